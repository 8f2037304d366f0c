// The hanpu strategy: head-level mapping with cross-operator fusion (HA-NPU §4-§5 on a CPU).
//
// One thread owns a (sequence, value head) and runs #1-#6 for all its chunks with the state and every
// chunk intermediate in a per-thread workspace sized for its cache (chunk buffers about 0.5 MiB at C = 64,
// K = V = 128, plus up to 0.5 MiB of states when a thread runs several heads in lockstep, see run_group):
// nothing of size [T, ...] is written to memory. Heads are dealt to threads statically; the heads left
// over after the full rounds ("tail heads") may be split column-wise along V, each slice recomputing the
// chunk's L x L work for its own columns, so no cross-thread reduction is needed. Which thread runs which
// (head, column slice) is the execution plan's mapping (plan/strategy.cpp), not decided here.
//
// Per chunk it runs a plan's steps (exec/chunk_program.h); by default the plan built from the switches of
// EngineConfig. The GEMM-first order (T factored out of W):
//   KS = (K o e^G) S,  QS = (Q~ o e^G) S,  A, P from K K^T and Q~ K^T,  T = (I + A)^-1
//   V' = T diag(beta) (V - KS),  O = QS + P V'
//   S <- e^{G_last} o S + (K o e^{G_last - G})^T V'        (chunk-first: in place, after the last read)
// With gemm_first off it runs FLA's order: W = T diag(beta) (K o e^G), U = T diag(beta) V, V' = U - W S.
//
// bf16 precision mode, GDN: the decays, and the l2norm and scale factors of q and k, are per-row scalars,
// so they are applied to GEMM results in fp32 instead of to operands that are then rounded: the GEMMs read
// bf16 q and k as loaded (exact operands; ChunkInputs::raw_qk; other dtypes are finished first, fq = fk = 1)
// and
//   A = diag(beta fk) (K K^T) diag(fk) o M,  P = diag(fq) (Q K^T) diag(fk) o M,
//   KS = diag(e^G fk) (K S),  QS = diag(e^G fq) (Q S),
//   (K~ o e^{G_last - G})^T V' = K^T (diag(e^{G_last - G} fk) V'),  (FLA order) Kb = diag(beta fk) K o e^G,
// with fq = scale / |q|, fk = 1 / |k| (1 / sqrt(sum x^2 + 1e-6); 1 without l2norm). Only one operand per
// product then carries a fresh rounding. (KDA's per-channel decays cannot leave the operands.)
#include <algorithm>
#include <array>
#include <memory>

#include <map>

#include "exec/phase_runner.h"
#include "exec/strategies.h"
#include "kernels/kernel_set.h"
#include "kernels/simd.h"
#include "kernels/tril_inverse.h"

namespace hanpu {

namespace {

// bf16 GDN: decays applied to GEMM results, not rounded operands (see the top of this file).
bool decays_on_results(const Problem& p) { return p.bf16_gemm && p.kind == Kind::kGdn; }

struct Work {
  int64_t n, hv, c0, Vc;
};

// The state-independent part of a chunk: its rows and gate factors, P and T = (I + A)^-1.
struct PreparedChunk {
  ChunkInputs in;
  AlignedVector<float> P, T;
  PreparedChunk(int64_t C, int64_t K, int64_t V, int64_t w) : in(C, K, V, w), P(C * C), T(C * C) {}
  int64_t bytes() const { return in.bytes() + static_cast<int64_t>((P.size() + T.size()) * sizeof(float)); }
};

struct HeadWorkspace {
  int64_t C, K, V, w;
  PreparedChunk prep;
  AlignedVector<float> kt, A, KS, X, Vn, O, KQ, states, S_next, scratch;  // S_next: only without chunk-first
  AlignedVector<float> Qs, Kd, Vb, PV, Vd;  // sized by fit() for the steps a program uses (Vd: bf16 GDN)
  AlignedVector<uint16_t> KQb, Qsb, Kdb;   // bf16 KDA: K o e^G, Q o e^G, K o e^{G_last - G} as bf16 rows
  Bf16Operand S_packed;                   // bf16 mode: the state packed for the chunk's X S products
  KeptOperand Vn_kept;                    // bf16 mode: V' packed for P V' and the update (prog.keep_vn)
  KeptOperand R_split, Vn_split;          // fused bf16 GDN (fused_state_products): R's and V''s split packings
  Bf16Operand Vd_packed;                  // and the update's decayed V', packed
  // Those five operands (const or not, as the workspace is).
  template <class W>
  static auto fused_operands(W& w) {
    return std::array{&w.R_split.packed, &w.R_split.low, &w.Vn_split.packed, &w.Vn_split.low, &w.Vd_packed};
  }

  HeadWorkspace(int64_t C_, int64_t K_, int64_t V_, int64_t w_)
      : C(C_), K(K_), V(V_), w(w_), prep(C_, K_, V_, w_), kt(K * C), A(C * C), KS(C * V), X(C * std::max(K, V)),
        Vn(C * V), O(C * V), KQ(C * K), scratch(std::max(kda_intra_scores_simd_scratch(C, K), kTrilBlock * C)) {}

  // The buffers of the steps `prog` runs; the state-update scratch when S is not updated in place.
  void fit(const ChunkProgram& prog, int64_t vmax, bool decay_on_results, bool bf16) {
    Vd.resize(decay_on_results ? C * V : 0);
    // The packed operands' storage is reserved, not sized (bytes() counts it): for bf16 calls, either packed
    // layout of S (fp32 rows, or bf16 pairs in rows padded to 16 columns) fits K * ceil16(vmax), and the fused
    // products' packed [C, vmax] operands (fused_state_products) ceil16(C / 2) pair rows of ceil16(vmax) words;
    // an exact call after a bf16 one on this thread releases it, so that its workspace is its own.
    if (bf16) {
      const std::size_t cols = static_cast<std::size_t>((vmax + 15) / 16 * 16);
      const std::size_t pair_rows = static_cast<std::size_t>(((C + 1) / 2 + 15) / 16 * 16);
      S_packed.data.reserve(static_cast<std::size_t>(K) * cols);
      for (Bf16Operand* o : fused_operands(*this)) o->data.reserve(pair_rows * cols);
    } else {
      AlignedVector<float>().swap(S_packed.data);
      for (Bf16Operand* o : fused_operands(*this)) AlignedVector<float>().swap(o->data);
    }
    auto uses = [&](plan::OpCode op) { return std::find(prog.ops.begin(), prog.ops.end(), op) != prog.ops.end(); };
    // bf16 KDA's decayed keys and queries go straight to bf16 rows (no decays on results): K S and Q S read them.
    const bool scaled_bf16 = bf16 && !decay_on_results;
    Qs.resize(uses(plan::OpCode::kQs) && !scaled_bf16 ? C * K : 0);
    KQb.resize(uses(plan::OpCode::kKe) && scaled_bf16 ? C * K : 0);
    Qsb.resize(uses(plan::OpCode::kQs) && scaled_bf16 ? C * K : 0);
    Kdb.resize(uses(plan::OpCode::kKd) && scaled_bf16 && !prog.packed_update ? C * K : 0);
    Kd.resize(uses(plan::OpCode::kKd) && !prog.packed_update ? C * K : 0);
    Vb.resize(uses(plan::OpCode::kVb) ? C * V : 0);
    // P V' before Q S (a plan may order them so) needs its own buffer.
    const auto pv = std::find(prog.ops.begin(), prog.ops.end(), plan::OpCode::kPV);
    const auto qs = std::find(prog.ops.begin(), prog.ops.end(), plan::OpCode::kQS);
    PV.resize(pv < qs ? C * V : 0);
    S_next.resize(prog.in_place ? 0 : K * vmax);
  }

  int64_t bytes() const {
    const std::size_t floats = kt.size() + A.size() + KS.size() + X.size() + Vn.size() + O.size() + KQ.size() +
                               states.size() + S_next.size() + scratch.size() + Qs.size() + Kd.size() + Vb.size() +
                               PV.size() + Vd.size();
    // Without chunk-first the old and the new state co-reside (S_next); with it S is updated in place.
    std::size_t packed = S_packed.data.capacity() + (KQb.size() + Qsb.size() + Kdb.size()) / 2;
    for (const Bf16Operand* o : fused_operands(*this)) packed += o->data.capacity();
    return prep.bytes() + static_cast<int64_t>((floats + packed) * sizeof(float));
  }
};

// Loads the state of a head's column slice, or zeros.
void begin_head(const Problem& p, const Work& wk, float* S, Counters& cnt) {
  if (p.in.initial_state) {
    load_state(p, *p.in.initial_state, wk.n, wk.hv, S, wk.c0, wk.Vc);
    cnt.traffic_bytes += p.K * wk.Vc * 4;
  } else {
    std::fill(S, S + p.K * wk.Vc, 0.0f);
  }
}

ChunkRows chunk_at(const Problem& p, const Work& wk, int64_t t0) {
  const Sequence& s = p.seqs[wk.n];
  return {std::min<int64_t>(p.opt.chunk_size, s.begin + s.len - t0), t0, wk.c0, wk.Vc};
}

// #1-#3 and P of one chunk: everything that does not read the state.
void prepare_chunk(const Problem& p, const ChunkProgram& prog, const RowLoader<float>& rows, const Work& wk,
                   const ChunkRows& cr, PreparedChunk& pc, HeadWorkspace& ws, Counters& cnt) {
  const int64_t C = ws.C, L = cr.L;
  StepTimer timer(cnt, Part::kLoad);
  pc.in.raw_qk = decays_on_results(p) && p.in.q.dtype == DType::kBF16 && p.in.k.dtype == DType::kBF16;
  // Of the steps, only K o beta (Kb) reads raw k in fp32 (the rest read the bf16 rows or the factors).
  pc.in.widen_raw_qk = std::find(prog.ops.begin(), prog.ops.end(), plan::OpCode::kKb) != prog.ops.end();
  pc.in.load(p, rows, p.seqs[wk.n], wk.hv, cr);
  cnt.traffic_bytes += chunk_input_bytes(p, L, wk.Vc);
  timer.mark(Part::kScores);
  chunk_scores(p, pc.in, L, true, true, ws.kt.data(), ws.A.data(), pc.P.data(), ws.scratch.data(), cnt,
               ScorePacking{prog.keep_keys, prog.repack_row_blocks});
  timer.mark(Part::kInverse);
  cnt.flops += 2.0 * tril_unit_inverse_simd(L, ws.A.data(), C, pc.T.data(), C, ws.scratch.data());
}

// (X o e^G) S for the rows X = K or Q~ [L, K] and the state S: the decay e (and the rows' factors f, may be
// null) on the product's rows (bf16 GDN: the GEMM reads the loaded rows themselves, as bf16 rows when the
// inputs are bf16, so only they are rounded; then with their factors ef = e o f in its registers) or already
// in `scaled` (the rows the Ke / Qs step made; bf16 KDA: in scaled_bf16, as bf16 rows).
void decayed_times_state(bool on_results, int64_t L, int64_t Vc, const float* raw, const uint16_t* raw_bf16,
                         const float* ef, const float* scaled, const uint16_t* scaled_bf16, StateOperand& S,
                         const float* e, const float* f, float* out, Counters& cnt) {
  if (on_results && raw_bf16) {
    S.times(L, raw_bf16, out, cnt, ef);
    return;
  }
  if (!on_results && scaled_bf16) {
    S.times(L, scaled_bf16, out, cnt);
    return;
  }
  S.times(L, on_results ? raw : scaled, out, cnt);
  if (on_results) simd::scale_rows(L, Vc, out, Vc, e, 1, f, out, Vc);
}

// bf16 GDN on bf16 q and k, and bf16 KDA with its decayed keys as bf16 rows (kd_rows, the update's row-major
// layout), whose plan runs V' = T R with R split and P V' with V' split (the AMX set's terms, plan/packing.h):
// K S is finished on its way out of the GEMM as R's split packing (KDA's from K o e^G's bf16 rows, with no row
// factors), and V' = T R as V''s split packing, which P V' reads and KDA's update too (GDN's update reads the
// decayed V' packed on the same way out) (kernels/kernel_set.h residual_split_bf16_rows,
// lower_times_split_bf16), so R and V' are never stored in fp32 and no pass packs them. Bit for bit the
// unfused steps' values (their kernel-set definitions). Not with the packing ablation's pack-always.
// tr and pv: the terms of V' = T R and of P V'.
bool fused_state_products(const ChunkProgram& prog, const ChunkInputs& in, bool decay_on_results, bool kd_rows,
                          plan::Bf16Terms tr, plan::Bf16Terms pv) {
  if (prog.repack_row_blocks || (decay_on_results ? !in.raw_qk : !kd_rows)) return false;
  const auto runs = [&](plan::OpCode op) { return std::find(prog.ops.begin(), prog.ops.end(), op) != prog.ops.end(); };
  for (plan::OpCode op : {plan::OpCode::kKS, plan::OpCode::kR, plan::OpCode::kVnFromTR, plan::OpCode::kPV,
                          plan::OpCode::kKtV}) {
    if (!runs(op)) return false;
  }
  // KDA's K S reads the rows Ke makes, its update the rows Kd makes.
  if (!decay_on_results && !(runs(plan::OpCode::kKe) && runs(plan::OpCode::kKd))) return false;
  return !tr.fp32 && !tr.left && tr.right && !pv.fp32 && pv.right;
}

// #4-#6 and the state update of a prepared chunk, the plan's steps in the plan's order (exec/chunk_program.h),
// with the head's state S [K, Vc] updated in place (every read of S precedes the update) or through
// S_next (old and new state co-reside until the chunk ends).
void state_chunk(const Problem& p, const Work& wk, const ChunkProgram& prog, const PreparedChunk& pc,
                 const ChunkRows& cr, HeadWorkspace& ws, float* S, const Outputs& out, Counters& cnt) {
  const int64_t K = p.K, Vc = wk.Vc, C = ws.C, w = ws.w, L = cr.L;
  const Sequence& s = p.seqs[wk.n];
  const ChunkInputs& in = pc.in;
  const float* e = in.eg.data();
  float* dst = prog.in_place ? S : ws.S_next.data();
  bool qs_done = false, pv_in_o = false;
  const bool decay_on_results = decays_on_results(p);
  StateOperand state(S, K, Vc, &ws.S_packed, prog.keep_state);
  ws.Vn_kept.valid = false;
  const bool rp = prog.repack_row_blocks;
  // The operands a bf16 product reads as two-term splits, or its fp32 operands (plan/packing.h), for the
  // kernel set's bf16 unit.
  const double bf16_rate = active_kernels().bf16_rate_over_fp32;
  const auto terms = [&](plan::OpCode op) {
    return p.bf16_gemm ? plan::bf16_terms(p.kind, op, bf16_rate) : plan::Bf16Terms{};
  };
  // V' kept packed from P V' to the update: only with the update's panel (the product with a packed right
  // operand) and without GDN's decays on V' (there the update reads a scaled V').
  KeptOperand* vn_kept = p.bf16_gemm && prog.keep_vn && prog.packed_update && !decay_on_results ? &ws.Vn_kept : nullptr;
  // bf16 KDA: the update's decayed keys as bf16 rows (its row-major layout, where its product runs on bf16
  // operands; the packed panel of pack-always keeps its path).
  const bool kd_rows =
      p.bf16_gemm && !decay_on_results && !prog.packed_update && !terms(plan::OpCode::kKtV).fp32;
  const bool fused = p.bf16_gemm && fused_state_products(prog, in, decay_on_results, kd_rows,
                                                         terms(plan::OpCode::kVnFromTR), terms(plan::OpCode::kPV));
  ws.R_split.valid = ws.Vn_split.valid = false;
  if (fused) vn_kept = &ws.Vn_split;
  StepTimer timer(cnt, Part::kVector);
  ++cnt.chunk_steps;
  for (plan::OpCode op : prog.ops) {
    timer.mark(part_of(op));
    switch (op) {
      case plan::OpCode::kKe:
        if (decay_on_results) break;
        if (p.bf16_gemm) {  // K o e^G as bf16 rows, K S's left operand (scale_rows_bf16: no fp32 copy)
          simd::scale_rows_bf16(L, K, in.k.data(), K, e, w, ws.KQb.data(), K);
        } else {
          simd::scale_rows(L, K, in.k.data(), K, e, w, nullptr, ws.KQ.data(), K);
        }
        break;
      case plan::OpCode::kKS:
        if (fused) {  // R = diag(beta) (V - diag(e^G fk) (K S)), split-packed on its way out (KDA: (K o e^G) S)
          simd::residual_split_bf16_rows(L, Vc, K, decay_on_results ? in.kb.data() : ws.KQb.data(), K, state.packed(),
                                         decay_on_results ? in.ek.data() : nullptr, in.beta.data(), in.v.data(),
                                         &ws.R_split.packed, &ws.R_split.low);
          ws.R_split.valid = ws.R_split.split = true;
          cnt.flops += 2.0 * static_cast<double>(L) * Vc * K;
          break;
        }
        decayed_times_state(decay_on_results, L, Vc, in.k.data(), in.raw_qk ? in.kb.data() : nullptr, in.ek.data(),
                            ws.KQ.data(), p.bf16_gemm ? ws.KQb.data() : nullptr, state, e, in.k_factors(), ws.KS.data(),
                            cnt);
        break;
      case plan::OpCode::kQs:
        if (decay_on_results) break;
        if (p.bf16_gemm) {
          simd::scale_rows_bf16(L, K, in.q.data(), K, e, w, ws.Qsb.data(), K);
        } else {
          simd::scale_rows(L, K, in.q.data(), K, e, w, nullptr, ws.Qs.data(), K);
        }
        break;
      case plan::OpCode::kQS:
        // O starts as QS; a P V' computed before it (a plan may order them so) is added at O.
        decayed_times_state(decay_on_results, L, Vc, in.q.data(), in.raw_qk ? in.qb.data() : nullptr, in.eq.data(),
                            ws.Qs.data(), p.bf16_gemm ? ws.Qsb.data() : nullptr, state, e, in.q_factors(), ws.O.data(),
                            cnt);
        qs_done = true;
        break;
      case plan::OpCode::kR:
        if (!fused) simd::beta_residual(L, Vc, in.beta.data(), in.v.data(), ws.KS.data(), ws.X.data());
        break;
      case plan::OpCode::kVnFromTR:
        if (fused) {  // V' = T hi(R) + T lo(R), split-packed, and (GDN) diag(e^{G_last - G} fk) V' packed for the update
          const Bf16LowerTerm t[2] = {{pc.T.data(), C, &ws.R_split.packed}, {pc.T.data(), C, &ws.R_split.low}};
          simd::lower_times_split_bf16(L, Vc, 2, t, &ws.Vn_split.packed, &ws.Vn_split.low,
                                       decay_on_results ? in.eg_last.data() : nullptr, in.k_factors(),
                                       decay_on_results ? &ws.Vd_packed : nullptr);
          ws.Vn_split.valid = ws.Vn_split.split = true;
          cnt.flops += lower_times_flops(L, Vc, 2);
          break;
        }
        lower_times(L, Vc, pc.T.data(), C, ws.X.data(), Vc, false, ws.Vn.data(), Vc, cnt, rp, nullptr, terms(op));
        break;
      case plan::OpCode::kKb:
        simd::scale_rows(L, K, in.k.data(), K, e, w, in.beta_k(), ws.KQ.data(), K);
        break;
      case plan::OpCode::kW: lower_times(L, K, pc.T.data(), C, ws.KQ.data(), K, false, ws.X.data(), K, cnt, rp); break;
      case plan::OpCode::kVb: simd::scale_rows(L, Vc, in.v.data(), Vc, in.beta.data(), 1, nullptr, ws.Vb.data(), Vc); break;
      case plan::OpCode::kU: lower_times(L, Vc, pc.T.data(), C, ws.Vb.data(), Vc, false, ws.Vn.data(), Vc, cnt, rp); break;
      case plan::OpCode::kWS: state.times(L, ws.X.data(), ws.KS.data(), cnt); break;
      case plan::OpCode::kVnFromUWS:
        for (int64_t k = 0; k < L * Vc; ++k) ws.Vn[k] -= ws.KS[k];
        break;
      case plan::OpCode::kPV:
        if (qs_done) {  // O += P V', accumulated onto QS
          lower_times(L, Vc, pc.P.data(), C, ws.Vn.data(), Vc, true, ws.O.data(), Vc, cnt, rp, vn_kept, terms(op));
          pv_in_o = true;
        } else {
          lower_times(L, Vc, pc.P.data(), C, ws.Vn.data(), Vc, false, ws.PV.data(), Vc, cnt, rp, vn_kept, terms(op));
        }
        break;
      case plan::OpCode::kO:
        if (!pv_in_o) {
          for (int64_t k = 0; k < L * Vc; ++k) ws.O[k] += ws.PV[k];
        }
        store_o_rows(out.o, s.batch, cr.t0, L, wk.hv, wk.c0, Vc, ws.O.data());
        cnt.traffic_bytes += L * Vc * static_cast<int64_t>(dtype_size(out.o.dtype));
        break;
      case plan::OpCode::kKd:
        if (prog.packed_update || decay_on_results) break;
        if (kd_rows) {  // K o e^{G_last - G} as bf16 rows, read transposed by the update
          simd::scale_rows_bf16(L, K, in.k.data(), K, in.eg_last.data(), w, ws.Kdb.data(), K);
        } else {
          simd::scale_rows(L, K, in.k.data(), K, in.eg_last.data(), w, nullptr, ws.Kd.data(), K);
        }
        break;
      case plan::OpCode::kKtV:
        if (fused && decay_on_results) {  // the decayed V' that V' = T R packed
          update_state_from_packed(in, L, Vc, S, ws.Vd_packed, dst, cnt);
          break;
        }
        if (decay_on_results) {  // K^T (diag(e^{G_last - G}) V'): K from its bf16 rows, or read transposed in
                                 // place or from a panel (either layout: the same bits)
          simd::scale_rows(L, Vc, ws.Vn.data(), Vc, in.eg_last.data(), 1, in.k_factors(), ws.Vd.data(), Vc);
          if (in.raw_qk) {
            update_state_from_rows(in, L, Vc, S, ws.Vd.data(), dst, cnt);
            break;
          }
          if (prog.packed_update) pack_transposed(L, K, in.k.data(), K, nullptr, 1, ws.kt.data(), L);
          update_state(in, L, Vc, S, prog.packed_update ? ws.kt.data() : in.k.data(), prog.packed_update, ws.Vd.data(),
                       dst, cnt, nullptr, terms(op));
          break;
        }
        // (K o e^{G_last - G})^T packed into a [K, L] panel, or Kd read transposed in place (bf16: as the
        // bf16 rows kKd made); a kept V' is packed here when the update reads it first
        if (kd_rows) {
          update_state_from_key_rows(in, L, Vc, S, ws.Kdb.data(), ws.Vn.data(), dst, cnt, vn_kept, terms(op));
          break;
        }
        if (prog.packed_update) pack_transposed(L, K, in.k.data(), K, in.eg_last.data(), w, ws.kt.data(), L);
        update_state(in, L, Vc, S, prog.packed_update ? ws.kt.data() : ws.Kd.data(), prog.packed_update, ws.Vn.data(),
                     dst, cnt, vn_kept, terms(op));
        break;
      default: break;  // S' ran fused at KtV; #1-#3 ran in prepare_chunk
    }
  }
  if (!prog.in_place) std::copy(dst, dst + K * Vc, S);
}

// Runs a group of heads of one sequence (same column slice) chunk by chunk in lockstep: chunk c of every
// head of the group, then chunk c + 1. Each head keeps its own state in the workspace; interleaving
// changes no head's arithmetic, but the group's rows of a token are neighbours in memory ([B, T, H, K]),
// so one page and a few cache lines serve them all instead of one scattered row per head. The next
// (head, chunk) step's rows are prefetched while the current one computes.
void run_group(const Problem& p, const RowLoader<float>& rows, const Work* group, int64_t g, const ChunkProgram& prog,
               HeadWorkspace& ws, const Outputs& out, Counters& cnt) {
  const int64_t KV = p.K * group[0].Vc;
  for (int64_t j = 0; j < g; ++j) begin_head(p, group[j], ws.states.data() + j * KV, cnt);
  const Sequence& s = p.seqs[group[0].n];
  for (int64_t t0 = s.begin; t0 < s.begin + s.len; t0 += p.opt.chunk_size) {
    for (int64_t j = 0; j < g; ++j) {
      const int64_t nj = j + 1 < g ? j + 1 : 0, nt0 = j + 1 < g ? t0 : t0 + p.opt.chunk_size;
      if (nt0 < s.begin + s.len) {
        StepTimer timer(cnt, Part::kPrefetch);
        const ChunkRows next = chunk_at(p, group[nj], nt0);
        ws.prep.in.prefetch(p, s, group[nj].hv, next);
        prefetch_o_rows(out.o, s.batch, next.t0, next.L, group[nj].hv, next.c0, next.Vc);
      }
      const ChunkRows cr = chunk_at(p, group[j], t0);
      prepare_chunk(p, prog, rows, group[j], cr, ws.prep, ws, cnt);
      state_chunk(p, group[j], prog, ws.prep, cr, ws, ws.states.data() + j * KV, out, cnt);
    }
  }
  for (int64_t j = 0; j < g; ++j) {
    if (out.final_state) {
      store_state(p, *out.final_state, group[j].n, group[j].hv, ws.states.data() + j * KV, group[j].c0, group[j].Vc);
    }
    cnt.traffic_bytes += KV * 4;
  }
}

}  // namespace

namespace {

// This pool thread's workspace. It outlives the call (one per pool thread), so repeated calls reuse
// warm memory; it grows when a call needs more.
HeadWorkspace& thread_workspace(const Problem& p, int64_t vmax) {
  thread_local std::unique_ptr<HeadWorkspace> cached;
  const int64_t C = p.opt.chunk_size, w = p.gate_width();
  if (!cached || cached->C != C || cached->K != p.K || cached->V < vmax || cached->w != w) {
    cached = std::make_unique<HeadWorkspace>(C, p.K, vmax, w);
  }
  return *cached;
}

int64_t max_columns(const std::vector<Work>& items) {
  int64_t vmax = 0;
  for (const Work& wk : items) vmax = std::max(vmax, wk.Vc);
  return vmax;
}

// The normal path: each thread runs its heads, in lockstep groups of up to g_max per sequence and slice.
void run_heads(const Problem& p, const ChunkProgram& prog, ThreadPool& pool,
               const std::vector<std::vector<Work>>& plan, const RowLoader<float>& rows, const Outputs& out,
               std::vector<Counters>& counters, std::vector<int64_t>& ws_bytes) {
  pool.run([&](int t) {
    if (plan[t].empty()) return;
    const int64_t vmax = max_columns(plan[t]);
    const int64_t g_max = lockstep_heads(p.K, vmax);
    HeadWorkspace& ws = thread_workspace(p, vmax);
    const std::vector<Work>& mine = plan[t];
    std::vector<std::pair<std::size_t, std::size_t>> groups;  // [begin, end) ranges of `mine`
    int64_t g_used = 1;
    for (std::size_t i = 0; i < mine.size();) {
      std::size_t j = i + 1;
      while (j < mine.size() && static_cast<int64_t>(j - i) < g_max && mine[j].n == mine[i].n &&
             mine[j].c0 == mine[i].c0 && mine[j].Vc == mine[i].Vc) {
        ++j;
      }
      groups.emplace_back(i, j);
      g_used = std::max<int64_t>(g_used, static_cast<int64_t>(j - i));
      i = j;
    }
    ws.states.resize(g_used * p.K * vmax);
    ws.fit(prog, vmax, decays_on_results(p), p.bf16_gemm);
    ws_bytes[t] = ws.bytes();
    for (const auto& [b, e] : groups) {
      run_group(p, rows, mine.data() + b, static_cast<int64_t>(e - b), prog, ws, out, counters[t]);
    }
  });
}

// Extreme tails (the plan's prepare and state-part phases): every worker first prepares its chunks of any
// head (the state-independent #1-#3 and P, stored per chunk), then each head's owner runs the
// state-dependent part over its chunks in order. Both halves are the normal path's functions, so the
// results are bit-identical to it; the price is a workspace that grows with T.
int64_t run_chunk_parallel(const Problem& p, const ChunkProgram& prog, const plan::Mapping& mp, ThreadPool& pool,
                           const RowLoader<float>& rows, const Outputs& out, std::vector<Counters>& counters,
                           std::vector<int64_t>& ws_bytes) {
  const PhaseRunner runner(mp);
  const auto ranges = mp.phase_ranges();
  // Prepared chunks by (unit, first column): one slot per chunk, filled by the prepare phase.
  std::map<std::pair<int64_t, int64_t>, std::vector<std::unique_ptr<PreparedChunk>>> prepared;
  int64_t vmax = 0;
  for (std::size_t i = ranges[0].first; i < ranges[0].second; ++i) {
    const plan::WorkItem& it = mp.items[i];
    auto& slots = prepared[{it.seq * p.HV + it.hv, it.col0}];
    slots.resize(mp.shape.chunks(it.seq));
    for (int64_t c = it.chunk0; c < it.chunk0 + it.chunks; ++c) {
      slots[c] = std::make_unique<PreparedChunk>(p.opt.chunk_size, p.K, it.cols, p.gate_width());
    }
    vmax = std::max(vmax, it.cols);
  }
  runner.run(pool, 0, 1, [&](int, int t, const plan::WorkItem& it) {
    HeadWorkspace& ws = thread_workspace(p, vmax);
    const Work wk{it.seq, it.hv, it.col0, it.cols};
    auto& slots = prepared[{it.seq * p.HV + it.hv, it.col0}];
    for (int64_t c = it.chunk0; c < it.chunk0 + it.chunks; ++c) {
      prepare_chunk(p, prog, rows, wk, chunk_at(p, wk, p.seqs[it.seq].begin + c * p.opt.chunk_size), *slots[c], ws, counters[t]);
    }
  });
  runner.run(pool, 1, 2, [&](int, int t, const plan::WorkItem& it) {
    HeadWorkspace& ws = thread_workspace(p, vmax);
    ws.states.resize(p.K * vmax);
    ws.fit(prog, vmax, decays_on_results(p), p.bf16_gemm);
    ws_bytes[t] = ws.bytes();
    float* S = ws.states.data();
    const Work wk{it.seq, it.hv, it.col0, it.cols};
    begin_head(p, wk, S, counters[t]);
    const auto& slots = prepared[{it.seq * p.HV + it.hv, it.col0}];
    for (int64_t c = 0; c < it.chunks; ++c) {
      state_chunk(p, wk, prog, *slots[c], chunk_at(p, wk, p.seqs[it.seq].begin + c * p.opt.chunk_size), ws, S, out, counters[t]);
    }
    if (out.final_state) store_state(p, *out.final_state, wk.n, wk.hv, S, wk.c0, wk.Vc);
  });
  int64_t bytes = 0;
  for (const auto& [key, slots] : prepared) {
    for (const auto& pc : slots) bytes += pc->bytes();
  }
  return bytes;
}

}  // namespace

struct HeadSteps::Impl {
  const Problem& p;
  const ChunkProgram& prog;
  Work wk;
  Outputs out;
  RowLoader<float> rows;
  HeadWorkspace ws;
  Counters cnt;
  Impl(const Problem& p_, const ChunkProgram& prog_, int64_t seq, int64_t hv, const Outputs& out_, bool timed)
      : p(p_), prog(prog_), wk{seq, hv, 0, p_.V}, out(with_strides(out_)), rows(p_),
        ws(p_.opt.chunk_size, p_.K, p_.V, p_.gate_width()), cnt(counters_for(p_, 1, timed)[0]) {
    ws.states.resize(p.K * p.V);
    ws.fit(prog, p.V, decays_on_results(p), p.bf16_gemm);
  }
  ChunkRows rows_of(int64_t c) const { return chunk_at(p, wk, p.seqs[wk.n].begin + c * p.opt.chunk_size); }
  double flops_since(double before) const { return cnt.flops - before; }
};

HeadSteps::HeadSteps(const Problem& p, const ChunkProgram& prog, int64_t seq, int64_t hv, const Outputs& out,
                     bool timed)
    : impl_(std::make_unique<Impl>(p, prog, seq, hv, out, timed)) {}
HeadSteps::~HeadSteps() = default;

int64_t HeadSteps::chunks() const {
  const Problem& p = impl_->p;
  return (p.seqs[impl_->wk.n].len + p.opt.chunk_size - 1) / p.opt.chunk_size;
}

const Counters& HeadSteps::counters() const { return impl_->cnt; }

double HeadSteps::prepare(int64_t c) {
  Impl& m = *impl_;
  const double before = m.cnt.flops;
  prepare_chunk(m.p, m.prog, m.rows, m.wk, m.rows_of(c), m.ws.prep, m.ws, m.cnt);
  return m.flops_since(before);
}

double HeadSteps::state(int64_t c) {
  Impl& m = *impl_;
  const double before = m.cnt.flops;
  float* S = m.ws.states.data();
  if (c == 0) begin_head(m.p, m.wk, S, m.cnt);
  state_chunk(m.p, m.wk, m.prog, m.ws.prep, m.rows_of(c), m.ws, S, m.out, m.cnt);
  if (c + 1 == chunks() && m.out.final_state) store_state(m.p, *m.out.final_state, m.wk.n, m.wk.hv, S, 0, m.p.V);
  return m.flops_since(before);
}

void run_hanpu(const Problem& p, const ChunkProgram& prog, const plan::Mapping& mp, ThreadPool& pool, const Outputs& out,
               bool breakdown, RunStats* stats) {
  const int threads = pool.size();
  const RowLoader<float> rows(p);
  std::vector<Counters> counters = counters_for(p, threads, breakdown);
  std::vector<int64_t> ws_bytes(threads, 0);
  const bool fallback = mp.phases[0].work == plan::Work::kPrepare;
  int64_t stored = 0;
  if (fallback) {
    stored = run_chunk_parallel(p, prog, mp, pool, rows, out, counters, ws_bytes);
  } else {
    const PhaseRunner runner(mp);
    std::vector<std::vector<Work>> plan(threads);
    for (int t = 0; t < threads; ++t) {
      for (const plan::WorkItem* it : runner.items(0, t)) plan[t].push_back({it->seq, it->hv, it->col0, it->cols});
    }
    run_heads(p, prog, pool, plan, rows, out, counters, ws_bytes);
  }
  if (!stats) return;
  if (fallback) stats->dataflow += " (chunk-parallel fallback for an extreme tail)";
  stats->peak_workspace_bytes = stored;
  for (int t = 0; t < threads; ++t) {
    stats->flops += counters[t].flops;
    stats->traffic_bytes += counters[t].traffic_bytes;
    stats->peak_workspace_bytes += ws_bytes[t];
  }
  if (!breakdown) return;
  stats->breakdown_ms.clear();
  stats->chunk_steps = 0;
  for (int part = 0; part < static_cast<int>(Part::kCount); ++part) {
    double ms = 0;
    for (const Counters& c : counters) ms += c.ns[part] / 1e6;
    stats->breakdown_ms.emplace_back(part_name(static_cast<Part>(part)), ms);
  }
  for (const Counters& c : counters) stats->chunk_steps += c.chunk_steps;
}

}  // namespace hanpu
