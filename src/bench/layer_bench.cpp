#include "bench/layer_bench.h"
#include "bench/bench.h"
#include "bench/bench_common.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "exec/thread_pool.h"
#include "kernels/kernel_set.h"
#include "layer/matmul.h"
#include "layer/random_weights.h"
#include "layer/reference.h"

namespace hanpu {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// The parts' breakdown of the run whose time is the median of `ms` (one LayerStats a run, same order).
std::vector<std::pair<std::string, double>> median_parts(const std::vector<double>& ms, const std::vector<LayerStats>& stats) {
  std::vector<size_t> order(ms.size());
  for (size_t i = 0; i < ms.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ms[a] < ms[b]; });
  return stats[order[ms.size() / 2]].parts_ms;
}

// One table line a part: its time (printf format `fmt`, ms) and share of their sum.
std::string format_parts(const std::vector<std::pair<std::string, double>>& parts, const char* fmt) {
  double total = 0;
  for (const auto& [n, ms] : parts) total += ms;
  std::string o;
  char num[32], buf[128];
  for (const auto& [n, ms] : parts) {
    std::snprintf(num, sizeof num, fmt, ms);
    std::snprintf(buf, sizeof buf, "  %-12s %s ms  %5.1f%%\n", n.c_str(), num, total > 0 ? 100 * ms / total : 0.0);
    o += buf;
  }
  return o;
}

Tensor random_hidden(DType dt, std::vector<int64_t> shape, uint64_t seed) {
  Tensor t(dt, std::move(shape));
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd;
  std::vector<double> v(t.numel());
  for (double& x : v) x = nd(rng);
  fill_from_doubles(t, v);
  return t;
}

// The stacked input projection [M, D] x [D, N1] on oneDNN and on the engine's own GEMM (rows split over
// the threads), in the layer's precision; one warm-up, then the median of three.
Status compare_gemm(const LayerSpec& s, DType act, int threads, int64_t M, LayerBenchReport* out) {
  const int64_t D = s.hidden_size;
  const int64_t n1 = s.kind() == Kind::kGdn ? s.conv_dim() + s.value_dim() + 2 * s.num_v_heads
                                            : 3 * s.key_dim() + s.num_v_heads + 2 * s.head_k_dim;
  out->gemm_flops = 2.0 * M * D * n1;
  const Tensor x = random_hidden(act, {M, D}, 3), w = random_hidden(act, {n1, D}, 4);
  Tensor y(DType::kF32, {M, n1});
  auto time3 = [](const std::function<Status()>& fn, double* ms) -> Status {
    std::vector<double> t;
    for (int r = 0; r < 4; ++r) {
      const auto t0 = Clock::now();
      HANPU_RETURN_IF_ERROR(fn());
      if (r > 0) t.push_back(ms_since(t0));
    }
    *ms = percentile_median(t);
    return Status::Ok();
  };
  double ms = 0;
  const auto product = [&](layer::Bf16Route route) {
    layer::ProjectionWeight pw;  // packed or copied once, not timed
    HANPU_RETURN_IF_ERROR(layer::ProjectionWeight::make(n1, D, act, w.bytes.data(), route, &pw));
    return time3([&] { return layer::matmul_nt(M, x.bytes.data(), D, pw, DType::kF32, y.bytes.data(), n1, threads); },
                 &ms);
  };
  if (act == DType::kF32) {
    HANPU_RETURN_IF_ERROR(product(layer::Bf16Route::kNative));
    out->gemm_ms.emplace_back("onednn", ms);
  } else {  // the routes of a bf16 product (layer/matmul.h); a oneDNN without bf16 kernels has no native one
    const Status native = product(layer::Bf16Route::kNative);
    if (native.ok()) {
      out->gemm_ms.emplace_back("onednn bf16", ms);
    } else if (native.code() != StatusCode::kUnimplemented) {
      return native;
    }
    HANPU_RETURN_IF_ERROR(product(layer::Bf16Route::kPairs));
    out->gemm_ms.emplace_back("bf16 pairs", ms);
  }
  // The engine's GEMM reads B [D, N1] row-major: W^T, packed once (not timed), operands as fp32.
  const std::vector<double> xd = to_doubles(x.view()), wd = to_doubles(w.view());
  std::vector<float> xf(xd.begin(), xd.end()), wt(D * n1);
  for (int64_t n = 0; n < n1; ++n)
    for (int64_t d = 0; d < D; ++d) wt[d * n1 + n] = static_cast<float>(wd[n * D + d]);
  const KernelSet& ks = active_kernels();
  const auto gemm = act == DType::kBF16 ? ks.gemm_nn_bf16 : ks.gemm_nn;
  ThreadPool& pool = shared_pool(threads);
  float* yp = reinterpret_cast<float*>(y.bytes.data());
  HANPU_RETURN_IF_ERROR(time3(
      [&] {
        pool.run([&](int t) {
          const int64_t b = M * t / threads, e = M * (t + 1) / threads;
          for (int64_t r = b; r < e; r += 64)  // 64-row panels: the tile height the kernels are built for
            gemm(std::min<int64_t>(64, e - r), n1, D, xf.data() + r * D, D, wt.data(), n1, false, yp + r * n1, n1);
        });
        return Status::Ok();
      },
      &ms));
  out->gemm_ms.emplace_back("engine " + ks.name, ms);
  return Status::Ok();
}

}  // namespace

void describe_cpu(std::string* model, std::string* features) {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  std::set<std::string> feats;
  model->clear();
  while (std::getline(f, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    const std::string val = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name" && model->empty()) *model = val;
    if (key == "flags" && feats.empty()) {
      std::istringstream ss(val);
      std::string flag;
      while (ss >> flag)
        if (flag == "avx512f" || flag == "avx512_bf16" || flag.rfind("amx", 0) == 0) feats.insert(flag);
    }
  }
  features->clear();
  for (const std::string& s : feats) *features += (features->empty() ? "" : " ") + s;
  if (model->empty()) *model = "unknown CPU";
  if (features->empty()) *features = "no AVX-512";
}

Status run_layer_bench(const LayerBenchConfig& cfg, const std::function<void(const std::string&)>& progress,
                       LayerBenchReport* out) {
  if (cfg.tokens < 1 || cfg.batch < 1) return InvalidArgument("tokens and batch must be >= 1");
  if (cfg.reps < 1) return InvalidArgument("reps must be >= 1, got " + std::to_string(cfg.reps));
  if (cfg.threads < 0) return InvalidArgument("threads must be >= 0, got " + std::to_string(cfg.threads));
  for (int64_t b : cfg.decode_batches)
    if (b < 1) return InvalidArgument("decode batch sizes must be >= 1, got " + std::to_string(b));
  LayerBenchReport r;
  describe_cpu(&r.cpu, &r.cpu_features);
  r.threads = ThreadPool::resolve(cfg.threads);
  TensorFile weights;
  std::string origin;
  if (!cfg.model_dir.empty()) {
    HANPU_RETURN_IF_ERROR(read_layer_checkpoint(cfg.model_dir, cfg.layer_index, &r.spec, &weights, &origin));
    r.source = origin;
  } else {
    if (!layer::layer_preset(cfg.preset, &r.spec)) return InvalidArgument("unknown preset '" + cfg.preset + "'");
    weights = layer::random_layer_weights(r.spec, cfg.weight_dtype, cfg.seed);
    r.source = "preset " + cfg.preset + ", random " + dtype_name(cfg.weight_dtype) + " weights";
  }
  const WeightLookup lookup = layer::lookup_in(weights, origin);
  std::unique_ptr<Layer> L;
  HANPU_RETURN_IF_ERROR(Layer::create(r.spec, lookup, cfg.precision, &L));
  r.precision = precision_name(L->precision());
  const LayerSpec& s = r.spec;
  const DType act = L->activation_dtype();
  r.projections = act == DType::kF32          ? "oneDNN fp32"
                  : layer::onednn_native_bf16() ? "oneDNN bf16"
                                                : "hanpu's bf16-pairs kernel (oneDNN has no bf16 dot product on this "
                                                  "CPU; W packed in bf16 pairs, widened in registers)";
  // What a prefill holds at once, at least: x and y [B, T, hidden], the projections [B, T, >= conv_dim] and the
  // core's output [B, T, value_dim], all in the activation dtype.
  const double rows = static_cast<double>(cfg.batch) * static_cast<double>(cfg.tokens);
  HANPU_RETURN_IF_ERROR(check_fits_in_memory(
      rows * dtype_size(act) * (2.0 * s.hidden_size + s.conv_dim() + s.value_dim()),
      "tokens " + std::to_string(cfg.tokens) + " x batch " + std::to_string(cfg.batch)));
  LayerRunConfig run;
  run.threads = r.threads;
  run.strategy = cfg.strategy;
  run.breakdown = true;

  // Prefill: the median rep's parts are reported (a clock read per part costs nothing measurable).
  const Tensor x = random_hidden(act, {cfg.batch, cfg.tokens, s.hidden_size}, cfg.seed + 1);
  Tensor y(act, {cfg.batch, cfg.tokens, s.hidden_size});
  std::vector<LayerStats> stats(cfg.reps);
  for (int rep = -1; rep < cfg.reps; ++rep) {
    LayerStats st;
    const auto t0 = Clock::now();
    HANPU_RETURN_IF_ERROR(L->prefill(x.view(), y.view(), nullptr, run, &st));
    const double ms = ms_since(t0);
    if (rep < 0) continue;
    r.prefill_all_ms.push_back(ms);
    stats[rep] = st;
    char line[160];
    std::snprintf(line, sizeof line, "prefill rep %d/%d: %.1f ms", rep + 1, cfg.reps, ms);
    progress(line);
  }
  r.prefill_median_ms = percentile_median(r.prefill_all_ms);
  r.prefill_min_ms = *std::min_element(r.prefill_all_ms.begin(), r.prefill_all_ms.end());
  r.parts_ms = median_parts(r.prefill_all_ms, stats);

  // Decode: `b` sequences in slots 0..b-1, one token each per step.
  for (int64_t b : cfg.decode_batches) {
    Tensor xd = random_hidden(act, {b, s.hidden_size}, cfg.seed + 2), yd(act, {b, s.hidden_size});
    Tensor conv(act, {b, s.conv_dim(), s.conv_kernel}), state(DType::kF32, {b, s.num_v_heads, s.head_k_dim, s.head_v_dim});
    std::vector<double> idx(b);
    for (int64_t i = 0; i < b; ++i) idx[i] = static_cast<double>(i);
    Tensor slots(DType::kI64, {b});
    fill_from_doubles(slots, idx);
    std::vector<double> t;
    std::vector<LayerStats> dstats;
    const int steps = std::max(cfg.reps, 20);
    for (int rep = -1; rep < steps; ++rep) {
      LayerStats st;
      const auto t0 = Clock::now();
      HANPU_RETURN_IF_ERROR(L->decode(xd.view(), yd.view(), conv.view(), state.view(), slots.view(), run, &st));
      if (rep < 0) continue;
      t.push_back(ms_since(t0));
      dstats.push_back(std::move(st));
    }
    r.decode.push_back({b, percentile_median(t), median_parts(t, dstats)});
    char line[160];
    std::snprintf(line, sizeof line, "decode batch %lld: %.3f ms per step", static_cast<long long>(b), percentile_median(t));
    progress(line);
  }

  if (cfg.check) {
    // The first check_tokens tokens of batch row 0, against the fp64 reference on the same weights and input.
    const int64_t n = std::min(cfg.check_tokens, cfg.tokens), D = s.hidden_size;
    const TensorView xs(x.bytes.data(), act, {1, n, D});
    Tensor ys(act, {1, n, D});
    HANPU_RETURN_IF_ERROR(L->prefill(xs, ys.view(), nullptr, run));
    layer::ReferenceResult ref;
    HANPU_RETURN_IF_ERROR(layer::reference_layer(s, lookup, xs, nullptr, nullptr, &ref));
    const std::vector<double> yv = to_doubles(ys.view());
    double num = 0, den = 0, mx = 0, scale = 0;
    for (size_t i = 0; i < yv.size(); ++i) {
      const double d = yv[i] - ref.y[i];
      num += d * d, den += ref.y[i] * ref.y[i];
      mx = std::max(mx, std::abs(d)), scale = std::max(scale, std::abs(ref.y[i]));
    }
    r.check_rel_rms = std::sqrt(num / den);
    r.check_max_rel = mx / scale;
    progress("checked " + std::to_string(n) + " tokens against the fp64 reference");
  }
  if (cfg.compare_gemm) {
    HANPU_RETURN_IF_ERROR(compare_gemm(s, act, r.threads, cfg.batch * cfg.tokens, &r));
    progress("timed the input projection on oneDNN and on the engine's GEMM");
  }
  *out = std::move(r);
  return Status::Ok();
}

std::string format_layer_table(const LayerBenchReport& r, const LayerBenchConfig& cfg) {
  std::ostringstream o;
  char buf[256];
  const LayerSpec& s = r.spec;
  o << "CPU: " << r.cpu << " (" << r.cpu_features << "), " << r.threads << " threads\n";
  o << "layer: " << layer_arch_name(s.arch) << " (" << r.source << "), hidden " << s.hidden_size << ", heads "
    << s.num_k_heads << "/" << s.num_v_heads << ", head dims " << s.head_k_dim << "/" << s.head_v_dim << ", conv "
    << s.conv_kernel << ", precision " << r.precision << "\n";
  o << "projections: " << r.projections << "\n";
  std::snprintf(buf, sizeof buf, "prefill B=%lld T=%lld: median %.1f ms (min %.1f, %d reps), %.0f tokens/s\n",
                static_cast<long long>(cfg.batch), static_cast<long long>(cfg.tokens), r.prefill_median_ms, r.prefill_min_ms,
                cfg.reps, cfg.batch * cfg.tokens / (r.prefill_median_ms * 1e-3));
  o << buf;
  o << format_parts(r.parts_ms, "%9.1f");
  for (const LayerBenchReport::DecodeRun& d : r.decode) {
    std::snprintf(buf, sizeof buf, "decode batch %3lld: %.3f ms per step (%.0f tokens/s)\n", static_cast<long long>(d.batch),
                  d.median_ms, d.batch / (d.median_ms * 1e-3));
    o << buf << format_parts(d.parts_ms, "%9.3f");
  }
  if (r.check_rel_rms >= 0) {
    std::snprintf(buf, sizeof buf, "check vs fp64 reference (%lld tokens): rel RMS %.3g, max |err| / max |y| %.3g\n",
                  static_cast<long long>(std::min(cfg.check_tokens, cfg.tokens)), r.check_rel_rms, r.check_max_rel);
    o << buf;
  }
  for (const auto& [n, ms] : r.gemm_ms) {
    std::snprintf(buf, sizeof buf, "input projection on %-16s %9.1f ms  %7.1f GFLOP/s\n", n.c_str(), ms,
                  r.gemm_flops / (ms * 1e6));
    o << buf;
  }
  return o.str();
}

std::string format_layer_json(const LayerBenchReport& r, const LayerBenchConfig& cfg) {
  using nlohmann::json;
  const LayerSpec& s = r.spec;
  json parts = json::object(), decode = json::array(), gemm = json::array();
  for (const auto& [n, ms] : r.parts_ms) parts[n] = ms;
  for (const LayerBenchReport::DecodeRun& d : r.decode) {
    json dparts = json::object();
    for (const auto& [n, ms] : d.parts_ms) dparts[n] = ms;
    decode.push_back({{"batch", d.batch}, {"median_ms", d.median_ms}, {"parts_ms", dparts}});
  }
  for (const auto& [n, ms] : r.gemm_ms)
    gemm.push_back({{"implementation", n}, {"median_ms", ms}, {"gflops", r.gemm_flops / (ms * 1e6)}});
  json j = {{"cpu", r.cpu},
            {"cpu_features", r.cpu_features},
            {"threads", r.threads},
            {"source", r.source},
            {"layer",
             {{"arch", layer_arch_name(s.arch)}, {"hidden_size", s.hidden_size}, {"num_k_heads", s.num_k_heads},
              {"num_v_heads", s.num_v_heads}, {"head_k_dim", s.head_k_dim}, {"head_v_dim", s.head_v_dim},
              {"conv_kernel", s.conv_kernel}, {"rms_norm_eps", s.rms_norm_eps}}},
            {"precision", r.precision},
            {"strategy", strategy_name(cfg.strategy)},
            {"prefill",
             {{"batch", cfg.batch}, {"tokens", cfg.tokens}, {"median_ms", r.prefill_median_ms}, {"min_ms", r.prefill_min_ms},
              {"all_ms", r.prefill_all_ms}, {"parts_ms", parts}}},
            {"decode", decode},
            {"projections", r.projections},
            {"projection_gemm", gemm}};
  if (r.check_rel_rms >= 0)
    j["check"] = {{"tokens", std::min(cfg.check_tokens, cfg.tokens)}, {"rel_rms", r.check_rel_rms},
                  {"max_rel", r.check_max_rel}};
  return j.dump(2) + "\n";
}

}  // namespace hanpu
