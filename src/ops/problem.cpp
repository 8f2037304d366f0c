#include "ops/problem.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "core/strided.h"

namespace hanpu {

std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << ']';
  return os.str();
}

TensorView with_strides(TensorView v) {
  if (v.strides.empty()) {
    std::vector<int64_t> st(v.rank());
    for (int d = 0; d < v.rank(); ++d) st[d] = v.stride(d);  // row-major, computed before strides is set
    v.strides = std::move(st);
  }
  return v;
}

Outputs with_strides(const Outputs& out) {
  Outputs o{with_strides(out.o), std::nullopt};
  if (out.final_state) o.final_state = with_strides(*out.final_state);
  return o;
}

Status check_view(const TensorView& t, const char* name, int rank, bool want_float) {
  if (t.rank() != rank) {
    return InvalidArgument(std::string(name) + " must have rank " + std::to_string(rank) + ", got shape " +
                           shape_str(t.shape));
  }
  if (!t.strides.empty() && t.strides.size() != t.shape.size()) {
    return InvalidArgument(std::string(name) + " has " + std::to_string(t.strides.size()) + " strides for rank " +
                           std::to_string(rank));
  }
  for (int d = 0; d < rank; ++d) {
    if (t.shape[d] < 0) return InvalidArgument(std::string(name) + ".shape[" + std::to_string(d) + "] is negative");
  }
  if (want_float && !is_float(t.dtype)) {
    return InvalidArgument(std::string(name) + ".dtype must be F64, F32, F16 or BF16, got " + dtype_name(t.dtype));
  }
  if (!want_float && t.dtype != DType::kI64) {
    return InvalidArgument(std::string(name) + ".dtype must be I64, got " + dtype_name(t.dtype));
  }
  if (t.data == nullptr && t.numel() > 0) return InvalidArgument(std::string(name) + ".data is null");
  return Status::Ok();
}

Span span_of(const TensorView& t) {
  if (t.numel() == 0 || t.data == nullptr) return {};
  const int64_t es = static_cast<int64_t>(dtype_size(t.dtype));
  int64_t down = 0, up = 0;  // furthest element offsets below and above the data pointer
  for (int d = 0; d < t.rank(); ++d) {
    const int64_t reach = (t.shape[d] - 1) * t.stride(d);
    (reach < 0 ? down : up) += reach;
  }
  const auto base = reinterpret_cast<uintptr_t>(t.data);
  return {base + static_cast<uintptr_t>(down * es), base + static_cast<uintptr_t>((up + 1) * es)};
}

Status check_distinct_elements(const TensorView& t, const char* name) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (|stride|, shape) of the dimensions longer than 1
  for (int d = 0; d < t.rank(); ++d) {
    if (t.shape[d] > 1) dims.emplace_back(std::abs(t.stride(d)), t.shape[d]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t reach = 0;
  for (const auto& [stride, extent] : dims) {
    if (stride <= reach) {
      return InvalidArgument(std::string(name) + " has overlapping elements (strides " + shape_str(t.strides) +
                             " for shape " + shape_str(t.shape) + "); a tensor the call writes needs its own memory "
                             "for every element");
    }
    reach += stride * (extent - 1);
  }
  return Status::Ok();
}

bool views_overlap(const TensorView& a, const TensorView& b) {
  const Span x = span_of(a), y = span_of(b);
  return x.lo < x.hi && y.lo < y.hi && x.lo < y.hi && y.lo < x.hi;
}

namespace {

// A written tensor must not share memory with any other tensor of the call: the strategies read inputs and
// write outputs in different orders, so an alias would be read after it was overwritten.
Status check_no_alias(const TensorView& w, const char* name, const Problem& p,
                      const std::vector<std::pair<const TensorView*, const char*>>& others) {
  const Span a = span_of(w);
  if (a.lo == a.hi) return Status::Ok();
  std::vector<std::pair<const TensorView*, const char*>> all = {
      {&p.in.q, "q"}, {&p.in.k, "k"}, {&p.in.v, "v"}, {&p.in.g, "g"}, {&p.in.beta, "beta"}};
  for (const auto& [opt, n] : {std::pair{&p.in.initial_state, "initial_state"}, std::pair{&p.in.cu_seqlens, "cu_seqlens"},
                               std::pair{&p.in.A_log, "A_log"}, std::pair{&p.in.dt_bias, "dt_bias"}}) {
    if (*opt) all.emplace_back(&**opt, n);
  }
  all.insert(all.end(), others.begin(), others.end());
  for (const auto& [t, n] : all) {
    const Span b = span_of(*t);
    if (b.lo < a.hi && a.lo < b.hi) {
      return InvalidArgument(std::string(name) + " shares memory with " + n +
                             "; outputs and updated states must not alias any other tensor of the call");
    }
  }
  return Status::Ok();
}

Status check_shape(const TensorView& t, const char* name, const std::vector<int64_t>& want, const char* dims) {
  if (t.shape != want) {
    return InvalidArgument(std::string(name) + " must have shape " + dims + " = " + shape_str(want) + ", got " +
                           shape_str(t.shape));
  }
  return Status::Ok();
}

Status check_finite(const TensorView& t, const char* name) {
  std::vector<double> vals = to_doubles(t);
  for (std::size_t i = 0; i < vals.size(); ++i) {
    if (!std::isfinite(vals[i])) {
      return InvalidArgument(std::string(name) + " has a non-finite value (" + std::to_string(vals[i]) +
                             ") at flat index " + std::to_string(i));
    }
  }
  return Status::Ok();
}

Status check_options(const Options& opt, Mode mode) {
  if (mode == Mode::kChunk && opt.chunk_size != 16 && opt.chunk_size != 32 && opt.chunk_size != 64) {
    return InvalidArgument("chunk_size must be 16, 32 or 64, got " + std::to_string(opt.chunk_size));
  }
  if (opt.scale && !std::isfinite(*opt.scale)) return InvalidArgument("scale must be finite");
  if (opt.lower_bound) {
    if (opt.kind != Kind::kKda) return InvalidArgument("lower_bound applies to KDA only (kind is gdn)");
    if (!opt.use_gate_in_kernel) return InvalidArgument("lower_bound needs use_gate_in_kernel");
    if (!std::isfinite(*opt.lower_bound) || *opt.lower_bound >= 0) {
      return InvalidArgument("lower_bound must be finite and < 0, got " + std::to_string(*opt.lower_bound));
    }
  }
  if (opt.precision != Precision::kAuto && opt.precision != Precision::kExact && opt.precision != Precision::kBf16) {
    return InvalidArgument("precision must be auto, exact or bf16, got " + std::to_string(static_cast<int>(opt.precision)));
  }
  if (opt.allow_neg_eigval && !opt.use_beta_sigmoid_in_kernel) {
    return InvalidArgument("allow_neg_eigval needs use_beta_sigmoid_in_kernel");
  }
  return Status::Ok();
}

Status build_sequences(const Inputs& in, Problem* p) {
  if (!in.cu_seqlens) {
    p->N = p->B;
    for (int64_t b = 0; b < p->B; ++b) p->seqs.push_back({b, 0, p->T});
    return Status::Ok();
  }
  const TensorView& cu = *in.cu_seqlens;
  HANPU_RETURN_IF_ERROR(check_view(cu, "cu_seqlens", 1, false));
  if (cu.shape[0] < 2) return InvalidArgument("cu_seqlens must have at least 2 entries, got " + shape_str(cu.shape));
  if (p->B != 1) return InvalidArgument("cu_seqlens needs batch size 1, got q.shape[0] (B) = " + std::to_string(p->B));
  const int64_t n = cu.shape[0] - 1;
  int64_t prev = load_i64(cu, 0);
  if (prev != 0) return InvalidArgument("cu_seqlens[0] must be 0, got " + std::to_string(prev));
  for (int64_t i = 1; i <= n; ++i) {
    const int64_t cur = load_i64(cu, i * cu.stride(0));
    if (cur < prev) {
      return InvalidArgument("cu_seqlens must be non-decreasing: cu_seqlens[" + std::to_string(i) + "] = " +
                             std::to_string(cur) + " < cu_seqlens[" + std::to_string(i - 1) + "] = " +
                             std::to_string(prev));
    }
    p->seqs.push_back({0, prev, cur - prev});
    prev = cur;
  }
  if (prev != p->T) {
    return InvalidArgument("cu_seqlens[-1] must equal T = " + std::to_string(p->T) + ", got " + std::to_string(prev));
  }
  p->N = n;
  return Status::Ok();
}

}  // namespace

Status validate_state(const Problem& p, const TensorView& s, const char* name, int64_t rows, bool rows_fixed) {
  HANPU_RETURN_IF_ERROR(check_view(s, name, 4, true));
  const int64_t a = p.opt.state_v_first ? p.V : p.K, b = p.opt.state_v_first ? p.K : p.V;
  const char* dims = p.opt.state_v_first ? "[N, HV, V, K]" : "[N, HV, K, V]";
  if (rows_fixed) return check_shape(s, name, {rows, p.HV, a, b}, dims);
  if (s.shape[1] != p.HV || s.shape[2] != a || s.shape[3] != b) {
    return InvalidArgument(std::string(name) + " must have shape [P, HV, " + (p.opt.state_v_first ? "V, K" : "K, V") +
                           "] = [P, " + std::to_string(p.HV) + ", " + std::to_string(a) + ", " + std::to_string(b) +
                           "], got " + shape_str(s.shape));
  }
  return Status::Ok();
}

Status validate_problem(const Inputs& in, const Options& opt, Mode mode, Problem* p) {
  *p = Problem();
  HANPU_RETURN_IF_ERROR(check_options(opt, mode));
  HANPU_RETURN_IF_ERROR(check_view(in.q, "q", 4, true));
  HANPU_RETURN_IF_ERROR(check_view(in.k, "k", 4, true));
  HANPU_RETURN_IF_ERROR(check_view(in.v, "v", 4, true));
  p->kind = opt.kind;
  p->B = in.q.shape[0];
  p->T = in.q.shape[1];
  p->H = in.q.shape[2];
  p->K = in.q.shape[3];
  if (p->B < 1) return InvalidArgument("q.shape[0] (B) must be >= 1, got " + std::to_string(p->B));
  if (p->T < 1) return InvalidArgument("q.shape[1] (T) must be >= 1, got " + std::to_string(p->T));
  if (p->H < 1) return InvalidArgument("q.shape[2] (H) must be >= 1, got " + std::to_string(p->H));
  if (p->K < 1 || p->K > 256) return InvalidArgument("q.shape[3] (K) = " + std::to_string(p->K) + ", expected 1..256");
  HANPU_RETURN_IF_ERROR(check_shape(in.k, "k", in.q.shape, "[B, T, H, K] (the shape of q)"));
  if (in.v.shape[0] != p->B || in.v.shape[1] != p->T) {
    return InvalidArgument("v must have shape [B, T, HV, V] with B, T = " + std::to_string(p->B) + ", " +
                           std::to_string(p->T) + " as q, got " + shape_str(in.v.shape));
  }
  p->HV = in.v.shape[2];
  p->V = in.v.shape[3];
  if (p->HV < 1 || p->HV % p->H != 0) {
    return InvalidArgument("v.shape[2] (HV) = " + std::to_string(p->HV) + " must be a positive multiple of q.shape[2] (H) = " +
                           std::to_string(p->H));
  }
  if (p->V < 1 || p->V > 256) return InvalidArgument("v.shape[3] (V) = " + std::to_string(p->V) + ", expected 1..256");
  p->group = p->HV / p->H;

  HANPU_RETURN_IF_ERROR(check_view(in.beta, "beta", 3, true));
  HANPU_RETURN_IF_ERROR(check_shape(in.beta, "beta", {p->B, p->T, p->HV}, "[B, T, HV]"));
  if (opt.kind == Kind::kGdn) {
    HANPU_RETURN_IF_ERROR(check_view(in.g, "g", 3, true));
    HANPU_RETURN_IF_ERROR(check_shape(in.g, "g", {p->B, p->T, p->HV}, "[B, T, HV]"));
  } else {
    HANPU_RETURN_IF_ERROR(check_view(in.g, "g", 4, true));
    HANPU_RETURN_IF_ERROR(check_shape(in.g, "g", {p->B, p->T, p->HV, p->K}, "[B, T, HV, K]"));
  }
  if (opt.use_gate_in_kernel) {
    const bool needs_a_log = !opt.lower_bound;
    if (needs_a_log && !in.A_log) return InvalidArgument("A_log is required with use_gate_in_kernel");
    if (in.A_log) {
      HANPU_RETURN_IF_ERROR(check_view(*in.A_log, "A_log", 1, true));
      HANPU_RETURN_IF_ERROR(check_shape(*in.A_log, "A_log", {p->HV}, "[HV]"));
    }
    if (in.dt_bias) {
      HANPU_RETURN_IF_ERROR(check_view(*in.dt_bias, "dt_bias", 1, true));
      if (opt.kind == Kind::kGdn) {
        HANPU_RETURN_IF_ERROR(check_shape(*in.dt_bias, "dt_bias", {p->HV}, "[HV]"));
      } else {
        HANPU_RETURN_IF_ERROR(check_shape(*in.dt_bias, "dt_bias", {p->HV * p->K}, "[HV * K]"));
      }
    }
  }
  HANPU_RETURN_IF_ERROR(build_sequences(in, p));
  p->in = in;
  for (TensorView* v : {&p->in.q, &p->in.k, &p->in.v, &p->in.g, &p->in.beta}) *v = with_strides(*v);
  for (std::optional<TensorView>* v : {&p->in.initial_state, &p->in.cu_seqlens, &p->in.A_log, &p->in.dt_bias}) {
    if (*v) **v = with_strides(**v);
  }
  p->opt = opt;
  p->scale = opt.scale ? *opt.scale : 1.0 / std::sqrt(static_cast<double>(p->K));
  p->bf16_gemm = resolve_precision(opt.precision, in.q.dtype) == Precision::kBf16;
  if (in.initial_state) {
    if (mode == Mode::kSlots) return InvalidArgument("initial_state must be empty for slot decoding (the pool is the state)");
    HANPU_RETURN_IF_ERROR(validate_state(*p, *in.initial_state, "initial_state", p->N, true));
  }
  if (opt.check_finite) {
    HANPU_RETURN_IF_ERROR(check_finite(in.q, "q"));
    HANPU_RETURN_IF_ERROR(check_finite(in.k, "k"));
    HANPU_RETURN_IF_ERROR(check_finite(in.v, "v"));
    HANPU_RETURN_IF_ERROR(check_finite(in.g, "g"));
    HANPU_RETURN_IF_ERROR(check_finite(in.beta, "beta"));
    if (in.initial_state) HANPU_RETURN_IF_ERROR(check_finite(*in.initial_state, "initial_state"));
    if (opt.use_gate_in_kernel && in.A_log) HANPU_RETURN_IF_ERROR(check_finite(*in.A_log, "A_log"));
    if (opt.use_gate_in_kernel && in.dt_bias) HANPU_RETURN_IF_ERROR(check_finite(*in.dt_bias, "dt_bias"));
  }
  return Status::Ok();
}

Status validate_outputs(const Problem& p, const Outputs& out, Mode mode) {
  HANPU_RETURN_IF_ERROR(check_view(out.o, "o", 4, true));
  HANPU_RETURN_IF_ERROR(check_shape(out.o, "o", {p.B, p.T, p.HV, p.V}, "[B, T, HV, V]"));
  HANPU_RETURN_IF_ERROR(check_distinct_elements(with_strides(out.o), "o"));
  if (out.final_state) {
    HANPU_RETURN_IF_ERROR(validate_state(p, *out.final_state, "final_state", p.N, true));
    const DType dt = out.final_state->dtype;
    if (dt != DType::kF32 && !(mode == Mode::kReference && dt == DType::kF64)) {
      return InvalidArgument(std::string("final_state.dtype must be F32") +
                             (mode == Mode::kReference ? " or F64" : "") + ", got " + dtype_name(dt));
    }
    const TensorView fs = with_strides(*out.final_state);
    HANPU_RETURN_IF_ERROR(check_distinct_elements(fs, "final_state"));
    HANPU_RETURN_IF_ERROR(check_no_alias(fs, "final_state", p, {}));
    HANPU_RETURN_IF_ERROR(check_no_alias(with_strides(out.o), "o", p, {{&fs, "final_state"}}));
  } else {
    HANPU_RETURN_IF_ERROR(check_no_alias(with_strides(out.o), "o", p, {}));
  }
  return Status::Ok();
}

Status check_written_pool(const Problem& p, const TensorView& pool, const TensorView& o, const TensorView& slots) {
  const TensorView pv = with_strides(pool), ov = with_strides(o), sv = with_strides(slots);
  HANPU_RETURN_IF_ERROR(check_distinct_elements(pv, "state_pool"));
  HANPU_RETURN_IF_ERROR(check_no_alias(pv, "state_pool", p, {{&ov, "o"}, {&sv, "slot_indices"}}));
  return check_no_alias(ov, "o", p, {{&sv, "slot_indices"}});
}

}  // namespace hanpu
