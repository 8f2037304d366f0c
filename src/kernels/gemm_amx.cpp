// The bf16 GEMMs on AMX tiles (Intel Sapphire Rapids and later): TDPBF16PS multiplies a tile of A, 16 rows
// of 16 pair words (16 x 32 bf16), by a tile of B, 16 rows of pair words (B[2p, n], B[2p + 1, n]) for 16
// columns, into a 16 x 16 fp32 tile of C (Intel SDM, TDPBF16PS: each accumulation rounded to nearest even,
// input denormals treated as zero and output denormals flushed, MXCSR neither consulted nor updated). The
// tile unit sits beside the AVX-512 unit: one core keeps both busy.
//
// C[M, N] (+)= op(A)[M, Kd] B[Kd, N] with Kp = ceil(Kd / 2) pairs, Kt = ceil(Kp / 16) steps of 16 pairs:
//   A as bf16 rows of pair words (kernels/bf16_pairs.h): rows padded to whole tiles and pairs to whole steps
//     with zeros in a per-thread copy, or read in place when bf16 rows need no padding (gemm_bf16_rows with
//     M % 16 == 0 and Kd % 32 == 0); a transposed A (stored [Kd, M]) becomes its pair panel, then a 32-bit
//     16 x 16 block transpose;
//   B in the AVX512-BF16 set's pair words with rows padded to whole steps: word (p, n) at p * ld + n,
//     ld = ceil16(N), ceil16(Kp) rows (the padding zero), which is the tile layout of B as it stands;
//   a block of 2 x 2 C tiles (32 x 32) accumulates over the steps: per step two A tiles, two B tiles, four
//     TDPBF16PS (tiles 0-3 C, 4-5 A, 6-7 B); edge blocks have one tile in a dimension, and tiles past C's
//     edge go through a zero-padded scratch tile. C's row factors (RowScale) are applied block by block
//     on a C tile's way in (before an accumulating product) or out (after a plain one), through its scratch
//     tile.
// Every element is one chain of tile steps from pair 0 in order, whatever block it falls in and however
// much of B is used: column splits give identical columns and every entry gives the bits of every other on
// the same operands (pack, packed product, rows forms, lower-triangular chains). The padding contributes
// zero products (a zero pair times a finite pair), which can change only the sign of a zero sum; an Inf or
// NaN in B's rows past a product's Kd would reach C through them (the engine's operands hold finite values).
//
// Linux grants the tile state per process (kernels/amx_support.h); each call makes sure the calling thread
// holds hanpu's tile configuration (kernels/amx_tiles.h use_amx_tiles).
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/aligned.h"
#include "kernels/amx_support.h"
#include "kernels/amx_tiles.h"
#include "kernels/bf16_pairs.h"
#include "kernels/kernel_set.h"
#include "kernels/overlap_probe.h"

namespace hanpu {
#if defined(__x86_64__) || defined(__i386__)
namespace {

#define HANPU_AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")))

using bf16_pairs::first_lanes;
using bf16_pairs::round_up;
constexpr int64_t kTile = 16;  // rows of a tile; pair words (A) or fp32 columns (B, C) of a tile row

// The 64-byte LDTILECFG operand, palette 1: tiles 0-7 of 16 rows x 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

const TileConfig& hanpu_tiles() {
  static const TileConfig c = [] {
    TileConfig t;
    for (int i = 0; i < 8; ++i) {
      t.colsb[i] = 64;
      t.rows[i] = kTile;
    }
    return t;
  }();
  return c;
}

// The tile intrinsics take tile numbers as literal tokens, hence these switches on T.
template <int T>
HANPU_AMX inline void tile_load(const void* p, int64_t stride) {
  if constexpr (T == 0) _tile_loadd(0, p, stride);
  if constexpr (T == 1) _tile_loadd(1, p, stride);
  if constexpr (T == 2) _tile_loadd(2, p, stride);
  if constexpr (T == 3) _tile_loadd(3, p, stride);
  if constexpr (T == 4) _tile_loadd(4, p, stride);
  if constexpr (T == 5) _tile_loadd(5, p, stride);
  if constexpr (T == 6) _tile_loadd(6, p, stride);
  if constexpr (T == 7) _tile_loadd(7, p, stride);
}
template <int T>
HANPU_AMX inline void tile_store(void* p, int64_t stride) {
  if constexpr (T == 0) _tile_stored(0, p, stride);
  if constexpr (T == 1) _tile_stored(1, p, stride);
  if constexpr (T == 2) _tile_stored(2, p, stride);
  if constexpr (T == 3) _tile_stored(3, p, stride);
}
template <int T>
HANPU_AMX inline void tile_zero() {
  if constexpr (T == 0) _tile_zero(0);
  if constexpr (T == 1) _tile_zero(1);
  if constexpr (T == 2) _tile_zero(2);
  if constexpr (T == 3) _tile_zero(3);
}
// C tile T = 2 mi + ni += A tile 4 + mi times B tile 6 + ni.
template <int T>
HANPU_AMX inline void tile_dp() {
  if constexpr (T == 0) _tile_dpbf16ps(0, 4, 6);
  if constexpr (T == 1) _tile_dpbf16ps(1, 4, 7);
  if constexpr (T == 2) _tile_dpbf16ps(2, 5, 6);
  if constexpr (T == 3) _tile_dpbf16ps(3, 5, 7);
}

// One product's operands, as bytes: A's tile rows (row r at a + r * as, 16 pairs = 64 bytes a step), B's
// word rows (pair row p at b + p * bs).
struct Operands {
  const char* a;
  int64_t as;
  const char* b;
  int64_t bs;
};

// C tile T's window: rows r x columns n (1..16) at c, and its rows' factors (row i's at s[i * ss]; null:
// none).
struct Window {
  float* c;
  int64_t ldc, r, n;
  const float* s;
  int64_t ss;
};

// C tile T in: zero, straight from C, or through the scratch tile (a partial tile, zero-padded, or rows
// scaled by their factors s: diag(s) C, one fp32 multiply per element).
template <int T>
HANPU_AMX inline void c_in(bool acc, const Window& w, float* scratch) {
  if (!acc) {
    tile_zero<T>();
    return;
  }
  if (w.r == kTile && w.n == kTile && !w.s) {
    tile_load<T>(w.c, w.ldc * 4);
    return;
  }
  const __mmask16 m = first_lanes(w.n);
  for (int64_t i = 0; i < kTile; ++i) {
    __m512 x = i < w.r ? _mm512_maskz_loadu_ps(m, w.c + i * w.ldc) : _mm512_setzero_ps();
    if (w.s && i < w.r) x = _mm512_mul_ps(x, _mm512_set1_ps(w.s[i * w.ss]));
    _mm512_store_ps(scratch + i * kTile, x);
  }
  tile_load<T>(scratch, 64);
}

// C tile T out: straight to C, or through the scratch tile (a partial tile, or, after a plain product, rows
// scaled by their factors s: diag(s) (A B)).
template <int T>
HANPU_AMX inline void c_out(bool acc, const Window& w, float* scratch) {
  const float* s = acc ? nullptr : w.s;
  if (w.r == kTile && w.n == kTile && !s) {
    tile_store<T>(w.c, w.ldc * 4);
    return;
  }
  tile_store<T>(scratch, 64);
  const __mmask16 m = first_lanes(w.n);
  for (int64_t i = 0; i < w.r; ++i) {
    __m512 x = _mm512_load_ps(scratch + i * kTile);
    if (s) x = _mm512_mul_ps(x, _mm512_set1_ps(s[i * w.ss]));
    _mm512_mask_storeu_ps(w.c + i * w.ldc, m, x);
  }
}

// C[rows, cols] at (i, j) (rows <= 16 MT, cols <= 16 NT) (+)= the nt products' first `steps` tile steps,
// chained in the C tiles; C's row factors rs on the tiles' way in (accumulating: diag(s) C + A B) or out
// (diag(s) (A B)), each tile through a scratch tile of its own (so no tile's vector work waits on another's
// stores). Measured on the Intel Xeon with AMX, in cache: a 64 x 128 x 128 product with its factors 1.56 us
// with a pass over C after it (C had left L1 while the blocks ran), 1.48 us with each block's rows scaled here;
// the update's 128 x 128 x 64 with the decay before it 3.8 -> 3.57 us. (Scaling each block one block ahead
// or behind its tile work, to let the two overlap, was a few percent slower: the core does not run this
// vector work beside the tile loads and stores.)
// The block's operands start at A's row i and B's column j; its C at Cb (row stride ldc) and its rows'
// factors at rs.s (both already at the block's first row).
// With a filler (KernelSet::VectorFiller), one of its steps follows each tile step's products: the filler's
// vector instructions issue while the tile unit works through the products (issue 17's instruction-level
// interleaving; the filler uses no tile registers).
template <int MT, int NT>
HANPU_AMX void block(int nt, const Operands* t, int64_t i, int64_t j, int64_t steps, bool acc, float* Cb, int64_t ldc,
                     int64_t rows, int64_t cols, RowScale rs, VectorFiller* filler) {
  alignas(64) float scratch[4][kTile * kTile];
  const auto window = [&](int mi, int ni) {
    return Window{Cb + kTile * mi * ldc + kTile * ni, ldc, std::min(kTile, rows - kTile * mi),
                  std::min(kTile, cols - kTile * ni), rs.s ? rs.s + kTile * mi * rs.stride : nullptr, rs.stride};
  };
  c_in<0>(acc, window(0, 0), scratch[0]);
  if constexpr (NT > 1) c_in<1>(acc, window(0, 1), scratch[1]);
  if constexpr (MT > 1) c_in<2>(acc, window(1, 0), scratch[2]);
  if constexpr (MT > 1 && NT > 1) c_in<3>(acc, window(1, 1), scratch[3]);
  for (int k = 0; k < nt; ++k) {
    const char* a = t[k].a + i * t[k].as;
    const char* b = t[k].b + j * 4;
    const int64_t as = t[k].as, bs = t[k].bs;
    for (int64_t s = 0; s < steps; ++s) {
      tile_load<4>(a + s * 64, as);
      if constexpr (MT > 1) tile_load<5>(a + kTile * as + s * 64, as);
      tile_load<6>(b + s * kTile * bs, bs);
      if constexpr (NT > 1) tile_load<7>(b + s * kTile * bs + 64, bs);
      tile_dp<0>();
      if constexpr (NT > 1) tile_dp<1>();
      if constexpr (MT > 1) tile_dp<2>();
      if constexpr (MT > 1 && NT > 1) tile_dp<3>();
      if (filler && !filler->done) filler->done = !filler->step(filler->ctx);
    }
  }
  c_out<0>(acc, window(0, 0), scratch[0]);
  if constexpr (NT > 1) c_out<1>(acc, window(0, 1), scratch[1]);
  if constexpr (MT > 1) c_out<2>(acc, window(1, 0), scratch[2]);
  if constexpr (MT > 1 && NT > 1) c_out<3>(acc, window(1, 1), scratch[3]);
}

using BlockFn = void (*)(int, const Operands*, int64_t, int64_t, int64_t, bool, float*, int64_t, int64_t, int64_t,
                         RowScale, VectorFiller*);

// The 32 x 32 blocks of C[M, N] row block by row block: fn(i, j, rows, cols, steps, block) for rows [i, i +
// rows), columns [j, j + cols) and the tile steps the block takes, with block<MT, NT> for its tiles (MT x NT,
// by rows and cols). `lower`: the A operands are lower triangular, so the block of rows [i, i + 32) takes
// only the steps that reach column i + 31 (the rest are zero products).
template <class Fn>
HANPU_AMX void for_each_block(int64_t M, int64_t N, int64_t Kt, bool lower, Fn&& fn) {
  static const BlockFn fns[2][2] = {{&block<1, 1>, &block<1, 2>}, {&block<2, 1>, &block<2, 2>}};
  for (int64_t i = 0; i < M; i += 2 * kTile) {
    const int64_t rows = std::min(2 * kTile, M - i);
    const int64_t steps = lower ? std::min(Kt, i / (2 * kTile) + 1) : Kt;  // i is a multiple of 32
    for (int64_t j = 0; j < N; j += 2 * kTile) {
      const int64_t cols = std::min(2 * kTile, N - j);
      fn(i, j, rows, cols, steps, fns[rows > kTile][cols > kTile]);
    }
  }
}

// C[M, N] (+)= the nt products over Kt steps (A's rows padded to whole tiles), in 32 x 32 blocks.
HANPU_AMX void multiply(int64_t M, int64_t N, int nt, const Operands* t, int64_t Kt, bool lower, bool acc, float* C,
                        int64_t ldc, RowScale rs = {}, VectorFiller* filler = nullptr) {
  use_amx_tiles();
  for_each_block(M, N, Kt, lower,
                 [&](int64_t i, int64_t j, int64_t rows, int64_t cols, int64_t steps, BlockFn block_fn) HANPU_AMX {
                   const RowScale rsi{rs.s ? rs.s + i * rs.stride : nullptr, rs.stride};
                   block_fn(nt, t, i, j, steps, acc, C + i * ldc + j, ldc, rows, cols, rsi, filler);
                 });
}

// A plain product C = sum of the nt products (as multiply computes it, lower or not) handed block by block
// to `finish` instead of stored: each 32 x 32 block of C (rows [i, i + rows), columns [j, j + cols)) as its
// tiles left it, in a 32 x 32 scratch (row stride 32; its entries past rows or cols are not C's), while it
// is in L1. finish(i, j, rows, cols, scratch) writes what the product's consumers read.
template <class Finish>
HANPU_AMX void multiply_finished(int64_t M, int64_t N, int nt, const Operands* t, int64_t Kt, bool lower,
                                 Finish&& finish) {
  use_amx_tiles();
  alignas(64) float c[2 * kTile * 2 * kTile];
  for_each_block(M, N, Kt, lower,
                 [&](int64_t i, int64_t j, int64_t rows, int64_t cols, int64_t steps, BlockFn block_fn) HANPU_AMX {
                   // Whole tiles into the scratch (their rows past M and columns past N are zero products: A's
                   // rows and B's columns are zero-padded to whole tiles).
                   const int64_t whole_rows = round_up(rows, kTile), whole_cols = round_up(cols, kTile);
                   block_fn(nt, t, i, j, steps, false, c, 2 * kTile, whole_rows, whole_cols, RowScale{}, nullptr);
                   finish(i, j, rows, cols, static_cast<const float*>(c));
                 });
}

// Grows a per-thread buffer to n words without initialising or ever shrinking it.
uint32_t* words(AlignedVector<uint32_t>* buf, int64_t n) {
  if (static_cast<int64_t>(buf->size()) < n) buf->resize(static_cast<std::size_t>(n));
  return buf->data();
}

// The step-padded shape of a Kd: Kpp = ceil16(ceil(Kd / 2)) pair words a row, Kt = Kpp / 16 steps.
int64_t padded_pairs(int64_t Kd) { return round_up((Kd + 1) / 2, kTile); }

// Zeros words [from, to) of each of `rows` rows (row stride ld).
void zero_columns(int64_t rows, int64_t from, int64_t to, uint32_t* w, int64_t ld) {
  if (from >= to) return;
  for (int64_t r = 0; r < rows; ++r) std::memset(w + r * ld + from, 0, static_cast<std::size_t>(to - from) * 4);
}

// A [M, Kd] fp32 to padded bf16 tile rows in `buf`: Mp = ceil16(M) rows of Kpp words.
const uint32_t* left_rows(int64_t M, int64_t Kd, const float* A, int64_t lda, AlignedVector<uint32_t>* buf) {
  const int64_t Kp = (Kd + 1) / 2, Kpp = padded_pairs(Kd), Mp = round_up(M, kTile);
  uint32_t* w = words(buf, Mp * Kpp);
  bf16_pairs::pack_rows(M, Kd, A, lda, w, Kpp);
  zero_columns(M, Kp, Kpp, w, Kpp);
  std::memset(w + M * Kpp, 0, static_cast<std::size_t>((Mp - M) * Kpp) * 4);
  return w;
}

// A transposed operand's tile rows from its pair panel (word (p, r) at panel + p * Mp, Kp rows): the panel's
// rows padded to Kpp with zeros, then transposed into Mp rows of Kpp words.
const uint32_t* left_from_panel(int64_t Mp, int64_t Kp, int64_t Kpp, uint32_t* panel, AlignedVector<uint32_t>* buf) {
  std::memset(panel + Kp * Mp, 0, static_cast<std::size_t>((Kpp - Kp) * Mp) * 4);
  uint32_t* w = words(buf, Mp * Kpp);
  for (int64_t p = 0; p < Kpp; p += kTile) {
    for (int64_t r = 0; r < Mp; r += kTile) bf16_pairs::transpose16(panel + p * Mp + r, Mp, w + r * Kpp + p, Kpp);
  }
  return w;
}

// B's words (rows of ld = ceil16(N)) with the rows past Kp zeroed to whole steps: `w` holds Kpp rows.
void pad_right(int64_t Kd, int64_t ld, uint32_t* w) {
  const int64_t Kp = (Kd + 1) / 2, Kpp = padded_pairs(Kd);
  std::memset(w + Kp * ld, 0, static_cast<std::size_t>((Kpp - Kp) * ld) * 4);
}

Operands operands(const uint32_t* a, int64_t a_words, const uint32_t* b, int64_t b_words) {
  return {reinterpret_cast<const char*>(a), a_words * 4, reinterpret_cast<const char*>(b), b_words * 4};
}

const uint32_t* words_of(const Bf16Operand& B) { return reinterpret_cast<const uint32_t*>(B.data.data()); }

// KernelSet::pack_bf16: the pair words in Kpp rows of ceil16(N).
void pack_operand(int64_t Kd, int64_t N, const float* B, int64_t ldb, Bf16Operand* out) {
  const int64_t Np = round_up(N, kTile);
  uint32_t* w = reinterpret_cast<uint32_t*>(out->reshape(Kd, N, Np, padded_pairs(Kd) * Np));
  bf16_pairs::pack_pairs(N, Kd, B, ldb, Np, w, nullptr);
  pad_right(Kd, Np, w);
}

// KernelSet::pack_bf16_split: both packings in one pass over X.
void pack_split(int64_t Kd, int64_t N, const float* X, int64_t ldx, Bf16Operand* hi, Bf16Operand* lo) {
  const int64_t Np = round_up(N, kTile), n = padded_pairs(Kd) * Np;
  uint32_t* h = reinterpret_cast<uint32_t*>(hi->reshape(Kd, N, Np, n));
  uint32_t* l = reinterpret_cast<uint32_t*>(lo->reshape(Kd, N, Np, n));
  bf16_pairs::pack_pairs(N, Kd, X, ldx, Np, h, l);
  pad_right(Kd, Np, h);
  pad_right(Kd, Np, l);
}

// KernelSet::pack_bf16_rows_t: X^T's pair words from bf16 rows, padded the same way.
void pack_rows_t(int64_t N, int64_t Kd, const uint16_t* X, int64_t ldx, Bf16Operand* out) {
  const int64_t Np = round_up(N, kTile);
  uint32_t* w = reinterpret_cast<uint32_t*>(out->reshape(Kd, N, Np, padded_pairs(Kd) * Np));
  bf16_pairs::pack_rows_t(N, Kd, X, ldx, Np, w);
  pad_right(Kd, Np, w);
}

// KernelSet::gemm_packed_bf16 (filler null) and gemm_packed_bf16_carrying (one filler step after each tile
// step): A's tile rows made per call, B packed.
void packed_product(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const Bf16Operand& B, bool acc,
                    float* C, int64_t ldc, VectorFiller* filler) {
  if (M <= 0 || N <= 0) return;
  thread_local AlignedVector<uint32_t> abuf;
  const Operands t = operands(left_rows(M, Kd, A, lda, &abuf), padded_pairs(Kd), words_of(B), B.ld);
  multiply(M, N, 1, &t, padded_pairs(Kd) / kTile, false, acc, C, ldc, {}, filler);
}

void gemm_packed_carrying(const KernelSet&, int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda,
                          const Bf16Operand& B, bool acc, float* C, int64_t ldc, VectorFiller* filler) {
  packed_product(M, N, Kd, A, lda, B, acc, C, ldc, filler);
}

void gemm_packed(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const Bf16Operand& B, bool acc,
                 float* C, int64_t ldc) {
  packed_product(M, N, Kd, A, lda, B, acc, C, ldc, nullptr);
}

// KernelSet::gemm_nn_bf16 / gemm_tn_bf16: both operands packed per call (A's tile rows from its rows, or from
// its pair panel when transposed), then the tile product.
// op(A)'s tile rows in a per-thread buffer: from A's rows [M, Kd], or, with trans_a (A stored [Kd, M]), from
// its pair panel by transposition.
const uint32_t* left_operand(int64_t M, int64_t Kd, const float* A, int64_t lda, bool trans_a) {
  thread_local AlignedVector<uint32_t> abuf, panel;
  if (!trans_a) return left_rows(M, Kd, A, lda, &abuf);
  const int64_t Kp = (Kd + 1) / 2, Kpp = padded_pairs(Kd), Mp = round_up(M, kTile);
  uint32_t* p = words(&panel, Kpp * Mp);
  bf16_pairs::pack_pairs(M, Kd, A, lda, Mp, p, nullptr);
  return left_from_panel(Mp, Kp, Kpp, p, &abuf);
}

template <bool TransA>
void gemm_bf16(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb, bool acc,
               float* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  thread_local AlignedVector<uint32_t> bbuf;
  const int64_t Kpp = padded_pairs(Kd), Np = round_up(N, kTile);
  const uint32_t* a = left_operand(M, Kd, A, lda, TransA);
  uint32_t* b = words(&bbuf, Kpp * Np);
  bf16_pairs::pack_pairs(N, Kd, B, ldb, Np, b, nullptr);
  pad_right(Kd, Np, b);
  const Operands t = operands(a, Kpp, b, Np);
  multiply(M, N, 1, &t, Kpp / kTile, false, acc, C, ldc);
}

// KernelSet::gemm_terms_bf16: op(A)'s tile rows made once (from its rows, or from its pair panel when
// transposed, as gemm_bf16 makes them), then every block's terms chained in the C tiles with C's row factors
// on their way in or out: one pass of C through the tiles for all the terms.
void gemm_terms(const KernelSet&, int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, bool trans_a,
                int nterms, const Bf16Operand* const* B, bool acc, float* C, int64_t ldc, RowScale rs) {
  if (M <= 0 || N <= 0 || nterms <= 0) return;
  const int64_t Kpp = padded_pairs(Kd);
  const uint32_t* a = left_operand(M, Kd, A, lda, trans_a);
  Operands t[kMaxLowerTerms];
  for (int k = 0; k < nterms; ++k) t[k] = operands(a, Kpp, words_of(*B[k]), B[k]->ld);
  multiply(M, N, nterms, t, Kpp / kTile, false, acc, C, ldc, rs);
}

// KernelSet::gemm_bf16_rows: bf16 rows are tile rows; read in place when no padding is needed.
// A as bf16 rows [M, Kd] for B's words: the rows in place when they are whole tiles (M % 16 == 0, Kd % 32
// == 0), else a zero-padded per-thread copy of their pair words.
Operands rows_operands(int64_t M, int64_t Kd, const uint16_t* A, int64_t lda, const Bf16Operand& B) {
  const int64_t Kp = (Kd + 1) / 2, Kpp = padded_pairs(Kd);
  Operands t{reinterpret_cast<const char*>(A), lda * 2, reinterpret_cast<const char*>(words_of(B)), B.ld * 4};
  if (M % kTile != 0 || Kd % (2 * kTile) != 0) {
    thread_local AlignedVector<uint32_t> abuf;
    const int64_t Mp = round_up(M, kTile);
    uint32_t* w = words(&abuf, Mp * Kpp);
    for (int64_t r = 0; r < Mp; ++r) {
      for (int64_t p = 0; p < Kpp; ++p) {
        w[r * Kpp + p] = r < M && p < Kp ? bf16_pairs::pair_word(A + r * lda, p, Kd) : 0u;
      }
    }
    t.a = reinterpret_cast<const char*>(w);
    t.as = Kpp * 4;
  }
  return t;
}

void gemm_rows(int64_t M, int64_t N, int64_t Kd, const uint16_t* A, int64_t lda, const Bf16Operand& B, bool acc,
               float* C, int64_t ldc, RowScale rs) {
  if (M <= 0 || N <= 0) return;
  const Operands t = rows_operands(M, Kd, A, lda, B);
  multiply(M, N, 1, &t, padded_pairs(Kd) / kTile, false, acc, C, ldc, rs);
}

// KernelSet::gemm_bf16_rows_tn: X^T's pair panel from the bf16 rows, then its tile rows by transposition, once
// for all the terms, which chain in the C tiles.
void gemm_rows_tn(int64_t M, int64_t N, int64_t Kd, const uint16_t* X, int64_t ldx, int nterms,
                  const Bf16Operand* const* B, bool acc, float* C, int64_t ldc, RowScale rs) {
  if (M <= 0 || N <= 0 || nterms <= 0) return;
  thread_local AlignedVector<uint32_t> abuf, panel;
  const int64_t Kp = (Kd + 1) / 2, Kpp = padded_pairs(Kd), Mp = round_up(M, kTile);
  uint32_t* p = words(&panel, Kpp * Mp);
  bf16_pairs::pack_rows_pairs(M, Kd, X, ldx, Mp, p);
  const uint32_t* a = left_from_panel(Mp, Kp, Kpp, p, &abuf);
  Operands t[kMaxLowerTerms];
  for (int k = 0; k < nterms; ++k) t[k] = operands(a, Kpp, words_of(*B[k]), B[k]->ld);
  multiply(M, N, nterms, t, Kpp / kTile, false, acc, C, ldc, rs);
}

// Each term's A to tile rows once (a left operand shared by several terms, as T by hi(R) and lo(R), once for
// all of them), into t.
void lower_operands(int64_t L, int nterms, const Bf16LowerTerm* terms, Operands* t) {
  thread_local AlignedVector<uint32_t> abuf[kMaxLowerTerms];
  for (int k = 0; k < nterms; ++k) {
    int same = 0;
    while (same < k && (terms[same].A != terms[k].A || terms[same].lda != terms[k].lda)) ++same;
    const uint32_t* a = same < k ? reinterpret_cast<const uint32_t*>(t[same].a)
                                 : left_rows(L, L, terms[k].A, terms[k].lda, &abuf[k]);
    t[k] = operands(a, padded_pairs(L), words_of(*terms[k].B), terms[k].B->ld);
  }
}

// KernelSet::lower_times_bf16: the terms' tile rows, then every 32-row block's terms chained in the C tiles,
// up to the steps that reach its diagonal.
void lower_times(int64_t L, int64_t N, int nterms, const Bf16LowerTerm* terms, bool acc, float* C, int64_t ldc) {
  if (L <= 0 || N <= 0 || nterms <= 0) return;
  Operands t[kMaxLowerTerms];
  lower_operands(L, nterms, terms, t);
  multiply(L, N, nterms, t, padded_pairs(L) / kTile, true, acc, C, ldc);
}

// Packed outputs written block by block from a product's 32 x 32 scratch (multiply_finished): the pair
// words of rows [i, i + 32) are pair rows [i / 2, i / 2 + 16) of an operand packed as pack_bf16 lays out a
// [M, N] matrix (Kpp = ceil16(ceil(M / 2)) rows of Np = ceil16(N) words), the same words pack_pairs writes,
// zeros included: rows past M and columns past N are zero (A row blocks of 32 cover the padded pair rows
// exactly: ceil32(M) / 2 = Kpp).
struct PackedOut {
  uint32_t* w;
  int64_t ld;
  static PackedOut of(int64_t M, int64_t N, Bf16Operand* out) {
    const int64_t Np = round_up(N, kTile);
    return {reinterpret_cast<uint32_t*>(out->reshape(M, N, Np, padded_pairs(M) * Np)), Np};
  }
  uint32_t* at(int64_t row, int64_t col) const { return w + row / 2 * ld + col; }
};

// For each pair of rows (r, r + 1) of a finished block and each 16 columns of it: x(r) and x(r + 1) as fp32
// vectors (x(row, c0, mask) gives row's 16 values from column c0, zero past the mask), handed to emit(pair
// row's first row, column, x0, x1, mask). Rows past the block's `rows` are zero.
template <class Row, class Emit>
HANPU_AMX void for_row_pairs(int64_t i, int64_t j, int64_t rows, int64_t cols, Row&& x, Emit&& emit) {
  for (int64_t q = 0; q < 2 * kTile; q += 2) {
    for (int64_t n = 0; n < cols; n += kTile) {
      const __mmask16 m = first_lanes(cols - n);
      const __m512 x0 = q < rows ? x(q, n, m) : _mm512_setzero_ps();
      const __m512 x1 = q + 1 < rows ? x(q + 1, n, m) : _mm512_setzero_ps();
      emit(i + q, j + n, x0, x1, m);
    }
  }
}

// KernelSet::residual_split_bf16_rows on the tiles: each block of K S leaves the tiles as
// R = beta (V - s (K S)) (residual_split_bf16_rows_by_parts's multiplies and subtraction, in its order) and
// goes straight into R's split pair words.
HANPU_AMX void residual_split(const KernelSet&, int64_t M, int64_t N, int64_t Kd, const uint16_t* A, int64_t lda,
                    const Bf16Operand& B, const float* s, const float* beta, const float* V, Bf16Operand* hi,
                    Bf16Operand* lo) {
  const PackedOut h = PackedOut::of(M, N, hi), l = PackedOut::of(M, N, lo);
  if (M <= 0 || N <= 0) return;
  const Operands t = rows_operands(M, Kd, A, lda, B);
  const __m512i idx = bf16_pairs::pair_interleave();
  multiply_finished(M, N, 1, &t, padded_pairs(Kd) / kTile, false,
                    [&](int64_t i, int64_t j, int64_t rows, int64_t cols, const float* c) HANPU_AMX {
                      const auto r = [&](int64_t q, int64_t n, __mmask16 m) HANPU_AMX {
                        const int64_t row = i + q;
                        // rounded before the subtraction, as the unfused form stores it: GCC would contract
                        // _mm512_mul_ps (a plain vector multiply to it) and the subtraction into an FMA
                        const __m512 c_row = _mm512_load_ps(c + q * 2 * kTile + n);
                        const __m512 ks = s ? _mm512_mul_round_ps(c_row, _mm512_set1_ps(s[row]), _MM_FROUND_CUR_DIRECTION)
                                            : c_row;
                        const __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, V + row * N + j + n), ks);
                        return _mm512_maskz_mul_ps(m, _mm512_set1_ps(beta[row]), d);
                      };
                      for_row_pairs(i, j, rows, cols, r, [&](int64_t row, int64_t col, __m512 x0, __m512 x1, __mmask16) HANPU_AMX {
                        __m512i low;
                        _mm512_storeu_si512(h.at(row, col), bf16_pairs::pair_words(x0, x1, idx, &low));
                        _mm512_storeu_si512(l.at(row, col), low);
                      });
                    });
}

// KernelSet::lower_times_split_bf16 on the tiles: each block of X = sum_t A_t B_t leaves the tiles as X's
// split pair words and the pair words of diag(f) X.
HANPU_AMX void lower_times_split(const KernelSet&, int64_t L, int64_t N, int nterms, const Bf16LowerTerm* terms,
                       Bf16Operand* hi, Bf16Operand* lo, const float* scale, const float* rowscale,
                       Bf16Operand* scaled) {
  const PackedOut h = PackedOut::of(L, N, hi), l = PackedOut::of(L, N, lo);
  const PackedOut d = scaled ? PackedOut::of(L, N, scaled) : PackedOut{nullptr, 0};
  if (L <= 0 || N <= 0 || nterms <= 0) return;
  Operands t[kMaxLowerTerms];
  lower_operands(L, nterms, terms, t);
  const __m512i idx = bf16_pairs::pair_interleave();
  multiply_finished(L, N, nterms, t, padded_pairs(L) / kTile, true,
                    [&](int64_t i, int64_t j, int64_t rows, int64_t cols, const float* c) HANPU_AMX {
                      const auto x = [&](int64_t q, int64_t n, __mmask16 m) HANPU_AMX {
                        return _mm512_maskz_load_ps(m, c + q * 2 * kTile + n);
                      };
                      for_row_pairs(i, j, rows, cols, x, [&](int64_t row, int64_t col, __m512 x0, __m512 x1, __mmask16 m) HANPU_AMX {
                        __m512i low;
                        _mm512_storeu_si512(h.at(row, col), bf16_pairs::pair_words(x0, x1, idx, &low));
                        _mm512_storeu_si512(l.at(row, col), low);
                        if (!d.w) return;
                        // scale_rows' factor per row: scale[r] * rowscale[r] (1 without rowscale), then one multiply
                        const auto f = [&](int64_t r) {
                          return r < L ? scale[r] * (rowscale ? rowscale[r] : 1.0f) : 0.0f;
                        };
                        // (masked: past N the words are +0, as packing's masked loads give, not 0 times f)
                        const __m512 y0 = _mm512_maskz_mul_ps(m, x0, _mm512_set1_ps(f(row)));
                        const __m512 y1 = _mm512_maskz_mul_ps(m, x1, _mm512_set1_ps(f(row + 1)));
                        _mm512_storeu_si512(d.at(row, col), bf16_pairs::pair_words(y0, y1, idx, nullptr));
                      });
                    });
}

// The bf16 peak: the overlap probe's AMX stream alone (four TDPBF16PS chains a step on the C tiles of a 2 x 2
// block, kernels/overlap_probe.h), so that the peak and the probe's matrix-only time are one measurement.
double amx_peak(int64_t iters) {
  probe_stream(ProbeLane::kAmxTile, true, 0, ProbeVector::kFma, iters);
  return probe_matrix_flops(ProbeLane::kAmxTile, iters);
}

}  // namespace

HANPU_AMX void use_amx_tiles() {
  TileConfig now;
  _tile_storeconfig(&now);
  asm volatile("" : : "r"(&now) : "memory");  // GCC 12 does not model STTILECFG's store
  if (std::memcmp(&now, &hanpu_tiles(), sizeof now) != 0) {
    asm volatile("" : : "r"(&hanpu_tiles()) : "memory");  // nor LDTILECFG's load
    _tile_loadconfig(&hanpu_tiles());
  }
}

void append_amx_kernel_sets(std::vector<KernelSet>* out) {
  if (!amx_support().usable) return;
  for (const KernelSet& s : *out) {
    if (s.name != "AVX3+BF16") continue;
    KernelSet k = s;  // the AVX512-BF16 set's entries, with the bf16 GEMMs on the tiles
    k.name = "AVX3+AMX";
    k.gemm_nn_bf16 = &gemm_bf16<false>;
    k.gemm_tn_bf16 = &gemm_bf16<true>;
    k.pack_bf16 = &pack_operand;
    k.pack_bf16_split = &pack_split;
    k.gemm_packed_bf16 = &gemm_packed;
    k.gemm_packed_bf16_carrying = &gemm_packed_carrying;
    k.pack_bf16_rows_t = &pack_rows_t;
    k.gemm_bf16_rows = &gemm_rows;
    k.gemm_bf16_rows_tn = &gemm_rows_tn;
    k.lower_times_bf16 = &lower_times;
    k.residual_split_bf16_rows = &residual_split;
    k.lower_times_split_bf16 = &lower_times_split;
    k.gemm_terms_bf16 = &gemm_terms;
    k.bf16_unit = "AMX tiles (TDPBF16PS)";
    k.bf16_peak = &amx_peak;
    k.bf16_matrix_engine = true;
    // 16 x 16 x 32 products a TDPBF16PS per 16 cycles against 2 x 16 fp32 FMA lanes a cycle.
    k.bf16_rate_over_fp32 = 16;
    k.bf16_tile_rows = kTile;      // A and C tiles: 16 rows
    k.bf16_tile_cols = kTile;      // B and C tiles: 16 fp32 columns
    k.bf16_tile_k = 2 * kTile;     // a tile step: 16 pairs
    out->insert(out->begin(), k);
    return;
  }
}

#else
void use_amx_tiles() {}
void append_amx_kernel_sets(std::vector<KernelSet>*) {}
#endif
}  // namespace hanpu
