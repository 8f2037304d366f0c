// `hanpu layer`: one linear-attention layer (a checkpoint's, or a preset shape with random weights) timed
// on random hidden states: prefill (median of reps after a warm-up, with the parts' breakdown), decode
// steps over slot pools for some batch sizes, an optional check against the fp64 layer reference, and the
// projection GEMM on oneDNN beside the engine's own tile GEMM.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hanpu/layer.h"

namespace hanpu {

struct LayerBenchConfig {
  std::string model_dir;  // a checkpoint directory, or empty for `preset`
  int64_t layer_index = 0;
  std::string preset = "qwen3.5-0.8b";
  DType weight_dtype = DType::kBF16;  // the random weights' dtype (preset runs)
  Precision precision = Precision::kAuto;
  int64_t tokens = 4096, batch = 1;
  std::vector<int64_t> decode_batches;  // empty: no decode timing
  int threads = 0;
  Strategy strategy = Strategy::kHanpu;
  int reps = 5;
  bool check = false;         // compare the first check_tokens tokens with the fp64 reference
  int64_t check_tokens = 64;
  bool compare_gemm = false;  // time the stacked input projection on oneDNN and on the engine's GEMM
  uint64_t seed = 1;
};

struct LayerBenchReport {
  std::string cpu, cpu_features, source;  // source: the checkpoint layer or the preset
  LayerSpec spec;
  std::string precision;  // "exact" or "bf16"
  std::string projections;  // how the projections run (layer/matmul.h's route for the prefill's row count)
  int threads = 0;
  double prefill_median_ms = 0, prefill_min_ms = 0;
  std::vector<double> prefill_all_ms;
  std::vector<std::pair<std::string, double>> parts_ms;  // from the median-time rep's breakdown
  struct DecodeRun {
    int64_t batch = 0;
    double median_ms = 0;                                   // per step
    std::vector<std::pair<std::string, double>> parts_ms;  // from the median-time step's breakdown
  };
  std::vector<DecodeRun> decode;
  double check_max_rel = -1, check_rel_rms = -1;          // -1: not checked
  // compare_gemm: ms of the [tokens, D] x [D, N1] projection on each implementation.
  std::vector<std::pair<std::string, double>> gemm_ms;
  double gemm_flops = 0;
};

// The CPU's model name and its matrix-related features (avx512f, avx512_bf16, amx_*), from /proc/cpuinfo.
void describe_cpu(std::string* model, std::string* features);

Status run_layer_bench(const LayerBenchConfig& cfg, const std::function<void(const std::string&)>& progress,
                       LayerBenchReport* out);
std::string format_layer_table(const LayerBenchReport& r, const LayerBenchConfig& cfg);
std::string format_layer_json(const LayerBenchReport& r, const LayerBenchConfig& cfg);

}  // namespace hanpu
