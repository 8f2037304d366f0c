// Chunkwise prefill against the fp64 reference across the option space and the edge shapes.
#include <gtest/gtest.h>

#include <cmath>

#include "test_util.h"
#include "verify/verify.h"

namespace hanpu {
namespace {

using testing::nmse_of;
using testing::Result;
using testing::run_op;
using testing::small_problem;

TEST(Chunk, RandomInstancesAcrossTheOptionSpacePassTheirBars) {
  // 144 instances: every (kind, dtype, scenario) group twice, with a seed `hanpu verify` does not use.
  for (int i = 0; i < 144; ++i) {
    const InstanceResult r = run_instance(make_instance(20261129, i));
    EXPECT_TRUE(r.passed) << r.kind << " " << r.dtype << " " << r.scenario << " " << r.shape << ": chunk o "
                          << r.chunk_o << " S " << r.chunk_s << " rec o " << r.rec_o << " S " << r.rec_s << " bars "
                          << r.bar_o << " " << r.bar_s << " (" << r.precision << ", fla o " << r.fla_o << " S " << r.fla_s << ") cvr o "
                          << r.cvr_o << " S " << r.cvr_s << " " << r.error;
  }
}

TEST(Chunk, ChunkSizesAndSequenceLengthsAroundTheChunk) {
  for (Kind kind : {Kind::kGdn, Kind::kKda}) {
    for (int C : {16, 32, 64}) {
      for (int64_t T : {int64_t{1}, int64_t{C - 1}, int64_t{C}, int64_t{C + 1}, int64_t{2 * C + 3}}) {
        TensorFile f = small_problem(kind, DType::kF32, 2, T, 1, 2, 17, 9, T * 7 + C);
        Inputs in;
        ASSERT_TRUE(bind_inputs(f, &in).ok());
        Options opt;
        opt.kind = kind;
        opt.chunk_size = C;
        Result ref, got;
        ASSERT_TRUE(run_op(reference_forward, in, opt, DType::kF64, DType::kF64, &ref).ok());
        ASSERT_TRUE(run_op(chunk_forward, in, opt, DType::kF32, DType::kF32, &got).ok());
        EXPECT_LT(nmse_of(got.o, ref.o), 1e-10) << kind_name(kind) << " C=" << C << " T=" << T;
        EXPECT_LT(nmse_of(got.state, ref.state), 1e-10) << kind_name(kind) << " C=" << C << " T=" << T;
      }
    }
  }
}

TEST(Chunk, HeadDimensionsFromOneTo256) {
  for (Kind kind : {Kind::kGdn, Kind::kKda}) {
    for (auto [K, V] : {std::pair<int64_t, int64_t>{1, 1}, {1, 256}, {256, 1}, {256, 256}, {100, 60}}) {
      TensorFile f = small_problem(kind, DType::kF32, 1, 70, 1, 1, K, V, K + V);
      Inputs in;
      ASSERT_TRUE(bind_inputs(f, &in).ok());
      Options opt;
      opt.kind = kind;
      Result ref, got;
      ASSERT_TRUE(run_op(reference_forward, in, opt, DType::kF64, DType::kF64, &ref).ok());
      ASSERT_TRUE(run_op(chunk_forward, in, opt, DType::kF32, DType::kF32, &got).ok());
      EXPECT_LT(nmse_of(got.o, ref.o), 1e-10) << K << "x" << V;
      EXPECT_LT(nmse_of(got.state, ref.state), 1e-10) << K << "x" << V;
    }
  }
}

// T = 2, K = V = 1, scale 1, g = log 0.5, beta = 0.5, q = (1, 2), k = (1, 1), v = (2, 3):
//   t0: S = 0.5 * 0 = 0,    u = 0.5 (2 - 0)   = 1,    S = 1,    o = 1 * 1 = 1
//   t1: S = 0.5 * 1 = 0.5,  u = 0.5 (3 - 0.5) = 1.25, S = 1.75, o = 1.75 * 2 = 3.5
TEST(Chunk, HandComputedTwoTokenExample) {
  using testing::tensor_of;
  for (Kind kind : {Kind::kGdn, Kind::kKda}) {
    TensorFile f;
    f.tensors["q"] = tensor_of(DType::kF32, {1, 2, 1, 1}, {1, 2});
    f.tensors["k"] = tensor_of(DType::kF32, {1, 2, 1, 1}, {1, 1});
    f.tensors["v"] = tensor_of(DType::kF32, {1, 2, 1, 1}, {2, 3});
    f.tensors["beta"] = tensor_of(DType::kF32, {1, 2, 1}, {0.5, 0.5});
    f.tensors["g"] = kind == Kind::kGdn ? tensor_of(DType::kF32, {1, 2, 1}, {std::log(0.5), std::log(0.5)})
                                        : tensor_of(DType::kF32, {1, 2, 1, 1}, {std::log(0.5), std::log(0.5)});
    Inputs in;
    ASSERT_TRUE(bind_inputs(f, &in).ok());
    Options opt;
    opt.kind = kind;
    opt.scale = 1.0;
    const std::pair<testing::OpFn, DType> paths[] = {
        {reference_forward, DType::kF64}, {chunk_forward, DType::kF32}, {recurrent_forward, DType::kF32}};
    for (auto [fn, state_dtype] : paths) {
      Result r;
      ASSERT_TRUE(run_op(fn, in, opt, DType::kF64, state_dtype, &r).ok());
      const std::vector<double> o = to_doubles(r.o.view()), s = to_doubles(r.state.view());
      EXPECT_NEAR(o[0], 1.0, 1e-6);
      EXPECT_NEAR(o[1], 3.5, 1e-6);
      EXPECT_NEAR(s[0], 1.75, 1e-6);
    }
  }
}

// Copies `t` into a buffer with every dimension padded by one element and returns a strided view of it.
TensorView padded_view(const Tensor& t, std::vector<float>& storage) {
  std::vector<int64_t> padded(t.shape.size()), strides(t.shape.size());
  int64_t total = 1;
  for (int d = static_cast<int>(t.shape.size()) - 1; d >= 0; --d) {
    strides[d] = total;
    padded[d] = t.shape[d] + 1;
    total *= padded[d];
  }
  storage.assign(total + 1, NAN);  // +1: start one float in, so the view is not 8-byte aligned
  const std::vector<double> v = to_doubles(t.view());
  std::vector<int64_t> idx(t.shape.size(), 0);
  for (std::size_t i = 0; i < v.size(); ++i) {
    int64_t off = 1;
    for (std::size_t d = 0; d < idx.size(); ++d) off += idx[d] * strides[d];
    storage[off] = static_cast<float>(v[i]);
    for (int d = static_cast<int>(idx.size()) - 1; d >= 0; --d) {
      if (++idx[d] < t.shape[d]) break;
      idx[d] = 0;
    }
  }
  return TensorView(storage.data() + 1, DType::kF32, t.shape, strides);
}

TEST(Chunk, StridedUnalignedViewsGiveBitIdenticalResults) {
  for (Kind kind : {Kind::kGdn, Kind::kKda}) {
    TensorFile f = small_problem(kind, DType::kF32, 2, 40, 2, 4, 12, 10, 5);
    std::mt19937_64 rng(9);
    f.tensors["initial_state"] = testing::random_tensor(DType::kF32, {2, 4, 12, 10}, rng);
    Inputs in;
    ASSERT_TRUE(bind_inputs(f, &in).ok());
    Options opt;
    opt.kind = kind;
    opt.chunk_size = 16;
    Result base;
    ASSERT_TRUE(run_op(chunk_forward, in, opt, DType::kF32, DType::kF32, &base).ok());
    std::vector<float> sq, sk, sv, sg, sb, ss, so, sf;
    Inputs strided = in;
    strided.q = padded_view(*f.find("q"), sq);
    strided.k = padded_view(*f.find("k"), sk);
    strided.v = padded_view(*f.find("v"), sv);
    strided.g = padded_view(*f.find("g"), sg);
    strided.beta = padded_view(*f.find("beta"), sb);
    strided.initial_state = padded_view(*f.find("initial_state"), ss);
    const TensorView o = padded_view(base.o, so), fs = padded_view(base.state, sf);
    ASSERT_TRUE(chunk_forward(strided, opt, Outputs{o, fs}).ok());
    EXPECT_EQ(to_doubles(o), to_doubles(base.o.view()));
    EXPECT_EQ(to_doubles(fs), to_doubles(base.state.view()));
  }
}

TEST(Chunk, FinalStateIsOptionalAndOutputFollowsTheRequestedDtype) {
  TensorFile f = small_problem(Kind::kGdn, DType::kBF16, 1, 20, 1, 1, 8, 8, 3);
  Inputs in;
  ASSERT_TRUE(bind_inputs(f, &in).ok());
  Options opt;
  Tensor o16(DType::kBF16, {1, 20, 1, 8}), o32(DType::kF32, {1, 20, 1, 8});
  ASSERT_TRUE(chunk_forward(in, opt, Outputs{o16.view(), std::nullopt}).ok());
  ASSERT_TRUE(chunk_forward(in, opt, Outputs{o32.view(), std::nullopt}).ok());
  const std::vector<double> a = to_doubles(o16.view()), b = to_doubles(o32.view());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], round_to_dtype(b[i], DType::kBF16));
}

TEST(Chunk, KdaWithGatesOfMinus1000IsFiniteAndAccurate) {
  TensorFile f = small_problem(Kind::kKda, DType::kF32, 1, 150, 1, 2, 32, 16, 11);
  std::vector<double> g = to_doubles(f.find("g")->view());
  for (std::size_t i = 0; i < g.size(); i += 7) g[i] = -1000.0;
  f.tensors["g"] = testing::tensor_of(DType::kF32, {1, 150, 2, 32}, g);
  Inputs in;
  ASSERT_TRUE(bind_inputs(f, &in).ok());
  Options opt;
  opt.kind = Kind::kKda;
  Result ref, got;
  ASSERT_TRUE(run_op(reference_forward, in, opt, DType::kF64, DType::kF64, &ref).ok());
  ASSERT_TRUE(run_op(chunk_forward, in, opt, DType::kF32, DType::kF32, &got).ok());
  EXPECT_TRUE(testing::all_finite(got.o));
  EXPECT_LT(nmse_of(got.o, ref.o), 1e-8);
  EXPECT_LT(nmse_of(got.state, ref.state), 1e-8);
}

}  // namespace
}  // namespace hanpu
