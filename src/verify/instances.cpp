#include "verify/instances.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

namespace hanpu {

namespace {

// Scenario names. Each puts one feature on; other options are drawn at random around it.
const std::vector<std::string> kScenarios = {
    "plain", "state", "v-first", "l2norm", "gate-in-kernel", "lower-bound|scale", "beta-sigmoid", "gva",
    "varlen", "long", "extreme-gates", "all-options"};

struct Rng {
  std::mt19937_64 gen;
  double uniform(double a, double b) { return std::uniform_real_distribution<double>(a, b)(gen); }
  double normal(double sd = 1.0) { return std::normal_distribution<double>(0.0, sd)(gen); }
  bool chance(double p) { return uniform(0, 1) < p; }
  template <typename T>
  T pick(const std::vector<T>& v) { return v[std::uniform_int_distribution<std::size_t>(0, v.size() - 1)(gen)]; }
  int64_t range(int64_t a, int64_t b) { return std::uniform_int_distribution<int64_t>(a, b)(gen); }
};

// Realistic log decay: -exp(A_log) * softplus(a + dt_bias), A = exp(A_log) in [1, 16] (Qwen3-Next, Kimi
// init), dt_bias = inverse softplus of dt in [0.001, 0.1], a ~ N(0, 1) the projected input.
double realistic_gate(Rng& r, double a_log, double dt_bias) {
  const double x = r.normal() + dt_bias;
  return -std::exp(a_log) * (x > 20 ? x : std::log1p(std::exp(x)));
}

double draw_dt_bias(Rng& r) {
  const double dt = std::exp(r.uniform(std::log(0.001), std::log(0.1)));
  return std::log(std::expm1(dt));
}

Tensor make(DType dt, std::vector<int64_t> shape, const std::vector<double>& values) {
  Tensor t(dt, std::move(shape));
  fill_from_doubles(t, values);
  return t;
}

}  // namespace

const std::vector<std::string>& verify_scenarios() { return kScenarios; }

std::string Instance::describe() const {
  const Tensor& q = *tensors.find("q");
  const Tensor& v = *tensors.find("v");
  std::ostringstream os;
  os << "T=" << q.shape[1] << " B=" << q.shape[0] << " H=" << q.shape[2] << " HV=" << v.shape[2]
     << " K=" << q.shape[3] << " V=" << v.shape[3] << " C=" << opt.chunk_size;
  if (const Tensor* cu = tensors.find("cu_seqlens")) os << " varlen[" << cu->shape[0] - 1 << "]";
  if (tensors.find("initial_state")) os << " init";
  if (opt.state_v_first) os << " v-first";
  if (opt.head_mapping == HeadMapping::kTiled) os << " tiled";
  if (opt.use_qk_l2norm_in_kernel) os << " l2norm";
  if (opt.use_gate_in_kernel) os << " gate-in-kernel";
  if (opt.lower_bound) os << " lower-bound=" << *opt.lower_bound;
  if (opt.use_beta_sigmoid_in_kernel) os << " beta-sigmoid";
  if (opt.allow_neg_eigval) os << " neg-eigval";
  if (opt.scale) os << " scale=" << *opt.scale;
  if (extreme_gates) os << " gates=-1000";
  return os.str();
}

Instance make_instance(uint64_t seed, int index) {
  static const DType kDtypes[] = {DType::kF32, DType::kF16, DType::kBF16};
  const int ns = static_cast<int>(kScenarios.size());
  Instance inst;
  inst.index = index;
  inst.scenario = kScenarios[index % ns];
  inst.kind = (index / ns) % 2 == 0 ? Kind::kGdn : Kind::kKda;
  inst.dtype = kDtypes[(index / (2 * ns)) % 3];
  const std::string& sc = inst.scenario;
  const bool kda = inst.kind == Kind::kKda, all = sc == "all-options";
  Rng r{std::mt19937_64(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(index) * 0xD1B54A32D192ED03ull + 1)};

  Options& opt = inst.opt;
  opt.kind = inst.kind;
  opt.chunk_size = static_cast<int>(r.pick<int64_t>({16, 32, 64}));
  opt.use_qk_l2norm_in_kernel = sc == "l2norm" || all || r.chance(0.25);
  opt.use_gate_in_kernel = sc == "gate-in-kernel" || all || (sc == "lower-bound|scale" && kda);
  if (sc == "lower-bound|scale") {
    if (kda) opt.lower_bound = r.uniform(-5.0, -0.5);
    else opt.scale = r.uniform(0.05, 1.0);
  }
  opt.use_beta_sigmoid_in_kernel = sc == "beta-sigmoid" || all;
  opt.allow_neg_eigval = opt.use_beta_sigmoid_in_kernel && (all || r.chance(0.5));
  const bool init = sc == "state" || sc == "v-first" || all || r.chance(0.3);
  opt.state_v_first = sc == "v-first" || (init && r.chance(0.2));
  inst.extreme_gates = sc == "extreme-gates";
  // ggml's tiled value heads (hv % H) in every other cycle of the scenarios' 72 (scenario, kind, dtype)
  // combinations: gva in the odd cycles, all-options in the even ones. Chosen from the index, not the random
  // stream, so that the mapping leaves every other field as the seed draws it.
  const bool odd_cycle = (index / (6 * ns)) % 2 == 1;
  if ((sc == "gva" && odd_cycle) || (all && !odd_cycle)) opt.head_mapping = HeadMapping::kTiled;

  // Shapes. Work (T * HV * K * V) is bounded so a default run stays within a couple of minutes.
  const std::vector<int64_t> dims = {1, 2, 3, 8, 16, 17, 32, 48, 60, 64, 100, 128, 256};
  const bool varlen = sc == "varlen" || all;
  const bool is_long = sc == "long";
  int64_t H = r.pick<int64_t>({1, 2});
  const int64_t group = (sc == "gva" || all) ? r.pick<int64_t>({2, 4}) : 1;
  int64_t K = r.pick(dims), V = r.pick(dims);
  std::vector<int64_t> lengths;
  if (is_long) {
    lengths = {r.pick<int64_t>({4096, 4097, 4160, 5000})};
    K = r.pick<int64_t>({48, 64, 100, 128});
    V = r.pick<int64_t>({48, 64, 128});
    H = 1;
  } else if (varlen) {
    const int64_t n = r.range(2, 5);
    const int64_t C = opt.chunk_size;
    for (int64_t i = 0; i < n; ++i) lengths.push_back(r.pick<int64_t>({0, 1, C - 1, C, C + 1, r.range(2, 3 * C)}));
    if (std::all_of(lengths.begin(), lengths.end(), [](int64_t l) { return l == 0; })) lengths[0] = 1;
  } else {
    lengths.assign(r.range(1, 3), r.pick<int64_t>({1, 2, 7, 15, 16, 17, 31, 33, 63, 64, 65, 100, 129, 200}));
  }
  int64_t total = 0;
  for (int64_t l : lengths) total += l;
  const double budget = is_long ? 7e7 : 8e6;
  while (static_cast<double>(total) * H * group * K * V > budget) {
    if (K >= V && K > 16) K = K * 2 / 3;
    else if (V > 16) V = V * 2 / 3;
    else break;
  }
  const int64_t HV = H * group;
  const int64_t B = varlen ? 1 : static_cast<int64_t>(lengths.size());
  const int64_t T = varlen ? total : lengths[0];
  const int64_t N = static_cast<int64_t>(lengths.size());
  const int64_t w = kda ? K : 1;
  const DType dt = inst.dtype;

  std::vector<double> q(B * T * H * K), k(B * T * H * K), v(B * T * HV * V), g(B * T * HV * w), beta(B * T * HV);
  for (double& x : q) x = r.normal();
  for (double& x : v) x = r.normal();
  // Keys: unit rows when no in-kernel l2norm (so beta * |k|^2 < 2 keeps the recurrence contractive, as
  // FLA's tests do with F.normalize); raw rows of random scale otherwise.
  for (int64_t row = 0; row < B * T * H; ++row) {
    double ss = 0;
    const double amp = r.uniform(0.5, 3.0);
    for (int64_t d = 0; d < K; ++d) {
      const double x = r.normal();
      k[row * K + d] = x;
      ss += x * x;
    }
    for (int64_t d = 0; d < K; ++d) k[row * K + d] *= opt.use_qk_l2norm_in_kernel ? amp : 1.0 / std::sqrt(ss + 1e-12);
  }
  for (double& x : beta) x = opt.use_beta_sigmoid_in_kernel ? r.normal(1.5) : r.uniform(0.0, 1.0);
  // Gates: per value head (and channel for KDA) parameters, then per token values.
  std::vector<double> a_log(HV), dt_bias(HV * w);
  for (double& x : a_log) x = std::log(r.uniform(1.0, 16.0));
  for (double& x : dt_bias) x = draw_dt_bias(r);
  for (int64_t i = 0; i < B * T; ++i) {
    for (int64_t hv = 0; hv < HV; ++hv) {
      for (int64_t d = 0; d < w; ++d) {
        double& x = g[(i * HV + hv) * w + d];
        if (opt.use_gate_in_kernel) {
          x = r.normal();  // the raw projection a; the kernel turns it into a decay
        } else {
          x = realistic_gate(r, a_log[hv], dt_bias[hv * w + d]);
          if (inst.extreme_gates) {
            const double u = r.uniform(0, 1);
            if (u < 0.04) x = -1000.0;
            else if (u < 0.10) x = 0.0;
            else if (u < 0.14) x = -r.uniform(10.0, 40.0);
          }
        }
      }
    }
  }
  TensorFile& f = inst.tensors;
  f.tensors["q"] = make(dt, {B, T, H, K}, q);
  f.tensors["k"] = make(dt, {B, T, H, K}, k);
  f.tensors["v"] = make(dt, {B, T, HV, V}, v);
  f.tensors["g"] = kda ? make(dt, {B, T, HV, K}, g) : make(dt, {B, T, HV}, g);
  f.tensors["beta"] = make(dt, {B, T, HV}, beta);
  if (opt.use_gate_in_kernel) {
    if (!opt.lower_bound || r.chance(0.5)) f.tensors["A_log"] = make(DType::kF32, {HV}, a_log);
    if (opt.lower_bound) {
      for (double& x : dt_bias) x = r.normal();
    }
    if (r.chance(0.8)) f.tensors["dt_bias"] = make(DType::kF32, {HV * w}, dt_bias);
  }
  if (init) {
    std::vector<double> s(N * HV * K * V);
    for (double& x : s) x = r.normal(0.5);
    f.tensors["initial_state"] =
        make(DType::kF32, opt.state_v_first ? std::vector<int64_t>{N, HV, V, K} : std::vector<int64_t>{N, HV, K, V}, s);
  }
  if (varlen) {
    std::vector<double> cu = {0};
    for (int64_t l : lengths) cu.push_back(cu.back() + static_cast<double>(l));
    f.tensors["cu_seqlens"] = make(DType::kI64, {N + 1}, cu);
  }
  return inst;
}

}  // namespace hanpu
