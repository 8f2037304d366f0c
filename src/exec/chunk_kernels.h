// Per-chunk building blocks shared by the engine's strategies: loading a chunk's rows, the decay factors,
// the masked score matrices, the inverse, and the state products. Every strategy is a different
// composition of these, so a comparison between strategies measures their dataflow only.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "core/aligned.h"
#include "kernels/decay.h"
#include "kernels/kernel_set.h"
#include "kernels/pack.h"
#include "ops/problem.h"
#include "ops/rows.h"
#include "plan/graph.h"
#include "plan/packing.h"

namespace hanpu {

// The kinds of chunk step the hanpu strategy's time breakdown tells apart (RunStats::breakdown_ms). The
// first kStepParts are a step's own work; kPrefetch is the time between steps spent asking for the next
// step's rows (ChunkInputs::prefetch, prefetch_o_rows): a burst of about a thousand lines, each of which waits
// for one of the core's few miss slots, so it takes about the rows' trip from memory (3-11 us a GDN step
// on the Intel Xeon with AMX, T = 4096) and is a share of a whole run that a step in cache (bench --parts,
// which prefetches nothing) does not show.
enum class Part { kLoad, kScores, kInverse, kGemm, kVector, kStore, kPrefetch, kCount };
inline constexpr int kStepParts = static_cast<int>(Part::kPrefetch);
const char* part_name(Part p);
// The part a chunk-graph operator's time falls in, as the hanpu strategy times its steps: the gate cumsum
// and decay factors with the rows' load; the score products, masks and KDA's scaled operands with the
// scores; the state products, the lower-triangular products and the update S' (fused into the update's
// GEMM) with the GEMMs; O with the store (O = QS + PV, then the rows' store); the rest vector passes.
Part part_of(plan::OpCode op);

// One thread's executed-work counters, the precision its GEMMs run at (gemm / gemm_tn below pick the
// kernel set's bf16 entries when bf16 is set: Problem::bf16_gemm), and its step times when timed.
struct Counters {
  double flops = 0;
  int64_t traffic_bytes = 0;
  bool bf16 = false;
  bool timed = false;  // EngineConfig::breakdown: add each step's time to ns[its part]
  double ns[static_cast<int>(Part::kCount)] = {};
  int64_t chunk_steps = 0;
};

// Counters for the threads of a call on problem p.
inline std::vector<Counters> counters_for(const Problem& p, int threads, bool timed = false) {
  Counters c;
  c.bf16 = p.bf16_gemm;
  c.timed = timed;
  return std::vector<Counters>(static_cast<std::size_t>(threads), c);
}

// Adds the time from its construction to the next mark() (or its destruction) to cnt.ns[part] when the
// counters are timed; free otherwise.
class StepTimer {
 public:
  StepTimer(Counters& cnt, Part part) : cnt_(cnt), part_(part) {
    if (cnt_.timed) t0_ = std::chrono::steady_clock::now();
  }
  ~StepTimer() { mark(part_); }
  // Ends the current step (charged to its part) and starts one of `next`.
  void mark(Part next) {
    if (!cnt_.timed) return;
    const auto now = std::chrono::steady_clock::now();
    cnt_.ns[static_cast<int>(part_)] += std::chrono::duration<double, std::nano>(now - t0_).count();
    t0_ = now;
    part_ = next;
  }

 private:
  Counters& cnt_;
  Part part_;
  std::chrono::steady_clock::time_point t0_;
};

// One chunk of one (sequence, value head): L rows starting at token t0, value columns [c0, c0 + Vc).
struct ChunkRows {
  int64_t L = 0, t0 = 0, c0 = 0, Vc = 0;
};

// The rows and gate factors of a chunk, in fp32 row-major buffers sized for chunk size C.
struct ChunkInputs {
  int64_t C, K, w;  // w: gate width (1 for GDN, K for KDA)
  AlignedVector<float> q, k, v, beta, graw;
  AlignedVector<double> G;        // GDN only: chunk-local inclusive cumsum of the gates [L] (w = 1)
  AlignedVector<float> ga;        // KDA only: the step factors exp(g) = exp(G_i - G_{i-1})   [L, w]
  AlignedVector<float> eg;        // exp(G)            [L, w]
  AlignedVector<float> eg_last;   // exp(G_last - G)   [L, w]
  AlignedVector<float> g_last;    // exp(G_last)       [w]
  AlignedVector<float> run;       // one channel's L tokens, for channel-major inputs [C]
  // Raw rows (set before load; the hanpu strategy's bf16 GDN with bf16 q and k): q and k hold the rows as
  // stored, exact as GEMM operands, and their l2norm / scale factors fq, fk [L] are applied to products
  // (bk = beta o fk). Without raw rows, q and k are finished as usual and there are no factors.
  bool raw_qk = false;
  // With raw rows, whether a step reads q and k in fp32 too (the FLA dataflow's K o beta does): if not, rows
  // stored contiguous are not widened, and q and k hold nothing.
  bool widen_raw_qk = true;
  AlignedVector<float> fq, fk, bk;
  AlignedVector<float> eq, ek;     // raw rows only: e^G o fq, e^G o fk [L], the row factors of Q S and K S
  AlignedVector<uint16_t> qb, kb;  // raw rows only: q and k as bf16 bit patterns [L, K], the GEMMs' own operands
  const float* q_factors() const { return raw_qk ? fq.data() : nullptr; }  // a scale_rows rowscale
  const float* k_factors() const { return raw_qk ? fk.data() : nullptr; }
  const float* beta_k() const { return raw_qk ? bk.data() : beta.data(); }  // beta o fk, or beta

  ChunkInputs(int64_t C_, int64_t K_, int64_t Vmax, int64_t w_);
  int64_t bytes() const;
  // Asks the memory system for the rows of a later chunk. Rows of one head are a head-stride apart
  // ([B, T, H, K] layout: 8 KiB at H = 16, K = 128), so the hardware prefetchers, which stay within a
  // page, do not fetch them; issued one chunk ahead, their DRAM latency overlaps the current chunk's GEMMs.
  // (Not all of it: on the AMD EPYC Zen 5 VM a GDN step still loses 4-6 us to these rows, and no schedule of
  // the prefetches tried there lowered a step's total: a step ahead, just before the load, in 16-line pieces
  // through the step, or on 2 MiB pages; docs/PERFORMANCE.md, AMD EPYC Zen 5.)
  void prefetch(const Problem& p, const Sequence& s, int64_t hv, const ChunkRows& c) const;
  // Loads rows, cumsums the gates and forms the decay factors.
  void load(const Problem& p, const RowLoader<float>& rows, const Sequence& s, int64_t hv, const ChunkRows& c);
};

// GDN's decay factors of a chunk from its gate cumsums G [L] (one gate a row): exp(G_i), exp(G_last - G_i) and
// exp(G_last), each exponent a difference taken in double, then the float exp, every factor its own exp.
// KDA's per-channel gates get theirs from kernels/simd.h kda_gate_factors: the step factors ga_i = exp(g_i)
// (the gate itself: the difference of the double cumsums is g_i unless |G_{i-1}| exceeds 2^29 |g_i|), and only
// every kDecayAnchorRows-th row of exp(G_i) and exp(G_last - G_i) an exp (an anchor), the rows between running
// products of the step factors from it,
//   eg_i = eg_{i-1} ga_i,   eg_last_i = eg_last_{i+1} ga_{i+1},
// as the KDA intra-chunk scores make all of theirs (kernels/decay.h). Why: KDA's per-channel gates made these
// exps (about 37 K per chunk of 64 x 128 channels with the scores') the largest single cost of its step in
// both precisions (ExpDiff: 24% of a KDA step on the Intel Xeon with AMX); now about 12 K. Each factor is <= 1
// for non-positive gates, so the products only shrink (a -1000 gate zeroes them), and n products add at most
// n / 2 ulp, which does show in exact mode's state: KDA rel. RMS S at T = 4096 (bench preset) 1.23e-7 with
// every factor an exp, 1.29e-7 with an anchor every 4 rows, 1.36e-7 every 8, 1.48e-7 every 16, 1.65e-7 with
// none (and GDN's 1.29e-7 would be 1.98e-7 with none: there the exps cost nothing, so it keeps them all).
// (kDecayAnchorRows: kernels/decay.h, shared with GDN's decay mask.)
void decay_factors(int64_t L, const double* G, float* eg, float* eg_last, float* g_last);

// Asks for the lines of o's rows [t0, t0 + L) of head hv, columns [c0, c0 + n), for writing: issued a step
// ahead, like ChunkInputs::prefetch, so the store's reads for ownership of the head-strided rows overlap
// the step before it.
void prefetch_o_rows(const TensorView& o, int64_t b, int64_t t0, int64_t L, int64_t hv, int64_t c0, int64_t n);

// o[b, t0 + i, hv, c0 .. c0 + n) = rows[i * n .. (i + 1) * n) for i < L: bf16 outputs with contiguous rows
// through the kernel set's vector narrowing, others element by element (the same rounding either way).
void store_o_rows(const TensorView& o, int64_t b, int64_t t0, int64_t L, int64_t hv, int64_t c0, int64_t n,
                  const float* rows);

// True for a [B, T, M, n] view whose tokens are closer together than its channels (channel-major), which
// ChunkInputs reads block-wise.
bool channel_major(const TensorView& x);

// Bytes of the chunk rows a strategy reads from the inputs (q, k, v columns, g, beta) for L rows.
int64_t chunk_input_bytes(const Problem& p, int64_t L, int64_t Vc);

// X [Kd, N] (row stride ldx) packed as a bf16 right operand into hi, and with `split` its low term
// X - bf16(X) into lo (the two-term split of plan/packing.h; lo untouched otherwise).
void pack_right(int64_t Kd, int64_t N, const float* X, int64_t ldx, bool split, Bf16Operand* hi, Bf16Operand* lo);

// A bf16 right operand packed by the first of a chunk's products that reads it and kept for the later
// ones (the plan keeps it: plan/packing.h), with its low term when it is read split. `valid` is cleared
// when the chunk's values change.
struct KeptOperand {
  Bf16Operand packed, low;
  bool valid = false, split = false;
  // X [Kd, N] (row stride ldx) packed, by this call unless an earlier one did; with split_x its low term
  // too (in `low`), by this call unless an earlier one packed it.
  const Bf16Operand& of(int64_t Kd, int64_t N, const float* X, int64_t ldx, bool split_x = false);
};

// Lower-triangular product: C = M * X where M [L, L] is zero above the diagonal; row block r only
// reads the columns of M (rows of X) it can touch. C may be accumulated into. bf16 mode: X is packed once
// for all row blocks, into `kept` when given (and read from it when already valid there), or, with
// `repack` (the packing ablation's pack-always), again for each row block's leading rows; `terms` says
// which operands enter as two-term splits (plan/packing.h): C += M hi(X) [+ M lo(X)] [+ lo(M) hi(X)], or
// (fp32) that the product runs on fp32 operands, as in exact mode.
void lower_times(int64_t L, int64_t N, const float* M, int64_t ldm, const float* X, int64_t ldx, bool accumulate,
                 float* C, int64_t ldc, Counters& cnt, bool repack = false, KeptOperand* kept = nullptr,
                 plan::Bf16Terms terms = {});

// The flops lower_times counts for nterms products of an L x L lower-triangular left operand by [L, N]: each
// row block [r0, r1) of kTrilBlock times the leading r1 rows.
double lower_times_flops(int64_t L, int64_t N, int nterms);

// How a chunk's bf16 score products pack K^T (plan/packing.h): once for both (keep_keys), once for each
// product, or for every row block of each (repack). Results are the same bits in every case.
struct ScorePacking {
  bool keep_keys = true;
  bool repack = false;
};

// Scores of a chunk: A (strictly lower, beta-scaled, decayed) and P (lower with diagonal, decayed) from
// q and k; kt is K^T packed [K, L] scratch. GDN uses GEMM tiles plus a decay mask and forms only the
// matrices asked for; KDA uses the exact reference-row split of kernels/decay.h, which forms both.
void chunk_scores(const Problem& p, const ChunkInputs& in, int64_t L, bool need_a, bool need_p, float* kt, float* A,
                  float* P, float* scratch, Counters& cnt, ScorePacking packing = {});

// The state update of a chunk, #5: dst = diag(e^{G_last}) S + (K o e^{G_last - G})^T V' on [K, cols]
// (dst may be S). The decayed keys are either Kd [L, K] row-major, read transposed in place, or, with
// `packed`, the [K, L] panel pack_transposed made of them. V' is [L, cols]; with the panel, bf16 mode may
// give V' as a kept operand (`vn_kept`, packed by this call unless an earlier product did). bf16 mode:
// `terms` (plan/packing.h) right: V' enters as its two-term split (a second product on its low term); fp32:
// the product runs on fp32 operands, as in exact mode. bf16 products run as one call (simd.h gemm_terms_bf16),
// the decay as its row factors.
void update_state(const ChunkInputs& in, int64_t L, int64_t cols, const float* S, const float* keys, bool packed,
                  const float* Vn, float* dst, Counters& cnt, KeptOperand* vn_kept = nullptr,
                  plan::Bf16Terms terms = {});

// bf16 GDN's update with the chunk's keys as loaded (ChunkInputs::raw_qk): dst = e^{G_last} S + K^T Vd on
// [K, cols], K^T read from the bf16 key rows [L, K] through the kernel set's own panel of them (no fp32
// transpose or conversion); Vd [L, cols] is GDN's decayed V'. The same bits as update_state on the widened
// keys in either layout (gemm_tn_bf16 and the packed panel's gemm_nn_bf16 run the same chains).
void update_state_from_rows(const ChunkInputs& in, int64_t L, int64_t cols, const float* S, const float* Vd, float* dst,
                            Counters& cnt);
// The same with Vd already packed (the fused V' = T R's decayed output, kernels/kernel_set.h
// lower_times_split_bf16).
void update_state_from_packed(const ChunkInputs& in, int64_t L, int64_t cols, const float* S, const Bf16Operand& vd,
                              float* dst, Counters& cnt);
// bf16 KDA's update with its decayed keys as bf16 rows kd [L, K] (kernels/simd.h scale_rows_bf16): K^T read
// from them through the kernel set's panel (gemm_bf16_rows_tn), V' as update_state packs it (`terms` right:
// its split's two terms). The same bits as update_state's bf16 products on the fp32 decayed keys.
void update_state_from_key_rows(const ChunkInputs& in, int64_t L, int64_t cols, const float* S, const uint16_t* kd,
                                const float* Vn, float* dst, Counters& cnt, KeptOperand* vn_kept,
                                plan::Bf16Terms terms);

// gemm_nn / gemm_tn calls that count their executed flops; with cnt.bf16 the operands are rounded to bf16.
void gemm(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb, bool accumulate,
          float* C, int64_t ldc, Counters& cnt);
void gemm_tn(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb,
             bool accumulate, float* C, int64_t ldc, Counters& cnt);

// gemm with a right operand packed once for several products (bf16 mode only), counting its flops.
void gemm_packed(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const Bf16Operand& B, bool accumulate,
                 float* C, int64_t ldc, Counters& cnt);
// The same with A given as bf16 rows (raw bf16 q and k), and C's row factors rs (kernels/kernel_set.h).
void gemm_packed(int64_t M, int64_t N, int64_t Kd, const uint16_t* A, int64_t lda, const Bf16Operand& B,
                 bool accumulate, float* C, int64_t ldc, Counters& cnt, RowScale rs = {});

// A chunk's state S [K, Vc] (row stride Vc) as the right operand of its X S products (K S, Q S, W S): read in
// place in exact mode; in bf16 mode packed at the chunk's first product and, with `keep` (the plan keeps
// it), reused by the others (S changes only after the chunk's last read of it), else packed again by each.
// One object per chunk.
class StateOperand {
 public:
  StateOperand(const float* S, int64_t K, int64_t Vc, Bf16Operand* packed, bool keep = true)
      : S_(S), K_(K), Vc_(Vc), packed_(packed), keep_(keep) {}
  // out [L, Vc] = X [L, K] S.
  void times(int64_t L, const float* X, float* out, Counters& cnt);
  // The same for X given as bf16 rows (bf16 mode only), each row r of out times row_factors[r] (null: 1) in
  // the product's registers (RowScale).
  void times(int64_t L, const uint16_t* X, float* out, Counters& cnt, const float* row_factors = nullptr);
  // The packed state (bf16 mode), for a fused product that reads it: packed by this call unless kept from an
  // earlier product.
  const Bf16Operand& packed();

 private:
  const float* S_;
  int64_t K_, Vc_;
  Bf16Operand* packed_;
  bool keep_;
  bool is_packed_ = false;
};

}  // namespace hanpu
