// Helpers shared by the tests: random tensors, output allocation, comparisons.
#pragma once

#include <cmath>
#include <random>
#include <vector>

#include "hanpu/hanpu.h"
#include "ops/named_inputs.h"

namespace hanpu::testing {

inline Tensor random_tensor(DType dt, std::vector<int64_t> shape, std::mt19937_64& rng, double sd = 1.0,
                            double mean = 0.0) {
  Tensor t(dt, std::move(shape));
  std::normal_distribution<double> nd(mean, sd);
  std::vector<double> v(static_cast<std::size_t>(t.numel()));
  for (double& x : v) x = nd(rng);
  fill_from_doubles(t, v);
  return t;
}

inline Tensor tensor_of(DType dt, std::vector<int64_t> shape, const std::vector<double>& v) {
  Tensor t(dt, std::move(shape));
  fill_from_doubles(t, v);
  return t;
}

// A small well-conditioned problem: unit-norm keys, betas in (0, 1), realistic negative gates.
inline TensorFile small_problem(Kind kind, DType dt, int64_t B, int64_t T, int64_t H, int64_t HV, int64_t K, int64_t V,
                                uint64_t seed) {
  std::mt19937_64 rng(seed);
  TensorFile f;
  f.tensors["q"] = random_tensor(dt, {B, T, H, K}, rng);
  std::vector<double> k(B * T * H * K);
  std::normal_distribution<double> nd;
  for (int64_t r = 0; r < B * T * H; ++r) {
    double ss = 0;
    for (int64_t d = 0; d < K; ++d) ss += (k[r * K + d] = nd(rng)) * k[r * K + d];
    for (int64_t d = 0; d < K; ++d) k[r * K + d] /= std::sqrt(ss);
  }
  f.tensors["k"] = tensor_of(dt, {B, T, H, K}, k);
  f.tensors["v"] = random_tensor(dt, {B, T, HV, V}, rng);
  std::uniform_real_distribution<double> ud(0.05, 0.95), gd(-0.6, -0.01);
  std::vector<double> beta(B * T * HV), g(B * T * HV * (kind == Kind::kKda ? K : 1));
  for (double& x : beta) x = ud(rng);
  for (double& x : g) x = gd(rng);
  f.tensors["beta"] = tensor_of(dt, {B, T, HV}, beta);
  f.tensors["g"] = kind == Kind::kKda ? tensor_of(dt, {B, T, HV, K}, g) : tensor_of(dt, {B, T, HV}, g);
  return f;
}

struct Result {
  Tensor o, state;
};

using OpFn = Status (*)(const Inputs&, const Options&, const Outputs&);

// Runs `fn` with outputs o (dtype o_dt) and a final state in the options' layout.
inline Status run_op(OpFn fn, const Inputs& in, const Options& opt, DType o_dt, DType s_dt, Result* r) {
  const int64_t N = in.cu_seqlens ? in.cu_seqlens->shape[0] - 1 : in.q.shape[0];
  const int64_t K = in.q.shape[3], HV = in.v.shape[2], V = in.v.shape[3];
  r->o = Tensor(o_dt, {in.q.shape[0], in.q.shape[1], HV, V});
  r->state = Tensor(s_dt, opt.state_v_first ? std::vector<int64_t>{N, HV, V, K} : std::vector<int64_t>{N, HV, K, V});
  return fn(in, opt, Outputs{r->o.view(), r->state.view()});
}

// Binds `f` and computes its fp64 reference (output and final state) under `opt`.
inline Status bind_with_reference(const TensorFile& f, const Options& opt, Inputs* in, Result* ref) {
  HANPU_RETURN_IF_ERROR(bind_inputs(f, in));
  return run_op(reference_forward, *in, opt, DType::kF64, DType::kF64, ref);
}

inline double nmse_of(const Tensor& y, const Tensor& ref) {
  const std::vector<double> a = to_doubles(y.view()), b = to_doubles(ref.view());
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den > 0 ? num / den : num;
}

inline bool all_finite(const Tensor& t) {
  for (double x : to_doubles(t.view())) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

}  // namespace hanpu::testing
