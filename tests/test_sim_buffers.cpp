// The NPU model's buffers: per-tensor dtypes, ping-pong load slots and reserved scratch in the footprint,
// the casts and forwards that bring fp32 tensors to the matrix unit.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "plan/device.h"
#include "plan/graph.h"
#include "plan/layout.h"
#include "plan/lifetime.h"
#include "plan/plan.h"
#include "sim/chunk_lowering.h"
#include "sim/lower.h"
#include "sim_test_util.h"
#include "sim/spill.h"

namespace hanpu::sim {
namespace {

using testing::device;
using testing::with_capacity;

int tensor_of(const plan::Graph& g, plan::Value v) {
  for (int t = 0; t < static_cast<int>(g.tensors.size()); ++t) {
    if (g.tensors[t].value == v) return t;
  }
  ADD_FAILURE() << "no tensor " << plan::value_name(v);
  return -1;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// On Ascend (fp16 operands, L1 != UB): model-precision inputs stay 2 B; the gate, the state and everything
// computed are fp32 on chip; the matrix unit's memories hold 2 B copies. On the host (fp32 operands)
// everything is 4 B.
TEST(SimBuffers, PerTensorDtypes) {
  const plan::Device d = device("ascend-310p");
  plan::GraphOptions o;
  o.chunk_first = o.gemm_first = false;
  o.kernels = plan::KernelSplit::kFla;
  const plan::Graph g = plan::build_chunk_graph(Kind::kGdn, 64, 128, 128, o);
  const int q = tensor_of(g, plan::Value::kQ), gate = tensor_of(g, plan::Value::kGate);
  const int s = tensor_of(g, plan::Value::kS), kkt = tensor_of(g, plan::Value::kKKt);
  const int out = tensor_of(g, plan::Value::kO), w = tensor_of(g, plan::Value::kW);
  EXPECT_EQ(plan::elem_bytes(g, q, d, "UB"), 2);
  EXPECT_EQ(plan::elem_bytes(g, q, d, "GM"), 2);
  EXPECT_EQ(plan::elem_bytes(g, gate, d, "UB"), 4);
  EXPECT_EQ(plan::elem_bytes(g, s, d, "UB"), 4);
  EXPECT_EQ(plan::elem_bytes(g, s, d, "L1"), 2);
  EXPECT_EQ(plan::elem_bytes(g, s, d, "L0B"), 2);
  EXPECT_EQ(plan::elem_bytes(g, kkt, d, "L0C"), 4);
  EXPECT_EQ(plan::elem_bytes(g, kkt, d, "UB"), 4);
  EXPECT_EQ(plan::elem_bytes(g, out, d, "UB"), 4);
  EXPECT_EQ(plan::elem_bytes(g, out, d, "GM"), 2);
  // Hand-offs between FLA's kernels are stored at the model's precision (W, U, h[c] = S), the gate's
  // cumsum in fp32; the final state S' in fp32.
  const int u = tensor_of(g, plan::Value::kU), gcum = tensor_of(g, plan::Value::kG);
  EXPECT_EQ(plan::elem_bytes(g, w, d, "GM"), 2);
  EXPECT_EQ(plan::elem_bytes(g, u, d, "GM"), 2);
  EXPECT_EQ(plan::elem_bytes(g, s, d, "GM"), 2);
  EXPECT_EQ(plan::elem_bytes(g, gcum, d, "GM"), 4);
  EXPECT_EQ(plan::elem_bytes(g, g.state_out, d, "GM"), 4);
  EXPECT_TRUE(plan::needs_cast(g, s, d));
  EXPECT_FALSE(plan::needs_cast(g, q, d));
  const plan::Device host = device("host");
  for (int t = 0; t < static_cast<int>(g.tensors.size()); ++t) {
    EXPECT_EQ(plan::elem_bytes(g, t, host, host.vector_mem), 4);
    EXPECT_FALSE(plan::needs_cast(g, t, host));
  }
}

// Inputs land in two slots (ping-pong): this chunk's copy over its uses, the next chunk's over every step;
// the Nd2Nz staging is reserved at every step. A device without the "buffers" section counts neither.
// Where double buffering would spill and single buffering fits, the lowering single-buffers.
TEST(SimBuffers, PingPongSlotsAndScratchAreInTheFootprint) {
  plan::Device d = device("ascend-310p");
  ASSERT_EQ(d.load_slots, 2);
  ASSERT_EQ(d.vector_scratch_bytes, 8192);
  const plan::Graph g = plan::build_chunk_graph(Kind::kGdn, 64, 128, 128, plan::GraphOptions{});
  const int n = static_cast<int>(g.ops.size());
  int prefetch = 0;
  for (const plan::Residency& r : plan::residencies(g, d)) {
    EXPECT_EQ(r.bytes, plan::tensor_bytes(g, r.tensor, d, r.memory)) << g.tensors[r.tensor].name << " in " << r.memory;
    if (!r.prefetch) continue;
    ++prefetch;
    EXPECT_EQ(g.tensors[r.tensor].role, plan::Role::kInput);
    EXPECT_TRUE(r.memory == "UB" || r.memory == "L1") << r.memory;
    EXPECT_EQ(r.from, 0);
    EXPECT_EQ(r.to, n - 1);
    EXPECT_TRUE(r.uses.empty());
  }
  EXPECT_GE(prefetch, 5);  // q, k, v, g, beta in UB (and q, k in L1)
  plan::Device single = d;
  single.load_slots = 1;
  single.vector_scratch_bytes = 0;
  const plan::LifetimeReport two = plan::analyse_lifetimes(g, d), one = plan::analyse_lifetimes(g, single);
  EXPECT_GT(two.peak_bytes.at("UB"), one.peak_bytes.at("UB") + 8192);
  const auto live = plan::live_bytes(g, d, plan::residencies(g, d));
  for (int64_t b : live.at("UB")) EXPECT_GE(b, 8192);  // the scratch, at every step
  // Capacity between the single- and the double-buffered peak: the lowering single-buffers, no spills.
  plan::Plan pl;
  ASSERT_TRUE(plan::make_plan(Kind::kGdn, d, {}, &pl).ok());
  const plan::Device tight = with_capacity(d, "UB", pl.lifetimes.peak_bytes.at("UB") - 1);
  std::unique_ptr<ChunkLowering> low;
  ASSERT_TRUE(make_lowering(pl, tight, &low).ok());
  EXPECT_TRUE(low->spills().moves.empty());
  EXPECT_LT(low->spills().peak_bytes.at("UB"), pl.lifetimes.peak_bytes.at("UB"));
}

// Back-pressure: a core's chunks hold at most the device's load slots of inputs and, where two chunks'
// working sets do not fit together, run one after another, so the simulated occupancy of every on-chip
// buffer stays near its capacity for every strategy (without it, loads ran megabytes ahead). Not exactly
// within: steps of one chunk overlap on different engines, which the sequential plan does not count, so
// the bound is the capacity plus 10%.
TEST(SimBuffers, BackPressureKeepsEveryBufferWithinItsCapacity) {
  for (const std::string name : {"ascend-310p", "ascend-310b"}) {
    const plan::Device d = device(name);
    Workload w;
    w.heads = 16;
    w.tokens = 1024;
    for (const std::string s : {"fla", "fla-megakernel", "flashqla", "hanpu", "+fusion", "+chunk-first"}) {
      SimRecord r;
      ASSERT_TRUE(simulate_strategy(s, d, w, &r).ok()) << s;
      for (const auto& [mem, peak] : r.sim_peak_bytes) {
        EXPECT_LE(peak, 1.1 * static_cast<double>(d.memory(mem)->bytes)) << name << " " << s << " " << mem;
      }
    }
  }
  // The producer stalls: with one slot, chunk c + 1's loads wait for chunk c to end (less overlap, longer).
  plan::Device d = device("ascend-310p");
  Workload w;
  w.heads = d.cores;
  w.tokens = 1024;
  SimRecord two, one;
  ASSERT_TRUE(simulate_strategy("fla", d, w, &two).ok());
  d.load_slots = 1;
  ASSERT_TRUE(simulate_strategy("fla", d, w, &one).ok());
  EXPECT_GT(one.latency_us, two.latency_us);
  EXPECT_LE(one.sim_peak_bytes.at("UB"), two.sim_peak_bytes.at("UB"));
}

// The state S is fp32 in UB and the matrix unit reads it: each chunk casts it to fp16 on the vector unit
// and forwards it UB -> L1 once (its several GEMMs share the copy). Q is loaded from global memory at the
// operand size: never cast. The host (shared memory, fp32 operands) does neither.
TEST(SimBuffers, CastsAndForwardsWhereTheMatrixUnitReadsFp32) {
  for (const std::string name : {"ascend-310p", "hexagon-v75"}) {
    const plan::Device d = device(name);
    Workload w;
    w.heads = d.cores;  // a head per core: no tail heads split into slices
    w.tokens = 64 * 4;
    SimRecord r;
    std::string trace;
    ASSERT_TRUE(simulate_strategy("hanpu", d, w, &r, &trace).ok());
    const size_t chunks = 4 * static_cast<size_t>(d.cores);
    EXPECT_EQ(count(trace, "\"cast S\""), chunks) << name;  // HMX too reads fp16: cast on HVX
    EXPECT_EQ(count(trace, "\"cast Q\""), 0u) << name;
    EXPECT_EQ(count(trace, "\"forward Q\""), 0u) << name;
    if (name == "ascend-310p") {
      EXPECT_EQ(count(trace, "\"forward S\""), chunks);
      EXPECT_NE(trace.find("\"name\":\"MTE3\""), std::string::npos);  // forwards on the queue that reads UB
    } else {
      EXPECT_EQ(count(trace, "\"forward S\""), 0u);  // one VTCM: nothing to move across
    }
  }
}

// A 160 KiB UB: FLA's order fused into one kernel needs S, S' and K^T V' (64 KiB each in fp32) at its state
// update, more than the buffer holds whatever else leaves it. The update runs in tiles instead of failing:
// its tensors stream through, stored and reloaded around it, and every step fits.
TEST(SimBuffers, AnOperatorTooLargeForTheBufferRunsInTilesWithSpills) {
  const plan::Device d = with_capacity(device("ascend-310p"), "UB", 160 * 1024);
  const plan::Memory* ub = d.memory("UB");
  ASSERT_NE(ub, nullptr);
  plan::GraphOptions o;
  o.chunk_first = o.gemm_first = false;  // FLA's order
  const plan::Graph g = plan::build_chunk_graph(Kind::kGdn, 64, 128, 128, o);
  SpillPlan sp;
  ASSERT_TRUE(plan_spills(g, d, &sp).ok());
  ASSERT_FALSE(sp.tiled.empty());
  const int update = g.producer(g.state_out);
  bool update_tiled = false;
  for (const TiledStep& t : sp.tiled) {
    EXPECT_EQ(t.memory, "UB");
    EXPECT_GE(t.tiles, 2);
    EXPECT_LE(t.tiles, kMaxTiles);
    update_tiled = update_tiled || t.step == update;
  }
  EXPECT_TRUE(update_tiled);
  EXPECT_LE(sp.peak_bytes.at("UB"), ub->bytes);
  // The presence after the moves never exceeds the buffer at any step (the scratch included).
  std::vector<int64_t> live(g.ops.size(), d.vector_scratch_bytes);
  for (const plan::Residency& r : sp.presence) {
    if (r.memory != "UB") continue;
    for (int s = std::max(0, r.from); s <= std::min<int>(static_cast<int>(g.ops.size()) - 1, r.to); ++s) live[s] += r.bytes;
  }
  for (size_t s = 0; s < live.size(); ++s) EXPECT_LE(live[s], ub->bytes) << "step " << s;
  // S' is written tile by tile and stored; it comes back for the next chunk.
  bool s_out_stored = false;
  for (const SpillMove& m : sp.moves) s_out_stored = s_out_stored || (m.tensor == g.state_out && m.store);
  EXPECT_TRUE(s_out_stored);
  // Simulated: it runs, and the spills go through global memory.
  Workload w;
  w.heads = 10;
  w.tokens = 512;
  SimRecord fused, full;
  ASSERT_TRUE(simulate_strategy("+fusion", d, w, &fused).ok());
  ASSERT_TRUE(simulate_strategy("+fusion", device("ascend-310p"), w, &full).ok());
  EXPECT_GT(fused.spill_bytes, 0);
  EXPECT_EQ(full.spill_bytes, 0);
  EXPECT_DOUBLE_EQ(fused.gm_bytes - full.gm_bytes, fused.spill_bytes);
  EXPECT_GT(fused.latency_us, full.latency_us);
}

// Layout conversions happen where the 310P's data movers make them: a matrix result leaving L0C (the vector
// relay), a global-memory tensor loaded for the Cube (Nd2Nz), the output stored (Nz2Nd) cost nothing; a
// UB-resident tensor the vector unit made and the Cube reads pays an explicit transform (2 x bytes / rate).
// Without the movers' flags (310B) each is a transform.
TEST(SimBuffers, TransformsOnlyWhereNoDataMoverConverts) {
  const plan::Device p = device("ascend-310p");
  plan::Device b = p;
  b.load_converts = b.result_move_converts = b.store_converts = false;
  const plan::Graph g = plan::build_chunk_graph(Kind::kGdn, 64, 128, 128, plan::GraphOptions{});
  const plan::DeviceCostModel cp(p), cb(b);
  using plan::Layout;
  const int kkt = tensor_of(g, plan::Value::kKKt), k = tensor_of(g, plan::Value::kK);
  const int out = tensor_of(g, plan::Value::kO), a = tensor_of(g, plan::Value::kA);
  ASSERT_EQ(g.ops[g.producer(kkt)].engine, plan::Engine::kMatrix);
  ASSERT_EQ(g.ops[g.producer(a)].engine, plan::Engine::kVector);
  EXPECT_EQ(cp.transform_cost(g, kkt, Layout::kBlocked, Layout::kDense), 0);
  EXPECT_EQ(cp.transform_cost(g, k, Layout::kDense, Layout::kBlocked), 0);
  EXPECT_EQ(cp.transform_cost(g, out, Layout::kBlocked, Layout::kDense), 0);
  const double bytes = 64.0 * 64 * 4;  // A, fp32 in UB, whole 16 x 16 blocks
  EXPECT_DOUBLE_EQ(cp.transform_cost(g, a, Layout::kDense, Layout::kBlocked),
                   p.transform_fixed_cycles + 2 * bytes / p.transform_bytes_per_cycle);
  for (int t : {kkt, k, out}) {
    EXPECT_GT(cb.transform_cost(g, t, Layout::kDense, Layout::kBlocked), 0) << g.tensors[t].name;
    EXPECT_GT(cb.transform_cost(g, t, Layout::kBlocked, Layout::kDense), 0) << g.tensors[t].name;
  }
  // Free conversions are not emitted as tasks: hanpu's plan on the 310P has no transform left at all.
  Workload w;
  w.heads = p.cores;
  w.tokens = 128;
  SimRecord r;
  std::string trace;
  ASSERT_TRUE(simulate_strategy("hanpu", p, w, &r, &trace).ok());
  EXPECT_EQ(count(trace, "\"transform "), 0u);
  EXPECT_EQ(r.transform_share, 0);
}

// L0 residency in GEMM-first order on the 310P (fp16 operands, L0A = L0B = 64 KiB): K S loads Ke and S,
// then Q S finds S still in L0B and loads only Qs; K K^T then Q K^T share K^T the same way. Written tensors
// are forgotten, and with buffers too small for either operand the right one streams once per left tile.
TEST(SimBuffers, AResidentOperandIsNotReloaded) {
  const plan::Device d = device("ascend-310p");
  const plan::Graph g = plan::build_chunk_graph(Kind::kGdn, 64, 128, 128, plan::GraphOptions{});
  auto op = [&](plan::OpCode c) -> const plan::OpNode& {
    for (const plan::OpNode& o : g.ops) {
      if (o.code == c) return o;
    }
    ADD_FAILURE() << plan::op_code_name(c);
    return g.ops[0];
  };
  const double rows = 64.0 * 128 * 2, state = 128.0 * 128 * 2;  // a chunk's 64 x 128 operand, S, in fp16
  L0Residency l0;
  EXPECT_DOUBLE_EQ(l0.load_bytes(g, d, op(plan::OpCode::kKS)), rows + state);
  EXPECT_DOUBLE_EQ(l0.load_bytes(g, d, op(plan::OpCode::kQS)), rows);  // S stays in L0B
  EXPECT_DOUBLE_EQ(l0.load_bytes(g, d, op(plan::OpCode::kKKt)), 2 * rows);
  EXPECT_DOUBLE_EQ(l0.load_bytes(g, d, op(plan::OpCode::kQKt)), rows);  // K^T stays in L0B
  l0.forget(op(plan::OpCode::kQKt).inputs[1]);
  EXPECT_DOUBLE_EQ(l0.load_bytes(g, d, op(plan::OpCode::kQKt)), rows);  // Q stayed in L0A; K^T comes again
  // No operand buffers described (hexagon): every operand every time.
  L0Residency none;
  const plan::Device h = device("hexagon-v75");
  EXPECT_DOUBLE_EQ(none.load_bytes(g, h, op(plan::OpCode::kKS)), rows + state);
  EXPECT_DOUBLE_EQ(none.load_bytes(g, h, op(plan::OpCode::kQS)), rows + state);
  // 8 KiB buffers: K S's Ke (16 KiB) in two tiles, S (32 KiB) streamed for each: S twice.
  const plan::Device small = with_capacity(with_capacity(d, "L0A", 8192), "L0B", 8192);
  L0Residency tiles;
  EXPECT_DOUBLE_EQ(tiles.load_bytes(g, small, op(plan::OpCode::kKS)), rows + 2 * state);
  // Simulated: the GEMM-first chunk moves less L1 -> L0 than its operands' sizes add up to.
  Workload w;
  w.heads = d.cores;
  w.tokens = 64;
  SimRecord r;
  ASSERT_TRUE(simulate_strategy("hanpu", d, w, &r).ok());
  double all = 0;
  for (const plan::OpNode& o : g.ops) {
    if (o.engine != plan::Engine::kMatrix) continue;
    for (int t : o.inputs) all += static_cast<double>(g.tensors[t].rows * g.tensors[t].cols * 2);
  }
  EXPECT_LT(r.l1_to_l0_bytes, static_cast<double>(d.cores) * all);
}

}  // namespace
}  // namespace hanpu::sim
