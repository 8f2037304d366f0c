// Tensor views: a pointer, a dtype, a shape and strides. hanpu never owns the memory behind a view.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "hanpu/status.h"

namespace hanpu {

enum class DType { kF64, kF32, kF16, kBF16, kI64 };

// Bytes per element.
std::size_t dtype_size(DType dt);
// Safetensors spelling: "F64", "F32", "F16", "BF16", "I64".
const char* dtype_name(DType dt);
// Parses the safetensors spelling; returns false for anything else.
bool parse_dtype(const std::string& name, DType* out);
bool is_float(DType dt);

// A strided view of n-dimensional data. `strides` are in elements (not bytes), one per dimension;
// empty strides mean contiguous row-major. Data may be unaligned; hanpu reads it through memcpy-safe
// loads. Views of inputs are only read; views of outputs are written and never read before.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;

  TensorView() = default;
  TensorView(const void* d, DType dt, std::vector<int64_t> s, std::vector<int64_t> st = {})
      : data(const_cast<void*>(d)), dtype(dt), shape(std::move(s)), strides(std::move(st)) {}

  int rank() const { return static_cast<int>(shape.size()); }
  int64_t numel() const;
  // Stride of dimension d in elements (row-major when `strides` is empty). Inline: the engine reads the
  // strides of its views once per row.
  int64_t stride(int d) const { return strides.empty() ? row_major_stride(d) : strides[static_cast<std::size_t>(d)]; }
  // The stride of dimension d of a contiguous row-major tensor of this shape.
  int64_t row_major_stride(int d) const;
  // "[1, 64, 2, 128] F32"
  std::string describe() const;
};

// A contiguous row-major tensor that owns its bytes: what file I/O and the CLI hand around.
struct Tensor {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;

  Tensor() = default;
  Tensor(DType dt, std::vector<int64_t> s);
  int64_t numel() const;
  TensorView view() const { return TensorView(bytes.data(), dtype, shape); }
};

// Element conversion helpers shared by the library, the CLI and tests (round to nearest even).
uint16_t f32_to_f16_bits(float x);
float f16_bits_to_f32(uint16_t h);
// bf16 is the upper half of an fp32: inline so that row conversions vectorise.
inline uint16_t f32_to_bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
inline float bf16_bits_to_f32(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
// Rounds x to the precision of `dt` (a no-op for F64) and returns it as a double.
double round_to_dtype(double x, DType dt);

// Copies `values` (row-major, numel of `t`) into `t`, converting to t's dtype.
void fill_from_doubles(Tensor& t, const std::vector<double>& values);
// Reads every element of `v` (any float or I64 dtype, any strides) as a double, row-major order.
std::vector<double> to_doubles(const TensorView& v);

}  // namespace hanpu
