// Device descriptions (devices/*.json, schema "hanpu-device/1"): the parameters the planner's cost model
// and lifetime analysis read. Every number is an object {"value": ..., "source": "..."}: the document,
// page or repository path it comes from, or "estimate: <arithmetic>". Loading validates everything and
// names the field path of the first error, e.g. "devices/x.json: matrix.macs_per_cycle.value: expected a
// positive number".
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hanpu/status.h"

namespace hanpu::plan {

struct Memory {
  std::string name;
  int64_t bytes = 0;
  bool on_chip = false;
};

// The NPU model's data-movement parameters (optional section "sim"; the host has none).
// Queue names of the engines in traces and busy times (data, so nothing depends on a device's name).
struct Queues {
  std::string load, store, matrix_load, matrix, matrix_out, vector, control;
};

struct SimParams {
  double global_gbps = 0;                   // the chip's global-memory bandwidth, shared by all cores
  double global_read_bytes_per_cycle = 0;   // one core's load path from global memory
  double global_write_bytes_per_cycle = 0;  // one core's store path to global memory
  double l1_to_l0_bytes_per_cycle = 0;      // matrix operands into the matrix unit
  double l0c_to_ub_bytes_per_cycle = 0;     // matrix results out to the vector memory
  // Vector-memory tensors into the matrix unit's operand memory (Ascend UB -> L1, on the store queue, the
  // one that reads UB); required where the two memories differ.
  double ub_to_l1_bytes_per_cycle = 0;
  double transfer_setup_cycles = 0;         // fixed cost of each global-memory transfer
  double launch_overhead_us = 0;            // per kernel launch
  double framework_op_us = 0;               // per eager framework operator (the native baseline's launches)
  double barrier_us = 0;                    // one cross-core barrier inside a launch (megakernels)
  bool l0c_to_ub_via_vector = false;        // matrix results reach the vector memory through the vector unit
  Queues queues;                            // matrix_out is the vector queue when results relay through it
  // Energy coefficients (pJ), and the chip's static power (W) charged over the whole latency.
  double pj_per_mac = 0, pj_per_vector_cycle = 0, pj_per_global_byte = 0, pj_per_on_chip_byte = 0;
  double static_w = 0;
};

// The format of the descriptions `hanpu calibrate` writes (their "calibration" object), raised whenever what
// it measures or what the cost model reads from it changes meaning, so that one an older hanpu wrote is set
// aside instead of read with the new meaning (2: the bf16 rate measured on bf16 rows and the unit's tile, the
// first format written, 3: the chunk rows' trip from memory, chunk_rows.memory_bytes_per_cycle; a calibration
// without the object predates them).
inline constexpr int kCalibrationFormat = 3;

// Whether two measurements of one core's FMA peak, `ratio` = one over the other, show the machine at the same
// speed: within 20%. Runs a minute apart in one speed phase of the virtual machines these figures come from
// spread by up to 15% (an Ice Lake Xeon guest: 145-172 GFLOP/s); a phase change moved the speed by a third.
inline bool fma_peak_steady(double ratio) { return ratio > 1 / 1.2 && ratio < 1.2; }

struct Device {
  std::string name, description, origin;  // origin: the file it came from
  // The optional "calibration" object {"format": n, "kernel_set": "name", "fma_peak_gflops": x} of a description
  // `hanpu calibrate` wrote: its format, the kernel set whose kernels it measured (0 and "": none), and one
  // core's fp32 FMA peak while it measured (0: not recorded; calibrations before it), which says at what speed
  // the machine ran its timings.
  int calibration_format = 0;
  std::string calibration_kernel_set;
  double calibration_fma_peak_gflops = 0;
  double clock_ghz = 1;
  int cores = 1;
  int operand_bytes = 4;  // bytes per element of chunk operands (the state is always fp32)
  std::vector<Memory> memories;
  // Which memory holds what (names from `memories`).
  std::string vector_mem, matrix_operand_mem, matrix_result_mem, state_mem, materialised_mem;
  std::string matrix_left_mem, matrix_right_mem;  // optional: where the matrix unit reads its operands
  double matrix_macs_per_cycle = 1;
  // Optional (matrix.solve_macs_per_cycle; 0: the matrix rate): the rate of the triangular inverse's MACs,
  // where the solve does not run at the GEMM rate (the host's forward substitution of its diagonal blocks
  // is scalar chains; hanpu calibrate measures the whole inverse).
  double solve_macs_per_cycle = 0;
  bool matrix_requires_blocked = false;
  // Optional (matrix.scales_accumulator_rows, default false): the GEMM applies C's row factors on C's way
  // into its registers or tiles (the host's RowScale, kernels/kernel_set.h), so the state update's decay,
  // S' = diag(eGlast) S + KtV, rides on the K^T V' product's pass over S and costs no vector pass of its own.
  bool matrix_scales_accumulator = false;
  double matrix_dense_penalty = 1;      // cycles factor of a GEMM reading a transposed operand in place
                                        // (dense) instead of from a blocked/packed copy (when allowed)
  bool vector_allows_blocked = true;    // vector operators can run on blocked tiles
  double vector_bytes_per_cycle = 1;
  double vector_blocked_row_wise_penalty = 1;  // cycles factor of a row-wise vector op on blocked tiles
  int64_t block_rows = 16, block_cols = 16;
  double transform_bytes_per_cycle = 1, transform_fixed_cycles = 0;
  // The bf16 precision mode's matrix unit (optional section "bf16_matrix"; the host's): its MAC rate, and
  // the cost of packing an fp32 operand into the unit's operand layout (pairs of bf16 along the reduction
  // dimension, 16 columns a row: the VDPBF16PS register layout and AMX's B tile layout), per fp32 source
  // byte and fixed. Absent: the fp32 matrix rate and the layout transform's costs stand in.
  // dense_penalty (optional, default 1): the cost factor of a bf16 GEMM reading a transposed left operand in
  // place (the update's key rows, transposed on the way) over the same GEMM on rows of its transpose.
  // tile_rows, tile_cols, tile_k (optional integers, default 1, 16, 2: VDPBF16PS's register layout): the
  // unit's operand tile, to whole multiples of which a product's M, N and reduction are padded (AMX: 16, 16,
  // 32). macs_per_cycle is the unit's rate on a left operand already in bf16 rows; converting an fp32 left
  // operand costs a packing of its bytes on top (plan/packing.h).
  bool has_bf16_matrix = false;
  double bf16_macs_per_cycle = 0, bf16_pack_bytes_per_cycle = 0, bf16_pack_fixed_cycles = 0, bf16_dense_penalty = 1;
  int64_t bf16_tile_rows = 1, bf16_tile_cols = 16, bf16_tile_k = 2;
  // Data movers that convert between dense and blocked while they move (optional flags in "layout"): a
  // global-memory load into the matrix unit's memory (Ascend's Nd2Nz DataCopy), the move of a matrix
  // result out of its result memory (310P's vector relay), a store to global memory (Nz2Nd). Where one
  // converts, the conversion costs nothing beyond the move; elsewhere it is an explicit transform.
  bool load_converts = false, result_move_converts = false, store_converts = false;
  // Buffers beside the tensors (optional section "buffers"): slots per tensor loaded from global memory
  // (2: ping-pong, the next chunk's loads land while this one computes) and bytes of the vector memory the
  // data movers reserve (e.g. Ascend's Nd2Nz staging).
  int load_slots = 1;
  int64_t vector_scratch_bytes = 0;
  // The host engine's chunk rows (optional section "chunk_rows", written by hanpu calibrate): loading a
  // chunk's input rows from the call's tensors (widened to fp32, q and k l2-normalised) and storing its
  // output rows, per fp32 byte of the chunk graph's input tensors and of O. Charged with the gate cumsum
  // (the engine's load step) and with O (its store step); 0: not modelled (the NPU model moves rows with its
  // own DMA queues).
  double rows_load_bytes_per_cycle = 0, rows_store_bytes_per_cycle = 0;
  // Optional (chunk_rows.memory_bytes_per_cycle): asking for a (chunk, head) step's rows from memory one step
  // ahead (the engine's prefetch burst, each line waiting for a free miss slot), per fp32 byte of the chunk
  // graph's inputs and O as the calibration's bf16 rows. Not an operator's: a whole run's step pays it
  // between steps, a step in cache does not (step_memory_cycles); 0: not modelled.
  double rows_memory_bytes_per_cycle = 0;
  bool has_sim = false;
  SimParams sim;

  const Memory* memory(const std::string& name) const;
  // Cycles of vector work over `bytes`: whole iterations of the unit's width (Ascend: a repeat is 8 blocks
  // of 32 B, a partial one still a repeat:
  // https://www.hiascend.com/document/detail/zh/canncommercial/83RC1/API/cceintrinsicapi/cceapi_0007.html).
  double vector_cycles(double bytes) const;
};

// The shipped descriptions compiled into the library (name, JSON text), from devices/*.json at build time.
const std::vector<std::pair<std::string, std::string>>& embedded_devices();

// The directory of the shipped device files (the source tree's devices/, or $HANPU_DEVICES_DIR).
std::string devices_dir();
// Names of the shipped devices (the *.json files in devices_dir()), sorted.
std::vector<std::string> shipped_devices();
// `name_or_path`: a shipped device name (e.g. "ascend-310p", "host": the shipped default) or a path to a JSON
// file.
Status load_device(const std::string& name_or_path, Device* out);
// The planner's "host" for a process whose engine runs the kernel set `kernel_set`: the description `hanpu
// calibrate` wrote at calibrated_host_path() (exec/calibrate.h) where there is one and it measured that set
// in the current format, else the shipped default; `note` (may be null) says why a calibration there was set
// aside, and is empty where none was. A file that does not load is an error where HANPU_HOST_DEVICE names it,
// and set aside with a note where it is the cache's own (a damaged cache must not fail every engine call).
Status load_host_device(const std::string& kernel_set, Device* out, std::string* note);
// Parses a device description from JSON text; `origin` prefixes error messages.
Status parse_device(const std::string& text, const std::string& origin, Device* out);
// Where `hanpu calibrate` writes by default and where load_host_device looks first:
// $HANPU_HOST_DEVICE, else $XDG_CACHE_HOME/hanpu/host.json, else ~/.cache/hanpu/host.json (an empty
// variable counts as unset).
std::string calibrated_host_path();

}  // namespace hanpu::plan
