// Continuous-batching decode on the engine: recurrent_decode_slots' semantics with the SIMD decode kernel
// (kernels/simd.h) and the (sequence, value head) units split statically across the pool's threads.
// A slot whose rows are contiguous (last stride 1) is updated where it lies; any other layout goes
// through a per-thread copy.
#include <algorithm>
#include <cmath>

#include "exec/strategies.h"
#include "kernels/simd.h"

namespace hanpu {

Status engine_decode_slots(const Inputs& in, const Options& opt, const EngineConfig& cfg, const TensorView& state_pool,
                           const TensorView& slot_indices, const TensorView& o, RunStats* stats) {
  if (cfg.threads < 0) return InvalidArgument("threads must be >= 0, got " + std::to_string(cfg.threads));
  Problem p;
  HANPU_RETURN_IF_ERROR(validate_problem(in, opt, Mode::kSlots, &p));
  HANPU_RETURN_IF_ERROR(validate_outputs(p, Outputs{o, std::nullopt}, Mode::kSlots));
  std::vector<int64_t> slots;
  HANPU_RETURN_IF_ERROR(validate_slot_pool(p, state_pool, slot_indices, o, &slots));
  const TensorView pool_v = with_strides(state_pool), out = with_strides(o);
  const int threads = ThreadPool::resolve(cfg.threads);
  ThreadPool& pool = shared_pool(threads);
  const RowLoader<float> rows(p);
  const int64_t K = p.K, V = p.V, w = p.gate_width();
  const bool in_place = pool_v.stride(3) == 1;
  std::vector<Counters> cnt(threads);
  pool.run([&](int t) {
    std::vector<float> q(K), k(K), v(V), g(w), decay(K), orow(V), tmp(in_place ? 0 : K * V);
    int64_t b, e;
    static_range(p.N * p.HV, threads, t, &b, &e);
    for (int64_t unit = b; unit < e; ++unit) {
      const int64_t n = unit / p.HV, hv = unit % p.HV;
      const Sequence& s = p.seqs[n];
      if (slots[n] < 0) {  // padding: zero outputs, no slot touched
        std::fill(orow.begin(), orow.end(), 0.0f);
        for (int64_t tk = s.begin; tk < s.begin + s.len; ++tk) store_o_row(out, s.batch, tk, hv, V, orow.data());
        continue;
      }
      float* S = tmp.data();
      int64_t lds = p.opt.state_v_first ? K : V;
      if (in_place) {
        S = static_cast<float*>(pool_v.data) + slots[n] * pool_v.stride(0) + hv * pool_v.stride(1);
        lds = pool_v.stride(2);
      } else {
        load_state(p, pool_v, slots[n], hv, S);  // k-first copy
        lds = V;
      }
      const bool v_first_kernel = in_place && p.opt.state_v_first;
      for (int64_t tk = s.begin; tk < s.begin + s.len; ++tk) {
        const float beta = rows.token(s.batch, tk, hv, q.data(), k.data(), v.data(), g.data());
        for (int64_t d = 0; d < K; ++d) decay[d] = g[w == 1 ? 0 : d];
        simd::exp_f32(K, decay.data(), decay.data());
        if (v_first_kernel) {
          simd::decode_v_first(K, V, S, lds, decay.data(), q.data(), k.data(), v.data(), beta, orow.data());
        } else {
          simd::decode_k_first(K, V, S, lds, decay.data(), q.data(), k.data(), v.data(), beta, orow.data());
        }
        store_o_row(out, s.batch, tk, hv, V, orow.data());
        cnt[t].flops += 8.0 * K * V;
        cnt[t].traffic_bytes += 2 * K * V * 4 + chunk_input_bytes(p, 1, V) + V * 4;
      }
      if (!in_place) store_state(p, pool_v, slots[n], hv, S);
    }
  });
  if (stats) {
    *stats = RunStats();
    stats->threads = threads;
    stats->simd_target = simd::target_name();
    for (const Counters& c : cnt) {
      stats->flops += c.flops;
      stats->traffic_bytes += c.traffic_bytes;
    }
    stats->peak_workspace_bytes = threads * static_cast<int64_t>((4 * K + 2 * V + w + (in_place ? 0 : K * V)) * 4);
  }
  return Status::Ok();
}

}  // namespace hanpu
