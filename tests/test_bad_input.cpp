// The bad-input table of the README, C++ rows not covered by test_validation.cpp: a failing call leaves
// the caller's outputs and state untouched (every entry point validates everything before it writes),
// written tensors need memory of their own, and reversed (negative-stride) views read and write correctly.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "hanpu/engine.h"
#include "test_util.h"

namespace hanpu {
namespace {

constexpr float kSentinel = 12345.5f;

// A GDN problem of 2 sequences (varlen, lengths 6 and 9) with its initial state.
struct Call {
  TensorFile f;
  Inputs in;
  Options opt;
  int64_t T = 15, HV = 4, K = 8, V = 6, N = 2;
};

Call make_call() {
  Call c;
  c.f = testing::small_problem(Kind::kGdn, DType::kF32, 1, c.T, 2, c.HV, c.K, c.V, 3);
  c.f.tensors["cu_seqlens"] = testing::tensor_of(DType::kI64, {3}, {0, 6, static_cast<double>(c.T)});
  std::mt19937_64 rng(8);
  c.f.tensors["initial_state"] = testing::random_tensor(DType::kF32, {c.N, c.HV, c.K, c.V}, rng, 0.3);
  EXPECT_TRUE(bind_inputs(c.f, &c.in).ok());
  return c;
}

Tensor filled(std::vector<int64_t> shape) {
  Tensor t(DType::kF32, std::move(shape));
  std::vector<double> v(static_cast<std::size_t>(t.numel()), kSentinel);
  fill_from_doubles(t, v);
  return t;
}

bool all_sentinel(const Tensor& t) {
  for (double x : to_doubles(t.view())) {
    if (x != kSentinel) return false;
  }
  return true;
}

using Entry = std::function<Status(const Inputs&, const Options&, const Outputs&)>;

// Every prefill entry point: the scalar paths and each engine strategy.
std::vector<std::pair<std::string, Entry>> entries() {
  std::vector<std::pair<std::string, Entry>> e = {{"reference", reference_forward},
                                                  {"chunk", chunk_forward},
                                                  {"recurrent", recurrent_forward}};
  for (Strategy s : all_strategies()) {
    e.emplace_back(strategy_name(s), [s](const Inputs& in, const Options& opt, const Outputs& out) {
      EngineConfig cfg;
      cfg.strategy = s;
      cfg.threads = 2;
      return engine_forward(in, opt, cfg, out);
    });
  }
  return e;
}

// A fault in the last element read (the last token of the last sequence, or the last cu_seqlens entry):
// each entry point fails, naming it, and o and final_state keep every sentinel bit.
TEST(BadInput, FailingCallsLeaveOutputsAndStateUntouched) {
  struct Fault {
    std::string name, fragment;
    std::function<void(Call&)> apply;
  };
  const std::vector<Fault> faults = {
      {"NaN in the last v element with check_finite", "v has a non-finite value",
       [](Call& c) {
         Tensor& v = c.f.tensors["v"];
         std::vector<double> x = to_doubles(v.view());
         x.back() = NAN;
         fill_from_doubles(v, x);
         c.opt.check_finite = true;
       }},
      {"Inf in the last initial_state element with check_finite", "initial_state has a non-finite value",
       [](Call& c) {
         Tensor& s = c.f.tensors["initial_state"];
         std::vector<double> x = to_doubles(s.view());
         x.back() = INFINITY;
         fill_from_doubles(s, x);
         c.opt.check_finite = true;
       }},
      {"cu_seqlens ending short of T", "cu_seqlens[-1] must equal T",
       [](Call& c) { c.f.tensors["cu_seqlens"] = testing::tensor_of(DType::kI64, {3}, {0, 6, 14}); }},
      {"dt_bias of the wrong length with the in-kernel gate", "dt_bias must have shape",
       [](Call& c) {
         c.opt.use_gate_in_kernel = true;
         c.f.tensors["A_log"] = testing::tensor_of(DType::kF32, {c.HV}, {0.1, 0.2, 0.3, 0.4});
         c.f.tensors["dt_bias"] = testing::tensor_of(DType::kF32, {c.HV + 1}, {0, 0, 0, 0, 0});
       }},
  };
  for (const Fault& fault : faults) {
    for (const auto& [name, fn] : entries()) {
      Call c = make_call();
      fault.apply(c);
      ASSERT_TRUE(bind_inputs(c.f, &c.in).ok());
      Tensor o = filled({1, c.T, c.HV, c.V}), state = filled({c.N, c.HV, c.K, c.V});
      const Status st = fn(c.in, c.opt, Outputs{o.view(), state.view()});
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << name << ": " << fault.name;
      EXPECT_NE(st.message().find(fault.fragment), std::string::npos) << name << ": " << st.message();
      EXPECT_TRUE(all_sentinel(o)) << name << " wrote o before failing on " << fault.name;
      EXPECT_TRUE(all_sentinel(state)) << name << " wrote final_state before failing on " << fault.name;
    }
  }
}

// The decode pool is the caller's state, updated in place: a fault in the last sequence (a bad slot,
// a duplicate slot, a NaN input) must leave every slot as it was.
TEST(BadInput, FailingDecodeLeavesThePoolUntouched) {
  const int64_t N = 3, HV = 2, K = 8, V = 4, P = 5;
  TensorFile f = testing::small_problem(Kind::kGdn, DType::kF32, N, 1, 1, HV, K, V, 5);
  Inputs in;
  ASSERT_TRUE(bind_inputs(f, &in).ok());
  std::mt19937_64 rng(2);
  const Tensor pool0 = testing::random_tensor(DType::kF32, {P, HV, K, V}, rng, 0.3);
  struct Fault {
    std::vector<double> slots;
    bool nan_in_last;
    std::string fragment;
  };
  for (const Fault& fault : {Fault{{0, 2, 5}, false, "slot_indices[2] = 5 is out of range for a pool of 5"},
                             Fault{{0, 2, 0}, false, "slot_indices[2] = 0 is used by an earlier sequence"},
                             Fault{{0, 2, 4}, true, "v has a non-finite value"}}) {
    TensorFile bad = f;
    if (fault.nan_in_last) {
      std::vector<double> x = to_doubles(bad.tensors["v"].view());
      x.back() = NAN;
      fill_from_doubles(bad.tensors["v"], x);
    }
    Inputs bin;
    ASSERT_TRUE(bind_inputs(bad, &bin).ok());
    Options opt;
    opt.check_finite = true;
    const Tensor slots = testing::tensor_of(DType::kI64, {N}, fault.slots);
    for (bool engine : {false, true}) {
      Tensor pool = pool0, o = filled({N, 1, HV, V});
      const Status st = engine ? engine_decode_slots(bin, opt, EngineConfig{}, pool.view(), slots.view(), o.view())
                               : recurrent_decode_slots(bin, opt, pool.view(), slots.view(), o.view());
      EXPECT_NE(st.message().find(fault.fragment), std::string::npos) << st.message();
      EXPECT_EQ(pool.bytes, pool0.bytes) << (engine ? "engine" : "recurrent") << ": " << fault.fragment;
      EXPECT_TRUE(all_sentinel(o));
    }
  }
}

// Written tensors: broadcast (stride 0) or otherwise overlapping elements, and outputs sharing memory with
// an input or with each other, are refused by name, before anything is written.
TEST(BadInput, WrittenTensorsNeedMemoryOfTheirOwn) {
  for (const auto& [name, fn] : entries()) {
    Call c = make_call();
    Tensor o = filled({1, c.T, c.HV, c.V}), state = filled({c.N, c.HV, c.K, c.V});
    // o broadcast over time: every token's row lands on the same memory
    TensorView o_bcast(o.bytes.data(), DType::kF32, {1, c.T, c.HV, c.V}, {c.T * c.HV * c.V, 0, c.V, 1});
    Status st = fn(c.in, c.opt, Outputs{o_bcast, state.view()});
    EXPECT_NE(st.message().find("o has overlapping elements"), std::string::npos) << name << ": " << st.message();
    // final_state rows interleaved onto each other (K stride smaller than the V extent)
    TensorView s_overlap(state.bytes.data(), DType::kF32, {c.N, c.HV, c.K, c.V}, {c.HV * c.K * c.V, c.K * c.V, 2, 1});
    st = fn(c.in, c.opt, Outputs{o.view(), s_overlap});
    EXPECT_NE(st.message().find("final_state has overlapping elements"), std::string::npos) << name << ": " << st.message();
    // final_state written over initial_state (in place): refused, decode slots are the in-place form
    st = fn(c.in, c.opt, Outputs{o.view(), *c.in.initial_state});
    EXPECT_NE(st.message().find("final_state shares memory with initial_state"), std::string::npos)
        << name << ": " << st.message();
    // o over the caller's v (same shape as o here)
    st = fn(c.in, c.opt, Outputs{c.in.v, state.view()});
    EXPECT_NE(st.message().find("o shares memory with v"), std::string::npos) << name << ": " << st.message();
    // o and final_state on one buffer
    Tensor both = filled({o.numel() + state.numel()});
    TensorView o_in(both.bytes.data(), DType::kF32, o.shape), s_in(both.bytes.data() + 4 * 8, DType::kF32, state.shape);
    st = fn(c.in, c.opt, Outputs{o_in, s_in});
    EXPECT_NE(st.message().find("o shares memory with final_state"), std::string::npos) << name << ": " << st.message();
    EXPECT_TRUE(all_sentinel(o) && all_sentinel(state) && all_sentinel(both)) << name;
  }
  // the decode pool over o, and a broadcast pool
  const int64_t N = 2, HV = 2, K = 4, V = 4;
  TensorFile f = testing::small_problem(Kind::kGdn, DType::kF32, N, 1, 1, HV, K, V, 6);
  Inputs in;
  ASSERT_TRUE(bind_inputs(f, &in).ok());
  Tensor pool = filled({N, HV, K, V});
  const Tensor slots = testing::tensor_of(DType::kI64, {N}, {0, 1});
  TensorView o_on_pool(pool.bytes.data(), DType::kF32, {N, 1, HV, V});
  Status st = engine_decode_slots(in, Options{}, EngineConfig{}, pool.view(), slots.view(), o_on_pool);
  EXPECT_NE(st.message().find("state_pool shares memory with o"), std::string::npos) << st.message();
  TensorView pool_bcast(pool.bytes.data(), DType::kF32, {N, HV, K, V}, {0, K * V, V, 1});
  Tensor o(DType::kF32, {N, 1, HV, V});
  st = recurrent_decode_slots(in, Options{}, pool_bcast, slots.view(), o.view());
  EXPECT_NE(st.message().find("state_pool has overlapping elements"), std::string::npos) << st.message();
  EXPECT_TRUE(all_sentinel(pool));
}

// Reversed views (negative strides, as NumPy's x[::-1] gives) are read and written where they lie: o and
// final_state written through reversed views equal the contiguous results bit for bit, on every path.
TEST(BadInput, ReversedOutputViewsAreWrittenInPlace) {
  for (const auto& [name, fn] : entries()) {
    Call c = make_call();
    Tensor o(DType::kF32, {1, c.T, c.HV, c.V}), state(DType::kF64, {c.N, c.HV, c.K, c.V});
    if (name != "reference") state = Tensor(DType::kF32, state.shape);
    ASSERT_TRUE(fn(c.in, c.opt, Outputs{o.view(), state.view()}).ok()) << name;
    Tensor o_rev(o.dtype, o.shape), s_rev(state.dtype, state.shape);
    const int64_t es = static_cast<int64_t>(dtype_size(state.dtype));
    // o reversed in time; final_state reversed along V (its last element first)
    TensorView ov(o_rev.bytes.data() + (c.T - 1) * c.HV * c.V * 4, DType::kF32, o.shape,
                  {c.T * c.HV * c.V, -c.HV * c.V, c.V, 1});
    TensorView sv(s_rev.bytes.data() + (c.V - 1) * es, state.dtype, state.shape,
                  {c.HV * c.K * c.V, c.K * c.V, c.V, -1});
    ASSERT_TRUE(fn(c.in, c.opt, Outputs{ov, sv}).ok()) << name;
    EXPECT_EQ(to_doubles(ov), to_doubles(o.view())) << name;
    EXPECT_EQ(to_doubles(sv), to_doubles(state.view())) << name;
  }
}

}  // namespace
}  // namespace hanpu
