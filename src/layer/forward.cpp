// Layer::prefill and Layer::decode (the maths is in hanpu/layer.h). One call runs, for M = B T tokens:
//   P [M, N1] = x W_in^T                  one GEMM for every projection that reads x (layer_impl.h)
//   KDA: F, G [M, H K] = P[f_a] W_fb^T, P[g_a] W_gb^T
//   conv + silu in place over P's q/k/v columns (each token reads the Kc - 1 inputs before it, so a channel
//     block is swept from the last token down; the first tokens read the carried conv state)
//   beta = sigmoid(b) in place over P's b columns
//   core: the engine reads q, k, v, beta and the raw gate input straight out of P (strided views) with the
//     gate, the l2norm and the scale applied in its kernels, and writes O [M, HV V]
//   gated RMSNorm in place over O; y = O W_out^T
// so the only full-size buffers are the projections' outputs (P, and F, G for KDA) and O.
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>

#include "core/strided.h"
#include "exec/thread_pool.h"
#include "kernels/simd.h"
#include "layer/layer_impl.h"
#include "layer/matmul.h"
#include "layer/vector_kernels.h"
#include "ops/gates.h"
#include "ops/problem.h"

namespace hanpu {
namespace {

// Activations are stored as float (kExact) or as bf16 bits (kBf16).
inline float ld(const float* p, int64_t i) { return p[i]; }
inline float ld(const uint16_t* p, int64_t i) { return bf16_bits_to_f32(p[i]); }
inline void st(float* p, int64_t i, float x) { p[i] = x; }
inline void st(uint16_t* p, int64_t i, float x) { p[i] = f32_to_bf16_bits(x); }

void split(int64_t items, int parts, int i, int64_t* b, int64_t* e) {
  *b = items * i / parts;
  *e = items * (i + 1) / parts;
}

using Lease = BufferPool::Lease;
Lease alloc(const Layer::Impl& L, int64_t elems, DType dt) {
  return L.buffers.take(static_cast<std::size_t>(std::max<int64_t>(1, elems)) * dtype_size(dt));
}

// Wall time of the parts, in LayerStats::parts_ms order.
class PartTimer {
 public:
  enum Part { kProjections, kConv, kGates, kCore, kNorm };
  explicit PartTimer(bool on) : on_(on), t_(std::chrono::steady_clock::now()) {}
  void lap(Part p) {
    if (!on_) return;
    const auto now = std::chrono::steady_clock::now();
    ms_[p] += std::chrono::duration<double, std::milli>(now - t_).count();
    t_ = now;
  }
  void report(LayerStats* s) const {
    if (!s) return;
    s->parts_ms.clear();
    if (!on_) return;
    const char* names[] = {"projections", "conv", "gates", "core", "norm"};
    for (int i = 0; i < 5; ++i) s->parts_ms.emplace_back(names[i], ms_[i]);
  }

 private:
  bool on_;
  std::chrono::steady_clock::time_point t_;
  double ms_[5] = {0, 0, 0, 0, 0};
};

// The causal conv + silu over channels [c0, c1) of one sequence's T rows of P (row stride ldp), in place.
// ctx [Kc - 1, c1 - c0]: the inputs before the first token (oldest first). Tokens go in tiles through an
// fp32 buffer that also keeps the Kc - 1 inputs before the tile (already overwritten in P by then); the
// tile is layer/vector_kernels.h's (conv output and SiLU output each rounded to A, as transformers' bf16 ops
// round them).
template <typename A>
void conv_block(const Layer::Impl& L, A* P, int64_t ldp, int64_t T, int64_t c0, int64_t c1, const float* ctx,
                std::vector<float>* buf) {
  constexpr bool kBf16 = std::is_same_v<A, uint16_t>;
  const int64_t C = L.spec.conv_dim(), Kc = L.spec.conv_kernel, w = c1 - c0, pre = Kc - 1, tile = 128;
  buf->resize((pre + tile) * w);
  float* in = buf->data();  // [pre + tile, w]
  std::copy(ctx, ctx + pre * w, in);
  for (int64_t t0 = 0; t0 < T; t0 += tile) {
    const int64_t n = std::min(tile, T - t0);
    if constexpr (kBf16) {
      simd::bf16_to_f32_rows(n, w, P + t0 * ldp + c0, ldp, in + pre * w, w);
    } else {
      for (int64_t t = 0; t < n; ++t) std::copy_n(P + (t0 + t) * ldp + c0, w, in + (pre + t) * w);
    }
    layer::conv_silu_tile(n, w, Kc, in, L.conv_w.data() + c0, C, L.conv_b.empty() ? nullptr : L.conv_b.data() + c0,
                          kBf16, kBf16, P + t0 * ldp + c0, ldp);
    std::copy(in + n * w, in + (n + pre) * w, in);  // the tile's last Kc - 1 inputs precede the next tile
  }
}

bool dense_rows(const TensorView& t, int64_t rows, int64_t cols) {
  // [.., cols] views whose rows lie back to back (row stride cols, last stride 1)
  if (t.stride(t.rank() - 1) != 1 && cols > 1) return false;
  int64_t want = cols;
  for (int d = t.rank() - 2; d >= 0; --d) {
    if (t.shape[d] > 1 && t.stride(d) != want) return false;
    want *= t.shape[d];
  }
  return want == rows * cols;
}

// Row r of a [.., D] view (its leading dimensions flattened row-major) as an element offset.
int64_t row_offset(const TensorView& t, int64_t r) {
  int64_t off = 0;
  for (int d = t.rank() - 2; d >= 0; --d) {
    off += (r % t.shape[d]) * t.stride(d);
    r /= t.shape[d];
  }
  return off;
}

// x as M contiguous rows of the activation dtype: x itself when it already is, else a converted copy.
const void* activations_in(const Layer::Impl& L, const TensorView& x, int64_t M, int64_t D, DType act, Lease* keep) {
  if (x.dtype == act && dense_rows(x, M, D)) return x.data;
  *keep = alloc(L, M * D, act);
  const TensorView dst(keep->get(), act, {M, D});
  std::vector<float> row(D);
  for (int64_t m = 0; m < M; ++m) {
    load_elems(x, row_offset(x, m), x.stride(x.rank() - 1), D, row.data());
    store_elems(dst, m * D, 1, D, row.data());
  }
  return keep->get();
}

Status check_weights_side(const Layer::Impl& L, const TensorView& x, const TensorView& y, int rank) {
  HANPU_RETURN_IF_ERROR(check_view(x, "x", rank, true));
  HANPU_RETURN_IF_ERROR(check_view(y, "y", rank, true));
  if (x.shape.back() != L.spec.hidden_size)
    return InvalidArgument("x.shape[" + std::to_string(rank - 1) + "] (hidden size) = " + std::to_string(x.shape.back()) +
                           ", the layer's hidden_size is " + std::to_string(L.spec.hidden_size));
  if (y.shape != x.shape) return InvalidArgument("y must have x's shape " + shape_str(x.shape) + ", got " + shape_str(y.shape));
  HANPU_RETURN_IF_ERROR(check_distinct_elements(y, "y"));
  if (views_overlap(x, y)) return InvalidArgument("y shares memory with x");
  return Status::Ok();
}

// The pieces of one call that prefill and decode share.
struct Call {
  const Layer::Impl& L;
  int threads;
  ThreadPool& pool;
  int64_t M;
  Lease xbuf, P, F, G, O;
  const void* X = nullptr;

  Call(const Layer::Impl& l, int t, int64_t m) : L(l), threads(t), pool(shared_pool(t)), M(m) {}

  int64_t es() const { return static_cast<int64_t>(dtype_size(L.act)); }
  unsigned char* pcol(int64_t col) const { return P.get() + col * es(); }

  Status project_in(const TensorView& x) {
    const int64_t D = L.spec.hidden_size;
    X = activations_in(L, x, M, D, L.act, &xbuf);
    P = alloc(L, M * L.n1, L.act);
    HANPU_RETURN_IF_ERROR(layer::matmul_nt(M, X, D, L.w_in, L.act, P.get(), L.n1, threads));
    if (L.spec.kind() == Kind::kKda) {
      const int64_t hk = L.spec.key_dim();
      F = alloc(L, M * hk, L.act);
      G = alloc(L, M * hk, L.act);
      HANPU_RETURN_IF_ERROR(layer::matmul_nt(M, pcol(L.col_fa), L.n1, L.w_fb, L.act, F.get(), hk, threads));
      HANPU_RETURN_IF_ERROR(layer::matmul_nt(M, pcol(L.col_ga), L.n1, L.w_gb, L.act, G.get(), hk, threads));
    }
    return Status::Ok();
  }

  // beta = sigmoid(b), rounded to the activation dtype, over P's b columns.
  template <typename A>
  void betas() {
    A* p = reinterpret_cast<A*>(P.get());
    const int64_t HV = L.spec.num_v_heads, n1 = L.n1, col = L.col_b;
    pool.run([&](int w) {
      int64_t b, e;
      split(M, threads, w, &b, &e);
      for (int64_t m = b; m < e; ++m)
        for (int64_t h = 0; h < HV; ++h) st(p, m * n1 + col + h, sigmoid(ld(p, m * n1 + col + h)));
    });
  }

  // The core's inputs as views into P (F for KDA's gate), for `B` sequences of `T` tokens.
  Inputs core_inputs(int64_t B, int64_t T) const {
    const LayerSpec& s = L.spec;
    const int64_t H = s.num_k_heads, HV = s.num_v_heads, K = s.head_k_dim, V = s.head_v_dim, n1 = L.n1;
    Inputs in;
    in.q = TensorView(pcol(0), L.act, {B, T, H, K}, {T * n1, n1, K, 1});
    in.k = TensorView(pcol(s.key_dim()), L.act, {B, T, H, K}, {T * n1, n1, K, 1});
    in.v = TensorView(pcol(2 * s.key_dim()), L.act, {B, T, HV, V}, {T * n1, n1, V, 1});
    in.beta = TensorView(pcol(L.col_b), L.act, {B, T, HV}, {T * n1, n1, 1});
    if (s.kind() == Kind::kGdn) {
      in.g = TensorView(pcol(L.col_a), L.act, {B, T, HV}, {T * n1, n1, 1});
    } else {
      in.g = TensorView(F.get(), L.act, {B, T, HV, K});
    }
    in.A_log = L.a_log.view();
    in.dt_bias = L.dt_bias.view();
    return in;
  }

  Options core_options() const {
    Options opt;
    opt.kind = L.spec.kind();
    opt.use_qk_l2norm_in_kernel = true;
    opt.use_gate_in_kernel = true;
    opt.precision = L.precision;
    return opt;
  }

  template <typename A>
  void norm() {
    const LayerSpec& s = L.spec;
    const int64_t HV = s.num_v_heads, V = s.head_v_dim, vd = s.value_dim();
    A* o = reinterpret_cast<A*>(O.get());
    const A* p = reinterpret_cast<const A*>(P.get());
    const A* g = reinterpret_cast<const A*>(G.get());
    constexpr bool kBf16 = std::is_same_v<A, uint16_t>;
    const bool gdn = s.kind() == Kind::kGdn;
    const float eps = static_cast<float>(s.rms_norm_eps);
    pool.run([&](int w) {
      int64_t b, e;
      split(M * HV, threads, w, &b, &e);
      for (int64_t u = b; u < e;) {  // items (token m, head h); a token's heads in one call
        const int64_t m = u / HV, h = u % HV, n = std::min(e - u, HV - h);
        const A* gate = gdn ? p + m * L.n1 + L.col_z + h * V : g + m * vd + h * V;
        layer::gated_rms_norm(n, V, gdn, eps, L.norm_w.data(), kBf16, o + m * vd + h * V, gate);
        u += n;
      }
    });
  }

  // y = O W_out^T, written straight into y when it is dense and of the activation dtype.
  Status project_out(const TensorView& y) {
    const int64_t D = L.spec.hidden_size, vd = L.spec.value_dim();
    if (y.dtype == L.act && dense_rows(y, M, D))
      return layer::matmul_nt(M, O.get(), vd, L.w_out, L.act, y.data, D, threads);
    Lease ybuf = alloc(L, M * D, L.act);
    HANPU_RETURN_IF_ERROR(layer::matmul_nt(M, O.get(), vd, L.w_out, L.act, ybuf.get(), D, threads));
    const TensorView src(ybuf.get(), L.act, {M, D});
    std::vector<float> row(D);
    for (int64_t m = 0; m < M; ++m) {
      load_elems(src, m * D, 1, D, row.data());
      store_elems(y, row_offset(y, m), y.stride(y.rank() - 1), D, row.data());
    }
    return Status::Ok();
  }
};

template <typename A>
Status prefill_impl(const Layer::Impl& L, const TensorView& x, const TensorView& y, const LayerState* state,
                    const LayerRunConfig& run, LayerStats* stats) {
  const LayerSpec& s = L.spec;
  const int64_t B = x.shape[0], T = x.shape[1], C = s.conv_dim(), Kc = s.conv_kernel;
  const int threads = ThreadPool::resolve(run.threads);
  PartTimer timer(run.breakdown);
  Call call(L, threads, B * T);
  // A continued prefill starts from a copy of the carried state: the engine writes the final state over it.
  Tensor initial;
  if (state && state->continuing) {
    initial = Tensor(DType::kF32, state->recurrent.shape);
    std::vector<float> buf(initial.numel());
    const TensorView& r = state->recurrent;
    const int64_t K = s.head_k_dim, V = s.head_v_dim;
    for (int64_t i = 0; i < B * s.num_v_heads * K; ++i) {
      const int64_t b = i / (s.num_v_heads * K), h = (i / K) % s.num_v_heads, k = i % K;
      load_elems(r, b * r.stride(0) + h * r.stride(1) + k * r.stride(2), r.stride(3), V, buf.data() + i * V);
    }
    std::memcpy(initial.bytes.data(), buf.data(), buf.size() * 4);
  }
  HANPU_RETURN_IF_ERROR(call.project_in(x));
  timer.lap(PartTimer::kProjections);

  // Conv: work items are (sequence, block of cb channels).
  const int64_t cb = 256, blocks = (C + cb - 1) / cb;
  A* P = reinterpret_cast<A*>(call.P.get());
  call.pool.run([&](int w) {
    int64_t ib, ie;
    split(B * blocks, threads, w, &ib, &ie);
    std::vector<float> ctx, tail, buf;
    for (int64_t item = ib; item < ie; ++item) {
      const int64_t b = item / blocks, c0 = (item % blocks) * cb, c1 = std::min(C, c0 + cb), wd = c1 - c0;
      // ctx: the Kc - 1 inputs before the first token (the carried conv state's newest, or zeros).
      ctx.assign((Kc - 1) * wd, 0.0f);
      if (state && state->continuing) {
        const TensorView& cs = state->conv;
        for (int64_t j = 0; j + 1 < Kc; ++j)
          load_elems(cs, b * cs.stride(0) + c0 * cs.stride(1) + (j + 1) * cs.stride(2), cs.stride(1), wd,
                     ctx.data() + j * wd);
      }
      A* rows = P + b * T * L.n1;
      if (state) {  // the new conv state: the last Kc inputs of [ctx, x's projections], oldest first
        tail.assign(Kc * wd, 0.0f);
        for (int64_t j = 0; j < Kc; ++j) {
          const int64_t src = T - Kc + j;  // token index; < 0 reads ctx (or the zero padding before it)
          for (int64_t c = 0; c < wd; ++c) {
            if (src >= 0) {
              tail[j * wd + c] = ld(rows + src * L.n1 + c0, c);
            } else if (src >= -(Kc - 1)) {
              tail[j * wd + c] = ctx[(Kc - 1 + src) * wd + c];
            }
          }
        }
        const TensorView& cs = state->conv;
        for (int64_t j = 0; j < Kc; ++j)
          store_elems(cs, b * cs.stride(0) + c0 * cs.stride(1) + j * cs.stride(2), cs.stride(1), wd, tail.data() + j * wd);
      }
      conv_block(L, rows, L.n1, T, c0, c1, ctx.data(), &buf);
    }
  });
  timer.lap(PartTimer::kConv);
  call.template betas<A>();
  timer.lap(PartTimer::kGates);

  call.O = alloc(L, B * T * s.value_dim(), L.act);
  Inputs in = call.core_inputs(B, T);
  if (state && state->continuing) in.initial_state = initial.view();
  Outputs out;
  out.o = TensorView(call.O.get(), L.act, {B, T, s.num_v_heads, s.head_v_dim});
  if (state) out.final_state = state->recurrent;
  EngineConfig cfg;
  cfg.strategy = run.strategy;
  cfg.threads = threads;
  HANPU_RETURN_IF_ERROR(engine_forward(in, call.core_options(), cfg, out));
  timer.lap(PartTimer::kCore);
  call.template norm<A>();
  timer.lap(PartTimer::kNorm);
  HANPU_RETURN_IF_ERROR(call.project_out(y));
  timer.lap(PartTimer::kProjections);
  timer.report(stats);
  return Status::Ok();
}

template <typename A>
Status decode_impl(const Layer::Impl& L, const TensorView& x, const TensorView& y, const TensorView& conv_pool,
                   const TensorView& state_pool, const std::vector<int64_t>& slots, const TensorView& slot_view,
                   const LayerRunConfig& run, LayerStats* stats) {
  const LayerSpec& s = L.spec;
  const int64_t N = x.shape[0], C = s.conv_dim(), Kc = s.conv_kernel;
  const int threads = ThreadPool::resolve(run.threads);
  PartTimer timer(run.breakdown);
  Call call(L, threads, N);
  HANPU_RETURN_IF_ERROR(call.project_in(x));
  timer.lap(PartTimer::kProjections);

  // Conv step: window = [conv_pool[slot] (Kc), new input]; out = silu(bias + sum_j w[j] window[j + 1]), on the
  // prefill's conv tile (one token, its Kc - 1 inputs before it from the window): the same bits as a one-token
  // prefill from the same state. The pool has the activation dtype (checked), so windows are read through
  // typed pointers at its strides. The new inputs are kept so the pool can be shifted once the core has
  // succeeded. Work items are (sequence, block of channels), so a single sequence still spreads over the
  // threads.
  constexpr bool kBf16 = std::is_same_v<A, uint16_t>;
  A* P = reinterpret_cast<A*>(call.P.get());
  A* pool_base = static_cast<A*>(conv_pool.data);
  const int64_t ps0 = conv_pool.stride(0), ps1 = conv_pool.stride(1), ps2 = conv_pool.stride(2);
  const int64_t cb = 512, blocks = (C + cb - 1) / cb;
  const Lease raw_buf = alloc(L, N * C, DType::kF32);
  float* const raw = reinterpret_cast<float*>(raw_buf.get());
  call.pool.run([&](int w) {
    int64_t ib, ie;
    split(N * blocks, threads, w, &ib, &ie);
    thread_local std::vector<float> in;  // [Kc, block]: the window's last Kc - 1 inputs, then the new one
    in.resize(Kc * cb);
    for (int64_t item = ib; item < ie; ++item) {
      const int64_t n = item / blocks, c0 = (item % blocks) * cb, wd = std::min(cb, C - c0);
      A* row = P + n * L.n1 + c0;
      float* now = in.data() + (Kc - 1) * wd;
      for (int64_t c = 0; c < wd; ++c) now[c] = ld(row, c);
      std::copy_n(now, wd, raw + n * C + c0);
      if (slots[n] < 0) continue;
      const A* win = pool_base + slots[n] * ps0 + c0 * ps1;
      layer::conv_window_rows(wd, Kc, win, ps1, ps2, kBf16, in.data());
      layer::conv_silu_tile(1, wd, Kc, in.data(), L.conv_w.data() + c0, C,
                            L.conv_b.empty() ? nullptr : L.conv_b.data() + c0, kBf16, kBf16, row, L.n1);
    }
  });
  timer.lap(PartTimer::kConv);
  call.template betas<A>();
  timer.lap(PartTimer::kGates);

  call.O = alloc(L, N * s.value_dim(), L.act);
  const TensorView o(call.O.get(), L.act, {N, 1, s.num_v_heads, s.head_v_dim});
  EngineConfig cfg;
  cfg.strategy = run.strategy;
  cfg.threads = threads;
  HANPU_RETURN_IF_ERROR(engine_decode_slots(call.core_inputs(N, 1), call.core_options(), cfg, state_pool, slot_view, o));
  timer.lap(PartTimer::kCore);
  // The core accepted the slots: shift each active sequence's conv window by its new input. Same work items as
  // the conv step. A dense pool ([.., C, Kc] with Kc contiguous) holds a block's windows back to back: the
  // block moves down one element at once, then each window's last element takes its new input.
  call.pool.run([&](int w) {
    int64_t ib, ie;
    split(N * blocks, threads, w, &ib, &ie);
    for (int64_t item = ib; item < ie; ++item) {
      const int64_t n = item / blocks, c0 = (item % blocks) * cb, wd = std::min(cb, C - c0);
      if (slots[n] < 0) continue;
      A* win = pool_base + slots[n] * ps0 + c0 * ps1;
      const float* in = raw + n * C + c0;
      if (ps2 == 1 && ps1 == Kc) {
        std::memmove(win, win + 1, static_cast<std::size_t>(wd * Kc - 1) * sizeof(A));
        for (int64_t c = 0; c < wd; ++c) st(win, c * Kc + Kc - 1, in[c]);
        continue;
      }
      for (int64_t c = 0; c < wd; ++c, win += ps1) {
        for (int64_t j = 0; j + 1 < Kc; ++j) win[j * ps2] = win[(j + 1) * ps2];
        st(win, (Kc - 1) * ps2, in[c]);
      }
    }
  });
  timer.lap(PartTimer::kConv);
  call.template norm<A>();
  timer.lap(PartTimer::kNorm);
  HANPU_RETURN_IF_ERROR(call.project_out(y));
  // Padding sequences: y rows of zeros (their O rows are zero already; this does not depend on the weights).
  const std::vector<float> zeros(s.hidden_size, 0.0f);
  for (int64_t n = 0; n < N; ++n)
    if (slots[n] < 0) store_elems(y, n * y.stride(0), y.stride(1), s.hidden_size, zeros.data());
  timer.lap(PartTimer::kProjections);
  timer.report(stats);
  return Status::Ok();
}

}  // namespace

Status Layer::prefill(const TensorView& x, const TensorView& y, const LayerState* state, const LayerRunConfig& run,
                      LayerStats* stats) const {
  const Impl& L = *impl_;
  if (run.threads < 0) return InvalidArgument("threads must be >= 0, got " + std::to_string(run.threads));
  HANPU_RETURN_IF_ERROR(check_weights_side(L, x, y, 3));
  const LayerSpec& s = L.spec;
  const int64_t B = x.shape[0], T = x.shape[1];
  if (state) {
    HANPU_RETURN_IF_ERROR(check_view(state->conv, "state.conv", 3, true));
    HANPU_RETURN_IF_ERROR(check_view(state->recurrent, "state.recurrent", 4, true));
    const std::vector<int64_t> conv_shape = {B, s.conv_dim(), s.conv_kernel};
    const std::vector<int64_t> rec_shape = {B, s.num_v_heads, s.head_k_dim, s.head_v_dim};
    if (state->conv.shape != conv_shape)
      return InvalidArgument("state.conv must have shape [B, conv_dim, conv_kernel] = " + shape_str(conv_shape) + ", got " +
                             shape_str(state->conv.shape));
    if (state->recurrent.shape != rec_shape)
      return InvalidArgument("state.recurrent must have shape [B, HV, K, V] = " + shape_str(rec_shape) + ", got " +
                             shape_str(state->recurrent.shape));
    if (state->conv.dtype != L.act)
      return InvalidArgument(std::string("state.conv.dtype must be ") + dtype_name(L.act) +
                             " (the layer's activation dtype), got " + dtype_name(state->conv.dtype));
    if (state->recurrent.dtype != DType::kF32)
      return InvalidArgument(std::string("state.recurrent.dtype must be F32, got ") + dtype_name(state->recurrent.dtype));
    HANPU_RETURN_IF_ERROR(check_distinct_elements(state->conv, "state.conv"));
    HANPU_RETURN_IF_ERROR(check_distinct_elements(state->recurrent, "state.recurrent"));
    const std::pair<const TensorView*, const char*> views[] = {
        {&x, "x"}, {&y, "y"}, {&state->conv, "state.conv"}, {&state->recurrent, "state.recurrent"}};
    for (int i = 2; i < 4; ++i)
      for (int j = 0; j < i; ++j)
        if (views_overlap(*views[i].first, *views[j].first))
          return InvalidArgument(std::string(views[i].second) + " shares memory with " + views[j].second);
  }
  if (B * T == 0) {
    // Nothing to run; a fresh state is the zero state, a carried one keeps its value.
    if (state && !state->continuing && B > 0) {
      const std::vector<float> zeros(std::max(s.conv_kernel, s.head_v_dim), 0.0f);
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t c = 0; c < s.conv_dim(); ++c)
          store_elems(state->conv, b * state->conv.stride(0) + c * state->conv.stride(1), state->conv.stride(2),
                      s.conv_kernel, zeros.data());
        for (int64_t h = 0; h < s.num_v_heads; ++h)
          for (int64_t k = 0; k < s.head_k_dim; ++k)
            store_elems(state->recurrent,
                        b * state->recurrent.stride(0) + h * state->recurrent.stride(1) + k * state->recurrent.stride(2),
                        state->recurrent.stride(3), s.head_v_dim, zeros.data());
      }
    }
    if (stats) stats->parts_ms.clear();
    return Status::Ok();
  }
  return L.act == DType::kBF16 ? prefill_impl<uint16_t>(L, x, y, state, run, stats)
                               : prefill_impl<float>(L, x, y, state, run, stats);
}

Status Layer::decode(const TensorView& x, const TensorView& y, const TensorView& conv_pool, const TensorView& state_pool,
                     const TensorView& slots, const LayerRunConfig& run, LayerStats* stats) const {
  const Impl& L = *impl_;
  const LayerSpec& s = L.spec;
  if (run.threads < 0) return InvalidArgument("threads must be >= 0, got " + std::to_string(run.threads));
  HANPU_RETURN_IF_ERROR(check_weights_side(L, x, y, 2));
  HANPU_RETURN_IF_ERROR(check_view(conv_pool, "conv_pool", 3, true));
  HANPU_RETURN_IF_ERROR(check_view(state_pool, "state_pool", 4, true));
  HANPU_RETURN_IF_ERROR(check_view(slots, "slots", 1, false));
  const int64_t N = x.shape[0], pool_size = conv_pool.shape[0];
  if (slots.shape[0] != N)
    return InvalidArgument("slots must have shape [N] = [" + std::to_string(N) + "], got " + shape_str(slots.shape));
  if (conv_pool.shape[1] != s.conv_dim() || conv_pool.shape[2] != s.conv_kernel)
    return InvalidArgument("conv_pool must have shape [P, conv_dim, conv_kernel] = [P, " + std::to_string(s.conv_dim()) +
                           ", " + std::to_string(s.conv_kernel) + "], got " + shape_str(conv_pool.shape));
  if (conv_pool.dtype != L.act)
    return InvalidArgument(std::string("conv_pool.dtype must be ") + dtype_name(L.act) +
                           " (the layer's activation dtype), got " + dtype_name(conv_pool.dtype));
  if (state_pool.shape[0] != pool_size)
    return InvalidArgument("state_pool has " + std::to_string(state_pool.shape[0]) + " slots, conv_pool has " +
                           std::to_string(pool_size));
  HANPU_RETURN_IF_ERROR(check_distinct_elements(conv_pool, "conv_pool"));
  for (const auto& [v, name] : {std::pair{&x, "x"}, std::pair{&y, "y"}, std::pair{&state_pool, "state_pool"},
                                std::pair{&slots, "slots"}})
    if (views_overlap(conv_pool, *v)) return InvalidArgument(std::string("conv_pool shares memory with ") + name);
  std::vector<int64_t> idx(N);
  for (int64_t n = 0; n < N; ++n) {
    std::memcpy(&idx[n], static_cast<const int64_t*>(slots.data) + n * slots.stride(0), sizeof(int64_t));
    if (idx[n] >= pool_size)
      return InvalidArgument("slots[" + std::to_string(n) + "] = " + std::to_string(idx[n]) + " is outside the pool of " +
                             std::to_string(pool_size) + " slots");
  }
  if (N == 0) {
    if (stats) stats->parts_ms.clear();
    return Status::Ok();
  }
  return L.act == DType::kBF16 ? decode_impl<uint16_t>(L, x, y, conv_pool, state_pool, idx, slots, run, stats)
                               : decode_impl<float>(L, x, y, conv_pool, state_pool, idx, slots, run, stats);
}

}  // namespace hanpu
