#include "bench/bench_common.h"

#include <algorithm>
#include <cstdio>
#include <unistd.h>

#include "core/strided.h"
#include "exec/calibrate.h"
#include "exec/chunk_kernels.h"

namespace hanpu {

void fill_uniform(std::vector<float>& x, uint64_t seed, float a) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& v : x) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    v = a * (static_cast<float>(s >> 40) * (2.0f / 16777216.0f) - 1.0f);
  }
}

Status check_fits_in_memory(double bytes, const std::string& request) {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return Status::Ok();  // unknown: let the allocations decide
  const double have = static_cast<double>(pages) * static_cast<double>(page);
  if (bytes <= have) return Status::Ok();
  char msg[256];
  std::snprintf(msg, sizeof msg, "%s needs at least %.1f GiB of memory, and this machine has %.1f GiB",
                request.c_str(), bytes / (1 << 30), have / (1 << 30));
  return InvalidArgument(msg);
}

Tensor to_dtype(const std::vector<float>& x, DType dt, std::vector<int64_t> shape) {
  Tensor t(dt, std::move(shape));
  store_elems<float>(t.view(), 0, 1, t.numel(), x.data());
  return t;
}

BenchInputs bench_inputs(const BenchConfig& cfg, int64_t T, int64_t H, int64_t HV) {
  const int64_t w = cfg.kind == Kind::kKda ? cfg.K : 1;
  BenchInputs b;
  b.q.resize(T * H * cfg.K);
  b.k.resize(T * H * cfg.K);
  b.v.resize(T * HV * cfg.V);
  b.g.resize(T * HV * w);
  b.beta.resize(T * HV);
  fill_uniform(b.q, cfg.seed, 1.7f);
  fill_uniform(b.k, cfg.seed + 1, 1.7f);
  fill_uniform(b.v, cfg.seed + 2, 1.7f);
  fill_uniform(b.g, cfg.seed + 3, 1.0f);
  fill_uniform(b.beta, cfg.seed + 4, 0.5f);
  for (float& x : b.g) x = -0.05f * (x + 1.0f) - 1e-3f;  // log decays in (-0.101, -0.001]
  for (float& x : b.beta) x += 0.5f;                    // (0, 1)
  return b;
}

Status host_chunk_plan(const BenchConfig& cfg, const plan::Device& host, bool bf16, plan::Packing packing, int64_t C,
                       plan::Plan* out) {
  plan::PlanOptions po;
  po.C = C;
  po.K = cfg.K;
  po.V = cfg.V;
  po.bf16 = bf16;
  po.packing = packing;
  return plan::make_plan(cfg.kind, host, po, out);
}

Status step_estimate_by_part(const BenchConfig& cfg, plan::Packing packing, bool bf16, int64_t C, bool whole_run,
                             BenchRecord* rec) {
  plan::Device host;
  HANPU_RETURN_IF_ERROR(plan::load_this_host(&host, nullptr));
  plan::Plan pl;
  if (cfg.plan) {
    if (cfg.plan->device != host.name) return Status::Ok();  // planned for another device's costs
    pl = *cfg.plan;
  } else {
    HANPU_RETURN_IF_ERROR(host_chunk_plan(cfg, host, bf16, packing, C, &pl));
  }
  const std::vector<double> cycles = plan::op_cycles(pl, host);
  std::vector<double> us(static_cast<int>(Part::kCount), 0.0);
  for (std::size_t i = 0; i < cycles.size(); ++i) {
    us[static_cast<int>(part_of(pl.graph.ops[i].code))] += cycles[i] / (pl.clock_ghz * 1e3);
  }
  us[static_cast<int>(Part::kPrefetch)] = plan::step_memory_cycles(pl, host) / (pl.clock_ghz * 1e3);
  rec->model_breakdown_us.clear();
  for (int part = 0; part < (whole_run ? static_cast<int>(Part::kCount) : kStepParts); ++part) {
    rec->model_breakdown_us.emplace_back(part_name(static_cast<Part>(part)), us[part]);
  }
  return Status::Ok();
}

void set_speedup(const std::vector<double>& ratios, BenchRecord* rec,
                 const std::function<void(const std::string&)>& progress) {
  rec->speedup_vs_exact = percentile_median(ratios);
  rec->speedup_vs_exact_min = *std::min_element(ratios.begin(), ratios.end());
  rec->speedup_vs_exact_max = *std::max_element(ratios.begin(), ratios.end());
  char line[256];
  std::snprintf(line, sizeof line, "%s %s T=%lld: bf16 %.2fx the speed of exact (median of %zu interleaved rounds, %.2f-%.2f)",
                rec->kind.c_str(), rec->strategy.c_str(), static_cast<long long>(rec->tokens), rec->speedup_vs_exact,
                ratios.size(), rec->speedup_vs_exact_min, rec->speedup_vs_exact_max);
  progress(line);
}

}  // namespace hanpu
