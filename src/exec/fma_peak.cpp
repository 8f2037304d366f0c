#include "exec/fma_peak.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "exec/thread_pool.h"
#include "kernels/kernel_set.h"
#include "kernels/simd.h"

namespace hanpu {

double measure_fma_peak(int threads, bool bf16) {
  const KernelSet& ks = active_kernels();
  if (bf16 && !ks.bf16_peak) return 0;
  ThreadPool& pool = shared_pool(threads);
  const int64_t iters = bf16 ? 10'000'000 : 20'000'000;
  std::vector<double> flops(threads), secs(threads);
  for (int round = 0; round < 2; ++round) {  // the first round warms up clocks
    pool.run([&](int t) {
      const auto t0 = std::chrono::steady_clock::now();
      flops[t] = bf16 ? ks.bf16_peak(iters) : simd::fma_peak_kernel(iters);
      secs[t] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
  }
  double total = 0, slowest = 0;
  for (int t = 0; t < threads; ++t) {
    total += flops[t];
    slowest = std::max(slowest, secs[t]);
  }
  return total / slowest / 1e9;
}

}  // namespace hanpu
