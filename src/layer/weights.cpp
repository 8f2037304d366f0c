// Layer::create: checks each weight by name and shape and packs them into the layer's form (layer_impl.h).
// Names are transformers' (module form, as a module's state_dict has them) with the checkpoint form as an
// alternative where they differ: Kimi Linear saves q_conv1d/k_conv1d/v_conv1d and the forget gate's
// f_a_proj, f_b_proj, A_log, dt_bias at the layer's level, while the module holds one conv1d and a
// forget_gate submodule.
#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

#include "layer/layer_impl.h"
#include "ops/problem.h"

namespace hanpu {
namespace {

// A weight read as fp32 values, row-major, after checking its shape.
struct Fetched {
  std::vector<float> values;
  DType dtype = DType::kF32;
};

class Fetcher {
 public:
  explicit Fetcher(const WeightLookup& lookup) : lookup_(lookup) {}

  // The first of `names` that exists, checked against `shape`; an error names the first name when none does.
  Status get(std::initializer_list<const char*> names, const std::vector<int64_t>& shape, Fetched* out) const {
    std::string first_where;
    for (const char* name : names) {
      std::string where;
      const TensorView* t = lookup_(name, &where);
      if (first_where.empty()) first_where = where.empty() ? name : where;
      if (!t) continue;
      if (where.empty()) where = name;
      if (!is_float(t->dtype)) return InvalidArgument(where + ": dtype " + dtype_name(t->dtype) + ", expected a float dtype");
      if (t->shape != shape)
        return InvalidArgument(where + ": expected shape " + shape_str(shape) + ", got " + shape_str(t->shape));
      if (t->numel() > 0 && !t->data) return InvalidArgument(where + ": data is null");
      const std::vector<double> d = to_doubles(*t);
      out->values.assign(d.begin(), d.end());
      out->dtype = t->dtype;
      return Status::Ok();
    }
    return NotFound(first_where + ": missing");
  }
  bool has(const char* name) const {
    std::string where;
    return lookup_(name, &where) != nullptr;
  }

 private:
  const WeightLookup& lookup_;
};

// Rows of `src` ([rows, cols] fp32) appended to `dst` in the order of `rows`.
void append_rows(const std::vector<float>& src, int64_t cols, const std::vector<int64_t>& rows, std::vector<float>* dst) {
  for (int64_t r : rows) dst->insert(dst->end(), src.begin() + r * cols, src.begin() + (r + 1) * cols);
}

Tensor pack(const std::vector<float>& values, std::vector<int64_t> shape, DType act) {
  Tensor t(act, std::move(shape));
  if (act == DType::kBF16) {
    auto* p = reinterpret_cast<uint16_t*>(t.bytes.data());
    for (size_t i = 0; i < values.size(); ++i) p[i] = f32_to_bf16_bits(values[i]);
  } else {
    std::memcpy(t.bytes.data(), values.data(), values.size() * sizeof(float));
  }
  return t;
}
std::vector<float> rounded(std::vector<float> v, DType act) {
  if (act == DType::kBF16)
    for (float& x : v) x = bf16_bits_to_f32(f32_to_bf16_bits(x));
  return v;
}
// A projection's weight [N, Kd] in the form its products read (layer/matmul.h).
Status projection(const std::vector<float>& values, int64_t N, int64_t Kd, DType act, layer::ProjectionWeight* out) {
  const Tensor t = pack(values, {N, Kd}, act);
  return layer::ProjectionWeight::make(N, Kd, act, t.bytes.data(), layer::Bf16Route::kAuto, out);
}
Tensor f32_tensor(const std::vector<float>& v) { return pack(v, {static_cast<int64_t>(v.size())}, DType::kF32); }

Status check_spec(const LayerSpec& s) {
  auto positive = [](int64_t v, const char* name) -> Status {
    return v > 0 ? Status::Ok() : InvalidArgument(std::string("spec.") + name + " must be > 0, got " + std::to_string(v));
  };
  HANPU_RETURN_IF_ERROR(positive(s.hidden_size, "hidden_size"));
  HANPU_RETURN_IF_ERROR(positive(s.num_k_heads, "num_k_heads"));
  HANPU_RETURN_IF_ERROR(positive(s.num_v_heads, "num_v_heads"));
  HANPU_RETURN_IF_ERROR(positive(s.head_k_dim, "head_k_dim"));
  HANPU_RETURN_IF_ERROR(positive(s.head_v_dim, "head_v_dim"));
  HANPU_RETURN_IF_ERROR(positive(s.conv_kernel, "conv_kernel"));
  if (s.head_k_dim > 256) return InvalidArgument("spec.head_k_dim must be <= 256, got " + std::to_string(s.head_k_dim));
  if (s.num_v_heads % s.num_k_heads)
    return InvalidArgument("spec.num_v_heads " + std::to_string(s.num_v_heads) + " is not a multiple of num_k_heads " +
                           std::to_string(s.num_k_heads));
  if (s.arch == LayerArch::kKimiLinear && (s.num_v_heads != s.num_k_heads || s.head_v_dim != s.head_k_dim))
    return InvalidArgument("spec: Kimi Linear has one head count and one head dimension (num_v_heads == num_k_heads, "
                           "head_v_dim == head_k_dim)");
  if (!(s.rms_norm_eps > 0)) return InvalidArgument("spec.rms_norm_eps must be > 0");
  return Status::Ok();
}

Status build_gdn(const Fetcher& f, Layer::Impl* L) {
  const LayerSpec& s = L->spec;
  const int64_t D = s.hidden_size, H = s.num_k_heads, HV = s.num_v_heads, K = s.head_k_dim, V = s.head_v_dim;
  const int64_t kd = s.key_dim(), vd = s.value_dim(), r = HV / H;
  std::vector<float> w;  // the stacked [N1, D] rows
  if (s.arch == LayerArch::kQwen3_5) {
    Fetched qkv, z, b, a;
    HANPU_RETURN_IF_ERROR(f.get({"in_proj_qkv.weight"}, {s.conv_dim(), D}, &qkv));
    HANPU_RETURN_IF_ERROR(f.get({"in_proj_z.weight"}, {vd, D}, &z));
    HANPU_RETURN_IF_ERROR(f.get({"in_proj_b.weight"}, {HV, D}, &b));
    HANPU_RETURN_IF_ERROR(f.get({"in_proj_a.weight"}, {HV, D}, &a));
    for (const Fetched* p : {&qkv, &z, &b, &a}) w.insert(w.end(), p->values.begin(), p->values.end());
  } else {
    // Qwen3-Next groups rows per key head g: qkvz = [q_g (K) | k_g (K) | v_g (r V) | z_g (r V)] for each g,
    // ba = [b_g (r) | a_g (r)] (fix_query_key_value_ordering). Reordered into the Qwen3.5 layout here.
    Fetched qkvz, ba;
    HANPU_RETURN_IF_ERROR(f.get({"in_proj_qkvz.weight"}, {2 * kd + 2 * vd, D}, &qkvz));
    HANPU_RETURN_IF_ERROR(f.get({"in_proj_ba.weight"}, {2 * HV, D}, &ba));
    const int64_t group = 2 * K + 2 * r * V;
    std::vector<int64_t> q, k, v, z, b, a;
    for (int64_t g = 0; g < H; ++g) {
      for (int64_t i = 0; i < K; ++i) q.push_back(g * group + i), k.push_back(g * group + K + i);
      for (int64_t i = 0; i < r * V; ++i) v.push_back(g * group + 2 * K + i), z.push_back(g * group + 2 * K + r * V + i);
      for (int64_t i = 0; i < r; ++i) b.push_back(g * 2 * r + i), a.push_back(g * 2 * r + r + i);
    }
    for (const auto* rows : {&q, &k, &v, &z}) append_rows(qkvz.values, D, *rows, &w);
    for (const auto* rows : {&b, &a}) append_rows(ba.values, D, *rows, &w);
  }
  L->col_z = s.conv_dim();
  L->col_b = L->col_z + vd;
  L->col_a = L->col_b + HV;
  L->n1 = L->col_a + HV;
  HANPU_RETURN_IF_ERROR(projection(w, L->n1, D, L->act, &L->w_in));
  Fetched out, norm, alog, dtb;
  HANPU_RETURN_IF_ERROR(f.get({"out_proj.weight"}, {D, vd}, &out));
  HANPU_RETURN_IF_ERROR(f.get({"norm.weight"}, {V}, &norm));
  HANPU_RETURN_IF_ERROR(f.get({"A_log"}, {HV}, &alog));
  HANPU_RETURN_IF_ERROR(f.get({"dt_bias"}, {HV}, &dtb));
  HANPU_RETURN_IF_ERROR(projection(out.values, D, vd, L->act, &L->w_out));
  L->norm_w = rounded(norm.values, L->act);
  L->a_log = f32_tensor(alog.values);
  L->dt_bias = f32_tensor(dtb.values);
  return Status::Ok();
}

Status build_kda(const Fetcher& f, Layer::Impl* L) {
  const LayerSpec& s = L->spec;
  const int64_t D = s.hidden_size, H = s.num_k_heads, K = s.head_k_dim, hk = H * K;
  Fetched q, k, v, b, fa, ga, fb, gb, out, norm, alog, dtb;
  HANPU_RETURN_IF_ERROR(f.get({"q_proj.weight"}, {hk, D}, &q));
  HANPU_RETURN_IF_ERROR(f.get({"k_proj.weight"}, {hk, D}, &k));
  HANPU_RETURN_IF_ERROR(f.get({"v_proj.weight"}, {hk, D}, &v));
  HANPU_RETURN_IF_ERROR(f.get({"b_proj.weight"}, {H, D}, &b));
  HANPU_RETURN_IF_ERROR(f.get({"forget_gate.f_a_proj.weight", "f_a_proj.weight"}, {K, D}, &fa));
  HANPU_RETURN_IF_ERROR(f.get({"g_a_proj.weight"}, {K, D}, &ga));
  HANPU_RETURN_IF_ERROR(f.get({"forget_gate.f_b_proj.weight", "f_b_proj.weight"}, {hk, K}, &fb));
  HANPU_RETURN_IF_ERROR(f.get({"g_b_proj.weight"}, {hk, K}, &gb));
  HANPU_RETURN_IF_ERROR(f.get({"o_proj.weight"}, {D, hk}, &out));
  HANPU_RETURN_IF_ERROR(f.get({"o_norm.weight"}, {K}, &norm));
  HANPU_RETURN_IF_ERROR(f.get({"forget_gate.A_log", "A_log"}, {1, 1, H, 1}, &alog));
  HANPU_RETURN_IF_ERROR(f.get({"forget_gate.dt_bias", "dt_bias"}, {hk}, &dtb));
  std::vector<float> w;
  for (const Fetched* p : {&q, &k, &v, &b, &fa, &ga}) w.insert(w.end(), p->values.begin(), p->values.end());
  L->col_b = 3 * hk;
  L->col_fa = L->col_b + H;
  L->col_ga = L->col_fa + K;
  L->n1 = L->col_ga + K;
  HANPU_RETURN_IF_ERROR(projection(w, L->n1, D, L->act, &L->w_in));
  HANPU_RETURN_IF_ERROR(projection(fb.values, hk, K, L->act, &L->w_fb));
  HANPU_RETURN_IF_ERROR(projection(gb.values, hk, K, L->act, &L->w_gb));
  HANPU_RETURN_IF_ERROR(projection(out.values, D, hk, L->act, &L->w_out));
  // KimiLinearRMSNormGated multiplies by weight.to(float32): the weight's own values, unrounded.
  L->norm_w = norm.values;
  L->a_log = f32_tensor(alog.values);
  L->dt_bias = f32_tensor(dtb.values);
  return Status::Ok();
}

// conv1d.weight [conv_dim, 1, Kc] (or, Kimi's checkpoint form, q_conv1d/k_conv1d/v_conv1d [H K, 1, Kc]),
// stored tap-major [Kc, conv_dim] so a token's channels are contiguous.
Status build_conv(const Fetcher& f, Layer::Impl* L) {
  const LayerSpec& s = L->spec;
  const int64_t C = s.conv_dim(), Kc = s.conv_kernel;
  Fetched w;
  if (s.arch == LayerArch::kKimiLinear && !f.has("conv1d.weight")) {
    const int64_t hk = s.key_dim();
    for (const char* name : {"q_conv1d.weight", "k_conv1d.weight", "v_conv1d.weight"}) {
      Fetched part;
      HANPU_RETURN_IF_ERROR(f.get({name}, {hk, 1, Kc}, &part));
      w.values.insert(w.values.end(), part.values.begin(), part.values.end());
    }
  } else {
    HANPU_RETURN_IF_ERROR(f.get({"conv1d.weight"}, {C, 1, Kc}, &w));
  }
  L->conv_w.assign(Kc * C, 0.0f);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t j = 0; j < Kc; ++j) L->conv_w[j * C + c] = w.values[c * Kc + j];
  L->conv_w = rounded(std::move(L->conv_w), L->act);
  if (f.has("conv1d.bias")) {
    Fetched b;
    HANPU_RETURN_IF_ERROR(f.get({"conv1d.bias"}, {C}, &b));
    L->conv_b = rounded(b.values, L->act);
  }
  return Status::Ok();
}

}  // namespace

Layer::Layer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Layer::~Layer() = default;
const LayerSpec& Layer::spec() const { return impl_->spec; }
DType Layer::activation_dtype() const { return impl_->act; }
Precision Layer::precision() const { return impl_->precision; }

Status Layer::create(const LayerSpec& spec, const WeightLookup& weights, Precision precision,
                     std::unique_ptr<Layer>* out) {
  if (!weights) return InvalidArgument("weights: no lookup given");
  HANPU_RETURN_IF_ERROR(check_spec(spec));
  auto L = std::make_unique<Impl>();
  L->spec = spec;
  if (precision == Precision::kAuto) {
    // The checkpoint's dtype decides, read off the first projection's weight.
    const char* probe = spec.arch == LayerArch::kQwen3_5     ? "in_proj_qkv.weight"
                        : spec.arch == LayerArch::kQwen3Next ? "in_proj_qkvz.weight"
                                                             : "q_proj.weight";
    std::string where;
    const TensorView* t = weights(probe, &where);
    precision = t && t->dtype == DType::kBF16 ? Precision::kBf16 : Precision::kExact;
  }
  L->precision = precision;
  L->act = precision == Precision::kBf16 ? DType::kBF16 : DType::kF32;
  const Fetcher f(weights);
  HANPU_RETURN_IF_ERROR(spec.kind() == Kind::kGdn ? build_gdn(f, L.get()) : build_kda(f, L.get()));
  HANPU_RETURN_IF_ERROR(build_conv(f, L.get()));
  out->reset(new Layer(std::move(L)));
  return Status::Ok();
}

}  // namespace hanpu
