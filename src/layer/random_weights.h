// Layers without a checkpoint: the shapes of the bench presets and random weights under transformers'
// names, for `hanpu layer --preset`, the layer benchmark and the tests (nothing is downloaded here).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hanpu/layer.h"
#include "hanpu/safetensors.h"

namespace hanpu::layer {

// "qwen3.5-0.8b" (Qwen3.5 layout, hidden 1024, 16/16 heads of 128), "qwen3.5-2b" (the same layout at
// hidden 2048: the model the HA-NPU calibration figures were measured on; see bench/bench.h for its
// source), "qwen3-next" (Qwen3-Next layout, hidden 2048, 16 q/k and 32 value heads of 128), "kimi-linear"
// (hidden 2304, 32 heads of 128).
bool layer_preset(const std::string& name, LayerSpec* out);
const std::vector<std::string>& layer_preset_names();

// Weights of `spec` under the names of a transformers checkpoint (Kimi: its q/k/v_conv1d and layer-level
// forget-gate names), in `dtype`. Scales keep activations O(1): projections N(0, 1/in), conv taps
// N(0, 1/Kc), A_log = log U(1, 16), dt_bias U(-1, 1), norm weights 1 + N(0, 0.1^2).
TensorFile random_layer_weights(const LayerSpec& spec, DType dtype, uint64_t seed);

// A WeightLookup over a TensorFile's tensors (names relative to the layer); `origin` prefixes `where`.
WeightLookup lookup_in(const TensorFile& file, const std::string& origin);

}  // namespace hanpu::layer
