/* The C ABI (include/hanpu/hanpu_c.h), compiled as C: a GDN and a KDA prefill on the engine against the
 * fp64 reference, the recurrent path, decode over state slots with padding, and the error contract (a code,
 * a message naming the argument, outputs untouched). Exits non-zero on the first failed check. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_test_util.h"
#include "hanpu/hanpu_c.h"

static int failures = 0;

#define CHECK(cond)                                                      \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                        \
    }                                                                    \
  } while (0)

enum { B = 1, T = 70, H = 2, HV = 4, K = 16, V = 8 };

static void check_prefill(hanpu_kind kind) {
  const int gw = kind == HANPU_KDA ? K : 1;
  static float q[B * T * H * K], k[B * T * H * K], v[B * T * HV * V], g[B * T * HV * K], beta[B * T * HV];
  static float o[B * T * HV * V], s[B * HV * K * V], o_rec[B * T * HV * V], s_rec[B * HV * K * V];
  static double o_ref[B * T * HV * V], s_ref[B * HV * K * V];
  unsigned seed = 7u + (unsigned)kind;
  for (int i = 0; i < B * T * H * K; ++i) q[i] = next_value(&seed), k[i] = next_value(&seed);
  for (int i = 0; i < B * T * HV * V; ++i) v[i] = next_value(&seed);
  for (int i = 0; i < B * T * HV * gw; ++i) g[i] = -0.05f * (next_value(&seed) + 1.0f) - 0.01f;
  for (int i = 0; i < B * T * HV; ++i) beta[i] = 0.5f + 0.4f * next_value(&seed);

  const int64_t qs[4] = {B, T, H, K}, vs[4] = {B, T, HV, V}, gs[4] = {B, T, HV, K}, ss[4] = {B, HV, K, V};
  hanpu_inputs in;
  memset(&in, 0, sizeof in);  /* rank 0: the optional tensors are absent */
  in.q = hanpu_tensor_contiguous(q, HANPU_F32, 4, qs);
  in.k = hanpu_tensor_contiguous(k, HANPU_F32, 4, qs);
  in.v = hanpu_tensor_contiguous(v, HANPU_F32, 4, vs);
  in.g = hanpu_tensor_contiguous(g, HANPU_F32, kind == HANPU_KDA ? 4 : 3, gs);
  in.beta = hanpu_tensor_contiguous(beta, HANPU_F32, 3, gs);
  hanpu_options opt;
  hanpu_options_init(&opt);
  opt.kind = kind;
  opt.use_qk_l2norm_in_kernel = 1;
  hanpu_engine_config cfg;
  hanpu_engine_config_init(&cfg);
  cfg.threads = 2;

  const hanpu_tensor o_t = hanpu_tensor_contiguous(o, HANPU_F32, 4, vs), s_t = hanpu_tensor_contiguous(s, HANPU_F32, 4, ss);
  const hanpu_tensor or_t = hanpu_tensor_contiguous(o_ref, HANPU_F64, 4, vs);
  const hanpu_tensor sr_t = hanpu_tensor_contiguous(s_ref, HANPU_F64, 4, ss);
  CHECK(hanpu_reference_forward(&in, &opt, &or_t, &sr_t) == HANPU_OK);
  CHECK(hanpu_chunk_forward(&in, &opt, &cfg, &o_t, &s_t) == HANPU_OK);
  CHECK(strcmp(hanpu_last_error(), "") == 0);
  CHECK(nmse(o, o_ref, B * T * HV * V) < 1e-10);
  CHECK(nmse(s, s_ref, B * HV * K * V) < 1e-10);
  const hanpu_tensor orec_t = hanpu_tensor_contiguous(o_rec, HANPU_F32, 4, vs);
  const hanpu_tensor srec_t = hanpu_tensor_contiguous(s_rec, HANPU_F32, 4, ss);
  CHECK(hanpu_recurrent_forward(&in, &opt, &orec_t, &srec_t) == HANPU_OK);
  CHECK(nmse(o_rec, o_ref, B * T * HV * V) < 1e-10);

  /* every strategy, and the bf16 precision mode within its bar */
  for (int st = HANPU_STRATEGY_HANPU; st <= HANPU_STRATEGY_NATIVE; ++st) {
    cfg.strategy = st;
    CHECK(hanpu_chunk_forward(&in, &opt, &cfg, &o_t, NULL) == HANPU_OK);
    CHECK(nmse(o, o_ref, B * T * HV * V) < 1e-10);
  }
  opt.precision = HANPU_PRECISION_BF16;
  CHECK(hanpu_chunk_forward(&in, &opt, NULL, &o_t, &s_t) == HANPU_OK);
  CHECK(nmse(o, o_ref, B * T * HV * V) < 1e-4 && nmse(o, o_ref, B * T * HV * V) > 1e-10);

  /* errors: a code, a message naming the argument, and outputs untouched */
  opt.precision = 7;
  CHECK(hanpu_chunk_forward(&in, &opt, NULL, &o_t, &s_t) == HANPU_INVALID_ARGUMENT);
  CHECK(strstr(hanpu_last_error(), "opt.precision 7 is not a hanpu_precision") != NULL);
  opt.precision = HANPU_PRECISION_BF16;
  for (int i = 0; i < B * T * HV * V; ++i) o[i] = 42.0f;
  hanpu_inputs bad = in;
  bad.k.shape[3] = K + 1;
  CHECK(hanpu_chunk_forward(&bad, &opt, NULL, &o_t, &s_t) == HANPU_INVALID_ARGUMENT);
  CHECK(strstr(hanpu_last_error(), "k must have shape") != NULL);
  bad = in;
  bad.q.dtype = 17;
  CHECK(hanpu_chunk_forward(&bad, &opt, NULL, &o_t, &s_t) == HANPU_INVALID_ARGUMENT);
  CHECK(strstr(hanpu_last_error(), "q.dtype 17 is not a hanpu_dtype") != NULL);
  opt.chunk_size = 48;
  CHECK(hanpu_chunk_forward(&in, &opt, NULL, &o_t, &s_t) == HANPU_INVALID_ARGUMENT);
  CHECK(strstr(hanpu_last_error(), "chunk_size must be 16, 32 or 64, got 48") != NULL);
  opt.chunk_size = 64;
  cfg.threads = -1;
  CHECK(hanpu_chunk_forward(&in, &opt, &cfg, &o_t, &s_t) == HANPU_INVALID_ARGUMENT);
  CHECK(strstr(hanpu_last_error(), "cfg.threads") != NULL);
  CHECK(hanpu_chunk_forward(NULL, &opt, NULL, &o_t, &s_t) == HANPU_INVALID_ARGUMENT);
  opt.head_mapping = 2;
  CHECK(hanpu_chunk_forward(&in, &opt, NULL, &o_t, &s_t) == HANPU_INVALID_ARGUMENT);
  CHECK(strstr(hanpu_last_error(), "opt.head_mapping 2 is not a hanpu_head_mapping") != NULL);
  for (int i = 0; i < B * T * HV * V; ++i) CHECK(o[i] == 42.0f);

  /* ggml's tiled value heads (hv % H): not the grouped result (H = 2 q/k heads, 4 value heads), and the engine
   * against the reference under the same mapping */
  opt.head_mapping = HANPU_HEADS_TILED;
  opt.precision = HANPU_PRECISION_EXACT;
  CHECK(hanpu_chunk_forward(&in, &opt, NULL, &o_t, &s_t) == HANPU_OK);
  CHECK(nmse(o, o_ref, B * T * HV * V) > 1e-3);
  CHECK(hanpu_reference_forward(&in, &opt, &or_t, &sr_t) == HANPU_OK);
  CHECK(nmse(o, o_ref, B * T * HV * V) < 1e-10);
  CHECK(nmse(s, s_ref, B * HV * K * V) < 1e-10);
}

/* One decode token for 3 sequences over a pool of 4 slots, sequence 1 padding: the slots of sequences 0
 * and 2 advance exactly as the recurrent path from the same state; the others are untouched. */
static void check_decode(void) {
  enum { N = 3, P = 4 };
  static float q[N * H * K], k[N * H * K], v[N * HV * V], g[N * HV], beta[N * HV], o[N * HV * V];
  static float pool[P * HV * K * V], pool0[P * HV * K * V], o_rec[HV * V], s_rec[HV * K * V];
  unsigned seed = 3u;
  for (int i = 0; i < N * H * K; ++i) q[i] = next_value(&seed), k[i] = next_value(&seed);
  for (int i = 0; i < N * HV * V; ++i) v[i] = next_value(&seed);
  for (int i = 0; i < N * HV; ++i) g[i] = -0.1f, beta[i] = 0.5f;
  for (int i = 0; i < P * HV * K * V; ++i) pool0[i] = pool[i] = 0.1f * next_value(&seed);
  int64_t slots[N] = {2, -1, 0};
  const int64_t qs[4] = {N, 1, H, K}, vs[4] = {N, 1, HV, V}, gs[3] = {N, 1, HV}, ps[4] = {P, HV, K, V}, ns[1] = {N};
  hanpu_inputs in;
  memset(&in, 0, sizeof in);
  in.q = hanpu_tensor_contiguous(q, HANPU_F32, 4, qs);
  in.k = hanpu_tensor_contiguous(k, HANPU_F32, 4, qs);
  in.v = hanpu_tensor_contiguous(v, HANPU_F32, 4, vs);
  in.g = hanpu_tensor_contiguous(g, HANPU_F32, 3, gs);
  in.beta = hanpu_tensor_contiguous(beta, HANPU_F32, 3, gs);
  hanpu_options opt;
  hanpu_options_init(&opt);
  const hanpu_tensor pool_t = hanpu_tensor_contiguous(pool, HANPU_F32, 4, ps);
  const hanpu_tensor slots_t = hanpu_tensor_contiguous(slots, HANPU_I64, 1, ns);
  const hanpu_tensor o_t = hanpu_tensor_contiguous(o, HANPU_F32, 4, vs);
  CHECK(hanpu_decode_slots(&in, &opt, NULL, &pool_t, &slots_t, &o_t) == HANPU_OK);
  for (int i = 0; i < HV * V; ++i) CHECK(o[HV * V + i] == 0.0f); /* padding */
  for (int n = 0; n < N; n += 2) {
    /* sequence n alone through the recurrent path, from its slot's old state */
    const int64_t q1[4] = {1, 1, H, K}, v1[4] = {1, 1, HV, V}, g1[3] = {1, 1, HV}, s1[4] = {1, HV, K, V};
    hanpu_inputs one;
    memset(&one, 0, sizeof one);
    one.q = hanpu_tensor_contiguous(q + n * H * K, HANPU_F32, 4, q1);
    one.k = hanpu_tensor_contiguous(k + n * H * K, HANPU_F32, 4, q1);
    one.v = hanpu_tensor_contiguous(v + n * HV * V, HANPU_F32, 4, v1);
    one.g = hanpu_tensor_contiguous(g + n * HV, HANPU_F32, 3, g1);
    one.beta = hanpu_tensor_contiguous(beta + n * HV, HANPU_F32, 3, g1);
    one.initial_state = hanpu_tensor_contiguous(pool0 + slots[n] * HV * K * V, HANPU_F32, 4, s1);
    const hanpu_tensor or_t = hanpu_tensor_contiguous(o_rec, HANPU_F32, 4, v1);
    const hanpu_tensor sr_t = hanpu_tensor_contiguous(s_rec, HANPU_F32, 4, s1);
    CHECK(hanpu_recurrent_forward(&one, &opt, &or_t, &sr_t) == HANPU_OK);
    for (int i = 0; i < HV * V; ++i) CHECK(fabsf(o[n * HV * V + i] - o_rec[i]) <= 1e-5f * (1.0f + fabsf(o_rec[i])));
    for (int i = 0; i < HV * K * V; ++i) {
      CHECK(fabsf(pool[slots[n] * HV * K * V + i] - s_rec[i]) <= 1e-5f * (1.0f + fabsf(s_rec[i])));
    }
  }
  for (int i = 0; i < HV * K * V; ++i) CHECK(pool[1 * HV * K * V + i] == pool0[1 * HV * K * V + i]);
  for (int i = 0; i < HV * K * V; ++i) CHECK(pool[3 * HV * K * V + i] == pool0[3 * HV * K * V + i]);
  /* a duplicate slot: refused, the pool untouched */
  memcpy(pool0, pool, sizeof pool);
  slots[2] = 2;
  CHECK(hanpu_decode_slots(&in, &opt, NULL, &pool_t, &slots_t, &o_t) == HANPU_INVALID_ARGUMENT);
  CHECK(strstr(hanpu_last_error(), "slot_indices[2] = 2 is used by an earlier sequence") != NULL);
  CHECK(memcmp(pool, pool0, sizeof pool) == 0);
}

/* A tiny Qwen3.5 layer from weights in memory: a 9-token prefill equals an 8-token prefill that fills the
 * states followed by one decode step; errors name what is wrong. */
enum { LD = 16, LH = 1, LHV = 2, LK = 8, LV = 4, LKC = 4, LC = 2 * LH * LK + LHV * LV, LT = 9 };

static void check_layer(void) {
  static float qkv[LC * LD], z[LHV * LV * LD], b[LHV * LD], a[LHV * LD], conv[LC * LKC], alog[LHV], dtb[LHV],
      norm[LV], out[LD * LHV * LV];
  struct {
    const char* name;
    float* data;
    int32_t rank;
    int64_t shape[3];
    float scale;
  } w[] = {{"in_proj_qkv.weight", qkv, 2, {LC, LD}, 0.25f},       {"in_proj_z.weight", z, 2, {LHV * LV, LD}, 0.25f},
           {"in_proj_b.weight", b, 2, {LHV, LD}, 0.25f},          {"in_proj_a.weight", a, 2, {LHV, LD}, 0.25f},
           {"conv1d.weight", conv, 3, {LC, 1, LKC}, 0.5f},        {"A_log", alog, 1, {LHV}, 1.0f},
           {"dt_bias", dtb, 1, {LHV}, 1.0f},                      {"norm.weight", norm, 1, {LV}, 1.0f},
           {"out_proj.weight", out, 2, {LD, LHV * LV}, 0.35f}};
  enum { NW = sizeof w / sizeof w[0] };
  const char* names[NW];
  hanpu_tensor tensors[NW];
  unsigned seed = 11;
  for (int i = 0; i < NW; ++i) {
    int64_t n = 1;
    for (int d = 0; d < w[i].rank; ++d) n *= w[i].shape[d];
    for (int64_t j = 0; j < n; ++j) w[i].data[j] = w[i].scale * next_value(&seed);
    names[i] = w[i].name;
    tensors[i] = hanpu_tensor_contiguous(w[i].data, HANPU_F32, w[i].rank, w[i].shape);
  }
  const hanpu_layer_spec spec = {HANPU_QWEN3_5, LD, LH, LHV, LK, LV, LKC, 1e-6};
  hanpu_layer* layer = NULL;
  CHECK(hanpu_layer_create(&spec, names, tensors, NW, HANPU_PRECISION_AUTO, &layer) == HANPU_OK);
  int64_t conv_dim = 0;
  int32_t act = -1;
  CHECK(hanpu_layer_describe(layer, NULL, &conv_dim, &act) == HANPU_OK && conv_dim == LC && act == HANPU_F32);

  static float x[LT * LD], y_full[LT * LD], y_part[LT * LD], y_step[LD], cs[LC * LKC], rs[LHV * LK * LV];
  for (int i = 0; i < LT * LD; ++i) x[i] = next_value(&seed);
  const int64_t full_shape[3] = {1, LT, LD}, part_shape[3] = {1, LT - 1, LD}, step_shape[2] = {1, LD};
  const int64_t cs_shape[3] = {1, LC, LKC}, rs_shape[4] = {1, LHV, LK, LV}, slot_shape[1] = {1};
  hanpu_tensor xf = hanpu_tensor_contiguous(x, HANPU_F32, 3, full_shape);
  hanpu_tensor yf = hanpu_tensor_contiguous(y_full, HANPU_F32, 3, full_shape);
  CHECK(hanpu_layer_prefill(layer, &xf, &yf, NULL, NULL, 0, NULL) == HANPU_OK);
  hanpu_tensor xp = hanpu_tensor_contiguous(x, HANPU_F32, 3, part_shape);
  hanpu_tensor yp = hanpu_tensor_contiguous(y_part, HANPU_F32, 3, part_shape);
  hanpu_tensor cst = hanpu_tensor_contiguous(cs, HANPU_F32, 3, cs_shape);
  hanpu_tensor rst = hanpu_tensor_contiguous(rs, HANPU_F32, 4, rs_shape);
  CHECK(hanpu_layer_prefill(layer, &xp, &yp, &cst, &rst, 0, NULL) == HANPU_OK);
  int64_t slot = 0;
  hanpu_tensor xs = hanpu_tensor_contiguous(x + (LT - 1) * LD, HANPU_F32, 2, step_shape);
  hanpu_tensor ys = hanpu_tensor_contiguous(y_step, HANPU_F32, 2, step_shape);
  hanpu_tensor sl = hanpu_tensor_contiguous(&slot, HANPU_I64, 1, slot_shape);
  CHECK(hanpu_layer_decode(layer, &xs, &ys, &cst, &rst, &sl, NULL) == HANPU_OK);
  double num = 0, den = 0;
  for (int i = 0; i < LD; ++i) {
    const double d = y_step[i] - y_full[(LT - 1) * LD + i];
    num += d * d;
    den += (double)y_full[(LT - 1) * LD + i] * y_full[(LT - 1) * LD + i];
  }
  CHECK(den > 0 && num / den < 1e-10);

  /* Errors: a slot outside the pool, a missing weight, a missing checkpoint. */
  slot = 3;
  CHECK(hanpu_layer_decode(layer, &xs, &ys, &cst, &rst, &sl, NULL) == HANPU_INVALID_ARGUMENT);
  CHECK(strstr(hanpu_last_error(), "slots[0] = 3 is outside the pool") != NULL);
  hanpu_layer_free(layer);
  layer = NULL;
  CHECK(hanpu_layer_create(&spec, names, tensors, NW - 1, HANPU_PRECISION_AUTO, &layer) == HANPU_NOT_FOUND);
  CHECK(strstr(hanpu_last_error(), "out_proj.weight") != NULL && layer == NULL);
  CHECK(hanpu_layer_load("/nonexistent-hanpu-model", 0, HANPU_PRECISION_AUTO, &layer) == HANPU_NOT_FOUND);
  CHECK(strstr(hanpu_last_error(), "config.json") != NULL && layer == NULL);
}

int main(void) {
  CHECK(strlen(hanpu_version()) > 0);
  check_prefill(HANPU_GDN);
  check_prefill(HANPU_KDA);
  check_decode();
  check_layer();
  if (failures) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("C ABI: all checks passed (hanpu %s)\n", hanpu_version());
  return 0;
}
