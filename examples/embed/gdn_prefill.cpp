// A GDN prefill through hanpu's C++ API: fp32 q, k, v, gates and beta laid out as FLA lays them out, run on the
// CPU engine, checked against the fp64 reference; then a bad argument, to show the error contract.
// Prints one line per check; exits 1 if the engine's result is off the exact mode's bar (NMSE <= 1e-10).
#include <cmath>
#include <cstdio>
#include <vector>

#include "hanpu/hanpu.h"

namespace {

// Deterministic values in [-1, 1).
struct Lcg {
  unsigned s = 12345u;
  float next() {
    s = s * 1664525u + 1013904223u;
    return static_cast<float>((s >> 8) & 0xFFFF) / 32768.0f - 1.0f;
  }
};

double nmse(const std::vector<float>& y, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    num += (y[i] - ref[i]) * (y[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return num / den;
}

}  // namespace

int main() {
  // Qwen3.5-style grouped heads (two value heads per q/k head); 300 tokens end in a partial chunk.
  const int64_t B = 1, T = 300, H = 2, HV = 4, K = 64, V = 64;
  Lcg rng;
  std::vector<float> q(B * T * H * K), k(q.size()), v(B * T * HV * V), g(B * T * HV), beta(g.size());
  for (auto* x : {&q, &k, &v})
    for (float& e : *x) e = rng.next();
  for (float& e : g) e = -0.05f * (rng.next() + 1.0f) - 0.01f;  // log decay in (-0.11, -0.01]
  for (float& e : beta) e = 0.5f + 0.4f * rng.next();

  hanpu::Inputs in;
  in.q = hanpu::TensorView(q.data(), hanpu::DType::kF32, {B, T, H, K});
  in.k = hanpu::TensorView(k.data(), hanpu::DType::kF32, {B, T, H, K});
  in.v = hanpu::TensorView(v.data(), hanpu::DType::kF32, {B, T, HV, V});
  in.g = hanpu::TensorView(g.data(), hanpu::DType::kF32, {B, T, HV});
  in.beta = hanpu::TensorView(beta.data(), hanpu::DType::kF32, {B, T, HV});
  hanpu::Options opt;  // FLA's defaults: GDN, scale K^-1/2, chunk size 64
  opt.use_qk_l2norm_in_kernel = true;

  std::vector<float> o(B * T * HV * V), state(B * HV * K * V);
  std::vector<double> o_ref(o.size()), state_ref(state.size());
  hanpu::Outputs out{hanpu::TensorView(o.data(), hanpu::DType::kF32, {B, T, HV, V}),
                     hanpu::TensorView(state.data(), hanpu::DType::kF32, {B, HV, K, V})};
  hanpu::Outputs ref{hanpu::TensorView(o_ref.data(), hanpu::DType::kF64, {B, T, HV, V}),
                     hanpu::TensorView(state_ref.data(), hanpu::DType::kF64, {B, HV, K, V})};

  hanpu::RunStats stats;
  hanpu::Status st = hanpu::engine_forward(in, opt, hanpu::EngineConfig{}, out, &stats);
  if (!st.ok()) return std::fprintf(stderr, "engine_forward: %s\n", st.ToString().c_str()), 1;
  st = hanpu::reference_forward(in, opt, ref);
  if (!st.ok()) return std::fprintf(stderr, "reference_forward: %s\n", st.ToString().c_str()), 1;
  const double e_o = nmse(o, o_ref), e_s = nmse(state, state_ref);
  std::printf("hanpu %s engine_forward (%s, %d threads, kernels %s): NMSE o %.2e, final state %.2e\n", HANPU_VERSION,
              stats.dataflow.c_str(), stats.threads, stats.simd_target.c_str(), e_o, e_s);

  // A bad argument comes back as a Status naming it; nothing is written.
  hanpu::Inputs bad = in;
  bad.beta.shape = {B, T, H};
  st = hanpu::engine_forward(bad, opt, hanpu::EngineConfig{}, out);
  std::printf("bad beta: %s\n", st.ToString().c_str());

  const bool ok = e_o <= 1e-10 && e_s <= 1e-10 && st.code() == hanpu::StatusCode::kInvalidArgument;
  std::printf("%s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
