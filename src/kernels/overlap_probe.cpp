// The one-core overlap probe's instruction streams (kernels/overlap_probe.h). Intrinsics under target
// attributes, run only after the run-time checks in probe_matrix_lane; off x86 there is no probe.
//
// A step is kProbeMatrixChains matrix instructions on independent accumulators (VDPBF16PS: 16 lanes x 2
// products, 64 flops each; or VFMADD on fp32: 32 flops), or kProbeTileChains TDPBF16PS on the four C tiles of
// a 2 x 2 tile block (16 x 16 outputs x 32 products: 16384 flops each; operand tiles loaded once; also the AMX
// set's bf16 peak), followed by `rounds` rounds of vector work on independent registers: 8 FMAs (kFma), or
// the exp of 2 registers (kExp: range reduction, a degree-6 polynomial by Horner, VSCALEF — the instruction
// mix of a softmax's exp), or 8 loads, FMAs and stores rolling over an 8 KiB buffer (kMemory). With operands
// in registers everything else stays in the 32 vector registers (12 + 8 chains and 4 operands; more would
// spill to the stack and time the stack), so those streams measure the core's execution units; operands from
// kL1 or kL2 add the loads a real GEMM makes every step (AMX: its four operand tiles, 4 KiB), rolling over a
// buffer of 16 KiB or 1 MiB.
#include "kernels/overlap_probe.h"

#include <cstdint>

#include "core/aligned.h"
#include "kernels/amx_support.h"
#include "kernels/amx_tiles.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace hanpu {

#if defined(__x86_64__) || defined(__i386__)
namespace {

// The matrix operands a step loads (kL1, kL2): 4 KiB a step, two halves of 2 KiB, bf16 ones (0x3F80: AMX's A
// tiles 4-5, VDPBF16PS's a) then bf16 2^-7 (0x3C00: B tiles 6-7, VDPBF16PS's b; as fp32 words about 0.0079,
// the FMA lane's addend); a step reads the next 4 KiB of its buffer, wrapping.
constexpr int64_t kStepBytes = 4096;
int64_t operand_bytes(ProbeOperands o) { return o == ProbeOperands::kL2 ? (int64_t{1} << 20) : o == ProbeOperands::kL1 ? 16384 : 0; }

const char* operand_buffer() {
  static const AlignedVector<uint16_t> buf = [] {
    AlignedVector<uint16_t> b(static_cast<std::size_t>(operand_bytes(ProbeOperands::kL2) / 2));
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = (i * 2) % kStepBytes < kStepBytes / 2 ? 0x3F80 : 0x3C00;
    return b;
  }();
  return reinterpret_cast<const char*>(buf.data());
}

// Step s's operands: the next 4 KiB of the buffer (null with operands in registers).
inline const char* step_operands(const char* base, int64_t bytes, int64_t s) {
  return bytes ? base + (s * kStepBytes) % bytes : nullptr;
}

template <ProbeLane Lane>
__attribute__((target("avx512f,avx512bf16"))) inline void matrix_step(__m512* m, __m512i a, __m512i b, __m512 c,
                                                                      const char* ops) {
  if (ops) {  // this step's operands from memory
    a = _mm512_load_si512(ops);
    b = _mm512_load_si512(ops + kStepBytes / 2);
  }
  for (int k = 0; k < kProbeMatrixChains; ++k) {
    if constexpr (Lane == ProbeLane::kBf16Dot) {
      m[k] = _mm512_dpbf16_ps(m[k], reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(b));
    } else {
      m[k] = _mm512_fmadd_ps(m[k], c, ops ? _mm512_castsi512_ps(b) : c);
    }
  }
}

constexpr int kFmaChains = 8, kExpRegisters = 2, kMemoryFloats = 2048;

// exp(x) for kExpRegisters registers in place: x = n ln2 + f, |f| <= ln2 / 2, exp(f) by its Taylor polynomial to f^6.
__attribute__((target("avx512f"))) inline void exp_in_place(__m512* x) {
  const __m512 log2e = _mm512_set1_ps(1.44269504f), ln2 = _mm512_set1_ps(-0.693147181f);
  const float coef[7] = {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};
  for (int k = 0; k < kExpRegisters; ++k) {
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x[k], log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_fmadd_ps(n, ln2, x[k]);
    __m512 p = _mm512_set1_ps(coef[0]);
    for (int i = 1; i < 7; ++i) p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(coef[i]));
    x[k] = _mm512_scalef_ps(p, n);
  }
}

// kMemory's buffer: 8 KiB of this thread's, in L1 (each value moves towards d / (1 - c), staying finite).
float* memory_rounds_buffer() {
  alignas(64) thread_local float buf[kMemoryFloats];
  return buf;
}

// The vector work of one step: `rounds` rounds of `kind` on v (kMemory: on mem, from float `*pos` on).
__attribute__((target("avx512f"))) inline void vector_rounds(int rounds, ProbeVector kind, __m512* v, __m512 c,
                                                             __m512 d, float* mem, int64_t* pos) {
  for (int r = 0; r < rounds; ++r) {
    if (kind == ProbeVector::kFma) {
      for (int k = 0; k < kFmaChains; ++k) v[k] = _mm512_fmadd_ps(v[k], c, d);
    } else if (kind == ProbeVector::kMemory) {
      for (int k = 0; k < kFmaChains; ++k) {
        float* x = mem + ((*pos + 16 * k) & (kMemoryFloats - 1));
        _mm512_store_ps(x, _mm512_fmadd_ps(_mm512_load_ps(x), c, d));
      }
      *pos += 16 * kFmaChains;
    } else {
      exp_in_place(v);
      for (int k = 0; k < kExpRegisters; ++k) v[k] = _mm512_mul_ps(v[k], _mm512_set1_ps(-1e-3f));  // back near 0
    }
  }
}

template <ProbeLane Lane>
__attribute__((target("avx512f,avx512bf16"))) double run(bool matrix, int rounds, ProbeVector kind, int64_t steps,
                                                        ProbeOperands operands) {
  __m512 m[kProbeMatrixChains], v[kFmaChains];
  for (int k = 0; k < kProbeMatrixChains; ++k) m[k] = _mm512_set1_ps(static_cast<float>(k));
  for (int k = 0; k < kFmaChains; ++k) v[k] = _mm512_set1_ps(-0.001f * static_cast<float>(k + 1));
  // bf16 (1, 1) . (2^-7, 2^-7) and an fp32 factor just under 1: every chain stays finite and normal.
  const __m512i a = _mm512_set1_epi32(0x3F803F80), b = _mm512_set1_epi32(0x3C003C00);
  const __m512 c = _mm512_set1_ps(0.999999f), d = _mm512_set1_ps(1e-7f);
  const char* base = operand_buffer();
  const int64_t bytes = operand_bytes(operands);
  float* mem = memory_rounds_buffer();
  int64_t pos = 0;
  for (int64_t s = 0; s < steps; ++s) {
    if (matrix) matrix_step<Lane>(m, a, b, c, step_operands(base, bytes, s));
    vector_rounds(rounds, kind, v, c, d, mem, &pos);
  }
  __m512 sum = _mm512_setzero_ps();
  for (int k = 0; k < kProbeMatrixChains; ++k) sum = _mm512_add_ps(sum, m[k]);
  for (int k = 0; k < kFmaChains; ++k) sum = _mm512_add_ps(sum, v[k]);
  sum = _mm512_add_ps(sum, _mm512_load_ps(mem));
  alignas(64) float out[16];
  _mm512_store_ps(out, sum);
  return static_cast<double>(out[0]);
}

// The AMX stream: C tiles 0-3 += A tiles 4-5 times B tiles 6-7 (kernels/amx_tiles.h), A of bf16 ones and B
// of 2^-7, so each C element grows by 0.25 a step and stays finite for any step count.
__attribute__((target("amx-tile,amx-bf16,avx512f"))) double run_amx(bool matrix, int rounds, ProbeVector kind,
                                                                    int64_t steps, ProbeOperands operands) {
  use_amx_tiles();
  alignas(64) uint16_t a[16 * 32], b[16 * 32];
  for (int i = 0; i < 16 * 32; ++i) {
    a[i] = 0x3F80;
    b[i] = 0x3C00;
  }
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, a, 64);
  _tile_loadd(5, a, 64);
  _tile_loadd(6, b, 64);
  _tile_loadd(7, b, 64);
  __m512 v[kFmaChains];
  for (int k = 0; k < kFmaChains; ++k) v[k] = _mm512_set1_ps(-0.001f * static_cast<float>(k + 1));
  const __m512 c = _mm512_set1_ps(0.999999f), d = _mm512_set1_ps(1e-7f);
  const char* base = operand_buffer();
  const int64_t bytes = operand_bytes(operands);
  float* mem = memory_rounds_buffer();
  int64_t pos = 0;
  for (int64_t s = 0; s < steps; ++s) {
    if (matrix) {
      if (const char* ops = step_operands(base, bytes, s)) {  // A tiles from the ones, B tiles from the 2^-7 half
        _tile_loadd(4, ops, 64);
        _tile_loadd(5, ops + 1024, 64);
        _tile_loadd(6, ops + 2048, 64);
        _tile_loadd(7, ops + 3072, 64);
      }
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
    vector_rounds(rounds, kind, v, c, d, mem, &pos);
  }
  alignas(64) float out[4][256];
  _tile_stored(0, out[0], 64);
  _tile_stored(1, out[1], 64);
  _tile_stored(2, out[2], 64);
  _tile_stored(3, out[3], 64);
  __m512 sum = _mm512_setzero_ps();
  for (int k = 0; k < kFmaChains; ++k) sum = _mm512_add_ps(sum, v[k]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  return static_cast<double>(lanes[0]) + out[0][0] + out[1][0] + out[2][0] + out[3][0] + mem[0];
}

}  // namespace

ProbeLane probe_matrix_lane() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f")) return ProbeLane::kNone;
  if (amx_support().usable) return ProbeLane::kAmxTile;
  return __builtin_cpu_supports("avx512bf16") ? ProbeLane::kBf16Dot : ProbeLane::kFp32Fma;
}

double probe_stream(ProbeLane lane, bool matrix, int rounds, ProbeVector kind, int64_t steps, ProbeOperands operands) {
  switch (lane) {
    case ProbeLane::kBf16Dot: return run<ProbeLane::kBf16Dot>(matrix, rounds, kind, steps, operands);
    case ProbeLane::kFp32Fma: return run<ProbeLane::kFp32Fma>(matrix, rounds, kind, steps, operands);
    case ProbeLane::kAmxTile: return run_amx(matrix, rounds, kind, steps, operands);
    default: return 0;
  }
}

#else
ProbeLane probe_matrix_lane() { return ProbeLane::kNone; }
double probe_stream(ProbeLane, bool, int, ProbeVector, int64_t, ProbeOperands) { return 0; }
#endif

double probe_matrix_flops(ProbeLane lane, int64_t steps) {
  const double per_instruction = lane == ProbeLane::kAmxTile  ? 16384.0
                                 : lane == ProbeLane::kBf16Dot ? 64.0
                                 : lane == ProbeLane::kFp32Fma ? 32.0
                                                               : 0.0;
  return per_instruction * probe_matrix_instructions(lane) * static_cast<double>(steps);
}

}  // namespace hanpu
