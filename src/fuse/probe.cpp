#include "fuse/probe.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

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

}  // namespace hanpu::fuse
