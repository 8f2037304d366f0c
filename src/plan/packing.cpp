#include "plan/packing.h"

#include <limits>

namespace hanpu::plan {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double fp32_bytes(const TensorNode& t) { return static_cast<double>(t.rows * t.cols) * 4.0; }

// The operand reads of a GEMM (OpNode: out = op(A) op(B), A = inputs[0], B = inputs[1]).
double a_bytes(const OpNode& o) { return static_cast<double>(o.m * o.k) * 4.0; }
double b_bytes(const OpNode& o) { return static_cast<double>(o.k * o.n) * 4.0; }

// Blocks of `block` rows over c rows, and the share of a full product that row blocks up to the
// diagonal execute: block b reads (b + 1) blocks, sum = nb (nb + 1) / 2 of nb^2.
int64_t blocks(int64_t c, int64_t block) { return (c + block - 1) / block; }
double triangle_share(int64_t c, int64_t block) {
  const double nb = static_cast<double>(blocks(c, block));
  return (nb + 1) / (2 * nb);
}

}  // namespace

const char* packing_name(Packing p) {
  switch (p) {
    case Packing::kPlanned: return "planned";
    case Packing::kNeverKeep: return "never-keep";
    case Packing::kPackAlways: return "pack-always";
  }
  return "?";
}

bool parse_packing(const std::string& name, Packing* out) {
  for (Packing p : {Packing::kPlanned, Packing::kNeverKeep, Packing::kPackAlways}) {
    if (name == packing_name(p)) {
      *out = p;
      return true;
    }
  }
  return false;
}

bool packs_right_operand(Kind kind, const OpNode& o) {
  if (o.kind != OpKind::kGemm) return false;
  return !(kind == Kind::kKda && (o.code == OpCode::kKKt || o.code == OpCode::kQKt));
}

bool shares_right_operand(Kind kind, const OpNode& o) {
  return packs_right_operand(kind, o) && !(kind == Kind::kGdn && o.code == OpCode::kKtV);
}

bool reads_bf16_rows(const OpNode& o, Layout l) {
  switch (o.code) {
    case OpCode::kKS: case OpCode::kQS: case OpCode::kKKt: case OpCode::kQKt:
      return true;
    case OpCode::kKtV:
      return l == Layout::kDense;
    default:
      return false;
  }
}

Bf16Terms bf16_terms(Kind kind, OpCode code, double bf16_over_fp32) {
  Bf16Terms t;
  switch (code) {
    case OpCode::kVnFromTR: t = {false, true}; break;
    case OpCode::kPV: t = {true, true}; break;
    case OpCode::kKtV: t = {false, kind == Kind::kKda}; break;
    default: return t;
  }
  if (t.products() > 1 && t.products() >= bf16_over_fp32) t = {false, false, true};
  return t;
}

Bf16CostModel::Bf16CostModel(const Device& d, Kind kind, int64_t row_block)
    : d_(d), fp32_(d), kind_(kind), row_block_(row_block),
      macs_per_cycle_(d.has_bf16_matrix ? d.bf16_macs_per_cycle : d.matrix_macs_per_cycle),
      pack_bytes_per_cycle_(d.has_bf16_matrix ? d.bf16_pack_bytes_per_cycle : d.transform_bytes_per_cycle / 2),
      pack_fixed_cycles_(d.has_bf16_matrix ? d.bf16_pack_fixed_cycles : d.transform_fixed_cycles),
      dense_penalty_(d.has_bf16_matrix ? d.bf16_dense_penalty : d.matrix_dense_penalty),
      bf16_over_fp32_(d.has_bf16_matrix ? d.bf16_macs_per_cycle / d.matrix_macs_per_cycle : 1.0) {}

bool Bf16CostModel::row_blocked(const OpNode& o) const {
  switch (o.code) {
    case OpCode::kKKt: case OpCode::kQKt: case OpCode::kVnFromTR: case OpCode::kPV: case OpCode::kW: case OpCode::kU:
      return true;
    default:
      return false;
  }
}

double Bf16CostModel::pack_cycles(double bytes) const { return pack_fixed_cycles_ + bytes / pack_bytes_per_cycle_; }

double Bf16CostModel::pack_cycles(double bytes, bool split) const {
  return split ? d_.vector_cycles(bytes) + 2 * pack_cycles(bytes) : pack_cycles(bytes);
}

bool Bf16CostModel::split_copy(const Graph& g, int t) const {
  for (int i : g.consumers(t)) {
    const OpNode& o = g.ops[i];
    if (shares_right_operand(kind_, o) && o.inputs[1] == t && terms(o).right) return true;
  }
  return false;
}

bool Bf16CostModel::fused_products() const {
  const Bf16Terms tr = bf16_terms(kind_, OpCode::kVnFromTR, bf16_over_fp32_);
  const Bf16Terms pv = bf16_terms(kind_, OpCode::kPV, bf16_over_fp32_);
  return !tr.fp32 && tr.right && !pv.fp32 && pv.right;
}

bool Bf16CostModel::reads_fused_packing(const OpNode& o, Layout l) const {
  return kind_ == Kind::kKda && o.code == OpCode::kKtV && l == Layout::kDense && fused_products();
}

bool Bf16CostModel::scales_results(const OpNode& o) const {
  return kind_ == Kind::kGdn && (o.code == OpCode::kKe || o.code == OpCode::kQs);
}

bool Bf16CostModel::allowed(const Graph& g, int op, Layout l) const {
  return l == Layout::kDense || packs_bf16(g.ops[op]);
}

double Bf16CostModel::op_cost(const Graph& g, int op, Layout l) const {
  const OpNode& o = g.ops[op];
  if (!allowed(g, op, l)) return kInf;
  if (scales_results(o)) return 0;
  if (!packs_bf16(o)) return fp32_.op_cost(g, op, l);
  // The unit executes whole tiles: M, N and the reduction padded to its tile.
  double macs = static_cast<double>(padded(o.m, d_.bf16_tile_rows) * padded(o.n, d_.bf16_tile_cols)) *
                static_cast<double>(padded(o.k, d_.bf16_tile_k));
  if (row_blocked(o)) macs *= triangle_share(g.C, row_block_);
  // Each product converts an fp32 left operand on the way in, either layout; a split left operand's low term
  // is made first (one vector pass).
  const Bf16Terms t = terms(o);
  const double convert = reads_bf16_rows(o, l) ? 0.0 : pack_cycles(a_bytes(o));
  double cost = t.products() * (macs / macs_per_cycle_ + convert);
  if (t.left) cost += d_.vector_cycles(a_bytes(o));
  // Dense, or a right operand made in the step (GDN's update): packed in the call, unless the fused products
  // packed it already.
  if ((l == Layout::kDense || !shares_right_operand(kind_, o)) && !reads_fused_packing(o, l)) {
    cost += pack_cycles(b_bytes(o), t.right);
  }
  if (!o.trans_a) return cost;
  // A transposed A: read in place (the measured penalty of that form), or the fp32 [k, m] panel first.
  if (l == Layout::kDense) return cost * dense_penalty_;
  return cost + d_.transform_fixed_cycles + 2 * a_bytes(o) / d_.transform_bytes_per_cycle;
}

double Bf16CostModel::transform_cost(const Graph& g, int t, Layout from, Layout to) const {
  if (from == to) return 0;
  if (to == Layout::kDense) return kInf;  // a packed copy is bf16 and read-only
  return pack_cycles(fp32_bytes(g.tensors[t]), split_copy(g, t));
}

bool Bf16CostModel::reads_in_layout(const Graph& g, int op, int t) const {
  const OpNode& o = g.ops[op];
  if (!packs_bf16(o)) return true;
  return shares_right_operand(kind_, o) && t == o.inputs[1];
}

LayoutPlan packing_layouts(const Graph& g, const Bf16CostModel& cm, Packing p) {
  if (p == Packing::kPlanned) return plan_layouts(g, cm);
  LayoutPlan plan = evaluate_plan(g, cm, std::vector<Layout>(g.ops.size(), Layout::kDense), Layout::kDense);
  if (p == Packing::kPackAlways) {
    // Each row block b packs the (b + 1) blocks it reads (both terms of a split operand, from one residual
    // pass) instead of the product packing its operand once.
    for (const OpNode& o : g.ops) {
      if (!cm.row_blocked(o) || !cm.packs_bf16(o)) continue;
      const int64_t nb = blocks(g.C, cm.row_block());
      const double whole = b_bytes(o), terms = cm.terms(o).right ? 2 : 1;
      double blocked = 0;
      for (int64_t b = 0; b < nb; ++b) blocked += terms * cm.pack_cycles(whole * static_cast<double>(b + 1) / nb);
      plan.cost += blocked - terms * cm.pack_cycles(whole);
    }
  }
  return plan;
}

}  // namespace hanpu::plan
