// A built layer: the weights in the packed form the forward reads (layer/weights.cpp builds it,
// layer/forward.cpp runs it).
#pragma once

#include <cstdint>
#include <vector>

#include "hanpu/layer.h"

namespace hanpu {

struct Layer::Impl {
  LayerSpec spec;
  Precision precision = Precision::kExact;  // kExact or kBf16 (resolved)
  DType act = DType::kF32;                  // activation and weight dtype: F32 or BF16

  // The first-stage projection: every weight that reads x, stacked into one [N1, D] matrix so one GEMM
  // reads x once. Rows (= columns of its output P):
  //   GDN: [q (H K) | k (H K) | v (HV V) | z (HV V) | b (HV) | a (HV)]
  //   KDA: [q (H K) | k (H K) | v (H K)  | b (H) | f_a (K) | g_a (K)]
  Tensor w_in;
  int64_t n1 = 0;
  int64_t col_z = 0, col_b = 0, col_a = 0;    // GDN
  int64_t col_fa = 0, col_ga = 0;             // KDA (col_b too)
  Tensor w_fb, w_gb;                          // KDA second stage, [H K, K]
  Tensor w_out;                               // [D, HV V]
  std::vector<float> conv_w;                  // [Kc, conv_dim], tap-major (values of the act dtype)
  std::vector<float> conv_b;                  // [conv_dim] or empty
  Tensor a_log, dt_bias;                      // F32: [HV]; dt_bias [HV] (GDN) or [HV K] (KDA)
  std::vector<float> norm_w;                  // [V] (values of the weight's dtype)
};

}  // namespace hanpu
