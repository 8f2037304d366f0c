// What the modes of `hanpu bench` share: the synthetic inputs and the planner's estimate of a chunk step
// by the parts the engine times (bench.cpp's prefill and decode runs, parts_bench.cpp's in-cache steps).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "hanpu/tensor.h"
#include "plan/plan.h"

namespace hanpu {

// Cheap deterministic fill (xorshift, uniform in [-a, a]): large inputs in milliseconds, not seconds.
void fill_uniform(std::vector<float>& x, uint64_t seed, float a);

// x converted to dtype dt in a new tensor of `shape`.
Tensor to_dtype(const std::vector<float>& x, DType dt, std::vector<int64_t> shape);

// OK where `bytes`, a lower bound of what a run will hold in memory at once, fits in this machine's physical
// memory; else InvalidArgument naming `request` (the options that set the size) and both sizes. A run too
// large for the machine fails here with a message instead of aborting in an allocation or being killed by
// the kernel's OOM killer part way through.
Status check_fits_in_memory(double bytes, const std::string& request);

// The bench's prefill inputs for T tokens of H q/k heads and HV value heads, [T, heads, dim] in fp32
// (B = 1, so a prefix of T' tokens is the inputs of T'): q, k, v uniform in [-1.7, 1.7], log decays g in
// (-0.101, -0.001] (one per value head for GDN, K per value head for KDA), beta in (0, 1).
struct BenchInputs {
  std::vector<float> q, k, v, g, beta;
};
BenchInputs bench_inputs(const BenchConfig& cfg, int64_t T, int64_t H, int64_t HV);

// The planner's estimate of one (chunk, head) step of a hanpu run by breakdown part, into
// rec->model_breakdown_us: the chunk plan the engine ran (cfg.plan's, or the host plan of the call's shape,
// precision and packing), each operator's cost in the part the engine times it in (exec/chunk_kernels.h
// part_of), and for a whole run's step (whole_run) the rows' trip from memory as the prefetch part
// (plan::step_memory_cycles; a step in cache has no such part). Left empty where cfg.plan was made for
// another device's costs.
Status step_estimate_by_part(const BenchConfig& cfg, plan::Packing packing, bool bf16, int64_t C, bool whole_run,
                             BenchRecord* rec);

// The host chunk plan of a call of the bench's shape (kind, K, V, C, precision, packing).
Status host_chunk_plan(const BenchConfig& cfg, const plan::Device& host, bool bf16, plan::Packing packing, int64_t C,
                       plan::Plan* out);

// A bf16 record's speed over exact from the per-round ratios (exact's time over bf16's, one per round of
// interleaved runs): their median, least and most into rec->speedup_vs_exact*, and a progress line.
void set_speedup(const std::vector<double>& ratios, BenchRecord* rec,
                 const std::function<void(const std::string&)>& progress);

}  // namespace hanpu
