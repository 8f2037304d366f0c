// The layer (hanpu/layer.h) against its fp64 reference (layer/reference.h) for each model layout, prefill
// with and without carried state, continuous-batching decode, the bf16 mode, checkpoints, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>

#include "hanpu/layer.h"
#include "hanpu/safetensors.h"
#include "layer/layer_impl.h"
#include "layer/random_weights.h"
#include "layer/reference.h"
#include "test_util.h"
#include "verify/verify.h"

namespace hanpu {
namespace {

using layer::lookup_in;
using layer::random_layer_weights;
using testing::random_tensor;

// Small shapes of each layout; HV = 2 H exercises grouped value heads, K != V the GDN head dims.
LayerSpec small_spec(LayerArch arch) {
  switch (arch) {
    case LayerArch::kQwen3Next: return {arch, 48, 2, 4, 16, 24, 4, 1e-6};
    case LayerArch::kQwen3_5: return {arch, 40, 2, 4, 32, 16, 4, 1e-6};
    case LayerArch::kKimiLinear: return {arch, 48, 3, 3, 16, 16, 4, 1e-5};
  }
  return {};
}

// max |a - b| / max |b|: the error relative to the output's scale.
double rel_err(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::abs(a[i] - b[i]));
    den = std::max(den, std::abs(b[i]));
  }
  return num / den;
}
std::vector<double> slice(const std::vector<double>& v, int64_t begin, int64_t n) {
  return std::vector<double>(v.begin() + begin, v.begin() + begin + n);
}

class LayerArchTest : public ::testing::TestWithParam<LayerArch> {};

std::string arch_test_name(const ::testing::TestParamInfo<LayerArch>& p) { return layer_arch_name(p.param); }

// fp32 layer vs the fp64 reference: B = 2 sequences of 70 tokens (a partial second chunk).
TEST_P(LayerArchTest, PrefillMatchesTheReference) {
  const LayerSpec spec = small_spec(GetParam());
  const TensorFile w = random_layer_weights(spec, DType::kF32, 11);
  std::unique_ptr<Layer> L;
  ASSERT_TRUE(Layer::create(spec, lookup_in(w, ""), Precision::kExact, &L).ok());
  EXPECT_EQ(L->activation_dtype(), DType::kF32);
  std::mt19937_64 rng(5);
  const int64_t B = 2, T = 70, D = spec.hidden_size;
  const Tensor x = random_tensor(DType::kF32, {B, T, D}, rng);
  Tensor y(DType::kF32, {B, T, D});
  Tensor conv(DType::kF32, {B, spec.conv_dim(), spec.conv_kernel});
  Tensor rec(DType::kF32, {B, spec.num_v_heads, spec.head_k_dim, spec.head_v_dim});
  const LayerState state{conv.view(), rec.view(), false};
  ASSERT_TRUE(L->prefill(x.view(), y.view(), &state, LayerRunConfig{}).ok());
  layer::ReferenceResult ref;
  ASSERT_TRUE(layer::reference_layer(spec, lookup_in(w, ""), x.view(), nullptr, nullptr, &ref).ok());
  EXPECT_LT(rel_err(to_doubles(y.view()), ref.y), 1e-5);
  EXPECT_LT(rel_err(to_doubles(rec.view()), ref.recurrent), 1e-5);
  EXPECT_LT(rel_err(to_doubles(conv.view()), ref.conv), 1e-6);  // the last Kc projected inputs
}

// A prompt run in two calls (the second continuing the first's state) equals one call over the whole prompt,
// with the first part shorter than the conv kernel (its conv state is zero-padded).
TEST_P(LayerArchTest, ContinuedPrefillEqualsOnePass) {
  const LayerSpec spec = small_spec(GetParam());
  const TensorFile w = random_layer_weights(spec, DType::kF32, 12);
  std::unique_ptr<Layer> L;
  ASSERT_TRUE(Layer::create(spec, lookup_in(w, ""), Precision::kExact, &L).ok());
  std::mt19937_64 rng(6);
  const int64_t B = 2, D = spec.hidden_size;
  for (int64_t t1 : {2, 40}) {
    const int64_t t2 = 33;
    const Tensor x1 = random_tensor(DType::kF32, {B, t1, D}, rng), x2 = random_tensor(DType::kF32, {B, t2, D}, rng);
    Tensor y1(DType::kF32, {B, t1, D}), y2(DType::kF32, {B, t2, D});
    Tensor conv(DType::kF32, {B, spec.conv_dim(), spec.conv_kernel});
    Tensor rec(DType::kF32, {B, spec.num_v_heads, spec.head_k_dim, spec.head_v_dim});
    LayerState state{conv.view(), rec.view(), false};
    ASSERT_TRUE(L->prefill(x1.view(), y1.view(), &state, LayerRunConfig{}).ok());
    layer::ReferenceResult r1;
    ASSERT_TRUE(layer::reference_layer(spec, lookup_in(w, ""), x1.view(), nullptr, nullptr, &r1).ok());
    EXPECT_LT(rel_err(to_doubles(conv.view()), r1.conv), 1e-6) << "t1 = " << t1;
    state.continuing = true;
    ASSERT_TRUE(L->prefill(x2.view(), y2.view(), &state, LayerRunConfig{}).ok());
    // The reference continues from its own carried state.
    Tensor c0(DType::kF64, conv.shape), s0(DType::kF64, rec.shape);
    fill_from_doubles(c0, r1.conv);
    fill_from_doubles(s0, r1.recurrent);
    const TensorView c0v = c0.view(), s0v = s0.view();
    layer::ReferenceResult r2;
    ASSERT_TRUE(layer::reference_layer(spec, lookup_in(w, ""), x2.view(), &c0v, &s0v, &r2).ok());
    EXPECT_LT(rel_err(to_doubles(y2.view()), r2.y), 1e-5) << "t1 = " << t1;
    EXPECT_LT(rel_err(to_doubles(rec.view()), r2.recurrent), 1e-5) << "t1 = " << t1;
    EXPECT_LT(rel_err(to_doubles(conv.view()), r2.conv), 1e-6) << "t1 = " << t1;
  }
}

// Decode: three sequences in slots 4, 0 and 2 of a 5-slot pool plus a padding row; each step's y row equals
// the reference's output for that token of the whole sequence, and the padding row is zero. The same steps on
// a conv pool whose windows are strided (stored [P, Kc, C], viewed as [P, C, Kc]) give the same bits: the
// dense pool's block shift and the strided pool's element moves hold the same windows.
TEST_P(LayerArchTest, DecodeStepsFollowTheReference) {
  const LayerSpec spec = small_spec(GetParam());
  const TensorFile w = random_layer_weights(spec, DType::kF32, 13);
  std::unique_ptr<Layer> L;
  ASSERT_TRUE(Layer::create(spec, lookup_in(w, ""), Precision::kExact, &L).ok());
  std::mt19937_64 rng(7);
  const int64_t S = 3, T0 = 9, steps = 4, D = spec.hidden_size, P = 5, C = spec.conv_dim(), Kc = spec.conv_kernel;
  const int64_t HV = spec.num_v_heads, K = spec.head_k_dim, V = spec.head_v_dim;
  const Tensor xs = random_tensor(DType::kF32, {S, T0 + steps, D}, rng);
  layer::ReferenceResult ref;
  ASSERT_TRUE(layer::reference_layer(spec, lookup_in(w, ""), xs.view(), nullptr, nullptr, &ref).ok());
  // Prefill the prompts, then copy each sequence's state into its slot.
  const TensorView prompt(xs.bytes.data(), DType::kF32, {S, T0, D}, {(T0 + steps) * D, D, 1});
  Tensor y0(DType::kF32, {S, T0, D}), conv(DType::kF32, {S, C, Kc}), rec(DType::kF32, {S, HV, K, V});
  const LayerState st{conv.view(), rec.view(), false};
  ASSERT_TRUE(L->prefill(prompt, y0.view(), &st, LayerRunConfig{}).ok());
  Tensor conv_pool(DType::kF32, {P, C, Kc}), state_pool(DType::kF32, {P, HV, K, V});
  const int64_t slot_of[S] = {4, 0, 2};
  for (int64_t s = 0; s < S; ++s) {
    std::memcpy(conv_pool.bytes.data() + slot_of[s] * C * Kc * 4, conv.bytes.data() + s * C * Kc * 4, C * Kc * 4);
    std::memcpy(state_pool.bytes.data() + slot_of[s] * HV * K * V * 4, rec.bytes.data() + s * HV * K * V * 4, HV * K * V * 4);
  }
  Tensor conv_store_t(DType::kF32, {P, Kc, C}), state_pool_t = state_pool;
  const TensorView conv_pool_t(conv_store_t.bytes.data(), DType::kF32, {P, C, Kc}, {C * Kc, 1, C});
  {
    const std::vector<double> dense = to_doubles(conv_pool.view());
    std::vector<double> t(P * Kc * C);
    for (int64_t q = 0; q < P; ++q)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t j = 0; j < Kc; ++j) t[(q * Kc + j) * C + c] = dense[(q * C + c) * Kc + j];
    fill_from_doubles(conv_store_t, t);
  }
  const Tensor slots = testing::tensor_of(DType::kI64, {S + 1}, {4, -1, 0, 2});  // row 1 is padding
  for (int64_t step = 0; step < steps; ++step) {
    Tensor x(DType::kF32, {S + 1, D}), y(DType::kF32, {S + 1, D});
    const std::vector<double> all = to_doubles(xs.view());
    std::vector<double> xv((S + 1) * D, 0.5);
    const int64_t rows[S] = {0, 2, 3};
    for (int64_t s = 0; s < S; ++s)
      for (int64_t d = 0; d < D; ++d) xv[rows[s] * D + d] = all[(s * (T0 + steps) + T0 + step) * D + d];
    fill_from_doubles(x, xv);
    ASSERT_TRUE(L->decode(x.view(), y.view(), conv_pool.view(), state_pool.view(), slots.view(), LayerRunConfig{}).ok());
    Tensor y_t(DType::kF32, {S + 1, D});
    ASSERT_TRUE(L->decode(x.view(), y_t.view(), conv_pool_t, state_pool_t.view(), slots.view(), LayerRunConfig{}).ok());
    EXPECT_EQ(y_t.bytes, y.bytes) << "strided conv pool, step " << step;
    const std::vector<double> yv = to_doubles(y.view());
    for (int64_t s = 0; s < S; ++s) {
      EXPECT_LT(rel_err(slice(yv, rows[s] * D, D), slice(ref.y, (s * (T0 + steps) + T0 + step) * D, D)), 1e-5)
          << "sequence " << s << " step " << step;
    }
    EXPECT_EQ(slice(yv, D, D), std::vector<double>(D, 0.0));
  }
  const std::vector<double> pool = to_doubles(conv_pool.view()), state = to_doubles(state_pool.view());
  EXPECT_EQ(to_doubles(conv_pool_t), pool);
  for (int64_t s = 0; s < S; ++s) {
    EXPECT_LT(rel_err(slice(pool, slot_of[s] * C * Kc, C * Kc), slice(ref.conv, s * C * Kc, C * Kc)), 1e-6);
    EXPECT_LT(rel_err(slice(state, slot_of[s] * HV * K * V, HV * K * V), slice(ref.recurrent, s * HV * K * V, HV * K * V)),
              1e-5);
  }
  EXPECT_EQ(slice(pool, 1 * C * Kc, C * Kc), std::vector<double>(C * Kc, 0.0));  // slot 1 untouched (zeros)
}

// bf16: weights and activations rounded where transformers' bf16 model rounds them. Against the fp64
// reference on the same (bf16) weights and input, the error is that of a chain of ~8 bf16 roundings
// (2^-9 each) and bf16 GEMM operands: its RMS relative to the output's RMS stays below 2e-2.
TEST_P(LayerArchTest, Bf16ModeStaysWithinBf16Rounding) {
  const LayerSpec spec = small_spec(GetParam());
  const TensorFile w = random_layer_weights(spec, DType::kBF16, 14);
  std::unique_ptr<Layer> L;
  ASSERT_TRUE(Layer::create(spec, lookup_in(w, ""), Precision::kAuto, &L).ok());
  EXPECT_EQ(L->activation_dtype(), DType::kBF16);
  EXPECT_EQ(L->precision(), Precision::kBf16);
  std::mt19937_64 rng(8);
  const Tensor x = random_tensor(DType::kBF16, {2, 70, spec.hidden_size}, rng);
  Tensor y(DType::kBF16, {2, 70, spec.hidden_size});
  ASSERT_TRUE(L->prefill(x.view(), y.view(), nullptr, LayerRunConfig{}).ok());
  layer::ReferenceResult ref;
  ASSERT_TRUE(layer::reference_layer(spec, lookup_in(w, ""), x.view(), nullptr, nullptr, &ref).ok());
  const double rms = std::sqrt(nmse(to_doubles(y.view()), ref.y));
  EXPECT_LT(rms, 2e-2);
  EXPECT_GT(rms, 0.0);  // it did round
}

// bf16 decode: two prompts prefilled with their states out, then one decode step each from slots 1 and 0 of a
// bf16 conv pool, dense ([P, C, Kc]) and strided (stored [P, Kc, C]): the same y bits and the same windows
// after the step, which are the windows a one-token continuing prefill of the same tokens leaves (the conv
// state is data movement: its bits, not its rounding, are the contract).
TEST_P(LayerArchTest, Bf16DecodeOnDenseAndStridedConvPools) {
  const LayerSpec spec = small_spec(GetParam());
  const TensorFile w = random_layer_weights(spec, DType::kBF16, 15);
  std::unique_ptr<Layer> L;
  ASSERT_TRUE(Layer::create(spec, lookup_in(w, ""), Precision::kAuto, &L).ok());
  std::mt19937_64 rng(9);
  const int64_t S = 2, T0 = 7, D = spec.hidden_size, P = 3, C = spec.conv_dim(), Kc = spec.conv_kernel;
  const int64_t HV = spec.num_v_heads, K = spec.head_k_dim, V = spec.head_v_dim;
  const Tensor prompt = random_tensor(DType::kBF16, {S, T0, D}, rng), x = random_tensor(DType::kBF16, {S, D}, rng);
  Tensor y0(DType::kBF16, {S, T0, D}), conv(DType::kBF16, {S, C, Kc}), rec(DType::kF32, {S, HV, K, V});
  const LayerState st{conv.view(), rec.view(), false};
  ASSERT_TRUE(L->prefill(prompt.view(), y0.view(), &st, LayerRunConfig{}).ok());
  // Sequence s in slot 1 - s: dense pool, strided pool, and the recurrent pools (one per decode).
  Tensor conv_pool(DType::kBF16, {P, C, Kc}), conv_store_t(DType::kBF16, {P, Kc, C});
  Tensor state_pool(DType::kF32, {P, HV, K, V});
  const auto* cs = reinterpret_cast<const uint16_t*>(conv.bytes.data());
  auto* cd = reinterpret_cast<uint16_t*>(conv_pool.bytes.data());
  auto* ct = reinterpret_cast<uint16_t*>(conv_store_t.bytes.data());
  for (int64_t s = 0; s < S; ++s) {
    const int64_t q = 1 - s;
    for (int64_t c = 0; c < C; ++c)
      for (int64_t j = 0; j < Kc; ++j) cd[(q * C + c) * Kc + j] = ct[(q * Kc + j) * C + c] = cs[(s * C + c) * Kc + j];
    std::memcpy(state_pool.bytes.data() + q * HV * K * V * 4, rec.bytes.data() + s * HV * K * V * 4, HV * K * V * 4);
  }
  Tensor state_pool_t = state_pool;
  const TensorView conv_pool_t(conv_store_t.bytes.data(), DType::kBF16, {P, C, Kc}, {C * Kc, 1, C});
  const Tensor slots = testing::tensor_of(DType::kI64, {S}, {1, 0});
  Tensor y(DType::kBF16, {S, D}), y_t(DType::kBF16, {S, D});
  ASSERT_TRUE(L->decode(x.view(), y.view(), conv_pool.view(), state_pool.view(), slots.view(), LayerRunConfig{}).ok());
  ASSERT_TRUE(L->decode(x.view(), y_t.view(), conv_pool_t, state_pool_t.view(), slots.view(), LayerRunConfig{}).ok());
  EXPECT_EQ(y_t.bytes, y.bytes);
  EXPECT_EQ(to_doubles(conv_pool_t), to_doubles(conv_pool.view()));
  // The continuing prefill of the same token from the same states.
  const TensorView x1(const_cast<unsigned char*>(x.bytes.data()), DType::kBF16, {S, 1, D});
  Tensor y1(DType::kBF16, {S, 1, D});
  const LayerState cont{conv.view(), rec.view(), true};
  ASSERT_TRUE(L->prefill(x1, y1.view(), &cont, LayerRunConfig{}).ok());
  const auto* after = reinterpret_cast<const uint16_t*>(conv.bytes.data());
  for (int64_t s = 0; s < S; ++s)
    for (int64_t i = 0; i < C * Kc; ++i)
      ASSERT_EQ(cd[(1 - s) * C * Kc + i], after[s * C * Kc + i]) << "sequence " << s << " at " << i;
  // The cores differ (recurrent step vs chunk of one), in bf16 output.
  EXPECT_LT(std::sqrt(nmse(to_doubles(y.view()), to_doubles(y1.view()))), 1e-2);
}

// Workspaces: a freed buffer serves the next call that fits; what the pool keeps is bounded.
TEST(LayerBuffers, ReusedAndBounded) {
  BufferPool pool;
  unsigned char* first = nullptr;
  {
    BufferPool::Lease a = pool.take(1000);
    first = a.get();
  }
  EXPECT_EQ(pool.retained_bytes(), 1000u);
  {
    BufferPool::Lease b = pool.take(600);  // the kept 1000-byte buffer fits
    EXPECT_EQ(b.get(), first);
    EXPECT_EQ(pool.retained_bytes(), 0u);
    BufferPool::Lease c = pool.take(600);  // in use: a new one
    EXPECT_NE(c.get(), first);
  }
  EXPECT_EQ(pool.retained_bytes(), 1600u);
  { BufferPool::Lease big = pool.take(BufferPool::kRetainedBytes + 1); }  // too big to keep
  EXPECT_EQ(pool.retained_bytes(), 1600u);
  for (int i = 0; i < 10; ++i) BufferPool::Lease l = pool.take(1u << 20);  // each reuses one 1 MiB buffer
  EXPECT_EQ(pool.retained_bytes(), 1600u + (1u << 20));
}

INSTANTIATE_TEST_SUITE_P(Layer, LayerArchTest,
                         ::testing::Values(LayerArch::kQwen3Next, LayerArch::kQwen3_5, LayerArch::kKimiLinear),
                         arch_test_name);

}  // namespace
}  // namespace hanpu
