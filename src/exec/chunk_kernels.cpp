#include "exec/chunk_kernels.h"

#include <cstdlib>
#include <cstring>

#include <algorithm>
#include <cmath>

#include "kernels/decay.h"
#include "kernels/kernel_set.h"
#include "kernels/simd.h"
#include "kernels/tril_inverse.h"

namespace hanpu {

ChunkInputs::ChunkInputs(int64_t C_, int64_t K_, int64_t Vmax, int64_t w_)
    : C(C_), K(K_), w(w_), q(C_ * K_), k(C_ * K_), v(C_ * Vmax), beta(C_), graw(C_ * w_), G(w_ == 1 ? C_ : 0),
      ga(C_ * w_), eg(C_ * w_), eg_last(C_ * w_), g_last(w_), run(C_), fq(C_), fk(C_), bk(C_), eq(C_), ek(C_),
      qb(C_ * K_), kb(C_ * K_) {}

int64_t ChunkInputs::bytes() const {
  return static_cast<int64_t>((q.size() + k.size() + v.size() + beta.size() + graw.size() + ga.size() + eg.size() +
                               eg_last.size() + g_last.size() + run.size() + fq.size() + fk.size() + bk.size() +
                               eq.size() + ek.size()) *
                                  sizeof(float) +
                              G.size() * sizeof(double) + (qb.size() + kb.size()) * sizeof(uint16_t));
}

bool channel_major(const TensorView& x) {
  return x.rank() == 4 && x.shape[3] > 1 && std::abs(x.stride(1)) < std::abs(x.stride(3));
}

namespace {

// Prefetches n elements of x from offset off, `stride` elements apart (a run of contiguous lines when
// stride is 1, else one line per element); `write`: for writing (the lines are fetched for ownership).
void prefetch_run(const TensorView& x, int64_t off, int64_t stride, int64_t n, bool write = false) {
  const int64_t es = static_cast<int64_t>(dtype_size(x.dtype));
  const char* base = static_cast<const char*>(x.data) + off * es;
  // Locality 2 (prefetcht1, into L2): measured a few percent faster than prefetcht0 at T = 4096, 16 heads,
  // as a whole chunk's rows (~100 KiB) are requested at once. (The hint must be a constant.)
  const auto fetch = [write](const void* a) {
    if (write) {
      __builtin_prefetch(a, 1, 2);
    } else {
      __builtin_prefetch(a, 0, 2);
    }
  };
  if (std::abs(stride) == 1) {
    // Every line the run [lo, hi) touches, from the line holding its first byte: a run that does not start
    // on a line boundary (a view at an odd offset; malloc's 16-byte alignment) touches one line more than
    // n * es / 64, and stepping 64 bytes from its first byte missed that last line on every row (measured:
    // a chunk's load 23-26 us with 16-byte-aligned rows vs 13-15 us with 64-byte-aligned ones; covered,
    // 15-18 us).
    const char* lo = stride < 0 ? base - (n - 1) * es : base;
    const uintptr_t first = reinterpret_cast<uintptr_t>(lo) & ~uintptr_t{63};
    const uintptr_t end = reinterpret_cast<uintptr_t>(lo) + static_cast<uintptr_t>(n * es);
    for (uintptr_t a = first; a < end; a += 64) fetch(reinterpret_cast<const void*>(a));
  } else {
    for (int64_t i = 0; i < n; ++i) fetch(base + i * stride * es);
  }
}

// The L x n block of rows [t0, t0 + L), columns [c0, c0 + n) of head m of a [B, T, M, n] view.
void prefetch_block(const TensorView& x, int64_t b, int64_t t0, int64_t L, int64_t m, int64_t c0, int64_t n,
                    bool write = false) {
  const int64_t off = b * x.stride(0) + t0 * x.stride(1) + m * x.stride(2) + c0 * x.stride(3);
  if (channel_major(x)) {
    for (int64_t d = 0; d < n; ++d) prefetch_run(x, off + d * x.stride(3), x.stride(1), L, write);
  } else {
    for (int64_t i = 0; i < L; ++i) prefetch_run(x, off + i * x.stride(1), x.stride(3), n, write);
  }
}

// out[i * n + d] = x[b, t0 + i, m, c0 + d] for a channel-major view: read channel by channel along the
// tokens (each channel's L tokens are one contiguous run), so a chunk costs n short streams instead of
// L * n scattered lines.
void load_channel_major(const TensorView& x, int64_t b, int64_t t0, int64_t L, int64_t m, int64_t c0, int64_t n,
                        float* out, float* run) {
  const int64_t off = b * x.stride(0) + t0 * x.stride(1) + m * x.stride(2) + c0 * x.stride(3);
  for (int64_t d = 0; d < n; ++d) {
    load_elems<float>(x, off + d * x.stride(3), x.stride(1), L, run);
    for (int64_t i = 0; i < L; ++i) out[i * n + d] = run[i];
  }
}

// n elements of x from element offset off, `stride` apart, into fp32: contiguous bf16 rows through the
// kernel set's vector widening, anything else element by element.
void load_row_f32(const TensorView& x, int64_t off, int64_t stride, int64_t n, float* out) {
  if (x.dtype == DType::kBF16 && stride == 1) {
    simd::bf16_to_f32(n, static_cast<const uint16_t*>(x.data) + off, out);
  } else {
    load_elems<float>(x, off, stride, n, out);
  }
}

// The bf16 bit patterns of a raw row (raw rows are bf16): copied as stored when the row is contiguous, else
// narrowed back from its widened copy (exact: it holds bf16 values).
void keep_bf16_row(const TensorView& x, bool channel_major_view, int64_t off, const float* widened, int64_t n,
                   uint16_t* out) {
  if (!channel_major_view && x.stride(3) == 1) {
    std::memcpy(out, static_cast<const uint16_t*>(x.data) + off, static_cast<std::size_t>(n) * sizeof(uint16_t));
  } else {
    simd::f32_to_bf16(n, widened, out);
  }
}

}  // namespace

void prefetch_o_rows(const TensorView& o, int64_t b, int64_t t0, int64_t L, int64_t hv, int64_t c0, int64_t n) {
  prefetch_block(o, b, t0, L, hv, c0, n, true);
}

void store_o_rows(const TensorView& o, int64_t b, int64_t t0, int64_t L, int64_t hv, int64_t c0, int64_t n,
                  const float* rows) {
  if (o.dtype == DType::kBF16 && o.stride(3) == 1) {  // the rows at o's row stride, in one call
    const int64_t off = b * o.stride(0) + t0 * o.stride(1) + hv * o.stride(2) + c0;
    simd::f32_to_bf16_rows(L, n, rows, n, static_cast<uint16_t*>(o.data) + off, o.stride(1));
    return;
  }
  for (int64_t i = 0; i < L; ++i) {
    const int64_t off = b * o.stride(0) + (t0 + i) * o.stride(1) + hv * o.stride(2) + c0 * o.stride(3);
    store_elems<float>(o, off, o.stride(3), n, rows + i * n);
  }
}

void ChunkInputs::prefetch(const Problem& p, const Sequence& s, int64_t hv, const ChunkRows& c) const {
  const int64_t h = p.qk_head(hv);
  const Inputs& in = p.in;
  prefetch_block(in.q, s.batch, c.t0, c.L, h, 0, K);
  prefetch_block(in.k, s.batch, c.t0, c.L, h, 0, K);
  prefetch_block(in.v, s.batch, c.t0, c.L, hv, c.c0, c.Vc);
  if (in.g.rank() == 4) {
    prefetch_block(in.g, s.batch, c.t0, c.L, hv, 0, w);
  } else {
    const int64_t off = s.batch * in.g.stride(0) + c.t0 * in.g.stride(1) + hv * in.g.stride(2);
    prefetch_run(in.g, off, in.g.stride(1), c.L);
  }
}

void decay_factors(int64_t L, const double* G, float* eg, float* eg_last, float* g_last) {
  // The L rows as one row of L columns, so that the exps run on full vectors (the same bits: exp works lane by
  // lane), G_last repeated for exp(G_last - G_i).
  const double* gl = G + (L - 1);
  thread_local AlignedVector<double> last;
  last.assign(static_cast<std::size_t>(L), *gl);
  simd::exp_diff(1, L, G, 0, nullptr, 0, eg);
  simd::exp_diff(1, L, last.data(), 0, G, 0, eg_last);
  simd::exp_diff(1, 1, gl, 0, nullptr, 0, g_last);
}

void ChunkInputs::load(const Problem& p, const RowLoader<float>& rows, const Sequence& s, int64_t hv,
                       const ChunkRows& c) {
  const int64_t h = p.qk_head(hv), L = c.L;
  const TensorView &qv = p.in.q, &kv = p.in.k, &vv = p.in.v;
  // Channel-major views (e.g. transformers' q, k, v: views of a transposed [B, C, T] convolution output)
  // are read as blocks; row by row, every element of a row would be its own cache line, all of a row's
  // lines in one L1 set when T is a multiple of 1024.
  const bool q_cm = channel_major(qv), k_cm = channel_major(kv), v_cm = channel_major(vv);
  // q and k are loaded as stored, then finished (l2norm, scale) unless the products take their factors.
  if (q_cm) load_channel_major(qv, s.batch, c.t0, L, h, 0, K, q.data(), run.data());
  if (k_cm) load_channel_major(kv, s.batch, c.t0, L, h, 0, K, k.data(), run.data());
  if (v_cm) load_channel_major(vv, s.batch, c.t0, L, hv, c.c0, c.Vc, v.data(), run.data());
  const auto at = [&](const TensorView& x, int64_t t, int64_t m) {
    return s.batch * x.stride(0) + t * x.stride(1) + m * x.stride(2);
  };
  // Raw rows that no step reads in fp32 stay bf16 only where stored contiguous: copied as stored, with no
  // widened copy.
  const bool q_bf16_only = raw_qk && !widen_raw_qk && !q_cm && qv.stride(3) == 1;
  const bool k_bf16_only = raw_qk && !widen_raw_qk && !k_cm && kv.stride(3) == 1;
  // Contiguous bf16 rows that are finished (not raw) are read where they are stored (the view's row stride),
  // summed, and widened and finished in one pass (RowLoader::finish_q_rows_bf16): one pass over the fp32 rows
  // where widening, the l2norm's scaling and q's scale made three.
  const auto finish_from_bf16 = [&](const TensorView& x, bool cm) {
    return !raw_qk && !cm && x.dtype == DType::kBF16 && x.stride(3) == 1;
  };
  const bool q_from_bf16 = finish_from_bf16(qv, q_cm), k_from_bf16 = finish_from_bf16(kv, k_cm);
  for (int64_t i = 0; i < L; ++i) {
    const int64_t t = c.t0 + i;
    if (!q_cm && !q_bf16_only && !q_from_bf16) load_row_f32(qv, at(qv, t, h), qv.stride(3), K, q.data() + i * K);
    if (!k_cm && !k_bf16_only && !k_from_bf16) load_row_f32(kv, at(kv, t, h), kv.stride(3), K, k.data() + i * K);
    if (raw_qk) {
      keep_bf16_row(qv, q_cm, at(qv, t, h), q.data() + i * K, K, qb.data() + i * K);
      keep_bf16_row(kv, k_cm, at(kv, t, h), k.data() + i * K, K, kb.data() + i * K);
    }
  }
  if (!v_cm) RowLoader<float>::load_rows(vv, s.batch, c.t0, L, hv, c.c0, c.Vc, v.data());
  // The rows' l2norm factors all at once (their sums side by side); without raw_qk fq and fk are scratch. Raw
  // rows' factors are summed from their bf16 values, widened or not (the same sums as of the widened rows).
  if (raw_qk) {
    rows.q_factors(L, qb.data(), fq.data());
    rows.k_factors(L, kb.data(), fk.data());
  } else {
    const auto stored = [&](const TensorView& x) { return static_cast<const uint16_t*>(x.data) + at(x, c.t0, h); };
    if (q_from_bf16) {
      rows.finish_q_rows_bf16(L, stored(qv), qv.stride(1), q.data(), fq.data());
    } else {
      rows.finish_q_rows(L, q.data(), fq.data());
    }
    if (k_from_bf16) {
      rows.finish_k_rows_bf16(L, stored(kv), kv.stride(1), k.data(), fk.data());
    } else {
      rows.finish_k_rows(L, k.data(), fk.data());
    }
  }
  rows.gates(s.batch, c.t0, L, hv, graw.data());
  rows.betas(s.batch, c.t0, L, hv, beta.data());
  if (p.kind == Kind::kKda) {
    simd::kda_gate_factors(L, w, graw.data(), ga.data(), eg.data(), eg_last.data(), g_last.data());
  } else {
    simd::gate_cumsum(L, 1, graw.data(), G.data());
    decay_factors(L, G.data(), eg.data(), eg_last.data(), g_last.data());
  }
  if (raw_qk) {  // (GDN: one decay a row) the products' row factors, as scale_rows would form them
    for (int64_t i = 0; i < L; ++i) {
      bk[i] = beta[i] * fk[i];
      ek[i] = eg[i] * fk[i];
      eq[i] = eg[i] * fq[i];
    }
  }
}

int64_t chunk_input_bytes(const Problem& p, int64_t L, int64_t Vc) {
  const Inputs& in = p.in;
  return L * (2 * p.K * static_cast<int64_t>(dtype_size(in.q.dtype)) + Vc * static_cast<int64_t>(dtype_size(in.v.dtype)) +
              p.gate_width() * static_cast<int64_t>(dtype_size(in.g.dtype)) +
              static_cast<int64_t>(dtype_size(in.beta.dtype)));
}


const char* part_name(Part p) {
  static const char* const names[] = {"load", "scores", "inverse", "gemm", "vector", "store", "prefetch"};
  return names[static_cast<int>(p)];
}

Part part_of(plan::OpCode op) {
  switch (op) {
    case plan::OpCode::kCumsum: case plan::OpCode::kExpG: case plan::OpCode::kExpGl: case plan::OpCode::kExpGlast:
      return Part::kLoad;
    case plan::OpCode::kKp: case plan::OpCode::kKn: case plan::OpCode::kQp: case plan::OpCode::kMask:
    case plan::OpCode::kKKt: case plan::OpCode::kA: case plan::OpCode::kQKt: case plan::OpCode::kP:
      return Part::kScores;
    case plan::OpCode::kSolve: return Part::kInverse;
    case plan::OpCode::kKS: case plan::OpCode::kQS: case plan::OpCode::kVnFromTR: case plan::OpCode::kW:
    case plan::OpCode::kU: case plan::OpCode::kWS: case plan::OpCode::kPV: case plan::OpCode::kKtV:
    case plan::OpCode::kUpdate:
      return Part::kGemm;
    case plan::OpCode::kO: return Part::kStore;
    default: return Part::kVector;
  }
}

namespace {

// gemm / gemm_tn on bf16-rounded operands (`bf16`) or on fp32 ones, whatever the run's precision: a bf16
// plan's fp32 products (plan/packing.h Bf16Terms::fp32) run as exact mode's.
void gemm_in(bool bf16, int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb,
             bool accumulate, float* C, int64_t ldc, Counters& cnt) {
  (bf16 ? simd::gemm_nn_bf16 : simd::gemm_nn)(M, N, Kd, A, lda, B, ldb, accumulate, C, ldc);
  cnt.flops += 2.0 * static_cast<double>(M) * N * Kd;
}

void gemm_tn_in(bool bf16, int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B,
                int64_t ldb, bool accumulate, float* C, int64_t ldc, Counters& cnt) {
  (bf16 ? simd::gemm_tn_bf16 : simd::gemm_tn)(M, N, Kd, A, lda, B, ldb, accumulate, C, ldc);
  cnt.flops += 2.0 * static_cast<double>(M) * N * Kd;
}

}  // namespace

void gemm(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb, bool accumulate,
          float* C, int64_t ldc, Counters& cnt) {
  gemm_in(cnt.bf16, M, N, Kd, A, lda, B, ldb, accumulate, C, ldc, cnt);
}

void gemm_tn(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb,
             bool accumulate, float* C, int64_t ldc, Counters& cnt) {
  gemm_tn_in(cnt.bf16, M, N, Kd, A, lda, B, ldb, accumulate, C, ldc, cnt);
}

void gemm_packed(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const Bf16Operand& B, bool accumulate,
                 float* C, int64_t ldc, Counters& cnt) {
  simd::gemm_packed_bf16(M, N, Kd, A, lda, B, accumulate, C, ldc);
  cnt.flops += 2.0 * static_cast<double>(M) * N * Kd;
}

void gemm_packed(int64_t M, int64_t N, int64_t Kd, const uint16_t* A, int64_t lda, const Bf16Operand& B,
                 bool accumulate, float* C, int64_t ldc, Counters& cnt, RowScale rs) {
  simd::gemm_bf16_rows(M, N, Kd, A, lda, B, accumulate, C, ldc, rs);
  cnt.flops += 2.0 * static_cast<double>(M) * N * Kd;
}

const Bf16Operand& StateOperand::packed() {
  if (!is_packed_ || !keep_) {
    simd::pack_bf16(K_, Vc_, S_, Vc_, packed_);
    is_packed_ = true;
  }
  return *packed_;
}

void StateOperand::times(int64_t L, const float* X, float* out, Counters& cnt) {
  if (!cnt.bf16) {
    gemm(L, Vc_, K_, X, K_, S_, Vc_, false, out, Vc_, cnt);
    return;
  }
  gemm_packed(L, Vc_, K_, X, K_, packed(), false, out, Vc_, cnt);
}

void StateOperand::times(int64_t L, const uint16_t* X, float* out, Counters& cnt, const float* row_factors) {
  gemm_packed(L, Vc_, K_, X, K_, packed(), false, out, Vc_, cnt, RowScale{row_factors, 1});
}

namespace {

// X - bf16(X) [rows, cols] into a per-thread buffer (contiguous rows), for a split operand's low term.
const float* residual(int64_t rows, int64_t cols, const float* X, int64_t ldx) {
  thread_local AlignedVector<float> lo;
  lo.resize(static_cast<std::size_t>(rows * cols));
  simd::bf16_residual(rows, cols, X, ldx, lo.data(), cols);
  return lo.data();
}

}  // namespace

void pack_right(int64_t Kd, int64_t N, const float* X, int64_t ldx, bool split, Bf16Operand* hi, Bf16Operand* lo) {
  if (split) {
    simd::pack_bf16_split(Kd, N, X, ldx, hi, lo);
  } else {
    simd::pack_bf16(Kd, N, X, ldx, hi);
  }
}

namespace {

// The bf16 update's right operands: V' [L, cols] packed once, as its two-term split's two terms with `split`
// (or kept from P V' in vn_kept, packed there unless an earlier product did); returns how many.
int update_terms(int64_t L, int64_t cols, const float* Vn, bool split, KeptOperand* vn_kept, const Bf16Operand** b) {
  thread_local Bf16Operand own_hi, own_lo;
  if (vn_kept) {
    b[0] = &vn_kept->of(L, cols, Vn, cols, split);
    b[1] = &vn_kept->low;
  } else {
    pack_right(L, cols, Vn, cols, split, &own_hi, &own_lo);
    b[0] = &own_hi;
    b[1] = &own_lo;
  }
  return split ? 2 : 1;
}

// The update's decay of the old state, diag(e^{G_last}) S [K, cols], as row factors on the prior C: one factor for
// every row (GDN) or one a key channel (KDA).
RowScale state_decay(const ChunkInputs& in) { return RowScale{in.g_last.data(), in.w == 1 ? 0 : 1}; }

// dst = e^{G_last} S + sum_t K^T b_t with K^T read from bf16 key rows kr [L, K] (gemm_bf16_rows_tn), the decay as
// the product's row factors on the prior C: scale_rows' multiplies, with no pass of their own.
void update_from_key_rows(const ChunkInputs& in, int64_t L, int64_t cols, const float* S, const uint16_t* kr, int nt,
                          const Bf16Operand* const* b, float* dst, Counters& cnt) {
  const int64_t K = in.K;
  if (dst != S) std::copy(S, S + K * cols, dst);
  simd::gemm_bf16_rows_tn(K, cols, L, kr, K, nt, b, true, dst, cols, state_decay(in));
  cnt.flops += 2.0 * static_cast<double>(K) * cols * L * nt;
}

}  // namespace

void update_state(const ChunkInputs& in, int64_t L, int64_t cols, const float* S, const float* keys, bool packed,
                  const float* Vn, float* dst, Counters& cnt, KeptOperand* vn_kept, plan::Bf16Terms terms) {
  const int64_t K = in.K, lda = packed ? L : K;
  // Both forms accumulate onto the old state with its decay e^{G_last} as the product's row factors on the prior
  // C: one pass of S through the GEMM where a decay pass and one product per term made two or three. The same
  // bits: the factors' one multiply, then each term's chain in order.
  if (dst != S) std::copy(S, S + K * cols, dst);
  int nt = 1;
  if (cnt.bf16 && !terms.fp32) {  // the terms chained, the keys' tile rows made once (gemm_terms_bf16)
    const Bf16Operand* b[2];
    nt = update_terms(L, cols, Vn, terms.right, vn_kept, b);
    simd::gemm_terms_bf16(K, cols, L, keys, lda, !packed, nt, b, true, dst, cols, state_decay(in));
  } else {  // the fp32 product (gemm_scaled_acc)
    simd::gemm_scaled_acc(!packed, K, cols, L, keys, lda, Vn, cols, dst, cols, state_decay(in));
  }
  cnt.flops += 2.0 * static_cast<double>(K) * cols * L * nt;
}

void update_state_from_rows(const ChunkInputs& in, int64_t L, int64_t cols, const float* S, const float* Vd, float* dst,
                            Counters& cnt) {
  thread_local Bf16Operand vd;
  simd::pack_bf16(L, cols, Vd, cols, &vd);
  update_state_from_packed(in, L, cols, S, vd, dst, cnt);
}

void update_state_from_packed(const ChunkInputs& in, int64_t L, int64_t cols, const float* S, const Bf16Operand& vd,
                              float* dst, Counters& cnt) {
  const Bf16Operand* b = &vd;
  update_from_key_rows(in, L, cols, S, in.kb.data(), 1, &b, dst, cnt);
}

void update_state_from_key_rows(const ChunkInputs& in, int64_t L, int64_t cols, const float* S, const uint16_t* kd,
                                const float* Vn, float* dst, Counters& cnt, KeptOperand* vn_kept,
                                plan::Bf16Terms terms) {
  const Bf16Operand* b[2];
  const int nt = update_terms(L, cols, Vn, terms.right, vn_kept, b);
  update_from_key_rows(in, L, cols, S, kd, nt, b, dst, cnt);
}

const Bf16Operand& KeptOperand::of(int64_t Kd, int64_t N, const float* X, int64_t ldx, bool split_x) {
  if (!valid) {
    pack_right(Kd, N, X, ldx, split_x, &packed, &low);
    valid = true;
    split = split_x;
  } else if (split_x && !split) {
    simd::pack_bf16(Kd, N, residual(Kd, N, X, ldx), N, &low);
    split = true;
  }
  return packed;
}

void lower_times(int64_t L, int64_t N, const float* M, int64_t ldm, const float* X, int64_t ldx, bool accumulate,
                 float* C, int64_t ldc, Counters& cnt, bool repack, KeptOperand* kept, plan::Bf16Terms terms) {
  if (!cnt.bf16 || terms.fp32) {
    for (int64_t r0 = 0; r0 < L; r0 += kTrilBlock) {
      const int64_t r1 = std::min(L, r0 + kTrilBlock);
      gemm_in(false, r1 - r0, N, r1, M + r0 * ldm, ldm, X, ldx, accumulate, C + r0 * ldc, ldc, cnt);
    }
    return;
  }
  // A split M's low term is made once for all row blocks, a split X's once for every packing of it.
  thread_local Bf16Operand own, own_low;
  thread_local AlignedVector<float> m_low;
  if (terms.left) {
    m_low.resize(static_cast<std::size_t>(L * L));
    simd::bf16_residual(L, L, M, ldm, m_low.data(), L);
  }
  if (repack) {  // pack-always: each row block packs the leading r1 rows of X it reads, every term a call
    const float* x_low = terms.right ? residual(L, N, X, ldx) : nullptr;
    for (int64_t r0 = 0; r0 < L; r0 += kTrilBlock) {
      const int64_t r1 = std::min(L, r0 + kTrilBlock);
      simd::pack_bf16(r1, N, X, ldx, &own);
      if (x_low) simd::pack_bf16(r1, N, x_low, N, &own_low);
      gemm_packed(r1 - r0, N, r1, M + r0 * ldm, ldm, own, accumulate, C + r0 * ldc, ldc, cnt);
      if (x_low) gemm_packed(r1 - r0, N, r1, M + r0 * ldm, ldm, own_low, true, C + r0 * ldc, ldc, cnt);
      if (terms.left) gemm_packed(r1 - r0, N, r1, m_low.data() + r0 * L, L, own, true, C + r0 * ldc, ldc, cnt);
    }
    return;
  }
  // X packed once (or kept from an earlier product), every row block's terms in one call, chained in
  // registers where the set can: row block [r0, r1) reads the pairs of X's rows [0, r1), the same words
  // whether L or r1 rows were packed.
  const Bf16Operand *hi = &own, *lo = &own_low;
  if (kept) {
    hi = &kept->of(L, N, X, ldx, terms.right);
    lo = &kept->low;
  } else {
    pack_right(L, N, X, ldx, terms.right, &own, &own_low);
  }
  Bf16LowerTerm t[kMaxLowerTerms];
  int n = 0;
  t[n++] = {M, ldm, hi};
  if (terms.right) t[n++] = {M, ldm, lo};
  if (terms.left) t[n++] = {m_low.data(), L, hi};
  simd::lower_times_bf16(L, N, n, t, accumulate, C, ldc);
  cnt.flops += lower_times_flops(L, N, n);
}

double lower_times_flops(int64_t L, int64_t N, int nterms) {
  double f = 0;
  for (int64_t r0 = 0; r0 < L; r0 += kTrilBlock) {  // the products of the row blocks, as gemm_packed counts them
    const int64_t r1 = std::min(L, r0 + kTrilBlock);
    f += 2.0 * static_cast<double>(r1 - r0) * N * r1 * nterms;
  }
  return f;
}

void chunk_scores(const Problem& p, const ChunkInputs& in, int64_t L, bool need_a, bool need_p, float* kt, float* A,
                  float* P, float* scratch, Counters& cnt, ScorePacking packing) {
  const int64_t K = p.K, C = in.C;
  if (p.kind == Kind::kKda) {
    cnt.flops += kda_intra_scores_simd(L, K, in.q.data(), in.k.data(), in.ga.data(), in.beta.data(), A, P, C, scratch);
    return;
  }
  // bf16: K^T is packed (its first `cols` columns), straight from the bf16 rows when q and k are raw.
  thread_local Bf16Operand kt_packed;
  if (!in.raw_qk) pack_transposed(L, K, in.k.data(), K, nullptr, 1, kt, L);
  const bool packs = in.raw_qk || cnt.bf16;
  const auto pack = [&](int64_t cols) {
    if (in.raw_qk) {
      simd::pack_bf16_rows_t(cols, K, in.kb.data(), K, &kt_packed);
    } else {
      simd::pack_bf16(K, cols, kt, L, &kt_packed);
    }
  };
  // Rows [r0, r0 + rows) of X (q or k) times the first `cols` columns of K^T.
  const auto scores = [&](int64_t r0, int64_t rows, int64_t cols, const AlignedVector<float>& X,
                          const AlignedVector<uint16_t>& Xb, float* out) {
    if (in.raw_qk) {
      gemm_packed(rows, cols, K, Xb.data() + r0 * K, K, kt_packed, false, out, C, cnt);
    } else if (cnt.bf16) {
      gemm_packed(rows, cols, K, X.data() + r0 * K, K, kt_packed, false, out, C, cnt);
    } else {
      gemm(rows, cols, K, X.data() + r0 * K, K, kt, L, false, out, C, cnt);
    }
  };
  // Only row blocks up to the diagonal are issued: row block r needs columns [0, r1). Kept (or exact), one
  // pass over the row blocks for both products; else each product's pass packs for itself.
  const bool one_pass = !packs || (packing.keep_keys && !packing.repack);
  for (int pass = 0; pass < (one_pass ? 1 : 2); ++pass) {
    const bool do_a = need_a && (one_pass || pass == 0), do_p = need_p && (one_pass || pass == 1);
    if (packs && !packing.repack && (do_a || do_p)) pack(L);
    for (int64_t r0 = 0; r0 < L; r0 += kTrilBlock) {
      const int64_t r1 = std::min(L, r0 + kTrilBlock);
      if (do_a) {
        if (packing.repack && packs) pack(r1);
        scores(r0, r1 - r0, r1, in.k, in.kb, A + r0 * C);
      }
      if (do_p) {
        if (packing.repack && packs) pack(r1);
        scores(r0, r1 - r0, r1, in.q, in.qb, P + r0 * C);
      }
    }
  }
  // M_ij ~ exp(G_i - G_j), j <= i, shared by both masks (kernels/simd.h decay_mask). Raw rows: the l2norm /
  // scale factors of row i (in beta_k and fq) and of column j (fk).
  simd::decay_mask(L, in.G.data(), in.raw_qk ? in.fk.data() : nullptr, in.beta_k(), in.raw_qk ? in.fq.data() : nullptr,
                   need_a ? A : nullptr, need_p ? P : nullptr, C);
}

}  // namespace hanpu
