#include "hanpu/tensor.h"

#include <cstring>
#include <sstream>

#include "core/strided.h"

namespace hanpu {

std::size_t dtype_size(DType dt) {
  switch (dt) {
    case DType::kF64: case DType::kI64: return 8;
    case DType::kF32: return 4;
    case DType::kF16: case DType::kBF16: return 2;
  }
  return 0;
}

const char* dtype_name(DType dt) {
  switch (dt) {
    case DType::kF64: return "F64";
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kI64: return "I64";
  }
  return "?";
}

bool parse_dtype(const std::string& name, DType* out) {
  static const DType all[] = {DType::kF64, DType::kF32, DType::kF16, DType::kBF16, DType::kI64};
  for (DType dt : all) {
    if (name == dtype_name(dt)) {
      *out = dt;
      return true;
    }
  }
  return false;
}

bool is_float(DType dt) { return dt != DType::kI64; }

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

int64_t TensorView::row_major_stride(int d) const {
  int64_t s = 1;
  for (int i = rank() - 1; i > d; --i) s *= shape[i];
  return s;
}

std::string TensorView::describe() const {
  std::ostringstream os;
  os << '[';
  for (int i = 0; i < rank(); ++i) os << (i ? ", " : "") << shape[i];
  os << "] " << dtype_name(dtype);
  return os.str();
}

Tensor::Tensor(DType dt, std::vector<int64_t> s) : dtype(dt), shape(std::move(s)) {
  bytes.assign(static_cast<std::size_t>(numel()) * dtype_size(dt), 0);
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

static uint32_t float_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

static float bits_float(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

uint16_t f32_to_f16_bits(float x) {
  const uint32_t u = float_bits(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return sign | (a > 0x7f800000u ? 0x7e00u : 0x7c00u);  // NaN (quiet), Inf
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to Inf
  const uint32_t e = a >> 23;
  const uint32_t m = a & 0x7fffffu;
  if (e < 113) {  // below 2^-14: a half subnormal (units of 2^-24) or zero
    if (e == 0) return sign;  // float subnormals are far below half's range
    const uint64_t mant = m | 0x800000u;
    const int shift = 126 - static_cast<int>(e);  // value / 2^-24 = mant * 2^(e - 126)
    if (shift > 31) return sign;
    uint32_t q = static_cast<uint32_t>(mant >> shift);
    const uint64_t rem = mant & ((uint64_t{1} << shift) - 1);
    const uint64_t half = uint64_t{1} << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return sign | static_cast<uint16_t>(q);
  }
  uint32_t h = ((e - 112) << 10) | (m >> 13);
  const uint32_t rem = m & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is correct
  return sign | static_cast<uint16_t>(h);
}

float f16_bits_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  if (e == 0) {
    const float v = static_cast<float>(m) * 5.9604644775390625e-8f;  // m * 2^-24, exact
    return sign ? -v : v;
  }
  if (e == 31) return bits_float(sign | 0x7f800000u | (m << 13));
  return bits_float(sign | ((e + 112) << 23) | (m << 13));
}

double round_to_dtype(double x, DType dt) {
  switch (dt) {
    case DType::kF64: case DType::kI64: return x;
    case DType::kF32: return static_cast<float>(x);
    case DType::kF16: return f16_bits_to_f32(f32_to_f16_bits(static_cast<float>(x)));
    case DType::kBF16: return bf16_bits_to_f32(f32_to_bf16_bits(static_cast<float>(x)));
  }
  return x;
}

void fill_from_doubles(Tensor& t, const std::vector<double>& values) {
  TensorView v = t.view();
  store_elems<double>(v, 0, 1, t.numel(), values.data());
}

std::vector<double> to_doubles(const TensorView& v) {
  std::vector<double> out(static_cast<std::size_t>(v.numel()));
  std::vector<int64_t> idx(v.rank(), 0);
  for (int64_t i = 0; i < v.numel(); ++i) {
    int64_t off = 0;
    for (int d = 0; d < v.rank(); ++d) off += idx[d] * v.stride(d);
    load_elems<double>(v, off, 1, 1, &out[i]);
    for (int d = v.rank() - 1; d >= 0; --d) {
      if (++idx[d] < v.shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

}  // namespace hanpu
