// `hanpu calibrate`: the host device description with costs measured on this machine's engine kernels.
//
// Costs are in nanoseconds (the description's clock is fixed at 1 GHz, so "cycles" read as ns):
// - matrix.macs_per_cycle: MACs per ns of the SIMD GEMM on a chunk's shape (C x V x K, row-major);
// - matrix.dense_penalty: the update GEMM (K x V x C) reading its operand transposed in place, over the
//   same GEMM on a packed [K, C] panel (the engine's two forms of that step);
// - matrix.solve_macs_per_cycle: the triangular inverse's MACs (C (C-1) (C-2) / 6) per ns, on a C x C chunk
//   matrix (its diagonal blocks' forward substitution does not run at the GEMM rate);
// - vector.bytes_per_cycle: bytes per ns of the row-scaling kernel on a chunk of rows;
// - chunk_rows: loading a GDN chunk's bf16 rows (q and k l2-normalised) and storing its bf16 o rows, per fp32
//   byte of the chunk graph's input tensors and of O, in cache (a long sequence's DRAM misses come on top);
// - layout.transform_*: packing a [C, K] block into a [K, C] panel, per byte (the cost model charges
//   2 x bytes / rate: one read and one write) and its fixed cost (the intercept of two sizes);
// - bf16_matrix: the active kernel set's bf16 GEMM on a chunk's shape with its right operand packed (MACs
//   per ns), its packing of a [K, V] fp32 operand per fp32 byte and fixed, and its dense_penalty: the
//   update GEMM reading its operand transposed in place over the same GEMM on a panel with V' packed
//   (plan/packing.h).
// Every value is the median of repeated timings after a warm-up, and records that in its source.
#pragma once

#include <functional>
#include <string>

#include "hanpu/status.h"
#include "plan/device.h"

namespace hanpu::plan {

struct CalibrateOptions {
  int reps = 200;           // timed repetitions of each kernel
  int64_t C = 64, K = 128, V = 128;
};

// The description as JSON text (schema hanpu-device/1), from the shipped devices/host.json with the
// measured fields replaced and a "calibration" object (kCalibrationFormat, the active kernel set's name);
// `progress` gets one line per measurement.
Status calibrate_host(const CalibrateOptions& opt, const std::function<void(const std::string&)>& progress,
                      std::string* json_text);

// The planner's "host" for this process: load_host_device for the active kernel set (the engine plans its
// calls on it; bench and plan print `note`).
Status load_this_host(Device* out, std::string* note);

}  // namespace hanpu::plan
