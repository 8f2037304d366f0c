// Random operator instances for `hanpu verify` and the tests: shapes, options, dtypes and gate regimes
// drawn per scenario so that every option of the contract is exercised by kind and dtype.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hanpu/ops.h"
#include "hanpu/safetensors.h"

namespace hanpu {

struct Instance {
  int index = 0;
  std::string scenario;
  Kind kind = Kind::kGdn;
  DType dtype = DType::kF32;  // of q, k, v, g, beta (states, A_log, dt_bias are F32)
  bool extreme_gates = false; // contains -1000 gate entries
  Options opt;
  TensorFile tensors;         // named as FLA's arguments

  // "T=65 B=1 H=2 HV=4 K=60 V=48 C=32 varlen[3] init v-first l2norm ..."
  std::string describe() const;
};

// The scenario names, in the order instances cycle through them.
const std::vector<std::string>& verify_scenarios();

// Instance `index` of the run with `seed`: scenario, kind and dtype cycle with the index so that any
// 6 * scenarios consecutive instances cover every (kind, dtype, scenario) group once; the rest is random.
Instance make_instance(uint64_t seed, int index);

}  // namespace hanpu
