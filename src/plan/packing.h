// Layout planning of the bf16 precision mode on the host: where a GEMM's right operand is packed into the
// matrix unit's operand layout and where a packed copy stays for later products (issue 13's "layout
// planning, measured").
//
// The host's bf16 unit (VDPBF16PS, or AMX tiles: the same layout) reads its right operand B [k, n] packed:
// pairs of bf16 along k, 16 columns a row (Bf16Operand, kernels/kernel_set.h). Its left operand is
// converted on the way in, its results are fp32 rows. In the layout DP's terms (plan/layout.h):
//   - a GEMM in the dense layout packs its right operand itself, for this product only (its row blocks
//     share it): op cost = MACs / rate + conversion of A (none where A is read as bf16 rows:
//     reads_bf16_rows) + pack of B, M, N and the reduction padded to the unit's tile
//     (Device::bf16_tile_*);
//   - a GEMM in the blocked layout reads B from a packed copy: the copy is a transform of B, made once
//     and shared by every later blocked reader (so blocked readers of one operand keep it packed across
//     steps); op cost = MACs / rate + conversion of A (+ the fp32 panel of a transposed A: the engine's
//     only form of a product with a packed right operand and a transposed left one; read in place, dense,
//     a transposed A costs the measured bf16_matrix.dense_penalty times the product);
//   - a packed copy is bf16 and read-only: it is never unpacked (blocked -> dense is infinite), results
//     and the state stay fp32 rows.
// The engine's row-blocked products (the score products and the lower-triangular ones, kTrilBlock rows a
// block up to the diagonal) execute (nb + 1) / (2 nb) of their full MACs, nb = ceil(C / kTrilBlock).
// KDA's scores are an exact per-channel vector split (no packing); GDN in bf16 applies the update's decays
// to V' (diag(e^{G_last - G} fk) V', made in the step), so the update never reads V''s packed copy.
//
// Two-term splits: the operands whose single rounding costs the output most enter the bf16 unit as x = hi +
// lo, hi = bf16(x), lo = bf16(x - hi) (kernels/simd.h bf16_residual), about 16 significant bits instead of 8:
// R in V' = T R and both operands of P V' (products hi hi + hi lo + lo hi; lo lo, at most 2^-16 of a
// product, is left out, as bf16(lo)'s own rounding is), and for KDA V' in the update too (GDN's update reads
// V' scaled in the step, single rounded).
// Why these: an fp64 emulation of the GEMM-first dataflow on the bench preset's data (T = 4096), rounding
// one operand at a time, puts R, P and V' at 0.95-1.04 times the error of rounding o itself, each of the
// others (S, T, KDA's scaled keys and queries, GDN's scaled V') at 0.06-0.38 times; with the three split, o
// measures 1.14x (GDN) and 1.20x (KDA) the bf16 floor instead of 2.04x and 2.11x. A split right operand is
// packed twice (hi and lo) after one residual pass; a split left operand is converted once more per product.
// A split stands in for the fp32 product (16 significant bits of 24), so where the bf16 unit's MAC rate is
// no more than the split's products times the fp32 unit's, the product runs on fp32 operands instead
// (Bf16Terms::fp32): no more MAC time, no split packing, and more exact. VDPBF16PS is at most two fp32 FMA
// rates (two products a lane per instruction; the AMD EPYC, Zen 4, measures 229 against 115 GFLOP/s on one
// core), so there all three split products run in fp32, as exact mode runs them (dense: the update reads
// Kd transposed in place, exact mode's choice too). Measured there (scripts/compare-binaries.py, six rounds,
// bests): GDN's in-cache step 69.5 -> 66.3 us, KDA's 115.0 -> 105.7 us; o 1.14x -> 1.13x the bf16 floor
// (GDN), 1.21x -> 1.14x (KDA, whose state error falls from 1.7e-3 to 4e-5 with the update exact). AMX
// tiles, at about 16 fp32 rates, keep the splits.
//
// The ablation's two fixed choices (hanpu bench --ablation --precision bf16):
//   - never-keep: every product packs its own right operand (all GEMMs dense): S packed for K S and again
//     for Q S, K^T for K K^T and again for Q K^T;
//   - pack-always: every GEMM call packs its operand: never-keep, and each row block of a row-blocked
//     product packs the leading rows it reads again.
#pragma once

#include <string>

#include "plan/layout.h"

namespace hanpu::plan {

enum class Packing { kPlanned, kNeverKeep, kPackAlways };
const char* packing_name(Packing p);  // "planned", "never-keep", "pack-always"
bool parse_packing(const std::string& name, Packing* out);

// Whether the engine's bf16 GEMM `o` packs its right operand (inputs[1]) at all (KDA's scores are an fp32
// vector split), and whether it reads it from a packed copy other products may share (GDN's update reads
// diag(e^{G_last - G} fk) V', made in the step, never V''s copy). The cost model and the engine's chunk
// program (which operands it keeps) both ask these.
bool packs_right_operand(Kind kind, const OpNode& o);
bool shares_right_operand(Kind kind, const OpNode& o);
// Whether the engine's bf16 GEMM `o`, run in layout `l`, reads its left operand as bf16 rows, with no
// conversion of its own: the products of keys and queries (K S, Q S, the score products, the update's K^T
// read transposed in place) read GDN's bf16 q and k rows as loaded (the bf16 mode's inputs under `auto`; fp32
// inputs would be converted) and KDA's decayed keys and queries as the bf16 rows their scaling writes. T and
// P, fp32 results of the step, are converted per product, and so is the fp32 [K, C] panel of the update's
// keys that a blocked update reads (the update with V' kept packed).
bool reads_bf16_rows(const OpNode& o, Layout l);

// Which operands of the bf16 GEMM `code` enter as two-term splits (above), and the products that takes;
// or, with `fp32`, that the product runs on fp32 operands on the fp32 unit instead of split.
struct Bf16Terms {
  bool left = false, right = false;
  bool fp32 = false;
  int products() const { return fp32 ? 1 : 1 + (left ? 1 : 0) + (right ? 1 : 0); }
};
// `bf16_over_fp32`: the bf16 unit's MAC rate over the fp32 unit's (KernelSet::bf16_rate_over_fp32 for the
// engine, the device's bf16_matrix over matrix macs_per_cycle for the cost model). A split product whose
// products number at least that runs in fp32.
Bf16Terms bf16_terms(Kind kind, OpCode code, double bf16_over_fp32);

class Bf16CostModel : public CostModel {
 public:
  // `row_block`: the engine's row block of the row-blocked products.
  Bf16CostModel(const Device& d, Kind kind, int64_t row_block);
  bool allowed(const Graph& g, int op, Layout l) const override;
  double op_cost(const Graph& g, int op, Layout l) const override;
  double transform_cost(const Graph& g, int tensor, Layout from, Layout to) const override;
  bool reads_in_layout(const Graph& g, int op, int tensor) const override;
  Layout result_layout(const Graph&, int, Layout) const override { return Layout::kDense; }

  // Cycles of packing `fp32_bytes` of an fp32 operand; of packing it as a two-term split (the residual pass
  // and both packings) when `split`.
  double pack_cycles(double fp32_bytes) const;
  double pack_cycles(double fp32_bytes, bool split) const;
  // Whether the engine runs op in row blocks up to the diagonal.
  bool row_blocked(const OpNode& o) const;
  bool packs(const OpNode& o) const { return packs_right_operand(kind_, o); }
  Bf16Terms terms(const OpNode& o) const { return bf16_terms(kind_, o.code, bf16_over_fp32_); }
  // Whether op o runs on the bf16 unit with a packed right operand: it packs one and is not an fp32 product.
  bool packs_bf16(const OpNode& o) const { return packs(o) && !terms(o).fp32; }
  // Whether tensor t is read split by a product that shares its packed copy (so the copy holds both terms).
  bool split_copy(const Graph& g, int t) const;
  // Whether the engine runs the bf16 step's fused products (exec/strategy_hanpu.cpp fused_state_products:
  // V' = T R reading R split and P V' reading V' split, on a unit that keeps the splits): K S's results
  // leave the unit as R's split packing and V' = T R's as V''s, which P V' and KDA's dense update both read.
  // Then KDA's dense update packs no V' of its own (reads_fused_packing), so keeping V' packed for it
  // (which runs the update on an fp32 key panel and the products unfused) saves nothing. The engine also
  // needs GDN's q and k as bf16 rows, the inputs this model assumes (reads_bf16_rows).
  bool fused_products() const;
  bool reads_fused_packing(const OpNode& o, Layout l) const;
  // Whether vector step o makes nothing in bf16 mode: GDN's decays (and its bf16 q and k rows' l2norm and
  // scale factors) go on K S's and Q S's results in the products' registers (kernel_set.h RowScale), not on
  // operands that would then be rounded, so Ke and Qs cost no pass (exec/strategy_hanpu.cpp
  // decays_on_results; fp32 inputs would take a pass over the results instead).
  bool scales_results(const OpNode& o) const;
  int64_t row_block() const { return row_block_; }

 private:
  const Device& d_;
  DeviceCostModel fp32_;  // vector steps, the inverse, KDA's exact scores
  Kind kind_;
  int64_t row_block_;
  // The bf16 unit's figures, or without a bf16_matrix section the fp32 unit's and the layout transform's.
  double macs_per_cycle_, pack_bytes_per_cycle_, pack_fixed_cycles_, dense_penalty_;
  double bf16_over_fp32_;  // the bf16 unit's MAC rate over the fp32 unit's (bf16_terms)
};

// The plan of a packing choice: planned = the layout DP; the fixed choices with their estimated cost.
LayoutPlan packing_layouts(const Graph& g, const Bf16CostModel& cm, Packing p);

}  // namespace hanpu::plan
