// Repacking of token-major inputs whose last dimension is not unit-stride.
//
// The engine reads one token's row (K channels, or the HV gate/beta values) at a time. A view whose
// channels are strided — transformers hands q, k, v over as views of a transposed [B, C, T] convolution
// output, so channel c of token t sits at c * T + t — puts every element of a row on its own cache line,
// and for T a multiple of 1024 every line of a row in the same L1 set: a Qwen3.5 layer's GDN call took
// 8x longer than on contiguous inputs. Such inputs are copied once into contiguous row-major buffers by a
// cache-blocked transpose (tiles of 32 tokens x 32 channels, read along the source's unit-stride axis),
// split over the pool's threads; everything else is read in place.
#pragma once

#include <cstdint>
#include <vector>

#include "exec/thread_pool.h"
#include "ops/problem.h"

namespace hanpu {

class RepackedInputs {
 public:
  // Rewrites the views of q, k, v, g, beta in `p` that need it to point at owned contiguous copies.
  void apply(Problem* p, ThreadPool& pool);
  int64_t bytes() const { return bytes_; }  // owned copies, for the workspace and traffic accounting

 private:
  std::vector<std::vector<unsigned char>> buffers_;
  int64_t bytes_ = 0;
};

// True when `v` (rank 3 or 4, token axis 1) has a last dimension of extent > 1 that is not unit-stride.
bool needs_repack(const TensorView& v);

}  // namespace hanpu
