#include "layer/random_weights.h"

#include <cmath>
#include <map>
#include <memory>
#include <random>

namespace hanpu::layer {

const std::vector<std::string>& layer_preset_names() {
  static const std::vector<std::string> names = {"qwen3.5-0.8b", "qwen3.5-2b", "qwen3-next", "kimi-linear"};
  return names;
}

bool layer_preset(const std::string& name, LayerSpec* out) {
  LayerSpec s;
  if (name == "qwen3.5-0.8b") {
    s = {LayerArch::kQwen3_5, 1024, 16, 16, 128, 128, 4, 1e-6};
  } else if (name == "qwen3.5-2b") {
    s = {LayerArch::kQwen3_5, 2048, 16, 16, 128, 128, 4, 1e-6};
  } else if (name == "qwen3-next") {
    s = {LayerArch::kQwen3Next, 2048, 16, 32, 128, 128, 4, 1e-6};
  } else if (name == "kimi-linear") {
    s = {LayerArch::kKimiLinear, 2304, 32, 32, 128, 128, 4, 1e-5};
  } else {
    return false;
  }
  *out = s;
  return true;
}

TensorFile random_layer_weights(const LayerSpec& s, DType dtype, uint64_t seed) {
  std::mt19937_64 rng(seed);
  TensorFile f;
  auto normal = [&](const std::string& name, std::vector<int64_t> shape, double sd, double mean = 0.0) {
    Tensor t(dtype, std::move(shape));
    std::normal_distribution<double> nd(mean, sd);
    std::vector<double> v(t.numel());
    for (double& x : v) x = nd(rng);
    fill_from_doubles(t, v);
    f.tensors[name] = std::move(t);
  };
  auto uniform = [&](const std::string& name, std::vector<int64_t> shape, double lo, double hi, bool log = false) {
    Tensor t(dtype, std::move(shape));
    std::uniform_real_distribution<double> ud(lo, hi);
    std::vector<double> v(t.numel());
    for (double& x : v) x = log ? std::log(ud(rng)) : ud(rng);
    fill_from_doubles(t, v);
    f.tensors[name] = std::move(t);
  };
  const int64_t D = s.hidden_size, HV = s.num_v_heads, K = s.head_k_dim, V = s.head_v_dim, Kc = s.conv_kernel;
  const int64_t kd = s.key_dim(), vd = s.value_dim();
  const double in_d = 1.0 / std::sqrt(static_cast<double>(D)), conv_sd = 1.0 / std::sqrt(static_cast<double>(Kc));
  if (s.arch == LayerArch::kQwen3_5) {
    normal("in_proj_qkv.weight", {s.conv_dim(), D}, in_d);
    normal("in_proj_z.weight", {vd, D}, in_d);
    normal("in_proj_b.weight", {HV, D}, in_d);
    normal("in_proj_a.weight", {HV, D}, in_d);
  } else if (s.arch == LayerArch::kQwen3Next) {
    normal("in_proj_qkvz.weight", {2 * kd + 2 * vd, D}, in_d);
    normal("in_proj_ba.weight", {2 * HV, D}, in_d);
  }
  if (s.kind() == Kind::kGdn) {
    normal("conv1d.weight", {s.conv_dim(), 1, Kc}, conv_sd);
    uniform("A_log", {HV}, 1.0, 16.0, true);
    uniform("dt_bias", {HV}, -1.0, 1.0);
    normal("norm.weight", {V}, 0.1, 1.0);
    normal("out_proj.weight", {D, vd}, 1.0 / std::sqrt(static_cast<double>(vd)));
    return f;
  }
  for (const char* p : {"q", "k", "v"}) {
    normal(std::string(p) + "_proj.weight", {kd, D}, in_d);
    normal(std::string(p) + "_conv1d.weight", {kd, 1, Kc}, conv_sd);
  }
  normal("b_proj.weight", {HV, D}, in_d);
  normal("f_a_proj.weight", {K, D}, in_d);
  normal("f_b_proj.weight", {kd, K}, 1.0 / std::sqrt(static_cast<double>(K)));
  normal("g_a_proj.weight", {K, D}, in_d);
  normal("g_b_proj.weight", {kd, K}, 1.0 / std::sqrt(static_cast<double>(K)));
  uniform("A_log", {1, 1, HV, 1}, 1.0, 16.0, true);
  uniform("dt_bias", {kd}, -1.0, 1.0);
  normal("o_norm.weight", {K}, 0.1, 1.0);
  normal("o_proj.weight", {D, kd}, 1.0 / std::sqrt(static_cast<double>(kd)));
  return f;
}

WeightLookup lookup_in(const TensorFile& file, const std::string& origin) {
  auto views = std::make_shared<std::map<std::string, TensorView>>();
  return [&file, origin, views](const std::string& name, std::string* where) -> const TensorView* {
    *where = origin + name;
    const Tensor* t = file.find(name);
    if (!t) return nullptr;
    return &((*views)[name] = t->view());
  };
}

}  // namespace hanpu::layer
