// Bad input gets a Status naming the argument with expected vs actual values; never a crash. Every entry
// point shares the same checks (ops/problem.cpp), so each case is run through all three.
#include <gtest/gtest.h>

#include <functional>

#include "test_util.h"

namespace hanpu {
namespace {

using testing::tensor_of;

struct Case {
  TensorFile f;
  Options opt;
  std::optional<Tensor> o_override, state_override;
};

Case valid_case(Kind kind = Kind::kGdn) {
  Case c;
  c.f = testing::small_problem(kind, DType::kF32, 1, 10, 2, 4, 8, 6, 1);
  c.opt.kind = kind;
  return c;
}

// Runs every entry point on the case; all must agree on the status. Returns it.
Status run_all(Case& c) {
  Inputs in;
  Status st = bind_inputs(c.f, &in);
  if (!st.ok()) return st;
  const bool shapes_ok = in.q.rank() == 4 && in.v.rank() == 4;
  const int64_t B = shapes_ok ? in.q.shape[0] : 1, T = shapes_ok ? in.q.shape[1] : 1;
  const int64_t HV = shapes_ok ? in.v.shape[2] : 1, V = shapes_ok ? in.v.shape[3] : 1;
  const int64_t K = shapes_ok ? in.q.shape[3] : 1;
  const int64_t N = in.cu_seqlens && in.cu_seqlens->rank() == 1 ? in.cu_seqlens->shape[0] - 1 : B;
  Tensor o = c.o_override ? *c.o_override : Tensor(DType::kF32, {B, T, HV, V});
  Tensor s = c.state_override ? *c.state_override : Tensor(DType::kF32, {std::max<int64_t>(N, 0), HV, K, V});
  if (c.opt.state_v_first && !c.state_override) s = Tensor(DType::kF32, {std::max<int64_t>(N, 0), HV, V, K});
  Outputs out{o.view(), s.view()};
  const Status a = chunk_forward(in, c.opt, out);
  if (c.opt.chunk_size != 64) return a;  // only the chunk path reads chunk_size
  const Status b = recurrent_forward(in, c.opt, out);
  EXPECT_EQ(a.message(), b.message()) << "chunk and recurrent disagree";
  if (!c.state_override) {  // the reference also accepts an F64 final state
    const Status r = reference_forward(in, c.opt, out);
    EXPECT_EQ(a.message(), r.message()) << "chunk and reference disagree";
  }
  return a;
}

void expect_error(Case c, const std::string& fragment, StatusCode code = StatusCode::kInvalidArgument) {
  const Status s = run_all(c);
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_NE(s.message().find(fragment), std::string::npos) << "message: " << s.message() << "\nwanted: " << fragment;
}

TEST(Validation, ValidCasePasses) {
  for (Kind kind : {Kind::kGdn, Kind::kKda}) {
    Case c = valid_case(kind);
    EXPECT_TRUE(run_all(c).ok());
  }
}

TEST(Validation, WrongRankOrShape) {
  Case c = valid_case();
  c.f.tensors["q"] = Tensor(DType::kF32, {10, 2, 8});
  expect_error(c, "q must have rank 4, got shape [10, 2, 8]");
  c = valid_case();
  c.f.tensors["k"] = Tensor(DType::kF32, {1, 10, 2, 9});
  expect_error(c, "k must have shape [B, T, H, K] (the shape of q) = [1, 10, 2, 8], got [1, 10, 2, 9]");
  c = valid_case();
  c.f.tensors["v"] = Tensor(DType::kF32, {1, 11, 4, 6});
  expect_error(c, "v must have shape [B, T, HV, V] with B, T = 1, 10 as q, got [1, 11, 4, 6]");
  c = valid_case();
  c.f.tensors["beta"] = Tensor(DType::kF32, {1, 10, 2});
  expect_error(c, "beta must have shape [B, T, HV] = [1, 10, 4], got [1, 10, 2]");
  c = valid_case(Kind::kKda);
  c.f.tensors["g"] = Tensor(DType::kF32, {1, 10, 4});
  expect_error(c, "g must have rank 4, got shape [1, 10, 4]");
  c = valid_case();
  c.o_override = Tensor(DType::kF32, {1, 10, 4, 5});
  expect_error(c, "o must have shape [B, T, HV, V] = [1, 10, 4, 6], got [1, 10, 4, 5]");
}

TEST(Validation, HeadsAndDimensions) {
  Case c = valid_case();
  c.f.tensors["v"] = Tensor(DType::kF32, {1, 10, 3, 6});
  c.f.tensors["beta"] = Tensor(DType::kF32, {1, 10, 3});
  c.f.tensors["g"] = Tensor(DType::kF32, {1, 10, 3});
  expect_error(c, "v.shape[2] (HV) = 3 must be a positive multiple of q.shape[2] (H) = 2");
  c = valid_case();
  c.f.tensors["q"] = Tensor(DType::kF32, {1, 10, 2, 300});
  expect_error(c, "q.shape[3] (K) = 300, expected 1..256");
  c = valid_case();
  c.f.tensors["v"] = Tensor(DType::kF32, {1, 10, 4, 257});
  expect_error(c, "v.shape[3] (V) = 257, expected 1..256");
  c = valid_case();
  c.f.tensors["q"] = Tensor(DType::kF32, {1, 0, 2, 8});
  expect_error(c, "q.shape[1] (T) must be >= 1, got 0");
}

TEST(Validation, Options) {
  Case c = valid_case();
  c.opt.chunk_size = 48;
  const Status s = run_all(c);
  EXPECT_NE(s.message().find("chunk_size must be 16, 32 or 64, got 48"), std::string::npos);
  c = valid_case();
  c.opt.lower_bound = -5.0;
  c.opt.use_gate_in_kernel = true;
  expect_error(c, "lower_bound applies to KDA only");
  c = valid_case(Kind::kKda);
  c.opt.lower_bound = -5.0;
  expect_error(c, "lower_bound needs use_gate_in_kernel");
  c = valid_case(Kind::kKda);
  c.opt.lower_bound = 1.0;
  c.opt.use_gate_in_kernel = true;
  expect_error(c, "lower_bound must be finite and < 0");
  c = valid_case();
  c.opt.allow_neg_eigval = true;
  expect_error(c, "allow_neg_eigval needs use_beta_sigmoid_in_kernel");
  c = valid_case();
  c.opt.scale = NAN;
  expect_error(c, "scale must be finite");
}

TEST(Validation, InKernelGateParameters) {
  Case c = valid_case();
  c.opt.use_gate_in_kernel = true;
  expect_error(c, "A_log is required with use_gate_in_kernel");
  c.f.tensors["A_log"] = Tensor(DType::kF32, {4});
  EXPECT_TRUE(run_all(c).ok());
  c.f.tensors["dt_bias"] = Tensor(DType::kF32, {32});
  expect_error(c, "dt_bias must have shape [HV] = [4], got [32]");
  Case k = valid_case(Kind::kKda);
  k.opt.use_gate_in_kernel = true;
  k.f.tensors["A_log"] = Tensor(DType::kF32, {4});
  k.f.tensors["dt_bias"] = Tensor(DType::kF32, {4});
  expect_error(k, "dt_bias must have shape [HV * K] = [32], got [4]");
}

TEST(Validation, CuSeqlens) {
  auto with_cu = [](std::vector<double> cu, int64_t B = 1) {
    Case c;
    c.f = testing::small_problem(Kind::kGdn, DType::kF32, B, 10, 1, 1, 4, 4, 2);
    c.f.tensors["cu_seqlens"] = tensor_of(DType::kI64, {static_cast<int64_t>(cu.size())}, cu);
    return c;
  };
  EXPECT_TRUE(run_all(*std::make_unique<Case>(with_cu({0, 3, 3, 10}))).ok());
  expect_error(with_cu({1, 10}), "cu_seqlens[0] must be 0, got 1");
  expect_error(with_cu({0, 6, 4, 10}), "cu_seqlens must be non-decreasing: cu_seqlens[2] = 4 < cu_seqlens[1] = 6");
  expect_error(with_cu({0, 4, 9}), "cu_seqlens[-1] must equal T = 10, got 9");
  expect_error(with_cu({0, 10}, 2), "cu_seqlens needs batch size 1, got q.shape[0] (B) = 2");
  expect_error(with_cu({0}), "cu_seqlens must have at least 2 entries");
  Case c = with_cu({0, 10});
  c.f.tensors["cu_seqlens"] = tensor_of(DType::kF32, {2}, {0, 10});
  expect_error(c, "cu_seqlens.dtype must be I64, got F32");
}

TEST(Validation, States) {
  Case c = valid_case();
  c.f.tensors["initial_state"] = Tensor(DType::kF32, {1, 4, 6, 8});
  expect_error(c, "initial_state must have shape [N, HV, K, V] = [1, 4, 8, 6], got [1, 4, 6, 8]");
  c.opt.state_v_first = true;  // the same tensor is right for the v-first layout
  EXPECT_TRUE(run_all(c).ok());
  c = valid_case();
  c.f.tensors["initial_state"] = Tensor(DType::kI64, {1, 4, 8, 6});
  expect_error(c, "initial_state.dtype must be F64, F32, F16 or BF16, got I64");
  c = valid_case();
  c.state_override = Tensor(DType::kF16, {1, 4, 8, 6});
  expect_error(c, "final_state.dtype must be F32");
  c = valid_case();
  c.state_override = Tensor(DType::kF32, {2, 4, 8, 6});
  expect_error(c, "final_state must have shape [N, HV, K, V] = [1, 4, 8, 6], got [2, 4, 8, 6]");
}

TEST(Validation, DtypesViewsAndMissingTensors) {
  Case c = valid_case();
  c.f.tensors["q"] = Tensor(DType::kI64, {1, 10, 2, 8});
  expect_error(c, "q.dtype must be F64, F32, F16 or BF16, got I64");
  c = valid_case();
  c.f.tensors.erase("beta");
  expect_error(c, "missing tensor 'beta'", StatusCode::kNotFound);

  Case v = valid_case();
  Inputs in;
  ASSERT_TRUE(bind_inputs(v.f, &in).ok());
  Tensor o(DType::kF32, {1, 10, 4, 6});
  Inputs bad = in;
  bad.k.data = nullptr;
  Status s = chunk_forward(bad, v.opt, Outputs{o.view(), std::nullopt});
  EXPECT_NE(s.message().find("k.data is null"), std::string::npos) << s.message();
  bad = in;
  bad.v.strides = {1, 2};
  s = chunk_forward(bad, v.opt, Outputs{o.view(), std::nullopt});
  EXPECT_NE(s.message().find("v has 2 strides for rank 4"), std::string::npos) << s.message();
}

TEST(Validation, CheckFiniteNamesTheTensorAndElement) {
  Case c = valid_case();
  std::vector<double> v = to_doubles(c.f.find("v")->view());
  v[5] = NAN;
  c.f.tensors["v"] = tensor_of(DType::kF32, {1, 10, 4, 6}, v);
  c.opt.check_finite = true;
  expect_error(c, "v has a non-finite value (nan) at flat index 5");
}

// Without check_finite a NaN propagates within its own (sequence, value head) and nowhere else; a NaN in
// v even stays in its own value column (u, S and o are column-separable along V).
TEST(Validation, NonFiniteInputsStayInTheirSequenceAndHead) {
  for (Kind kind : {Kind::kGdn, Kind::kKda}) {
    TensorFile f = testing::small_problem(kind, DType::kF32, 2, 20, 1, 2, 8, 4, 3);
    std::vector<double> v = to_doubles(f.find("v")->view());
    v[((0 * 20 + 5) * 2 + 1) * 4 + 2] = NAN;  // batch 0, token 5, value head 1
    f.tensors["v"] = tensor_of(DType::kF32, {2, 20, 2, 4}, v);
    Inputs in;
    ASSERT_TRUE(bind_inputs(f, &in).ok());
    Options opt;
    opt.kind = kind;
    for (auto fn : {chunk_forward, recurrent_forward}) {
      testing::Result r;
      ASSERT_TRUE(testing::run_op(fn, in, opt, DType::kF32, DType::kF32, &r).ok());
      const std::vector<double> o = to_doubles(r.o.view()), s = to_doubles(r.state.view());
      for (int64_t b = 0; b < 2; ++b) {
        for (int64_t hv = 0; hv < 2; ++hv) {
          if (b == 0 && hv == 1) continue;  // the poisoned (sequence, head)
          for (int64_t t = 0; t < 20; ++t) {
            for (int64_t j = 0; j < 4; ++j) EXPECT_TRUE(std::isfinite(o[((b * 20 + t) * 2 + hv) * 4 + j]));
          }
          for (int64_t j = 0; j < 32; ++j) EXPECT_TRUE(std::isfinite(s[(b * 2 + hv) * 32 + j]));
        }
      }
      EXPECT_TRUE(std::isnan(o[((0 * 20 + 19) * 2 + 1) * 4 + 2]));
    }
  }
}

}  // namespace
}  // namespace hanpu
