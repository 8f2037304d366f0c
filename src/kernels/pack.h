// Packing an operand for the row-major GEMM kernels.
#pragma once

#include <cstdint>

namespace hanpu {

// dst[c, r] = src[r, c] * (scale ? scale[r * sw + (sw == 1 ? 0 : c)] : 1) for r < rows, c < cols: a
// transposed, optionally row- or element-scaled copy (the [K, L] panel of a K^T operand), through the active
// kernel set (kernels/kernel_set.h).
void pack_transposed(int64_t rows, int64_t cols, const float* src, int64_t lds, const float* scale, int64_t sw,
                     float* dst, int64_t ldd);

}  // namespace hanpu
