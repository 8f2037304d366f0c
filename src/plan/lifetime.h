// Lifetime analysis: peak live bytes per memory for a chunk graph in its order, on a device.
//
// Model (one chunk of one head, steps = operators in order):
// - an operand of a vector op must be in the device's vector memory, an operand of a matrix op in its
//   matrix-operand memory; a tensor is present in a memory from the step it is produced there (or moved
//   there: at its producer's step) to the last step that reads it from there. Graph inputs are loaded at
//   their first use in each memory.
// - a matrix op's result passes through the matrix-result memory at its producer's step only (moved out
//   at once, as FixPipe / L0C->UB moves do); where the device names them, its left and right operands
//   pass through the matrix unit's operand buffers (L0A / L0B) at that step only.
// - the recurrent state lives in the state memory: S from the chunk start to its last read, S' from its
//   production to the chunk end (and, like any tensor, S is also in the matrix-operand memory while
//   matrix ops read it). When the state update is S's last reader (chunk-first order), S' is
//   written over S in place: one buffer, not two.
// - a tensor whose producer and a consumer are different kernels is materialised in global memory
//   (written once, read back by each consuming kernel) and counted as traffic, not as on-chip bytes.
// Element sizes: per tensor and memory (elem_bytes below). What a kernel loads from global memory occupies
// `Device::load_slots` buffers (ping-pong): this chunk's copy from its first to its last use, and the
// next chunks' copies over all of the kernel's steps (they land while this chunk computes).
// `Device::vector_scratch_bytes` of the vector memory are reserved for the data movers (peaks include it).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "plan/device.h"
#include "plan/graph.h"

namespace hanpu::plan {

// One tensor's presence in one on-chip memory over steps [from, to] (inclusive) of a chunk, within one
// kernel. `uses` are the steps that touch it there (its producer's, its readers'), sorted; the state's
// chunk-spanning residencies count the chunk start (-1) or end (steps) as uses: S arrives from the
// previous chunk, S' leaves for the next one.
struct Residency {
  int tensor = -1;
  std::string memory;
  int kernel = 0;
  int from = 0, to = 0;
  int64_t bytes = 0;
  std::vector<int> uses;
  // A load slot held for the next chunk's copy of a loaded tensor (ping-pong): over all of the kernel's
  // steps, never used by this chunk (so never spilled).
  bool prefetch = false;
};

struct LifetimeReport {
  std::map<std::string, int64_t> peak_bytes;  // per memory name (on-chip memories only)
  std::map<std::string, int> peak_step;       // the step at which each peak occurs
  bool state_in_place = false;                // S' overwrites S
  int64_t materialised_bytes = 0;             // bytes written to global memory between kernels
  int64_t materialised_traffic_bytes = 0;     // those writes plus their reads
};

// Per-tensor dtypes. Q, K, V, beta and the output O are stored at the model's precision (the device's
// operand size), the log-decay gate and the state in fp32 (FLA keeps both in fp32); what a chunk computes is
// fp32 where it is computed: the vector unit's working precision, the matrix unit's accumulators in its
// result memory. The matrix unit reads operand-size copies: in a memory only it reads (Ascend's L1, L0A,
// L0B) every tensor is at the operand size; an fp32 tensor gets there by an explicit cast (the lowering's
// "cast" task, sim/chunk_lowering.cpp). Where one memory serves both units (Hexagon's VTCM, the host's
// cache) a tensor is counted at its working size. Global memory holds what one kernel hands another at the
// model's precision, the gate's cumsum and decay factors in fp32 (FLA's stored dtypes: T, W, U, the
// per-chunk states h[c] and V' in k.dtype / v.dtype, the gate cumsum fp32); the final state is fp32.
int elem_bytes(const Graph& g, int t, const Device& d, const std::string& memory);
int64_t tensor_bytes(const Graph& g, int t, const Device& d, const std::string& memory);
// The size stored in global memory (the device's materialised memory): loads, stores, traffic.
int64_t tensor_bytes(const Graph& g, int t, const Device& d);
// Whether the matrix unit reads a cast copy of t (its working size in the vector memory is above the
// operand size).
bool needs_cast(const Graph& g, int t, const Device& d);
// Whether the state update is S's last reader, so that S' can overwrite S (chunk-first order).
bool state_updated_in_place(const Graph& g);
// Every residency of the graph on the device, in tensor order (on-chip memories only).
std::vector<Residency> residencies(const Graph& g, const Device& d);
// Live bytes per on-chip memory at each step, from a list of residencies.
std::map<std::string, std::vector<int64_t>> live_bytes(const Graph& g, const Device& d, const std::vector<Residency>& rs);
LifetimeReport analyse_lifetimes(const Graph& g, const Device& d);

}  // namespace hanpu::plan
