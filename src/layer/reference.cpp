#include "layer/reference.h"

#include <cmath>
#include <string>

#include "ops/gates.h"

namespace hanpu::layer {
namespace {

using Vec = std::vector<double>;

Status weight(const WeightLookup& w, std::initializer_list<const char*> names, Vec* out) {
  for (const char* n : names) {
    std::string where;
    if (const TensorView* t = w(n, &where)) {
      *out = to_doubles(*t);
      return Status::Ok();
    }
  }
  return NotFound(std::string(*names.begin()) + ": missing");
}

// out[t, n] = sum_d x[t, d] W[n, d] for rows [T, Din] and W [N, Din].
Vec linear(const Vec& x, int64_t rows, int64_t din, const Vec& W) {
  const int64_t n_out = static_cast<int64_t>(W.size()) / din;
  Vec y(rows * n_out, 0.0);
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t n = 0; n < n_out; ++n) {
      double s = 0;
      for (int64_t d = 0; d < din; ++d) s += x[t * din + d] * W[n * din + d];
      y[t * n_out + n] = s;
    }
  return y;
}

double silu(double x) { return x / (1.0 + std::exp(-x)); }

}  // namespace

Status reference_layer(const LayerSpec& s, const WeightLookup& wl, const TensorView& x, const TensorView* conv0,
                       const TensorView* rec0, ReferenceResult* out) {
  const int64_t B = x.shape[0], T = x.shape[1], D = s.hidden_size, M = B * T;
  const int64_t H = s.num_k_heads, HV = s.num_v_heads, K = s.head_k_dim, V = s.head_v_dim;
  const int64_t kd = s.key_dim(), vd = s.value_dim(), C = s.conv_dim(), Kc = s.conv_kernel, r = HV / H;
  const Vec xs = to_doubles(x);
  Vec mixed(M * C), z, b(M * HV), a, f_gate, o_gate;  // mixed: conv inputs [M, C] in q, k, v order
  if (s.arch == LayerArch::kQwen3Next) {
    Vec wqkvz, wba;
    HANPU_RETURN_IF_ERROR(weight(wl, {"in_proj_qkvz.weight"}, &wqkvz));
    HANPU_RETURN_IF_ERROR(weight(wl, {"in_proj_ba.weight"}, &wba));
    const Vec qkvz = linear(xs, M, D, wqkvz), ba = linear(xs, M, D, wba);
    z.assign(M * vd, 0.0);
    a.assign(M * HV, 0.0);
    // fix_query_key_value_ordering: view [.., H, 2K + 2 r V] and [.., H, 2 r], then split each group.
    const int64_t group = 2 * K + 2 * r * V;
    for (int64_t t = 0; t < M; ++t)
      for (int64_t g = 0; g < H; ++g) {
        const double* src = &qkvz[t * (H * group) + g * group];
        for (int64_t i = 0; i < K; ++i) {
          mixed[t * C + g * K + i] = src[i];
          mixed[t * C + kd + g * K + i] = src[K + i];
        }
        for (int64_t i = 0; i < r * V; ++i) {
          mixed[t * C + 2 * kd + g * r * V + i] = src[2 * K + i];
          z[t * vd + g * r * V + i] = src[2 * K + r * V + i];
        }
        for (int64_t i = 0; i < r; ++i) {
          b[t * HV + g * r + i] = ba[t * 2 * HV + g * 2 * r + i];
          a[t * HV + g * r + i] = ba[t * 2 * HV + g * 2 * r + r + i];
        }
      }
  } else if (s.arch == LayerArch::kQwen3_5) {
    Vec wqkv, wz, wb, wa;
    HANPU_RETURN_IF_ERROR(weight(wl, {"in_proj_qkv.weight"}, &wqkv));
    HANPU_RETURN_IF_ERROR(weight(wl, {"in_proj_z.weight"}, &wz));
    HANPU_RETURN_IF_ERROR(weight(wl, {"in_proj_b.weight"}, &wb));
    HANPU_RETURN_IF_ERROR(weight(wl, {"in_proj_a.weight"}, &wa));
    mixed = linear(xs, M, D, wqkv);
    z = linear(xs, M, D, wz);
    b = linear(xs, M, D, wb);
    a = linear(xs, M, D, wa);
  } else {
    Vec wq, wk, wv, wb, wfa, wfb, wga, wgb;
    HANPU_RETURN_IF_ERROR(weight(wl, {"q_proj.weight"}, &wq));
    HANPU_RETURN_IF_ERROR(weight(wl, {"k_proj.weight"}, &wk));
    HANPU_RETURN_IF_ERROR(weight(wl, {"v_proj.weight"}, &wv));
    HANPU_RETURN_IF_ERROR(weight(wl, {"b_proj.weight"}, &wb));
    HANPU_RETURN_IF_ERROR(weight(wl, {"forget_gate.f_a_proj.weight", "f_a_proj.weight"}, &wfa));
    HANPU_RETURN_IF_ERROR(weight(wl, {"forget_gate.f_b_proj.weight", "f_b_proj.weight"}, &wfb));
    HANPU_RETURN_IF_ERROR(weight(wl, {"g_a_proj.weight"}, &wga));
    HANPU_RETURN_IF_ERROR(weight(wl, {"g_b_proj.weight"}, &wgb));
    const Vec q = linear(xs, M, D, wq), k = linear(xs, M, D, wk), v = linear(xs, M, D, wv);
    for (int64_t t = 0; t < M; ++t)
      for (int64_t i = 0; i < kd; ++i) {
        mixed[t * C + i] = q[t * kd + i];
        mixed[t * C + kd + i] = k[t * kd + i];
        mixed[t * C + 2 * kd + i] = v[t * kd + i];
      }
    b = linear(xs, M, D, wb);
    f_gate = linear(linear(xs, M, D, wfa), M, K, wfb);
    o_gate = linear(linear(xs, M, D, wga), M, K, wgb);
  }

  // Conv weights [C, Kc] (Kimi's checkpoint form: three [H K, 1, Kc] pieces in q, k, v order).
  Vec cw, cb;
  if (!weight(wl, {"conv1d.weight"}, &cw).ok()) {
    for (const char* n : {"q_conv1d.weight", "k_conv1d.weight", "v_conv1d.weight"}) {
      Vec part;
      HANPU_RETURN_IF_ERROR(weight(wl, {n}, &part));
      cw.insert(cw.end(), part.begin(), part.end());
    }
  }
  const bool has_bias = weight(wl, {"conv1d.bias"}, &cb).ok();
  const Vec c0 = conv0 ? to_doubles(*conv0) : Vec(B * C * Kc, 0.0);
  Vec conv_out(M * C);
  out->conv.assign(B * C * Kc, 0.0);
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t c = 0; c < C; ++c) {
      // The channel's full input sequence: the carried Kc inputs, then T new ones.
      Vec seq(Kc + T);
      for (int64_t j = 0; j < Kc; ++j) seq[j] = c0[(bi * C + c) * Kc + j];
      for (int64_t t = 0; t < T; ++t) seq[Kc + t] = mixed[(bi * T + t) * C + c];
      for (int64_t t = 0; t < T; ++t) {
        double acc = has_bias ? cb[c] : 0.0;
        for (int64_t j = 0; j < Kc; ++j) acc += cw[c * Kc + j] * seq[Kc + t - (Kc - 1) + j];
        conv_out[(bi * T + t) * C + c] = silu(acc);
      }
      for (int64_t j = 0; j < Kc; ++j) out->conv[(bi * C + c) * Kc + j] = seq[T + j];
    }

  // The core in fp64 (ops.h reference_forward) with the in-kernel gate, l2norm and default scale.
  Vec a_log, dt_bias, norm_w, w_out;
  HANPU_RETURN_IF_ERROR(weight(wl, {"A_log", "forget_gate.A_log"}, &a_log));
  HANPU_RETURN_IF_ERROR(weight(wl, {"dt_bias", "forget_gate.dt_bias"}, &dt_bias));
  HANPU_RETURN_IF_ERROR(weight(wl, {"norm.weight", "o_norm.weight"}, &norm_w));
  HANPU_RETURN_IF_ERROR(weight(wl, {"out_proj.weight", "o_proj.weight"}, &w_out));
  Tensor q(DType::kF64, {B, T, H, K}), k(DType::kF64, {B, T, H, K}), v(DType::kF64, {B, T, HV, V});
  Tensor g(DType::kF64, s.kind() == Kind::kGdn ? std::vector<int64_t>{B, T, HV} : std::vector<int64_t>{B, T, HV, K});
  Tensor beta(DType::kF64, {B, T, HV}), alog_t(DType::kF64, {HV}), dtb_t(DType::kF64, {static_cast<int64_t>(dt_bias.size())});
  Vec qv(M * kd), kv(M * kd), vv(M * vd), betav(M * HV);
  for (int64_t t = 0; t < M; ++t) {
    for (int64_t i = 0; i < kd; ++i) qv[t * kd + i] = conv_out[t * C + i], kv[t * kd + i] = conv_out[t * C + kd + i];
    for (int64_t i = 0; i < vd; ++i) vv[t * vd + i] = conv_out[t * C + 2 * kd + i];
    for (int64_t h = 0; h < HV; ++h) betav[t * HV + h] = sigmoid(b[t * HV + h]);
  }
  fill_from_doubles(q, qv);
  fill_from_doubles(k, kv);
  fill_from_doubles(v, vv);
  fill_from_doubles(g, s.kind() == Kind::kGdn ? a : f_gate);
  fill_from_doubles(beta, betav);
  fill_from_doubles(alog_t, a_log);
  fill_from_doubles(dtb_t, dt_bias);
  Inputs in;
  in.q = q.view();
  in.k = k.view();
  in.v = v.view();
  in.g = g.view();
  in.beta = beta.view();
  in.A_log = alog_t.view();
  in.dt_bias = dtb_t.view();
  Tensor init;
  if (rec0) {
    init = Tensor(DType::kF64, rec0->shape);
    fill_from_doubles(init, to_doubles(*rec0));
    in.initial_state = init.view();
  }
  Options opt;
  opt.kind = s.kind();
  opt.use_qk_l2norm_in_kernel = true;
  opt.use_gate_in_kernel = true;
  Tensor o(DType::kF64, {B, T, HV, V}), fs(DType::kF64, {B, HV, K, V});
  HANPU_RETURN_IF_ERROR(reference_forward(in, opt, Outputs{o.view(), fs.view()}));
  out->recurrent = to_doubles(fs.view());

  // Gated RMSNorm per (token, value head), then the output projection.
  Vec ov = to_doubles(o.view());
  for (int64_t t = 0; t < M; ++t)
    for (int64_t h = 0; h < HV; ++h) {
      double* row = &ov[(t * HV + h) * V];
      double ss = 0;
      for (int64_t i = 0; i < V; ++i) ss += row[i] * row[i];
      const double rn = 1.0 / std::sqrt(ss / V + s.rms_norm_eps);
      for (int64_t i = 0; i < V; ++i) {
        const double gate = s.kind() == Kind::kGdn ? silu(z[t * vd + h * V + i]) : sigmoid(o_gate[t * vd + h * V + i]);
        row[i] = norm_w[i] * row[i] * rn * gate;
      }
    }
  out->y = linear(ov, M, vd, w_out);
  return Status::Ok();
}

}  // namespace hanpu::layer
