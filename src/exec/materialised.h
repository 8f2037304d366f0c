// Intermediates in memory, indexed by (global chunk, value head): the building blocks of the
// materialising strategies (native, fla, fla-megakernel in strategy_fla.cpp; flashqla).
#pragma once

#include <algorithm>
#include <limits>
#include <memory>
#include <vector>

#include "core/aligned.h"
#include "exec/strategies.h"
#include "kernels/simd.h"
#include "kernels/tril_inverse.h"

namespace hanpu {

struct ChunkRef {
  int64_t n, t0, L, index;  // sequence, first token, rows, global chunk index
};

struct Scratch {
  ChunkInputs in;
  int64_t loaded = -1;  // the task whose rows `in` holds
  AlignedVector<float> kt, A, P, T, KQ, X, S, scratch;
  AlignedVector<float> state_in, vn;  // flashqla's segments: a chunk's incoming state and its V' (sized on use)
  Scratch(int64_t C, int64_t K, int64_t V, int64_t w)
      : in(C, K, V, w), kt(K * C), A(C * C), P(C * C), T(C * C), KQ(C * K), X(C * std::max(K, V)), S(K * V),
        scratch(std::max(kda_intra_scores_simd_scratch(C, K), kTrilBlock * C)) {}
  int64_t bytes() const {
    return in.bytes() + static_cast<int64_t>((kt.size() + A.size() + P.size() + T.size() + KQ.size() + X.size() +
                                              S.size() + scratch.size() + state_in.size() + vn.size()) * sizeof(float));
  }
};

// The pool threads of a materialising strategy, each with its scratch and counters.
class Workers {
 public:
  Workers(ThreadPool& pool, const Problem& p) : cnt_(counters_for(p, pool.size())) {
    for (int t = 0; t < pool.size(); ++t) {
      ws_.push_back(std::make_unique<Scratch>(p.opt.chunk_size, p.K, p.V, p.gate_width()));
    }
  }
  Scratch& scratch(int t) { return *ws_[t]; }
  Counters& counters(int t) { return cnt_[t]; }
  // Adds the counters and the scratch to the stats, with `materialised` bytes of shared intermediates.
  void report(int64_t materialised, RunStats* stats) const {
    stats->peak_workspace_bytes = materialised;
    for (std::size_t t = 0; t < ws_.size(); ++t) {
      stats->flops += cnt_[t].flops;
      stats->traffic_bytes += cnt_[t].traffic_bytes;
      stats->peak_workspace_bytes += ws_[t]->bytes();
    }
  }

 private:
  std::vector<std::unique_ptr<Scratch>> ws_;
  std::vector<Counters> cnt_;
};

// The intermediates a materialising strategy keeps in memory, indexed by (global chunk, value head):
// W and U always; every chunk's state h[c] and V' with keep_states (native, fla); the stored rows, A
// and T with native.
class Materialised {
 public:
  Materialised(const Problem& p, bool native, bool keep_states) : p_(p), rows_(p), native_(native) {
    C_ = p.opt.chunk_size;
    K_ = p.K;
    V_ = p.V;
    HV_ = p.HV;
    w_ = p.gate_width();
    for (int64_t n = 0; n < p.N; ++n) {
      const Sequence& s = p.seqs[n];
      first_chunk_.push_back(static_cast<int64_t>(chunks_.size()));
      for (int64_t t0 = s.begin; t0 < s.begin + s.len; t0 += C_) {
        chunks_.push_back({n, t0, std::min(C_, s.begin + s.len - t0), static_cast<int64_t>(chunks_.size())});
      }
    }
    first_chunk_.push_back(static_cast<int64_t>(chunks_.size()));  // the end of the last sequence
    const int64_t tasks = this->tasks();
    W_.resize(tasks * C_ * K_);
    log_decay_.resize(tasks);
    U_.resize(tasks * C_ * V_);
    if (keep_states) {
      Vn_.resize(tasks * C_ * V_);
      H_.resize(tasks * K_ * V_);
    }
    if (native_) {
      for (int64_t i = 0; i < tasks; ++i) inputs_.emplace_back(C_, K_, V_, w_);
      A_.resize(tasks * C_ * C_);
      T_.resize(tasks * C_ * C_);
    }
  }

  int64_t tasks() const { return static_cast<int64_t>(chunks_.size()) * HV_; }
  // The task of chunk c of sequence n for value head hv (tasks are (global chunk, value head)).
  int64_t task(int64_t n, int64_t c, int64_t hv) const { return (first_chunk_[n] + c) * HV_ + hv; }
  const std::vector<ChunkRef>& chunks() const { return chunks_; }
  // A bound on the log of the chunk's state-map norm, sum over tokens of max_d g[d], recorded by fused_wu;
  // +inf where a token's delta rule may expand the state (beta |k|^2 > 2 or beta < 0).
  double chunk_log_decay(int64_t task) const { return log_decay_[task]; }
  int64_t units() const { return p_.N * HV_; }
  int64_t bytes() const {
    int64_t b = static_cast<int64_t>((W_.size() + U_.size() + Vn_.size() + H_.size() + A_.size() + T_.size()) * 4);
    for (const ChunkInputs& in : inputs_) b += in.bytes();
    return b;
  }

  // native #1: a chunk's rows and gate factors, stored.
  void load(int64_t task, Counters& c) {
    const ChunkRef& ch = chunks_[task / HV_];
    prefetch_next_rows(task, inputs_[task]);
    inputs_[task].load(p_, rows_, p_.seqs[ch.n], task % HV_, {ch.L, ch.t0, 0, V_});
    c.traffic_bytes += chunk_input_bytes(p_, ch.L, V_) + inputs_[task].bytes();
  }
  // native #2 and #3: A, then T, each through memory.
  void kkt(int64_t task, Scratch& ws, Counters& c) {
    const int64_t L = chunks_[task / HV_].L;
    chunk_scores(p_, inputs_[task], L, true, false, ws.kt.data(), a(task), ws.P.data(), ws.scratch.data(), c);
    c.traffic_bytes += inputs_[task].bytes() + C_ * C_ * 4;
  }
  void solve(int64_t task, Scratch& ws, Counters& c) {
    const int64_t L = chunks_[task / HV_].L;
    c.flops += 2.0 * tril_unit_inverse_simd(L, a(task), C_, t(task), C_, ws.scratch.data());
    c.traffic_bytes += 2 * C_ * C_ * 4;
  }
  // native #4: W and U from the stored inputs and T.
  void wu_stored(int64_t task, Scratch& ws, Counters& c) {
    wu(inputs_[task], t(task), task, ws, c);
    c.traffic_bytes += inputs_[task].bytes() + C_ * C_ * 4;
  }
  // fla phase 1: #1-#4 fused per task, only W and U reach memory.
  void fused_wu(int64_t task, Scratch& ws, Counters& c) {
    const ChunkRef& ch = chunks_[task / HV_];
    prefetch_next_rows(task, ws.in);
    ws.in.load(p_, rows_, p_.seqs[ch.n], task % HV_, {ch.L, ch.t0, 0, V_});
    ws.loaded = task;
    c.traffic_bytes += chunk_input_bytes(p_, ch.L, V_);
    chunk_scores(p_, ws.in, ch.L, true, false, ws.kt.data(), ws.A.data(), ws.P.data(), ws.scratch.data(), c);
    c.flops += 2.0 * tril_unit_inverse_simd(ch.L, ws.A.data(), C_, ws.T.data(), C_, ws.scratch.data());
    wu(ws.in, ws.T.data(), task, ws, c);
    // Bound on the chunk's state-map norm: each token's step scales S by diag(e^{g_t}) and then applies
    // the delta rule (I - beta_t k_t k_t^T), which mixes channels, so the bound is sum_t max_d g_t[d] (per
    // token; the per-channel chunk sums would miss a decay that moves from channel to channel) -- as long
    // as the delta rule does not expand, |1 - beta_t |k_t|^2| <= 1, i.e. beta_t |k_t|^2 <= 2 (beta >= 0).
    // Where it can expand the bound is void: recorded as +inf, which makes the segment exact (flashqla).
    double bound = 0;
    for (int64_t i = 0; i < ch.L; ++i) {
      const float* g = ws.in.graw.data() + i * w_;
      bound += *std::max_element(g, g + w_);
      const double gain = ws.in.beta[i] * simd::sum_squares(K_, ws.in.k.data() + i * K_);
      if (!(gain <= 2.0 && ws.in.beta[i] >= 0)) bound = std::numeric_limits<double>::infinity();
    }
    log_decay_[task] = bound;
  }

  // One chunk of the state recurrence on a [K, width] matrix X, in place:
  //   V' = (with_u ? U : 0) - W X,   X <- e^{G_last} o X + (K o e^{G_last - G})^T V'
  // width V advances a state; width K with_u = false advances a transition matrix (the state map's
  // linear part). V' goes to vn when given.
  void advance(int64_t task, Scratch& ws, float* X, int64_t width, bool with_u, Counters& c, float* vn = nullptr) {
    const ChunkRef& ch = chunks_[task / HV_];
    const int64_t L = ch.L;
    float* v = vn ? vn : ws.X.data();
    gemm(L, width, K_, W_.data() + task * C_ * K_, K_, X, width, false, v, width, c);  // W X
    const float* uc = U_.data() + task * C_ * V_;
    for (int64_t k = 0; k < L * width; ++k) v[k] = (with_u ? uc[k] : 0.0f) - v[k];
    const ChunkInputs& in = input(task, ws, ch);
    simd::scale_rows(L, K_, in.k.data(), K_, in.eg_last.data(), w_, nullptr, ws.KQ.data(), K_);  // Kd
    update_state(in, L, width, X, ws.KQ.data(), false, v, X, c);
    c.traffic_bytes += L * (K_ + V_) * 4 + chunk_input_bytes(p_, L, 0);
  }
  // #5 for one (sequence, value head): every h[c] and V' to memory.
  void states(int64_t u, Scratch& ws, Counters& c, const Outputs& out) {
    const int64_t n = u / HV_, hv = u % HV_;
    float* S = ws.S.data();
    if (p_.in.initial_state) {
      load_state(p_, *p_.in.initial_state, n, hv, S);
      c.traffic_bytes += K_ * V_ * 4;
    } else {
      std::fill(S, S + K_ * V_, 0.0f);
    }
    for (int64_t g = first_chunk_[n]; g < first_chunk_[n + 1]; ++g) {  // the sequence's chunks, in order
      const ChunkRef& ch = chunks_[g];
      const int64_t task = ch.index * HV_ + hv;
      std::copy(S, S + K_ * V_, H_.data() + task * K_ * V_);  // h[c]
      advance(task, ws, S, V_, true, c, Vn_.data() + task * C_ * V_);
      c.traffic_bytes += K_ * V_ * 4 + ch.L * V_ * 4;  // h[c] and V' written
    }
    if (out.final_state) store_state(p_, *out.final_state, n, hv, S);
    c.traffic_bytes += K_ * V_ * 4;
  }
  // #6 for one task from the materialised h[c] and V'.
  void output(int64_t task, Scratch& ws, Counters& c, const Outputs& out) {
    output_from(task, ws, H_.data() + task * K_ * V_, Vn_.data() + task * C_ * V_, c, out);
    c.traffic_bytes += K_ * V_ * 4 + chunks_[task / HV_].L * V_ * 4;  // h[c] and V' read
  }

  // The inputs of a task: stored (native), or loaded into the scratch unless it holds them already.
  const ChunkInputs& input(int64_t task, Scratch& ws, const ChunkRef& ch) {
    if (native_) return inputs_[task];
    if (ws.loaded != task) {
      prefetch_next_rows(task, ws.in);
      ws.in.load(p_, rows_, p_.seqs[ch.n], task % HV_, {ch.L, ch.t0, 0, V_});
      ws.loaded = task;
    }
    return ws.in;
  }

  // O rows of one chunk from the state at its start S and its V': O = (Q~ o e^G) S + P V'.
  void output_from(int64_t task, Scratch& ws, const float* S, const float* vn, Counters& c, const Outputs& out) {
    const ChunkRef& ch = chunks_[task / HV_];
    const int64_t hv = task % HV_, L = ch.L;
    const ChunkInputs& in = input(task, ws, ch);
    prefetch_next_o_rows(task, out);
    chunk_scores(p_, in, L, false, true, ws.kt.data(), ws.A.data(), ws.P.data(), ws.scratch.data(), c);
    simd::scale_rows(L, K_, in.q.data(), K_, in.eg.data(), w_, nullptr, ws.KQ.data(), K_);
    gemm(L, V_, K_, ws.KQ.data(), K_, S, V_, false, ws.X.data(), V_, c);
    lower_times(L, V_, ws.P.data(), C_, vn, V_, true, ws.X.data(), V_, c);
    store_o_rows(out.o, p_.seqs[ch.n].batch, ch.t0, L, hv, 0, V_, ws.X.data());
    c.traffic_bytes += chunk_input_bytes(p_, L, 0) + L * V_ * static_cast<int64_t>(dtype_size(out.o.dtype));
  }

 private:
  float* a(int64_t task) { return A_.data() + task * C_ * C_; }

  // The chunk after `task`'s in its sequence (same value head), or null for the sequence's last chunk.
  const ChunkRef* next_chunk(int64_t task) const {
    const int64_t next = task / HV_ + 1;
    return next < first_chunk_[chunks_[task / HV_].n + 1] ? &chunks_[next] : nullptr;
  }
  // The next chunk's input rows, and its output rows for writing, asked for before this chunk's are read
  // or written: the prefetching the hanpu strategy does for its next step, so that the baselines, on the
  // same kernels, differ from it in dataflow only. (`in`: any of the problem's ChunkInputs, for its shape.)
  void prefetch_next_rows(int64_t task, const ChunkInputs& in) const {
    if (const ChunkRef* nc = next_chunk(task)) in.prefetch(p_, p_.seqs[nc->n], task % HV_, {nc->L, nc->t0, 0, V_});
  }
  void prefetch_next_o_rows(int64_t task, const Outputs& out) const {
    if (const ChunkRef* nc = next_chunk(task)) {
      prefetch_o_rows(out.o, p_.seqs[nc->n].batch, nc->t0, nc->L, task % HV_, 0, V_);
    }
  }
  float* t(int64_t task) { return T_.data() + task * C_ * C_; }

  void wu(const ChunkInputs& in, const float* T, int64_t task, Scratch& ws, Counters& c) {
    const int64_t L = chunks_[task / HV_].L;
    simd::scale_rows(L, K_, in.k.data(), K_, in.eg.data(), w_, in.beta.data(), ws.KQ.data(), K_);
    lower_times(L, K_, T, C_, ws.KQ.data(), K_, false, W_.data() + task * C_ * K_, K_, c);
    simd::scale_rows(L, V_, in.v.data(), V_, in.beta.data(), 1, nullptr, ws.X.data(), V_);  // diag(beta) V
    lower_times(L, V_, T, C_, ws.X.data(), V_, false, U_.data() + task * C_ * V_, V_, c);
    c.traffic_bytes += L * (K_ + V_) * 4;  // W, U written
  }

  const Problem& p_;
  const RowLoader<float> rows_;
  const bool native_;
  int64_t C_, K_, V_, HV_, w_;
  std::vector<ChunkRef> chunks_;
  std::vector<int64_t> first_chunk_;  // global index of each sequence's first chunk, and the end (N + 1)
  AlignedVector<float> W_, U_, Vn_, H_, A_, T_;
  AlignedVector<double> log_decay_;
  std::vector<ChunkInputs> inputs_;
};

}  // namespace hanpu
