// Tasks of the multi-engine runtime (DESIGN.md §6): a task is a DAG of stages, each on one engine class
// (DMA, vector, matrix), built as a real tile pipeline for a device from a short text spec:
//
//   gemm:MxNxK[:dtype]       C[M,N] = A[M,K] B[K,N]: per output tile and K panel, DMA loads of the A and B
//                            panels (double-buffered), vector preparation into the matrix unit's layout,
//                            the matrix product (accumulating over panels), then a vector conversion of
//                            the accumulator and a DMA store.
//   softmax:RxC[:dtype]      per block of rows: DMA load, 4 vector passes (max, exp, sum, scale), DMA store
//   rmsnorm:RxC[:dtype]      2 vector passes (sum of squares, scale)
//   dequant:RxC[:dtype]      int8 -> dtype: load R*C bytes, 1 vector pass over the output, store
//   transform:RxC[:dtype]    a layout transform: 1 vector pass
//   eltwise:RxC[:dtype][:N]  a chain of N element-wise ops (default 2): N vector passes
//   gdn:CHUNKS, kda:CHUNKS   one head's chunks (C = 64, K = V = 128) as the planner's plan for the device
//                            orders them: each step on its engine at the cost model's cycles, the state
//                            on chip from chunk to chunk; on the host, the engine's own chunk steps on
//                            the host plan's program (two matrix-class stages per chunk, task.cpp)
// dtype: f16 (default), bf16, f32. Vector passes cost the bytes they touch over the device's vector rate,
// matrix products MACs over its matrix rate, DMA the device's set-up plus bytes over the path (sim/).
// On the host the stages run the real kernels: copies for DMA, the kernel registry's packing of the B
// panel into the matrix unit's layout for "prepare" (simd::pack_bf16: bf16 pairs on AVX512-BF16), its
// bf16 GEMM for the product (simd::gemm_packed_bf16: the matrix unit in use), and the vector passes
// themselves (transform: row-major to 16 x 16 blocks). Each host stage is cut into slices (row blocks of
// its tile) that the one-core executor interleaves with another task's.
// Tiles are the largest that fit the task's on-chip region (half the vector memory, so that two tasks
// can be in flight), double-buffered.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/aligned.h"
#include "hanpu/status.h"
#include "plan/device.h"

namespace hanpu::fuse {

enum class EngineClass { kDma, kVector, kMatrix };
const char* engine_class_name(EngineClass e);

struct Stage {
  std::string name;
  EngineClass engine = EngineClass::kVector;
  bool store = false;      // DMA: a write to global memory (else a read)
  double cycles = 0;       // vector / matrix work in device cycles
  double bytes = 0;        // DMA bytes
  std::vector<int> deps;   // earlier stages of the same task
};

// A stage's host work cut into `slices` pieces that must run in order: run(s0, s1) does slices [s0, s1)
// (row blocks of the stage's tile), and running them in any cut gives the same bits as running them whole.
struct HostStage {
  int64_t slices = 1;
  std::function<void(int64_t s0, int64_t s1)> run;
  void operator()() const { run(0, slices); }
};

struct Task {
  std::string spec;            // the text it was built from
  std::vector<Stage> stages;   // in a valid issue order (dependencies first)
  int64_t on_chip_bytes = 0;   // its region: double-buffered tiles
  // Resource vector: the work per engine class (vector and matrix cycles, DMA bytes).
  double vector_cycles = 0, matrix_cycles = 0, dma_bytes = 0;
  double deadline_us = 0;      // 0: none
  // Host execution (built with `host_data`): one entry per stage running the real kernel on the task's
  // own buffers (its inputs in "global" memory, its region's tiles), and the task's output.
  std::vector<HostStage> host;
  std::shared_ptr<const AlignedVector<float>> host_output;
};

// Builds the task `spec` for device `d` with an on-chip region of at most `region_bytes`. Errors name the
// bad part of the spec. With `host_data`, the task also gets deterministic inputs and its stages' host
// closures; the host computes in fp32 whatever the dtype (its tiles are sized for 4-byte elements).
Status build_task(const std::string& spec, const plan::Device& d, int64_t region_bytes, Task* out,
                  bool host_data = false);

// The deterministic inputs host tasks are built on: n values in [-1, 1) of a fixed linear congruential
// sequence from `seed` (GEMM A and B: seeds 1 and 2; row tasks: 3; gdn / kda q, k, v, g, beta: 4 to 8).
AlignedVector<float> task_inputs(int64_t n, uint32_t seed);

// The capacity of the device's vector memory (UB, VTCM): what in-flight tasks' regions share.
int64_t on_chip_capacity(const plan::Device& d);

}  // namespace hanpu::fuse
