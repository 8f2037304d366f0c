// Vectors whose storage starts on a 64-byte cache line, for every buffer a GEMM reads or writes.
//
// Why: std::vector's storage is only 16-byte aligned, so a row of 64 bytes (a 512-bit register, an AMX tile
// row of 16 pair words or 16 fp32) straddles two cache lines and costs two L1 accesses. Measured on the
// Intel Xeon with AMX (a 64 x 128 x 128 bf16 product on tiles, 2 x 2 blocks of 16 x 16 tiles, in cache):
// 1.04 us with A, B and C on line boundaries, 2.69 us with all three 16 bytes off, 1.46-1.89 us with one or
// two off. Row strides that are multiples of 64 bytes (K = V = 128 in fp32 or bf16) then keep every row
// on its lines.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace hanpu {

inline constexpr std::size_t kCacheLine = 64;

template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kCacheLine}));
  }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t{kCacheLine}); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept {
    return true;
  }
  template <class U>
  bool operator!=(const CacheLineAllocator<U>&) const noexcept {
    return false;
  }
};

// A std::vector whose data() is 64-byte aligned.
template <class T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace hanpu
