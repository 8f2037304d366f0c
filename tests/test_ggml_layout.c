/* The README's recipe for calling hanpu on ggml's tensors ("Embedding hanpu in an engine"), checked end to end in C:
 * tensors laid out as llama.cpp hands them to ggml_gated_delta_net (q, k and v as views into one fused conv output
 * of conv_dim = 2 H S_k + H_v S_v channels per token, ggml's innermost-first ne/nb, the state transposed, the
 * output's attention rows followed by the final states in one buffer), viewed through the recipe, run by
 * hanpu_chunk_forward, and compared with an oracle that follows ggml's per-token recurrence as its CPU kernel
 * states it (value head hv reads q/k head hv % H; decay, delta rule, update, readout scaled by 1/sqrt(S_v)),
 * written here in double from those formulas. GDN and KDA, two sequences, grouped value heads. Exits non-zero on
 * the first failed check. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_test_util.h"
#include "hanpu/hanpu_c.h"

enum { S = 16, H = 2, HV = 4, T = 37, NS = 2, CONV = 2 * H * S + HV * S };

/* What a ggml tensor says of its memory: element counts and byte strides, innermost first. */
typedef struct {
  float* data;
  int64_t ne[4];
  size_t nb[4];
} ggml_like;

/* The recipe: reversed dims, byte strides over the element size; `rank` drops leading ne[0] = 1 (g, beta). */
static hanpu_tensor view_of(const ggml_like* t, int rank) {
  hanpu_tensor v;
  memset(&v, 0, sizeof v);
  v.data = t->data;
  v.dtype = HANPU_F32;
  v.rank = rank;
  for (int i = 0; i < rank; ++i) {
    v.shape[i] = t->ne[3 - i];
    v.strides[i] = (int64_t)(t->nb[3 - i] / sizeof(float));
  }
  return v;
}

/* q, k, v of token t of sequence n, head h: views into the fused conv output [NS][T][CONV]. */
static const float* qkv_at(const float* conv, int n, int t, int part, int h) {
  return conv + ((size_t)n * T + t) * CONV + (part == 0 ? 0 : part == 1 ? H * S : 2 * H * S) + (size_t)h * S;
}

static int run(int kda) {
  const int gw = kda ? S : 1;
  static float conv[NS * T * CONV], g[NS * T * HV * S], beta[NS * T * HV], state0[NS * HV * S * S];
  static float dst[NS * T * HV * S + NS * HV * S * S];
  static double want[NS * T * HV * S + NS * HV * S * S];
  unsigned seed = 5u + (unsigned)kda;
  for (int i = 0; i < NS * T * CONV; ++i) conv[i] = next_value(&seed);
  /* llama.cpp l2-normalises q and k before the op */
  for (int n = 0; n < NS; ++n)
    for (int t = 0; t < T; ++t)
      for (int part = 0; part < 2; ++part)
        for (int h = 0; h < H; ++h) {
          float* x = (float*)qkv_at(conv, n, t, part, h);
          double ss = 0;
          for (int i = 0; i < S; ++i) ss += (double)x[i] * x[i];
          for (int i = 0; i < S; ++i) x[i] = (float)(x[i] / sqrt(ss));
        }
  for (int i = 0; i < NS * T * HV * gw; ++i) g[i] = -0.05f * (next_value(&seed) + 1.0f) - 0.01f;
  for (int i = 0; i < NS * T * HV; ++i) beta[i] = 0.5f + 0.4f * next_value(&seed);
  for (int i = 0; i < NS * HV * S * S; ++i) state0[i] = 0.1f * next_value(&seed);

  /* the oracle: ggml's recurrence per (sequence, value head), state st[j * S + i] = S[i][j] */
  const double scale = 1.0 / sqrt((double)S);
  for (int n = 0; n < NS; ++n)
    for (int hv = 0; hv < HV; ++hv) {
      double st[S * S], delta[S];
      for (int e = 0; e < S * S; ++e) st[e] = state0[((size_t)n * HV + hv) * S * S + e];
      for (int t = 0; t < T; ++t) {
        const float *q = qkv_at(conv, n, t, 0, hv % H), *k = qkv_at(conv, n, t, 1, hv % H);
        const float* v = qkv_at(conv, n, t, 2, hv);
        const float* gt = g + (((size_t)n * T + t) * HV + hv) * gw;
        const double b = beta[((size_t)n * T + t) * HV + hv];
        for (int j = 0; j < S; ++j)
          for (int i = 0; i < S; ++i) st[j * S + i] *= exp(gt[kda ? i : 0]);
        for (int j = 0; j < S; ++j) {
          double sk = 0;
          for (int i = 0; i < S; ++i) sk += st[j * S + i] * k[i];
          delta[j] = (v[j] - sk) * b;
        }
        for (int j = 0; j < S; ++j)
          for (int i = 0; i < S; ++i) st[j * S + i] += k[i] * delta[j];
        for (int j = 0; j < S; ++j) {
          double o = 0;
          for (int i = 0; i < S; ++i) o += st[j * S + i] * q[i];
          want[(((size_t)n * T + t) * HV + hv) * S + j] = o * scale;
        }
      }
      for (int e = 0; e < S * S; ++e) want[(size_t)NS * T * HV * S + ((size_t)n * HV + hv) * S * S + e] = st[e];
    }

  /* the tensors as ggml describes them */
  const size_t f = sizeof(float);
  ggml_like q = {conv, {S, H, T, NS}, {f, S * f, CONV * f, (size_t)T * CONV * f}};
  ggml_like k = {conv + H * S, {S, H, T, NS}, {f, S * f, CONV * f, (size_t)T * CONV * f}};
  ggml_like v = {conv + 2 * H * S, {S, HV, T, NS}, {f, S * f, CONV * f, (size_t)T * CONV * f}};
  ggml_like gg = {g, {gw, HV, T, NS}, {f, gw * f, (size_t)HV * gw * f, (size_t)T * HV * gw * f}};
  ggml_like bb = {beta, {1, HV, T, NS}, {f, f, HV * f, (size_t)T * HV * f}};
  ggml_like s0 = {state0, {S, S, HV, NS}, {f, S * f, S * S * f, (size_t)HV * S * S * f}};
  ggml_like attn = {dst, {S, HV, T, NS}, {f, S * f, HV * S * f, (size_t)T * HV * S * f}};
  ggml_like sfin = {dst + NS * T * HV * S, {S, S, HV, NS}, {f, S * f, S * S * f, (size_t)HV * S * S * f}};

  hanpu_inputs in;
  memset(&in, 0, sizeof in);
  in.q = view_of(&q, 4);
  in.k = view_of(&k, 4);
  in.v = view_of(&v, 4);
  in.g = view_of(&gg, kda ? 4 : 3);
  in.beta = view_of(&bb, 3);
  in.initial_state = view_of(&s0, 4);
  hanpu_options opt;
  hanpu_options_init(&opt);
  opt.kind = kda ? HANPU_KDA : HANPU_GDN;
  opt.state_v_first = 1;
  opt.head_mapping = HANPU_HEADS_TILED;
  opt.precision = HANPU_PRECISION_EXACT;
  const hanpu_tensor o_t = view_of(&attn, 4), s_t = view_of(&sfin, 4);
  if (hanpu_chunk_forward(&in, &opt, NULL, &o_t, &s_t) != HANPU_OK) {
    fprintf(stderr, "%s: hanpu_chunk_forward failed: %s\n", kda ? "kda" : "gdn", hanpu_last_error());
    return 1;
  }
  const double e = nmse(dst, want, NS * T * HV * S + NS * HV * S * S);
  printf("%s: ggml's tensors through the recipe, NMSE against ggml's recurrence %.2e\n", kda ? "kda" : "gdn", e);
  if (!(e < 1e-10)) {
    fprintf(stderr, "%s: NMSE %.3e over the bar 1e-10\n", kda ? "kda" : "gdn", e);
    return 1;
  }
  return 0;
}

int main(void) {
  const int failures = run(0) + run(1);
  return failures ? 1 : 0;
}
