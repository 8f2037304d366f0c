// hanpu: fast delta-rule linear attention (Gated DeltaNet, Kimi Delta Attention). Umbrella header.
#pragma once

#include "hanpu/engine.h"
#include "hanpu/ops.h"
#include "hanpu/safetensors.h"
#include "hanpu/status.h"
#include "hanpu/tensor.h"
#include "hanpu/version.h"
