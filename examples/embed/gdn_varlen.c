/* A varlen GDN prefill through hanpu's C ABI (hanpu/hanpu_c.h), as a continuous-batching engine calls it: two
 * sequences of 100 and 157 tokens packed into one row with cu_seqlens, each starting from its own state,
 * run on the engine and checked against the fp64 reference. Exits 1 if the result is off the exact mode's
 * bar (NMSE <= 1e-10). Build: CMake (this folder), or cc gdn_varlen.c $(pkg-config --cflags --libs hanpu). */
#include <stdio.h>
#include <stdlib.h>

#include "hanpu/hanpu_c.h"

enum { N = 2, T = 257, H = 2, HV = 4, K = 32, V = 32 };

/* Deterministic values in [-1, 1). */
static float next_value(unsigned* s) {
  *s = *s * 1664525u + 1013904223u;
  return (float)((*s >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

static double nmse(const float* y, const double* ref, int n) {
  double num = 0, den = 0;
  for (int i = 0; i < n; ++i) {
    num += (y[i] - ref[i]) * (y[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return num / den;
}

int main(void) {
  static float q[T * H * K], k[T * H * K], v[T * HV * V], g[T * HV], beta[T * HV], s0[N * HV * K * V];
  static float o[T * HV * V], s[N * HV * K * V];
  static double o_ref[T * HV * V], s_ref[N * HV * K * V];
  int64_t cu[N + 1] = {0, 100, T};
  unsigned seed = 99u;
  for (int i = 0; i < T * H * K; ++i) q[i] = next_value(&seed), k[i] = next_value(&seed);
  for (int i = 0; i < T * HV * V; ++i) v[i] = next_value(&seed);
  for (int i = 0; i < T * HV; ++i) g[i] = -0.05f * (next_value(&seed) + 1.0f) - 0.01f, beta[i] = 0.5f + 0.4f * next_value(&seed);
  for (int i = 0; i < N * HV * K * V; ++i) s0[i] = 0.1f * next_value(&seed);

  const int64_t qs[4] = {1, T, H, K}, vs[4] = {1, T, HV, V}, gs[3] = {1, T, HV}, ss[4] = {N, HV, K, V}, cs[1] = {N + 1};
  hanpu_inputs in = {0}; /* rank 0: an optional tensor is absent */
  in.q = hanpu_tensor_contiguous(q, HANPU_F32, 4, qs);
  in.k = hanpu_tensor_contiguous(k, HANPU_F32, 4, qs);
  in.v = hanpu_tensor_contiguous(v, HANPU_F32, 4, vs);
  in.g = hanpu_tensor_contiguous(g, HANPU_F32, 3, gs);
  in.beta = hanpu_tensor_contiguous(beta, HANPU_F32, 3, gs);
  in.initial_state = hanpu_tensor_contiguous(s0, HANPU_F32, 4, ss);
  in.cu_seqlens = hanpu_tensor_contiguous(cu, HANPU_I64, 1, cs);
  hanpu_options opt;
  hanpu_options_init(&opt);
  opt.use_qk_l2norm_in_kernel = 1;

  const hanpu_tensor o_t = hanpu_tensor_contiguous(o, HANPU_F32, 4, vs), s_t = hanpu_tensor_contiguous(s, HANPU_F32, 4, ss);
  const hanpu_tensor or_t = hanpu_tensor_contiguous(o_ref, HANPU_F64, 4, vs);
  const hanpu_tensor sr_t = hanpu_tensor_contiguous(s_ref, HANPU_F64, 4, ss);
  if (hanpu_chunk_forward(&in, &opt, NULL, &o_t, &s_t) != HANPU_OK ||
      hanpu_reference_forward(&in, &opt, &or_t, &sr_t) != HANPU_OK) {
    fprintf(stderr, "hanpu: %s\n", hanpu_last_error());
    return 1;
  }
  const double e_o = nmse(o, o_ref, T * HV * V), e_s = nmse(s, s_ref, N * HV * K * V);
  printf("hanpu %s hanpu_chunk_forward, 2 sequences (varlen): NMSE o %.2e, final states %.2e\n", hanpu_version(), e_o,
         e_s);
  const int ok = e_o <= 1e-10 && e_s <= 1e-10;
  printf("%s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
