// The peak a run measures its utilisation against, and `hanpu calibrate` the speed it measured at.
#pragma once

namespace hanpu {

// Measures the fp32 FMA peak of `threads` threads running at once (GFLOP/s: the flops of all over the slowest's
// time, after a warm-up round); with bf16, the peak of the kernel set's bf16 dot-product probe (0 when the set
// has none).
double measure_fma_peak(int threads, bool bf16 = false);

}  // namespace hanpu
