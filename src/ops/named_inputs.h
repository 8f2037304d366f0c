// Binds tensors named as FLA's arguments (q, k, v, g, beta; optional initial_state, cu_seqlens, A_log,
// dt_bias) to operator Inputs. Used by the CLI, by `hanpu verify` and by tests.
#pragma once

#include "hanpu/ops.h"
#include "hanpu/safetensors.h"

namespace hanpu {

// The views point into `file`, which must outlive `in`. A missing required tensor is kNotFound.
Status bind_inputs(const TensorFile& file, Inputs* in);

}  // namespace hanpu
