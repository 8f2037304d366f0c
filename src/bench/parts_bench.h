// `hanpu bench --parts`: where one chunk step of the hanpu strategy spends its time when its data is in
// cache. Whole-run timings (--breakdown) mix each part's arithmetic with the memory traffic of the rows'
// first touch and a noisy machine's phases; repeating one (chunk, head) step on the same data keeps its
// rows, buffers and state in the core's caches, so each part's time is its kernels' alone, comparable
// between builds and kernel sets (HANPU_KERNELS) and with the planner's in-cache cost model.
#pragma once

#include <functional>
#include <string>

#include "bench/bench.h"

namespace hanpu {

// One record per run: the engine's own chunk program for the bench's kind, head dims and precision
// (engine_chunk_program), run by the engine's own steps (HeadSteps: prepare, then state, of chunk 0 of one
// head of C = 64 rows with an initial state) 100 x cfg.reps times after 20 warm-ups, each step timed by
// part (load, scores, inverse, gemm, vector, store). The record's median_ms / min_ms are a step's, its
// parts_us / parts_min_us each part's median / least, and model_breakdown_us the planner's estimate.
// The inputs are the bench's (bench_common.h) for one head, in cfg.dtype; the steps run with denormals
// flushed, as on the engine's threads (exec/fp_mode.h).
Status run_parts_bench(const BenchConfig& cfg, const std::function<void(const std::string&)>& progress,
                       BenchReport* out);

}  // namespace hanpu
