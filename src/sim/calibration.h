// The calibration report: the NPU model run at the configurations of the HA-NPU paper's profiling figures
// (research/ha_npu_calibration.md, C4-C9: Qwen3.5-2B linear-attention layers on an Ascend 310P), printing
// the model's value beside each figure. On another device the same runs show what changes (no figures to
// match there). The model is calibrated only where a row says so; every other row is a prediction.
#pragma once

#include <string>
#include <vector>

#include "hanpu/status.h"
#include "plan/device.h"

namespace hanpu::sim {

struct CalibrationRow {
  std::string figure;         // "C4", ...
  std::string what;           // the quantity
  std::string configuration;  // how the model was run for it
  std::string unit;           // "%", "KiB", "GB/s"
  bool has_figure = false;    // the paper's value exists for this device (the 310P)
  double figure_lo = 0, figure_hi = 0;  // the figure (a range where the paper gives one)
  double model_lo = 0, model_hi = 0;    // the model (a range over the configuration's sweep)
  bool calibrated = false;    // a device parameter was fitted to this figure (named in its source)
  // Whether the model's range meets the figure's widened by 25% each way.
  bool within_25_percent() const { return has_figure && model_hi >= 0.75 * figure_lo && model_lo <= 1.25 * figure_hi; }
};

// The rows for `d` (a device with a "sim" section); progress on stderr when `progress`.
Status calibration_report(const plan::Device& d, std::vector<CalibrationRow>* out, bool progress = false);

}  // namespace hanpu::sim
