// The layer in fp64, step by step as transformers' modeling files write it, from the weights in their own
// layout (Qwen3-Next's grouped in_proj_qkvz / in_proj_ba split per key head here, not by Layer::create's
// reordering), with the fp64 operator reference (ops.h reference_forward) as the core. What Layer::prefill
// and Layer::decode are tested against (tests/test_layer.cpp) and what `hanpu layer --check` compares with.
#pragma once

#include <vector>

#include "hanpu/layer.h"

namespace hanpu::layer {

struct ReferenceResult {
  std::vector<double> y;          // [B, T, D]
  std::vector<double> conv;       // [B, conv_dim, Kc]: the last Kc conv inputs (zero-padded on the left)
  std::vector<double> recurrent;  // [B, HV, K, V]
};

// x [B, T, D]; conv0 [B, conv_dim, Kc] and rec0 [B, HV, K, V] the carried state, or null for zeros.
Status reference_layer(const LayerSpec& spec, const WeightLookup& weights, const TensorView& x, const TensorView* conv0,
                       const TensorView* rec0, ReferenceResult* out);

}  // namespace hanpu::layer
