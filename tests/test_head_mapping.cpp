// Options::head_mapping: with kTiled, value head hv reads q/k head hv % H (ggml's GGML_OP_GATED_DELTA_NET), which
// by definition is the grouped-free call (G = 1) on q and k tiled to HV heads, q_t[.., hv, :] = q[.., hv % H, :]
// (ggml_repeat's tiling). Every path must give exactly the bits of that call: the same rows reach the same
// arithmetic, only read from another head.
#include <gtest/gtest.h>

#include <cstring>
#include <utility>

#include "test_util.h"

namespace hanpu {
namespace {

using testing::OpFn;
using testing::Result;
using testing::run_op;
using testing::small_problem;

// q or k [B, T, H, K] tiled to [B, T, HV, K]: head hv is head hv % H.
Tensor tile_heads(const Tensor& x, int64_t HV) {
  const int64_t B = x.shape[0], T = x.shape[1], H = x.shape[2], K = x.shape[3];
  const std::size_t row = static_cast<std::size_t>(K) * dtype_size(x.dtype);
  Tensor out(x.dtype, {B, T, HV, K});
  for (int64_t bt = 0; bt < B * T; ++bt) {
    for (int64_t hv = 0; hv < HV; ++hv) {
      std::memcpy(&out.bytes[static_cast<std::size_t>(bt * HV + hv) * row],
                  &x.bytes[static_cast<std::size_t>(bt * H + hv % H) * row], row);
    }
  }
  return out;
}

// The file with q and k tiled to the value heads.
TensorFile with_tiled_qk(const TensorFile& f) {
  TensorFile out = f;
  const int64_t HV = f.find("v")->shape[2];
  out.tensors["q"] = tile_heads(*f.find("q"), HV);
  out.tensors["k"] = tile_heads(*f.find("k"), HV);
  return out;
}

// Two sequences (varlen), their own initial states, H = 2 q/k heads for HV = 6 value heads.
TensorFile varlen_problem(Kind kind, DType dt) {
  const int64_t T = 150, H = 2, HV = 6, K = 48, V = 40, N = 2;
  TensorFile f = small_problem(kind, dt, 1, T, H, HV, K, V, 71);
  std::mt19937_64 rng(72);
  f.tensors["initial_state"] = testing::random_tensor(DType::kF32, {N, HV, K, V}, rng, 0.1);
  f.tensors["cu_seqlens"] = testing::tensor_of(DType::kI64, {N + 1}, {0, 70, T});
  return f;
}

void expect_same_bits(const Result& a, const Result& b, const std::string& what) {
  EXPECT_TRUE(a.o.bytes == b.o.bytes) << what << ": o differs";
  EXPECT_TRUE(a.state.bytes == b.state.bytes) << what << ": final state differs";
}

TEST(HeadMapping, NamesParse) {
  HeadMapping m = HeadMapping::kGrouped;
  EXPECT_TRUE(parse_head_mapping("tiled", &m));
  EXPECT_EQ(m, HeadMapping::kTiled);
  EXPECT_TRUE(parse_head_mapping("grouped", &m));
  EXPECT_EQ(m, HeadMapping::kGrouped);
  EXPECT_FALSE(parse_head_mapping("modulo", &m));
  EXPECT_STREQ(head_mapping_name(HeadMapping::kTiled), "tiled");
}

TEST(HeadMapping, TiledIsTheCallOnTiledQAndKOnEveryPrefillPath) {
  for (Kind kind : {Kind::kGdn, Kind::kKda}) {
    for (DType dt : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(std::string(kind_name(kind)) + " " + dtype_name(dt));
      const TensorFile f = varlen_problem(kind, dt), ft = with_tiled_qk(f);
      Inputs in, in_t;
      ASSERT_TRUE(bind_inputs(f, &in).ok());
      ASSERT_TRUE(bind_inputs(ft, &in_t).ok());
      Options tiled, grouped;
      tiled.kind = grouped.kind = kind;
      tiled.use_qk_l2norm_in_kernel = grouped.use_qk_l2norm_in_kernel = true;
      tiled.head_mapping = HeadMapping::kTiled;
      for (auto [fn, name] : {std::pair<OpFn, const char*>{reference_forward, "reference"},
                              {chunk_forward, "chunk"}, {recurrent_forward, "recurrent"}}) {
        const DType out_dt = fn == reference_forward ? DType::kF64 : DType::kF32;
        Result a, b;
        ASSERT_TRUE(run_op(fn, in, tiled, out_dt, out_dt, &a).ok());
        ASSERT_TRUE(run_op(fn, in_t, grouped, out_dt, out_dt, &b).ok());
        expect_same_bits(a, b, name);
      }
      for (Strategy s : all_strategies()) {
        for (Precision p : {Precision::kExact, Precision::kBf16}) {
          const std::string what = std::string(strategy_name(s)) + " " + precision_name(p);
          tiled.precision = grouped.precision = p;
          EngineConfig cfg;
          cfg.strategy = s;
          cfg.threads = 3;
          Result a, b;
          a.o = Tensor(DType::kF32, {1, 150, 6, 40});
          b.o = a.o;
          a.state = Tensor(DType::kF32, {2, 6, 48, 40});
          b.state = a.state;
          ASSERT_TRUE(engine_forward(in, tiled, cfg, Outputs{a.o.view(), a.state.view()}).ok()) << what;
          ASSERT_TRUE(engine_forward(in_t, grouped, cfg, Outputs{b.o.view(), b.state.view()}).ok()) << what;
          expect_same_bits(a, b, what);
        }
      }
    }
  }
}

TEST(HeadMapping, TiledIsTheCallOnTiledQAndKInDecode) {
  for (Kind kind : {Kind::kGdn, Kind::kKda}) {
    const int64_t N = 3, H = 2, HV = 4, K = 32, V = 24, P = 5;
    const TensorFile f = small_problem(kind, DType::kF32, N, 1, H, HV, K, V, 81), ft = with_tiled_qk(f);
    Inputs in, in_t;
    ASSERT_TRUE(bind_inputs(f, &in).ok());
    ASSERT_TRUE(bind_inputs(ft, &in_t).ok());
    Options tiled, grouped;
    tiled.kind = grouped.kind = kind;
    tiled.head_mapping = HeadMapping::kTiled;
    std::mt19937_64 rng(82);
    const Tensor pool0 = testing::random_tensor(DType::kF32, {P, HV, K, V}, rng, 0.1);
    const Tensor slots = testing::tensor_of(DType::kI64, {N}, {4, -1, 1});
    Tensor pa = pool0, pb = pool0, oa(DType::kF32, {N, 1, HV, V}), ob = oa;
    ASSERT_TRUE(recurrent_decode_slots(in, tiled, pa.view(), slots.view(), oa.view()).ok());
    ASSERT_TRUE(recurrent_decode_slots(in_t, grouped, pb.view(), slots.view(), ob.view()).ok());
    EXPECT_TRUE(pa.bytes == pb.bytes && oa.bytes == ob.bytes) << kind_name(kind) << " recurrent_decode_slots";
    EngineConfig cfg;
    cfg.threads = 2;
    pa = pool0;
    pb = pool0;
    ASSERT_TRUE(engine_decode_slots(in, tiled, cfg, pa.view(), slots.view(), oa.view()).ok());
    ASSERT_TRUE(engine_decode_slots(in_t, grouped, cfg, pb.view(), slots.view(), ob.view()).ok());
    EXPECT_TRUE(pa.bytes == pb.bytes && oa.bytes == ob.bytes) << kind_name(kind) << " engine_decode_slots";
  }
}

// The option changes which heads pair up exactly when there are several q/k heads and several value heads per
// q/k head (for H = 1 or HV = H, hv / G and hv % H are the same head).
TEST(HeadMapping, MattersOnlyWithSeveralHeadsOnBothSides) {
  const auto differs = [](int64_t H, int64_t HV) {
    const TensorFile f = small_problem(Kind::kGdn, DType::kF32, 1, 40, H, HV, 16, 16, 91);
    Inputs in;
    EXPECT_TRUE(bind_inputs(f, &in).ok());
    Options tiled, grouped;
    tiled.head_mapping = HeadMapping::kTiled;
    Result a, b;
    EXPECT_TRUE(run_op(chunk_forward, in, tiled, DType::kF32, DType::kF32, &a).ok());
    EXPECT_TRUE(run_op(chunk_forward, in, grouped, DType::kF32, DType::kF32, &b).ok());
    return a.o.bytes != b.o.bytes;
  };
  EXPECT_TRUE(differs(2, 4));
  EXPECT_TRUE(differs(3, 6));
  EXPECT_FALSE(differs(1, 4));
  EXPECT_FALSE(differs(2, 2));
}

}  // namespace
}  // namespace hanpu
