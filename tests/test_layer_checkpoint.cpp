// Layers from checkpoint directories (config.json + safetensors, single or sharded) and the errors a bad
// checkpoint, config or call gets: each names the file, the tensor or the argument, and nothing is written.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "hanpu/layer.h"
#include "hanpu/safetensors.h"
#include "layer/random_weights.h"
#include "test_util.h"

namespace hanpu {
namespace {

namespace fs = std::filesystem;
using layer::lookup_in;
using layer::random_layer_weights;

const LayerSpec kQwen35{LayerArch::kQwen3_5, 40, 2, 4, 32, 16, 4, 1e-6};
const LayerSpec kKimi{LayerArch::kKimiLinear, 48, 3, 3, 16, 16, 4, 1e-5};

std::string qwen35_config(const std::string& extra = "") {
  return R"({"model_type": "qwen3_5_text", "num_hidden_layers": 4, "hidden_size": 40, "linear_num_key_heads": 2,
             "linear_num_value_heads": 4, "linear_key_head_dim": 32, "linear_value_head_dim": 16,
             "linear_conv_kernel_dim": 4, "rms_norm_eps": 1e-6, "hidden_act": "silu",)" + extra +
         R"( "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"]})";
}

std::string fresh_dir(const std::string& name) {
  const std::string d = ::testing::TempDir() + "hanpu_layer_" + name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}
void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// The layer's tensors under `prefix` (plus an unrelated tensor, as a real checkpoint has).
TensorFile checkpoint_of(const TensorFile& layer_w, const std::string& prefix) {
  TensorFile f;
  for (const auto& [n, t] : layer_w.tensors) f.tensors[prefix + n] = t;
  f.tensors["model.embed_tokens.weight"] = Tensor(DType::kF32, {8, 4});
  return f;
}

std::vector<double> run(const Layer& L, const Tensor& x) {
  Tensor y(DType::kF32, x.shape);
  EXPECT_TRUE(L.prefill(x.view(), y.view(), nullptr, LayerRunConfig{}).ok());
  return to_doubles(y.view());
}

TEST(LayerCheckpoint, LoadsWhatCreateBuildsBitForBit) {
  const std::string dir = fresh_dir("single");
  const TensorFile w = random_layer_weights(kQwen35, DType::kF32, 1);
  write(dir + "/config.json", qwen35_config());
  ASSERT_TRUE(write_safetensors(dir + "/model.safetensors", checkpoint_of(w, "model.layers.1.linear_attn.")).ok());
  std::unique_ptr<Layer> from_dir, direct;
  const Status st = load_layer(dir, 1, Precision::kAuto, &from_dir);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(Layer::create(kQwen35, lookup_in(w, ""), Precision::kExact, &direct).ok());
  EXPECT_EQ(from_dir->precision(), Precision::kExact);
  std::mt19937_64 rng(2);
  const Tensor x = testing::random_tensor(DType::kF32, {1, 20, 40}, rng);
  EXPECT_EQ(run(*from_dir, x), run(*direct, x));
}

TEST(LayerCheckpoint, ShardedMultimodalAndKimiCheckpointForms) {
  // A multimodal Qwen3.5 checkpoint (text_config, model.language_model.*) split over two shards.
  const std::string dir = fresh_dir("sharded");
  const TensorFile w = random_layer_weights(kQwen35, DType::kBF16, 3);
  write(dir + "/config.json", R"({"model_type": "qwen3_5", "text_config": )" + qwen35_config() + "}");
  TensorFile a, b;
  std::string index = R"({"metadata": {}, "weight_map": {)";
  int i = 0;
  for (const auto& [n, t] : w.tensors) {
    const std::string full = "model.language_model.layers.0.linear_attn." + n, shard = i % 2 ? "b.safetensors" : "a.safetensors";
    (i++ % 2 ? b : a).tensors[full] = t;
    index += (i > 1 ? ", \"" : "\"") + full + "\": \"" + shard + "\"";
  }
  write(dir + "/model.safetensors.index.json", index + "}}");
  ASSERT_TRUE(write_safetensors(dir + "/a.safetensors", a).ok());
  ASSERT_TRUE(write_safetensors(dir + "/b.safetensors", b).ok());
  std::unique_ptr<Layer> L;
  const Status st = load_layer(dir, 0, Precision::kAuto, &L);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(L->precision(), Precision::kBf16);  // auto: a bf16 checkpoint runs in bf16
  EXPECT_EQ(L->spec().num_v_heads, 4);

  // Kimi Linear as transformers saves it: linear_attn_config, self_attn.q_conv1d, layer-level f_a_proj.
  const std::string kdir = fresh_dir("kimi");
  write(kdir + "/config.json", R"({"model_type": "kimi_linear", "num_hidden_layers": 2, "hidden_size": 48,
        "linear_attn_config": {"num_heads": 3, "head_dim": 16, "short_conv_kernel_size": 4, "kda_layers": [2],
        "full_attn_layers": [1]}})");
  const TensorFile kw = random_layer_weights(kKimi, DType::kF32, 4);
  ASSERT_TRUE(write_safetensors(kdir + "/model.safetensors", checkpoint_of(kw, "model.layers.1.self_attn.")).ok());
  std::unique_ptr<Layer> K;
  ASSERT_TRUE(load_layer(kdir, 1, Precision::kExact, &K).ok());
  EXPECT_EQ(K->spec().arch, LayerArch::kKimiLinear);
  EXPECT_DOUBLE_EQ(K->spec().rms_norm_eps, 1e-5);
  const Status full = load_layer(kdir, 0, Precision::kExact, &K);
  EXPECT_NE(full.message().find("layer 0 is a 'full_attention' layer"), std::string::npos) << full.message();
}

// Each bad checkpoint or config: the error and the words it must contain.
TEST(LayerCheckpoint, BadCheckpointsAreErrorsNamingFileTensorAndShapes) {
  const TensorFile w = random_layer_weights(kQwen35, DType::kF32, 5);
  struct Case {
    const char* name;
    std::string config;
    std::function<void(TensorFile*)> edit;
    std::vector<std::string> words;
  };
  const std::vector<Case> cases = {
      {"missing_tensor", qwen35_config(), [](TensorFile* f) { f->tensors.erase("model.layers.0.linear_attn.in_proj_z.weight"); },
       {"model.safetensors: model.layers.0.linear_attn.in_proj_z.weight", "missing"}},
      {"misshaped_tensor", qwen35_config(),
       [](TensorFile* f) { f->tensors["model.layers.0.linear_attn.in_proj_b.weight"] = Tensor(DType::kF32, {3, 40}); },
       {"model.layers.0.linear_attn.in_proj_b.weight", "expected shape [4, 40], got [3, 40]"}},
      {"integer_tensor", qwen35_config(),
       [](TensorFile* f) { f->tensors["model.layers.0.linear_attn.A_log"] = Tensor(DType::kI64, {4}); },
       {"model.layers.0.linear_attn.A_log", "dtype I64"}},
      {"unknown_model", R"({"model_type": "llama", "num_hidden_layers": 2})", nullptr,
       {"config.json", "model_type 'llama'"}},
      {"no_linear_fields", R"({"model_type": "qwen3_next", "num_hidden_layers": 4, "hidden_size": 40})", nullptr,
       {"config.json", "linear_num_key_heads: missing"}},
      {"bad_activation", qwen35_config(R"( "hidden_act_unused": 0,)").replace(qwen35_config().find("silu"), 4, "gelu"),
       nullptr, {"config.json", "hidden_act", "gelu"}},
      {"no_layer", qwen35_config(), [](TensorFile* f) { f->tensors.clear(); f->tensors["x"] = Tensor(DType::kF32, {1}); },
       {"no tensor of layer 0", "model.layers.0.linear_attn."}},
  };
  for (const Case& c : cases) {
    const std::string dir = fresh_dir(c.name);
    write(dir + "/config.json", c.config);
    TensorFile f = checkpoint_of(w, "model.layers.0.linear_attn.");
    if (c.edit) c.edit(&f);
    ASSERT_TRUE(write_safetensors(dir + "/model.safetensors", f).ok());
    std::unique_ptr<Layer> L;
    const Status st = load_layer(dir, 0, Precision::kAuto, &L);
    EXPECT_FALSE(st.ok()) << c.name;
    EXPECT_EQ(L, nullptr) << c.name;
    for (const std::string& word : c.words) EXPECT_NE(st.message().find(word), std::string::npos) << c.name << ": " << st.message();
  }
  std::unique_ptr<Layer> L;
  EXPECT_EQ(load_layer(fresh_dir("empty"), 0, Precision::kAuto, &L).code(), StatusCode::kNotFound);
  const std::string dir = fresh_dir("range");
  write(dir + "/config.json", qwen35_config());
  EXPECT_NE(load_layer(dir, 7, Precision::kAuto, &L).message().find("layer 7 does not exist"), std::string::npos);
}

// Bad calls: an error naming the argument, and no output or state written.
TEST(LayerCheckpoint, BadCallsNameTheArgumentAndWriteNothing) {
  const TensorFile w = random_layer_weights(kQwen35, DType::kF32, 6);
  std::unique_ptr<Layer> L;
  ASSERT_TRUE(Layer::create(kQwen35, lookup_in(w, ""), Precision::kExact, &L).ok());
  const int64_t C = kQwen35.conv_dim();
  Tensor x(DType::kF32, {1, 5, 40}), y(DType::kF32, {1, 5, 40}), x_wrong(DType::kF32, {1, 5, 41});
  Tensor conv(DType::kF32, {1, C, 4}), rec(DType::kF32, {1, 4, 32, 16}), conv_bf(DType::kBF16, {1, C, 4});
  auto msg = [](const Status& s) { return s.message(); };
  EXPECT_NE(msg(L->prefill(x_wrong.view(), x_wrong.view(), nullptr, {})).find("x.shape[2] (hidden size) = 41"), std::string::npos);
  EXPECT_NE(msg(L->prefill(x.view(), x.view(), nullptr, {})).find("y shares memory with x"), std::string::npos);
  const LayerState bad_dtype{conv_bf.view(), rec.view(), true};
  EXPECT_NE(msg(L->prefill(x.view(), y.view(), &bad_dtype, {})).find("state.conv.dtype must be F32"), std::string::npos);
  const LayerState bad_shape{conv.view(), TensorView(rec.bytes.data(), DType::kF32, {1, 4, 16, 32}), true};
  EXPECT_NE(msg(L->prefill(x.view(), y.view(), &bad_shape, {})).find("state.recurrent must have shape"), std::string::npos);
  // Decode: a slot outside the pool, then duplicate slots (refused by the core after the conv step ran):
  // the pools keep their values.
  Tensor xd(DType::kF32, {2, 40}), yd(DType::kF32, {2, 40}), pool(DType::kF32, {3, C, 4}), spool(DType::kF32, {3, 4, 32, 16});
  std::mt19937_64 rng(9);
  pool = testing::random_tensor(DType::kF32, {3, C, 4}, rng);
  spool = testing::random_tensor(DType::kF32, {3, 4, 32, 16}, rng);
  const std::vector<unsigned char> pool0 = pool.bytes, spool0 = spool.bytes;
  const Tensor outside = testing::tensor_of(DType::kI64, {2}, {0, 3}), dup = testing::tensor_of(DType::kI64, {2}, {1, 1});
  EXPECT_NE(msg(L->decode(xd.view(), yd.view(), pool.view(), spool.view(), outside.view(), {})).find("slots[1] = 3"),
            std::string::npos);
  const Status d = L->decode(xd.view(), yd.view(), pool.view(), spool.view(), dup.view(), {});
  EXPECT_FALSE(d.ok());
  EXPECT_EQ(pool.bytes, pool0);
  EXPECT_EQ(spool.bytes, spool0);
  Tensor pool_bf(DType::kBF16, {3, C, 4});
  EXPECT_NE(msg(L->decode(xd.view(), yd.view(), pool_bf.view(), spool.view(), outside.view(), {})).find("conv_pool.dtype"),
            std::string::npos);
}

}  // namespace
}  // namespace hanpu
