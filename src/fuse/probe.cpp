#include "fuse/probe.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/aligned.h"
#include "kernels/kernel_set.h"
#include "kernels/simd.h"
#include "fuse/task.h"

#if defined(__linux__)
#include <sched.h>
#endif

namespace hanpu::fuse {

namespace {

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// Microseconds of one probe stream.
double time_stream(ProbeLane lane, bool matrix, int rounds, ProbeVector kind, int64_t steps, ProbeOperands ops) {
  const auto t0 = std::chrono::steady_clock::now();
  volatile double sink = probe_stream(lane, matrix, rounds, kind, steps, ops);
  (void)sink;
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

// Pins the calling thread to the core it is on for the probe's lifetime (one core, as the experiment asks),
// restoring its affinity after.
class PinToCurrentCore {
 public:
  PinToCurrentCore() {
#if defined(__linux__)
    if (sched_getaffinity(0, sizeof saved_, &saved_) != 0) return;
    cpu_ = sched_getcpu();
    if (cpu_ < 0) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu_, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) cpu_ = -1;
#endif
  }
  ~PinToCurrentCore() {
#if defined(__linux__)
    if (cpu_ >= 0) sched_setaffinity(0, sizeof saved_, &saved_);
#endif
  }
  PinToCurrentCore(const PinToCurrentCore&) = delete;
  PinToCurrentCore& operator=(const PinToCurrentCore&) = delete;
  int cpu() const { return cpu_; }

 private:
  int cpu_ = -1;
#if defined(__linux__)
  cpu_set_t saved_;
#endif
};

}  // namespace

const char* probe_vector_name(ProbeVector v) {
  return v == ProbeVector::kFma ? "fma" : v == ProbeVector::kExp ? "exp" : "memory";
}

const char* probe_operands_name(ProbeOperands o) {
  return o == ProbeOperands::kRegisters ? "registers" : o == ProbeOperands::kL1 ? "L1" : "L2";
}

double overlap_fraction(double t_matrix, double t_vector, double t_both) {
  return (t_matrix + t_vector - t_both) / std::min(t_matrix, t_vector);
}

Status run_overlap_probe(int reps, const std::vector<int>& rounds, int64_t steps,
                         const std::function<void(const std::string&)>& progress, ProbeResult* out) {
  if (reps < 1) return InvalidArgument("reps must be >= 1, got " + std::to_string(reps));
  if (steps < 1) return InvalidArgument("steps must be >= 1, got " + std::to_string(steps));
  if (rounds.empty()) return InvalidArgument("rounds is empty");
  for (int r : rounds) {
    if (r < 1) return InvalidArgument("every vector round count must be >= 1, got " + std::to_string(r));
  }
  ProbeResult res;
  res.lane = probe_matrix_lane();
  switch (res.lane) {
    case ProbeLane::kBf16Dot: res.lane_name = "AVX512-BF16 dot products (VDPBF16PS)"; break;
    case ProbeLane::kFp32Fma: res.lane_name = "AVX-512 fp32 FMA"; break;
    case ProbeLane::kAmxTile: res.lane_name = "AMX tiles (TDPBF16PS)"; break;
    case ProbeLane::kNone:
      return {StatusCode::kUnimplemented, "the overlap probe needs AVX-512 (this CPU has none, and no AMX)"};
  }
  res.matrix_engine = res.lane == ProbeLane::kAmxTile;
  res.steps = steps;
  const PinToCurrentCore pin;
  res.cpu = pin.cpu();
  std::vector<double> matrix_gflops;
  for (ProbeOperands ops : {ProbeOperands::kRegisters, ProbeOperands::kL1, ProbeOperands::kL2}) {
    for (ProbeVector kind : {ProbeVector::kFma, ProbeVector::kExp, ProbeVector::kMemory}) {
      for (int r : rounds) {
        std::vector<double> tm, tv, tb;
        time_stream(res.lane, true, r, kind, steps / 8 + 1, ops);  // warm-up (clocks, caches of the code)
        for (int i = 0; i < reps; ++i) {
          tm.push_back(time_stream(res.lane, true, 0, kind, steps, ops));
          tv.push_back(time_stream(res.lane, false, r, kind, steps, ops));
          tb.push_back(time_stream(res.lane, true, r, kind, steps, ops));
        }
        ProbePoint pt;
        pt.operands = ops;
        pt.kind = kind;
        pt.rounds = r;
        pt.matrix_us = median(tm);
        pt.vector_us = median(tv);
        pt.both_us = median(tb);
        pt.overlap = overlap_fraction(pt.matrix_us, pt.vector_us, pt.both_us);
        if (ops == ProbeOperands::kRegisters) {
          matrix_gflops.push_back(probe_matrix_flops(res.lane, steps) / (pt.matrix_us * 1e3));
        }
        char line[240];
        std::snprintf(line, sizeof line,
                      "operands %s, %s x%d: matrix %.0f us, vector %.0f us, both %.0f us, overlap %.2f",
                      probe_operands_name(ops), probe_vector_name(kind), r, pt.matrix_us, pt.vector_us, pt.both_us,
                      pt.overlap);
        progress(line);
        res.points.push_back(pt);
      }
    }
  }
  res.matrix_gflops = median(matrix_gflops);
  *out = std::move(res);
  return Status::Ok();
}

namespace {

// The pair's exp as a filler: y = exp(x) over [next, end), `per` values a step.
struct ExpCursor {
  const float* x;
  float* y;
  int64_t next, end, per;
};

bool exp_step(void* c) {
  auto* e = static_cast<ExpCursor*>(c);
  const int64_t n = std::min(e->per, e->end - e->next);
  simd::exp_f32(n, e->x + e->next, e->y + e->next);
  e->next += n;
  return e->next < e->end;
}

// The kernel pair's operands: A's rows (16 slices' worth, reused round robin: they stay in L2, as the GEMM
// task's A panel does), B packed, C, and the exp's input and output (kExpSlots slices' worth).
struct PairData {
  static constexpr int64_t kN = 128, kK = 128, kASlices = 16, kExpSlots = 32;
  AlignedVector<float> A, B, C, x, y;
  Bf16Operand packed;
  PairData() : A(task_inputs(kASlices * kPairSliceRows * kK, 1)), B(task_inputs(kK * kN, 2)),
               C(static_cast<size_t>(kPairSliceRows * kN)), x(task_inputs(kExpSlots * kPairExpFloats, 3)),
               y(x.size()) {
    simd::pack_bf16(kK, kN, B.data(), kN, &packed);
  }
  const float* a(int64_t s) const { return A.data() + (s % kASlices) * kPairSliceRows * kK; }
  int64_t e(int64_t s) const { return (s % kExpSlots) * kPairExpFloats; }
  // Slice s's product, carrying f (null: none).
  void gemm(int64_t s, VectorFiller* f) {
    simd::gemm_packed_bf16_carrying(kPairSliceRows, kN, kK, a(s), kK, packed, false, C.data(), kN, f);
  }
  void exp(int64_t s) { simd::exp_f32(kPairExpFloats, x.data() + e(s), y.data() + e(s)); }
};

// Microseconds of fn() over the slices.
template <class Fn>
double time_slices(int64_t slices, Fn&& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t s = 0; s < slices; ++s) fn(s);
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Status run_kernel_pair_probe(int reps, int64_t slices, const std::vector<int64_t>& floats,
                             const std::function<void(const std::string&)>& progress, KernelPairResult* out) {
  if (reps < 1) return InvalidArgument("reps must be >= 1, got " + std::to_string(reps));
  if (slices < 1) return InvalidArgument("slices must be >= 1, got " + std::to_string(slices));
  if (floats.empty()) return InvalidArgument("floats is empty");
  for (int64_t f : floats) {
    if (f < 1) return InvalidArgument("every carried exp width must be >= 1 value, got " + std::to_string(f));
  }
  const KernelSet& ks = active_kernels();
  KernelPairResult res;
  res.kernel_set = ks.name;
  res.carries = ks.bf16_matrix_engine;
  res.slices = slices;
  const PinToCurrentCore pin;
  PairData d;
  auto carried = [&](int64_t per) {
    return time_slices(slices, [&](int64_t s) {
      ExpCursor c{d.x.data(), d.y.data(), d.e(s), d.e(s) + kPairExpFloats, per};
      VectorFiller f{&exp_step, &c};
      d.gemm(s, &f);
    });
  };
  std::vector<double> tg, te, ta;
  std::vector<std::vector<double>> tc(floats.size());
  carried(floats[0]);  // warm-up
  for (int i = 0; i < reps; ++i) {
    tg.push_back(time_slices(slices, [&](int64_t s) { d.gemm(s, nullptr); }));
    te.push_back(time_slices(slices, [&](int64_t s) { d.exp(s); }));
    ta.push_back(time_slices(slices, [&](int64_t s) {
      d.gemm(s, nullptr);
      d.exp(s);
    }));
    for (size_t k = 0; k < floats.size(); ++k) tc[k].push_back(carried(floats[k]));
  }
  res.gemm_us = median(tg);
  res.exp_us = median(te);
  res.alternated_us = median(ta);
  res.alternated_overlap = overlap_fraction(res.gemm_us, res.exp_us, res.alternated_us);
  char line[240];
  std::snprintf(line, sizeof line, "kernel pair: gemm %.0f us, exp %.0f us, alternated %.0f us, overlap %.2f",
                res.gemm_us, res.exp_us, res.alternated_us, res.alternated_overlap);
  progress(line);
  for (size_t k = 0; k < floats.size(); ++k) {
    PairPoint pt;
    pt.floats = floats[k];
    pt.carried_us = median(tc[k]);
    pt.overlap = overlap_fraction(res.gemm_us, res.exp_us, pt.carried_us);
    std::snprintf(line, sizeof line, "kernel pair: carried %lld values a tile step %.0f us, overlap %.2f",
                  static_cast<long long>(pt.floats), pt.carried_us, pt.overlap);
    progress(line);
    res.points.push_back(pt);
  }
  *out = std::move(res);
  return Status::Ok();
}

}  // namespace hanpu::fuse
