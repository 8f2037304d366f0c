// The materialising baselines, on the same kernels as the hanpu strategy (DESIGN.md §2):
//
// fla (chunk-head-chunk), three parallel launches:
//   1. over (chunk, value head):  G, A, T = (I + A)^-1, W = T diag(beta e^G) K, U = T diag(beta) V
//      -> W [chunks, HV, C, K] and U [chunks, HV, C, V] in memory
//   2. over (sequence, value head), sequential over chunks:  h[c] = S, V' = U - W S,
//      S <- e^{G_last} S + (K o e^{G_last - G})^T V'  -> every h[c] and V' in memory
//   3. over (chunk, value head):  O = (Q~ o e^G) h[c] + P V'
// fla-megakernel: the same three phases inside one parallel region, separated by barriers.
// native: one launch per operator, every intermediate in a full-size buffer: #1 rows and gates, #2 A,
//   #3 T, #4 W and U, #5 states and V', #6 O (how a plain port of the chunk algorithm runs it).
#include <algorithm>
#include <memory>

#include "exec/strategies.h"
#include "kernels/simd.h"
#include "kernels/tril_inverse.h"

namespace hanpu {

namespace {

struct ChunkRef {
  int64_t n, t0, L, index;  // sequence, first token, rows, global chunk index
};

struct Scratch {
  ChunkInputs in;
  std::vector<float> kt, A, P, T, KQ, X, S, scratch;
  Scratch(int64_t C, int64_t K, int64_t V, int64_t w)
      : in(C, K, V, w), kt(K * C), A(C * C), P(C * C), T(C * C), KQ(C * K), X(C * std::max(K, V)), S(K * V),
        scratch(std::max(kda_scores_scratch(C, K), kTrilBlock * C)) {}
  int64_t bytes() const {
    return in.bytes() + static_cast<int64_t>((kt.size() + A.size() + P.size() + T.size() + KQ.size() + X.size() +
                                              S.size() + scratch.size()) * sizeof(float));
  }
};

// The intermediates a materialising strategy keeps in memory, indexed by (global chunk, value head).
class Materialised {
 public:
  Materialised(const Problem& p, bool native) : p_(p), rows_(p), native_(native) {
    C_ = p.opt.chunk_size;
    K_ = p.K;
    V_ = p.V;
    HV_ = p.HV;
    w_ = p.gate_width();
    for (int64_t n = 0; n < p.N; ++n) {
      const Sequence& s = p.seqs[n];
      for (int64_t t0 = s.begin; t0 < s.begin + s.len; t0 += C_) {
        chunks_.push_back({n, t0, std::min(C_, s.begin + s.len - t0), static_cast<int64_t>(chunks_.size())});
      }
    }
    const int64_t tasks = this->tasks();
    W_.resize(tasks * C_ * K_);
    U_.resize(tasks * C_ * V_);
    Vn_.resize(tasks * C_ * V_);
    H_.resize(tasks * K_ * V_);
    if (native_) {
      for (int64_t i = 0; i < tasks; ++i) inputs_.emplace_back(C_, K_, V_, w_);
      A_.resize(tasks * C_ * C_);
      T_.resize(tasks * C_ * C_);
    }
  }

  int64_t tasks() const { return static_cast<int64_t>(chunks_.size()) * HV_; }
  int64_t units() const { return p_.N * HV_; }
  int64_t bytes() const {
    int64_t b = static_cast<int64_t>((W_.size() + U_.size() + Vn_.size() + H_.size() + A_.size() + T_.size()) * 4);
    for (const ChunkInputs& in : inputs_) b += in.bytes();
    return b;
  }

  // native #1: a chunk's rows and gate factors, stored.
  void load(int64_t task, Counters& c) {
    const ChunkRef& ch = chunks_[task / HV_];
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
    ws.in.load(p_, rows_, p_.seqs[ch.n], task % HV_, {ch.L, ch.t0, 0, V_});
    c.traffic_bytes += chunk_input_bytes(p_, ch.L, V_);
    chunk_scores(p_, ws.in, ch.L, true, false, ws.kt.data(), ws.A.data(), ws.P.data(), ws.scratch.data(), c);
    c.flops += 2.0 * tril_unit_inverse_simd(ch.L, ws.A.data(), C_, ws.T.data(), C_, ws.scratch.data());
    wu(ws.in, ws.T.data(), task, ws, c);
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
    for (const ChunkRef& ch : chunks_) {
      if (ch.n != n) continue;
      const int64_t task = ch.index * HV_ + hv, L = ch.L;
      std::copy(S, S + K_ * V_, H_.data() + task * K_ * V_);  // h[c]
      float* vn = Vn_.data() + task * C_ * V_;
      gemm(L, V_, K_, W_.data() + task * C_ * K_, K_, S, V_, false, vn, V_, c);  // W S
      const float* uc = U_.data() + task * C_ * V_;
      for (int64_t k = 0; k < L * V_; ++k) vn[k] = uc[k] - vn[k];
      const ChunkInputs& in = input(task, ws, ch);
      simd::scale_rows(L, K_, in.k.data(), K_, in.eg_last.data(), w_, nullptr, ws.KQ.data(), K_);
      simd::scale_rows(K_, V_, S, V_, in.g_last.data(), w_ == 1 ? 0 : 1, nullptr, S, V_);
      gemm_tn(K_, V_, L, ws.KQ.data(), K_, vn, V_, true, S, V_, c);
      // read W, U, k and gates; write h[c] and V'
      c.traffic_bytes += L * (K_ + V_) * 4 + chunk_input_bytes(p_, L, 0) + K_ * V_ * 4 + L * V_ * 4;
    }
    if (out.final_state) store_state(p_, *out.final_state, n, hv, S);
    c.traffic_bytes += K_ * V_ * 4;
  }
  // #6 for one task: O = (Q~ o e^G) h[c] + P V'.
  void output(int64_t task, Scratch& ws, Counters& c, const Outputs& out) {
    const ChunkRef& ch = chunks_[task / HV_];
    const int64_t hv = task % HV_, L = ch.L;
    const ChunkInputs& in = input(task, ws, ch);
    chunk_scores(p_, in, L, false, true, ws.kt.data(), ws.A.data(), ws.P.data(), ws.scratch.data(), c);
    simd::scale_rows(L, K_, in.q.data(), K_, in.eg.data(), w_, nullptr, ws.KQ.data(), K_);
    gemm(L, V_, K_, ws.KQ.data(), K_, H_.data() + task * K_ * V_, V_, false, ws.X.data(), V_, c);
    lower_times(L, V_, ws.P.data(), C_, Vn_.data() + task * C_ * V_, V_, true, ws.X.data(), V_, c);
    for (int64_t i = 0; i < L; ++i) store_o_row(out.o, p_.seqs[ch.n].batch, ch.t0 + i, hv, V_, ws.X.data() + i * V_);
    c.traffic_bytes += chunk_input_bytes(p_, L, 0) + K_ * V_ * 4 + L * V_ * 4 +
                       L * V_ * static_cast<int64_t>(dtype_size(out.o.dtype));
  }

 private:
  float* a(int64_t task) { return A_.data() + task * C_ * C_; }
  float* t(int64_t task) { return T_.data() + task * C_ * C_; }

  // The inputs of a task: stored (native) or reloaded into the scratch (fla).
  const ChunkInputs& input(int64_t task, Scratch& ws, const ChunkRef& ch) {
    if (native_) return inputs_[task];
    ws.in.load(p_, rows_, p_.seqs[ch.n], task % HV_, {ch.L, ch.t0, 0, V_});
    return ws.in;
  }

  void wu(const ChunkInputs& in, const float* T, int64_t task, Scratch& ws, Counters& c) {
    const int64_t L = chunks_[task / HV_].L;
    simd::scale_rows(L, K_, in.k.data(), K_, in.eg.data(), w_, in.beta.data(), ws.KQ.data(), K_);
    lower_times(L, K_, T, C_, ws.KQ.data(), K_, false, W_.data() + task * C_ * K_, K_, c);
    for (int64_t i = 0; i < L; ++i) {
      for (int64_t j = 0; j < V_; ++j) ws.X[i * V_ + j] = in.beta[i] * in.v[i * V_ + j];
    }
    lower_times(L, V_, T, C_, ws.X.data(), V_, false, U_.data() + task * C_ * V_, V_, c);
    c.traffic_bytes += L * (K_ + V_) * 4;  // W, U written
  }

  const Problem& p_;
  const RowLoader<float> rows_;
  const bool native_;
  int64_t C_, K_, V_, HV_, w_;
  std::vector<ChunkRef> chunks_;
  std::vector<float> W_, U_, Vn_, H_, A_, T_;
  std::vector<ChunkInputs> inputs_;
};

}  // namespace

void run_materialising(const Problem& p, Strategy strategy, ThreadPool& pool, const Outputs& out, RunStats* stats) {
  const int threads = pool.size();
  const bool native = strategy == Strategy::kNative;
  Materialised m(p, native);
  std::vector<std::unique_ptr<Scratch>> ws(threads);
  for (auto& s : ws) s = std::make_unique<Scratch>(p.opt.chunk_size, p.K, p.V, p.gate_width());
  std::vector<Counters> cnt(threads);
  auto phase = [&](int t, int64_t items, const auto& fn) {
    int64_t b, e;
    static_range(items, threads, t, &b, &e);
    for (int64_t i = b; i < e; ++i) fn(i, *ws[t], cnt[t]);
  };
  auto launch = [&](int64_t items, const auto& fn) { pool.run([&](int t) { phase(t, items, fn); }); };
  auto fused_wu = [&](int64_t i, Scratch& s, Counters& c) { m.fused_wu(i, s, c); };
  auto states = [&](int64_t u, Scratch& s, Counters& c) { m.states(u, s, c, out); };
  auto output = [&](int64_t i, Scratch& s, Counters& c) { m.output(i, s, c, out); };
  switch (strategy) {
    case Strategy::kNative:
      launch(m.tasks(), [&](int64_t i, Scratch&, Counters& c) { m.load(i, c); });
      launch(m.tasks(), [&](int64_t i, Scratch& s, Counters& c) { m.kkt(i, s, c); });
      launch(m.tasks(), [&](int64_t i, Scratch& s, Counters& c) { m.solve(i, s, c); });
      launch(m.tasks(), [&](int64_t i, Scratch& s, Counters& c) { m.wu_stored(i, s, c); });
      launch(m.units(), states);
      launch(m.tasks(), output);
      break;
    case Strategy::kFlaMegakernel:
      pool.run([&](int t) {
        phase(t, m.tasks(), fused_wu);
        pool.barrier();
        phase(t, m.units(), states);
        pool.barrier();
        phase(t, m.tasks(), output);
      });
      break;
    default:  // Strategy::kFla
      launch(m.tasks(), fused_wu);
      launch(m.units(), states);
      launch(m.tasks(), output);
      break;
  }
  if (!stats) return;
  stats->peak_workspace_bytes = m.bytes();
  for (int t = 0; t < threads; ++t) {
    stats->flops += cnt[t].flops;
    stats->traffic_bytes += cnt[t].traffic_bytes;
    stats->peak_workspace_bytes += ws[t]->bytes();
  }
}

}  // namespace hanpu
