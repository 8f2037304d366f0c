#include "exec/repack.h"

#include <algorithm>
#include <cstring>

namespace hanpu {

bool needs_repack(const TensorView& v) {
  return v.rank() >= 2 && v.shape.back() > 1 && v.stride(v.rank() - 1) != 1;
}

namespace {

constexpr int64_t kTile = 32;

// dst (contiguous [B, T, M, C]) <- src ([B, T, M, C] with any strides) for the (b, m) pairs of `worker`.
// Each 32 x 32 (token, channel) tile is read channel by channel along tokens when tokens are the source's
// shorter stride, else token by token; either way the other side's lines stay in L1 for the tile.
template <int kBytes>
void copy_tiles(const TensorView& src, unsigned char* dst, int64_t B, int64_t T, int64_t M, int64_t C, int worker,
                int workers) {
  const int64_t sb = src.stride(0), st = src.stride(1);
  const int64_t sm = src.rank() == 4 ? src.stride(2) : 0;
  const int64_t sc = src.stride(src.rank() - 1);
  const auto* s = static_cast<const unsigned char*>(src.data);
  const bool tokens_inner = std::abs(st) < std::abs(sc);
  for (int64_t bm = worker; bm < B * M; bm += workers) {
    const int64_t b = bm / M, m = bm % M;
    for (int64_t t0 = 0; t0 < T; t0 += kTile) {
      const int64_t t1 = std::min(T, t0 + kTile);
      for (int64_t c0 = 0; c0 < C; c0 += kTile) {
        const int64_t c1 = std::min(C, c0 + kTile);
        auto one = [&](int64_t t, int64_t c) {
          std::memcpy(dst + (((b * T + t) * M + m) * C + c) * kBytes, s + (b * sb + t * st + m * sm + c * sc) * kBytes,
                      kBytes);
        };
        if (tokens_inner) {
          for (int64_t c = c0; c < c1; ++c)
            for (int64_t t = t0; t < t1; ++t) one(t, c);
        } else {
          for (int64_t t = t0; t < t1; ++t)
            for (int64_t c = c0; c < c1; ++c) one(t, c);
        }
      }
    }
  }
}

}  // namespace

void RepackedInputs::apply(Problem* p, ThreadPool& pool) {
  for (TensorView* v : {&p->in.q, &p->in.k, &p->in.v, &p->in.g, &p->in.beta}) {
    if (!needs_repack(*v)) continue;
    const int64_t B = v->shape[0], T = v->shape[1];
    const int64_t M = v->rank() == 4 ? v->shape[2] : 1, C = v->shape.back();
    const std::size_t es = dtype_size(v->dtype);
    buffers_.emplace_back(static_cast<std::size_t>(v->numel()) * es);
    unsigned char* dst = buffers_.back().data();
    bytes_ += static_cast<int64_t>(buffers_.back().size());
    const TensorView src = *v;
    pool.run([&](int w) {
      switch (es) {
        case 2: copy_tiles<2>(src, dst, B, T, M, C, w, pool.size()); break;
        case 4: copy_tiles<4>(src, dst, B, T, M, C, w, pool.size()); break;
        default: copy_tiles<8>(src, dst, B, T, M, C, w, pool.size()); break;
      }
    });
    *v = with_strides(TensorView(dst, v->dtype, v->shape));
  }
}

}  // namespace hanpu
