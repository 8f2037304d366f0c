#include "exec/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "exec/chunk_kernels.h"
#include "exec/fp_mode.h"
#include "kernels/kernel_set.h"
#include "kernels/simd.h"
#include "plan/device.h"

namespace hanpu::plan {

namespace {

// Median ns of fn over `reps` runs after 3 warm-up runs.
template <typename F>
double median_ns(int reps, F fn) {
  for (int i = 0; i < 3; ++i) fn();
  std::vector<double> t(reps);
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    t[r] = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  }
  std::nth_element(t.begin(), t.begin() + reps / 2, t.end());
  return t[reps / 2];
}

std::vector<float> random_floats(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

nlohmann::json measured(double value, const std::string& what) {
  return {{"value", value}, {"source", what}};
}

}  // namespace

Status calibrate_host(const CalibrateOptions& opt, const std::function<void(const std::string&)>& progress,
                      std::string* json_text) {
  if (opt.reps < 5) return InvalidArgument("reps must be >= 5, got " + std::to_string(opt.reps));
  std::ifstream f(devices_dir() + "/host.json");
  if (!f) return NotFound("the shipped " + devices_dir() + "/host.json cannot be read");
  std::stringstream ss;
  ss << f.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str());
  const int64_t C = opt.C, K = opt.K, V = opt.V;
  std::mt19937 rng(1);
  const std::vector<float> a = random_floats(C * K, rng), b = random_floats(K * V, rng), scale = random_floats(C, rng);
  std::vector<float> c(std::max(C, K) * V), panel(K * C), rows(C * K);
  ScopedFlushDenormals ftz;  // as the engine's threads run
  char line[256];
  std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  const std::string by = std::string("measured by hanpu calibrate on ") + date + " (" + simd::target_name() +
                         ", median of " + std::to_string(opt.reps) + " runs): ";

  const double t_gemm = median_ns(opt.reps, [&] { simd::gemm_nn(C, V, K, a.data(), K, b.data(), V, false, c.data(), V); });
  const double macs_per_ns = static_cast<double>(C * V * K) / t_gemm;
  std::snprintf(line, sizeof line, "gemm %lldx%lldx%lld row-major: %.0f ns, %.1f MACs/ns", (long long)C, (long long)V,
                (long long)K, t_gemm, macs_per_ns);
  progress(line);
  const double t_tn = median_ns(opt.reps, [&] { simd::gemm_tn(K, V, C, a.data(), K, b.data(), V, false, c.data(), V); });
  const double t_nn = median_ns(opt.reps, [&] { simd::gemm_nn(K, V, C, panel.data(), C, b.data(), V, false, c.data(), V); });
  std::snprintf(line, sizeof line, "update gemm %lldx%lldx%lld: transposed in place %.0f ns, packed panel %.0f ns",
                (long long)K, (long long)V, (long long)C, t_tn, t_nn);
  progress(line);
  const double t_pack = median_ns(opt.reps, [&] {
    pack_transposed(C, K, a.data(), K, scale.data(), 1, panel.data(), C);
  });
  const double t_pack_half = median_ns(opt.reps, [&] {
    pack_transposed(C / 2, K, a.data(), K, scale.data(), 1, panel.data(), C);
  });
  const double bytes = static_cast<double>(C * K * 4);
  // t = fixed + 2 bytes / rate at two sizes: rate from the slope, fixed from the intercept.
  const double slope = std::max(1e-6, (t_pack - t_pack_half) / (bytes / 2));  // ns per byte
  const double fixed = std::max(0.0, t_pack - slope * bytes);
  std::snprintf(line, sizeof line, "pack %lldx%lld -> panel: %.0f ns (%.0f ns at half size)", (long long)C,
                (long long)K, t_pack, t_pack_half);
  progress(line);
  const double t_vec = median_ns(opt.reps, [&] {
    simd::scale_rows(C, K, a.data(), K, scale.data(), 1, nullptr, rows.data(), K);
  });
  std::snprintf(line, sizeof line, "row scaling %lldx%lld: %.0f ns, %.1f B/ns", (long long)C, (long long)K, t_vec,
                bytes / t_vec);
  progress(line);

  // The bf16 unit of the active kernel set (plan/packing.h): its GEMM on a packed right operand, and the
  // packing of an fp32 operand at two sizes (fixed + bytes / rate, as the cost model charges it).
  const KernelSet& ks = active_kernels();
  Bf16Operand packed;
  ks.pack_bf16(K, V, b.data(), V, &packed);
  const double t_bf16 = median_ns(opt.reps, [&] { ks.gemm_packed_bf16(C, V, K, a.data(), K, packed, false, c.data(), V); });
  const double bf16_macs_per_ns = static_cast<double>(C * V * K) / t_bf16;
  const double t_bpack = median_ns(opt.reps, [&] { ks.pack_bf16(K, V, b.data(), V, &packed); });
  const double t_bpack_half = median_ns(opt.reps, [&] { ks.pack_bf16(K / 2, V, b.data(), V, &packed); });
  const double pbytes = static_cast<double>(K * V * 4);
  const double pslope = std::max(1e-6, (t_bpack - t_bpack_half) / (pbytes / 2));
  const double pfixed = std::max(0.0, t_bpack - pslope * pbytes);
  // The update's two forms in bf16: Kd [C, K] read transposed in place (converted on the way, V' packed in
  // the call) against the [K, C] panel times V' packed (the panel itself is the layout transform above).
  const double t_tn16 = median_ns(opt.reps, [&] { ks.gemm_tn_bf16(K, V, C, a.data(), K, b.data(), V, false, c.data(), V); });
  Bf16Operand vn;
  ks.pack_bf16(C, V, b.data(), V, &vn);
  const double t_panel16 = median_ns(opt.reps, [&] { ks.gemm_packed_bf16(K, V, C, panel.data(), C, vn, false, c.data(), V); });
  const double t_pack_vn = median_ns(opt.reps, [&] { ks.pack_bf16(C, V, b.data(), V, &vn); });
  const double bf16_penalty = std::max(1e-3, t_tn16 / (t_panel16 + t_pack_vn));
  std::snprintf(line, sizeof line,
                "bf16 update gemm %lldx%lldx%lld: transposed in place %.0f ns, panel with V' packed %.0f + %.0f ns",
                (long long)K, (long long)V, (long long)C, t_tn16, t_panel16, t_pack_vn);
  progress(line);
  std::snprintf(line, sizeof line,
                "bf16 gemm %lldx%lldx%lld on a packed operand (%s): %.0f ns, %.1f MACs/ns; pack %lldx%lld: %.0f ns "
                "(%.0f ns at half size)",
                (long long)C, (long long)V, (long long)K, ks.bf16_unit.c_str(), t_bf16, bf16_macs_per_ns, (long long)K,
                (long long)V, t_bpack, t_bpack_half);
  progress(line);

  j["description"] = "The CPU hanpu builds on, one core per head, with costs measured by hanpu calibrate (ns)";
  j["clock_ghz"] = measured(1.0, "calibrated costs are in nanoseconds: the clock is fixed at 1 GHz");
  j["matrix"]["macs_per_cycle"] = measured(macs_per_ns, by + "SIMD GEMM on a chunk's C x V x K");
  j["matrix"]["dense_penalty"] = measured(std::max(1e-3, t_tn / t_nn),
                                          by + "update GEMM with its operand transposed in place / on a packed panel");
  j["vector"]["bytes_per_cycle"] = measured(bytes / t_vec, by + "row scaling of a chunk's C x K rows");
  j["layout"]["transform_bytes_per_cycle"] = measured(2.0 / slope, by + "packing a C x K block into a panel (slope)");
  j["layout"]["transform_fixed_cycles"] = measured(fixed, by + "packing a C x K block into a panel (intercept)");
  const std::string unit = by + "kernel set " + ks.name + " (" + ks.bf16_unit + "), ";
  j["bf16_matrix"]["macs_per_cycle"] = measured(bf16_macs_per_ns, unit + "bf16 GEMM on a chunk's C x V x K, B packed");
  j["bf16_matrix"]["pack_bytes_per_cycle"] = measured(1.0 / pslope, unit + "packing a K x V fp32 operand (slope)");
  j["bf16_matrix"]["pack_fixed_cycles"] = measured(pfixed, unit + "packing a K x V fp32 operand (intercept)");
  j["bf16_matrix"]["dense_penalty"] =
      measured(bf16_penalty, unit + "update GEMM with its operand transposed in place / on a panel with V' packed");
  Device check;
  const std::string text = j.dump(2) + "\n";
  HANPU_RETURN_IF_ERROR(parse_device(text, "calibrated host", &check));
  *json_text = text;
  return Status::Ok();
}

}  // namespace hanpu::plan
