// Element access through a TensorView: offsets and strides in elements, any dtype, unaligned data.
// Every read goes through memcpy, so unaligned views (e.g. tensors inside a safetensors file) are safe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "hanpu/tensor.h"

namespace hanpu {

// out[i] = view[off + i * stride] for i < n, converted to R (float or double).
template <typename R>
inline void load_elems(const TensorView& v, int64_t off, int64_t stride, int64_t n, R* out) {
  const unsigned char* base = static_cast<const unsigned char*>(v.data);
  const int64_t es = static_cast<int64_t>(dtype_size(v.dtype));
  auto each = [&](auto convert) {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<R>(convert(base + (off + i * stride) * es));
  };
  switch (v.dtype) {
    case DType::kF64: each([](const unsigned char* p) { double x; std::memcpy(&x, p, 8); return x; }); break;
    case DType::kF32:
      if constexpr (sizeof(R) == 4) {
        if (stride == 1) {  // the common contiguous case: one copy
          std::memcpy(out, base + off * 4, static_cast<std::size_t>(n) * 4);
          break;
        }
      }
      each([](const unsigned char* p) { float x; std::memcpy(&x, p, 4); return x; });
      break;
    case DType::kF16: each([](const unsigned char* p) { uint16_t h; std::memcpy(&h, p, 2); return f16_bits_to_f32(h); }); break;
    case DType::kBF16:
      if (stride == 1) {  // contiguous: widen in blocks through an aligned buffer (vectorises)
        uint16_t buf[256];
        for (int64_t i0 = 0; i0 < n; i0 += 256) {
          const int64_t m = std::min<int64_t>(256, n - i0);
          std::memcpy(buf, base + (off + i0) * 2, static_cast<std::size_t>(m) * 2);
          for (int64_t i = 0; i < m; ++i) out[i0 + i] = static_cast<R>(bf16_bits_to_f32(buf[i]));
        }
        break;
      }
      each([](const unsigned char* p) { uint16_t h; std::memcpy(&h, p, 2); return bf16_bits_to_f32(h); });
      break;
    case DType::kI64: each([](const unsigned char* p) { int64_t x; std::memcpy(&x, p, 8); return x; }); break;
  }
}

// view[off + i * stride] = in[i] for i < n, rounded to the view's dtype (round to nearest even).
template <typename R>
inline void store_elems(const TensorView& v, int64_t off, int64_t stride, int64_t n, const R* in) {
  unsigned char* base = static_cast<unsigned char*>(v.data);
  const int64_t es = static_cast<int64_t>(dtype_size(v.dtype));
  auto each = [&](auto convert) {
    for (int64_t i = 0; i < n; ++i) convert(base + (off + i * stride) * es, in[i]);
  };
  switch (v.dtype) {
    case DType::kF64: each([](unsigned char* p, R x) { double y = static_cast<double>(x); std::memcpy(p, &y, 8); }); break;
    case DType::kF32:
      if constexpr (sizeof(R) == 4) {
        if (stride == 1) {  // the common contiguous case: one copy
          std::memcpy(base + off * 4, in, static_cast<std::size_t>(n) * 4);
          break;
        }
      }
      each([](unsigned char* p, R x) { float y = static_cast<float>(x); std::memcpy(p, &y, 4); });
      break;
    case DType::kF16:
      each([](unsigned char* p, R x) { uint16_t h = f32_to_f16_bits(static_cast<float>(x)); std::memcpy(p, &h, 2); });
      break;
    case DType::kBF16:
      if (stride == 1) {  // contiguous: narrow in blocks through an aligned buffer (vectorises)
        uint16_t buf[256];
        for (int64_t i0 = 0; i0 < n; i0 += 256) {
          const int64_t m = std::min<int64_t>(256, n - i0);
          for (int64_t i = 0; i < m; ++i) buf[i] = f32_to_bf16_bits(static_cast<float>(in[i0 + i]));
          std::memcpy(base + (off + i0) * 2, buf, static_cast<std::size_t>(m) * 2);
        }
        break;
      }
      each([](unsigned char* p, R x) { uint16_t h = f32_to_bf16_bits(static_cast<float>(x)); std::memcpy(p, &h, 2); });
      break;
    case DType::kI64: each([](unsigned char* p, R x) { int64_t y = static_cast<int64_t>(x); std::memcpy(p, &y, 8); }); break;
  }
}

inline int64_t load_i64(const TensorView& v, int64_t off) {
  int64_t x;
  std::memcpy(&x, static_cast<const unsigned char*>(v.data) + off * 8, 8);
  return x;
}

}  // namespace hanpu
