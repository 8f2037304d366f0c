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

#include "core/aligned.h"
#include "exec/chunk_kernels.h"
#include "exec/fma_peak.h"
#include "exec/fp_mode.h"
#include "exec/strategies.h"
#include "kernels/kernel_set.h"
#include "kernels/simd.h"
#include "kernels/tril_inverse.h"
#include "ops/problem.h"
#include "ops/rows.h"
#include "plan/device.h"
#include "plan/graph.h"

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

// Buffers are 64-byte aligned, as the engine's workspaces are (a tile or vector row split across two cache
// lines costs more: measured here, the bf16 product 1.8 -> 2.2-2.3 us with malloc's 16-byte alignment).
AlignedVector<float> random_floats(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1, 1);
  AlignedVector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

nlohmann::json measured(double value, const std::string& what) {
  return {{"value", value}, {"source", what}};
}

// A bf16 tensor of uniform values in [-1.7, 1.7] (bench's inputs).
Tensor bf16_tensor(std::vector<int64_t> shape, std::mt19937& rng, float lo = -1.7f, float hi = 1.7f) {
  Tensor t(DType::kBF16, std::move(shape));
  std::uniform_real_distribution<float> u(lo, hi);
  auto* bits = reinterpret_cast<uint16_t*>(t.bytes.data());
  for (int64_t i = 0; i < t.numel(); ++i) bits[i] = f32_to_bf16_bits(u(rng));
  return t;
}

// The problem of a GDN call on bf16 rows [1, T, H, K] as bench runs it (q and k l2-normalised, chunk size C);
// it views the tensors.
Status gdn_rows_problem(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                        int64_t C, Problem* p) {
  Inputs in{q.view(), k.view(), v.view(), g.view(), beta.view(), {}, {}, {}, {}};
  Options o;
  o.chunk_size = C;
  o.use_qk_l2norm_in_kernel = true;
  return validate_problem(in, o, Mode::kChunk, p);
}

// Median ns of ChunkInputs::load on one GDN chunk [C rows, K, V] of bf16 inputs with q and k l2-normalised,
// and of store_o_rows on its bf16 output rows.
Status time_chunk_rows(const CalibrateOptions& opt, std::mt19937& rng, double* t_load, double* t_store) {
  const int64_t C = opt.C, K = opt.K, V = opt.V;
  const Tensor q = bf16_tensor({1, C, 1, K}, rng), k = bf16_tensor({1, C, 1, K}, rng), v = bf16_tensor({1, C, 1, V}, rng);
  const Tensor g = bf16_tensor({1, C, 1}, rng, -0.101f, -0.001f), beta = bf16_tensor({1, C, 1}, rng, 0.0f, 1.0f);
  Problem p;
  HANPU_RETURN_IF_ERROR(gdn_rows_problem(q, k, v, g, beta, C, &p));
  const RowLoader<float> rows(p);
  ChunkInputs ci(C, K, V, 1);
  *t_load = median_ns(opt.reps, [&] { ci.load(p, rows, p.seqs[0], 0, {C, 0, 0, V}); });
  const Tensor out(DType::kBF16, {1, C, 1, V});
  const TensorView ov = with_strides(out.view());
  const AlignedVector<float> o_rows = random_floats(C * V, rng);
  *t_store = median_ns(opt.reps, [&] { store_o_rows(ov, 0, 0, C, 0, 0, V, o_rows.data()); });
  return Status::Ok();
}

// Mean ns of asking for one (chunk, head) step's rows from memory as the hanpu strategy does between steps
// (ChunkInputs::prefetch and prefetch_o_rows, one step ahead): the bf16 q, k, v, gate, beta and o rows of a
// [1, T, H, K] call with H = 16 heads at T = 4096 (64 MiB of rows: bench's GDN preset), visited in the
// engine's order (chunk by chunk, one thread's lockstep group: lockstep_heads, 8 at K = V = 128), with
// `between` (in-cache work of about a step) after each burst, so that each starts with the miss slots free,
// as in a run. The mean of a pass, not a median: a chunk's first head finds its rows on pages no step
// touched yet and pays about twice the others (timed in run_group on the Intel Xeon with AMX: 7-11 against
// 3-4 us), and a run pays both. The median of three passes.
template <typename F>
Status time_rows_from_memory(const CalibrateOptions& opt, F between, double* t_fetch) {
  const int64_t C = opt.C, K = opt.K, V = opt.V, H = 16, T = 64 * C, group = std::min(H, lockstep_heads(K, V));
  const Tensor q(DType::kBF16, {1, T, H, K}), k = q, v(DType::kBF16, {1, T, H, V}), o = v;
  const Tensor g(DType::kBF16, {1, T, H}), beta = g;
  Problem p;
  HANPU_RETURN_IF_ERROR(gdn_rows_problem(q, k, v, g, beta, C, &p));
  const TensorView ov = with_strides(o.view());
  const ChunkInputs ci(C, K, V, 1);
  std::vector<double> pass_means;
  for (int pass = 0; pass < 3; ++pass) {
    double ns = 0;
    for (int64_t t0 = 0; t0 < T; t0 += C) {
      for (int64_t h = 0; h < group; ++h) {
        const auto start = std::chrono::steady_clock::now();
        ci.prefetch(p, p.seqs[0], h, {C, t0, 0, V});
        prefetch_o_rows(ov, 0, t0, C, h, 0, V);
        ns += std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
        between();
      }
    }
    pass_means.push_back(ns / static_cast<double>(T / C * group));
  }
  std::sort(pass_means.begin(), pass_means.end());
  *t_fetch = pass_means[1];
  return Status::Ok();
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
  const AlignedVector<float> a = random_floats(C * K, rng), b = random_floats(K * V, rng), scale = random_floats(C, rng);
  AlignedVector<float> c(std::max(C, K) * V), panel(K * C), rows(C * K);
  ScopedFlushDenormals ftz;  // as the engine's threads run
  char line[256];
  std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  const std::string by = std::string("measured by hanpu calibrate on ") + date + " (" + simd::target_name() +
                         ", median of " + std::to_string(opt.reps) + " runs): ";

  // One core's FMA peak (bench's measurement, so that bench compares like with like), before and after the
  // timings: it says at what speed the machine ran them. A virtual machine's speed moves in phases (the same
  // 64 x 128 x 128 product measured 85 and 56 MACs/ns minutes apart on the Ice Lake Xeon of the twelfth
  // session), and a calibration taken in a slow phase is slow throughout.
  const double peak_before = measure_fma_peak(1);
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

  // The bf16 unit of the active kernel set (plan/packing.h): its GEMM on a packed right operand with the
  // left one already bf16 rows (the rate alone: the cost model charges an fp32 left operand's conversion as
  // a packing of its bytes on top), and the packing of an fp32 operand at two sizes (fixed + bytes / rate,
  // as the cost model charges it).
  const KernelSet& ks = active_kernels();
  Bf16Operand packed;
  ks.pack_bf16(K, V, b.data(), V, &packed);
  AlignedVector<uint16_t> a_rows(C * K);
  ks.f32_to_bf16(C * K, a.data(), a_rows.data());
  const double t_bf16 =
      median_ns(opt.reps, [&] { ks.gemm_bf16_rows(C, V, K, a_rows.data(), K, packed, false, c.data(), V, RowScale{}); });
  const double bf16_macs_per_ns = static_cast<double>(C * V * K) / t_bf16;
  const double t_bpack = median_ns(opt.reps, [&] { ks.pack_bf16(K, V, b.data(), V, &packed); });
  const double t_bpack_half = median_ns(opt.reps, [&] { ks.pack_bf16(K / 2, V, b.data(), V, &packed); });
  const double pbytes = static_cast<double>(K * V * 4);
  const double pslope = std::max(1e-6, (t_bpack - t_bpack_half) / (pbytes / 2));
  const double pfixed = std::max(0.0, t_bpack - pslope * pbytes);
  // The update's two forms in bf16, V' packed: the keys' bf16 rows [C, K] read transposed in place against
  // bf16 rows of their [K, C] transpose (the cost model charges the panel's making and conversion apart).
  Bf16Operand vn;
  ks.pack_bf16(C, V, b.data(), V, &vn);
  const Bf16Operand* vn_terms[] = {&vn};
  AlignedVector<uint16_t> panel_rows(K * C);
  for (int64_t r = 0; r < K; ++r) {
    for (int64_t q = 0; q < C; ++q) panel_rows[r * C + q] = a_rows[q * K + r];
  }
  const double t_tn16 = median_ns(opt.reps, [&] {
    ks.gemm_bf16_rows_tn(K, V, C, a_rows.data(), K, 1, vn_terms, false, c.data(), V, RowScale{});
  });
  const double t_panel16 = median_ns(opt.reps, [&] {
    ks.gemm_bf16_rows(K, V, C, panel_rows.data(), C, vn, false, c.data(), V, RowScale{});
  });
  const double bf16_penalty = std::max(1e-3, t_tn16 / t_panel16);
  std::snprintf(line, sizeof line,
                "bf16 update gemm %lldx%lldx%lld, V' packed: key rows transposed in place %.0f ns, rows of their "
                "transpose %.0f ns",
                (long long)K, (long long)V, (long long)C, t_tn16, t_panel16);
  progress(line);
  std::snprintf(line, sizeof line,
                "bf16 gemm %lldx%lldx%lld, bf16 rows times a packed operand (%s): %.0f ns, %.1f MACs/ns; pack %lldx%lld: %.0f ns "
                "(%.0f ns at half size)",
                (long long)C, (long long)V, (long long)K, ks.bf16_unit.c_str(), t_bf16, bf16_macs_per_ns, (long long)K,
                (long long)V, t_bpack, t_bpack_half);
  progress(line);

  // The triangular inverse of a chunk's (I + A), A strictly lower with entries of a chunk's size (the
  // engine's blocked forward substitution: scalar chains in the diagonal blocks, GEMMs beside them).
  AlignedVector<float> amat(C * C, 0.0f), tinv(C * C), tscratch(kTrilBlock * C);
  for (int64_t i = 0; i < C; ++i) {
    for (int64_t jj = 0; jj < i; ++jj) amat[i * C + jj] = 0.1f * a[(i * C + jj) % (C * K)];
  }
  const double t_solve = median_ns(opt.reps, [&] { tril_unit_inverse_simd(C, amat.data(), C, tinv.data(), C, tscratch.data()); });
  // The units the cost model charges in: the chunk graph's solve MACs, its input tensors' and O's fp32 bytes.
  const Graph g = build_chunk_graph(Kind::kGdn, C, K, V, GraphOptions{});
  const auto solve = std::find_if(g.ops.begin(), g.ops.end(), [](const OpNode& o) { return o.kind == OpKind::kSolve; });
  const double solve_macs = solve->macs();
  std::snprintf(line, sizeof line, "triangular inverse %lldx%lld: %.0f ns, %.2f MACs/ns", (long long)C, (long long)C,
                t_solve, solve_macs / t_solve);
  progress(line);
  // A GDN chunk's rows as the engine loads them (bf16 q, k, v, gates and betas, q and k l2-normalised, in
  // cache: the DRAM misses of a long sequence's rows come on top) and its bf16 output rows' store.
  double t_load = 0, t_store = 0;
  HANPU_RETURN_IF_ERROR(time_chunk_rows(opt, rng, &t_load, &t_store));
  const double in_bytes = g.bytes_of(Role::kInput), out_bytes = g.bytes_of(Role::kOutput);
  std::snprintf(line, sizeof line, "chunk rows (bf16, l2norm, in cache): load %.0f ns, store %.0f ns", t_load, t_store);
  progress(line);
  // The same rows' trip from memory, asked for a step ahead (a chunk GEMM in cache between the steps).
  double t_fetch = 0;
  HANPU_RETURN_IF_ERROR(time_rows_from_memory(
      opt, [&] { simd::gemm_nn(C, V, K, a.data(), K, b.data(), V, false, c.data(), V); }, &t_fetch));
  std::snprintf(line, sizeof line, "chunk rows from memory (bf16, 64 MiB, prefetched a step ahead): %.0f ns a step",
                t_fetch);
  progress(line);

  const double peak_after = measure_fma_peak(1);
  const double fma_peak = (peak_before + peak_after) / 2;
  std::snprintf(line, sizeof line, "fp32 FMA peak, one core: %.1f GFLOP/s before the timings, %.1f after", peak_before,
                peak_after);
  progress(line);
  if (!fma_peak_steady(peak_after / peak_before)) {
    progress("warning: the machine's speed moved while calibrating (a virtual machine's phases, or frequency "
             "scaling): the figures mix two speeds; re-run `hanpu calibrate`");
  }

  j["description"] = "The CPU hanpu builds on, one core per head, with costs measured by hanpu calibrate (ns)";
  j["clock_ghz"] = measured(1.0, "calibrated costs are in nanoseconds: the clock is fixed at 1 GHz");
  j["matrix"]["macs_per_cycle"] = measured(macs_per_ns, by + "SIMD GEMM on a chunk's C x V x K");
  j["matrix"]["dense_penalty"] = measured(std::max(1e-3, t_tn / t_nn),
                                          by + "update GEMM with its operand transposed in place / on a packed panel");
  j["matrix"]["solve_macs_per_cycle"] = measured(solve_macs / t_solve, by + "the triangular inverse of a C x C chunk matrix");
  j["vector"]["bytes_per_cycle"] = measured(bytes / t_vec, by + "row scaling of a chunk's C x K rows");
  j["chunk_rows"]["load_bytes_per_cycle"] =
      measured(in_bytes / t_load, by + "loading a GDN chunk's bf16 rows (l2norm, in cache), per fp32 byte of its inputs");
  j["chunk_rows"]["store_bytes_per_cycle"] =
      measured(out_bytes / t_store, by + "storing a chunk's o rows as bf16, per fp32 byte of O");
  j["chunk_rows"]["memory_bytes_per_cycle"] = measured(
      (in_bytes + out_bytes) / t_fetch,
      by + "asking for a (chunk, head) step's bf16 rows and o rows from memory a step ahead (prefetch bursts over "
           "64 MiB, a thread's 8 heads in lockstep, mean of a pass), per fp32 byte of its inputs and O");
  j["layout"]["transform_bytes_per_cycle"] = measured(2.0 / slope, by + "packing a C x K block into a panel (slope)");
  j["layout"]["transform_fixed_cycles"] = measured(fixed, by + "packing a C x K block into a panel (intercept)");
  const std::string unit = by + "kernel set " + ks.name + " (" + ks.bf16_unit + "), ";
  j["bf16_matrix"]["macs_per_cycle"] =
      measured(bf16_macs_per_ns, unit + "bf16 GEMM on a chunk's C x V x K, A bf16 rows, B packed");
  // The unit's tile, from the kernel set (what its products execute, not a measurement).
  const std::string tile = "the " + ks.name + " kernel set's bf16 operand tile (" + ks.bf16_unit + "): ";
  j["bf16_matrix"]["tile_rows"] = {{"value", ks.bf16_tile_rows}, {"source", tile + "rows of A and C"}};
  j["bf16_matrix"]["tile_cols"] = {{"value", ks.bf16_tile_cols}, {"source", tile + "columns of B and C"}};
  j["bf16_matrix"]["tile_k"] = {{"value", ks.bf16_tile_k}, {"source", tile + "the reduction of one product"}};
  j["bf16_matrix"]["pack_bytes_per_cycle"] = measured(1.0 / pslope, unit + "packing a K x V fp32 operand (slope)");
  j["bf16_matrix"]["pack_fixed_cycles"] = measured(pfixed, unit + "packing a K x V fp32 operand (intercept)");
  j["bf16_matrix"]["dense_penalty"] = measured(
      bf16_penalty, unit + "update GEMM, V' packed, with its key rows transposed in place / on rows of their transpose");
  j["calibration"] = {{"format", kCalibrationFormat}, {"kernel_set", ks.name}, {"fma_peak_gflops", fma_peak}};
  Device check;
  const std::string text = j.dump(2) + "\n";
  HANPU_RETURN_IF_ERROR(parse_device(text, "calibrated host", &check));
  *json_text = text;
  return Status::Ok();
}

Status load_this_host(Device* out, std::string* note) {
  return load_host_device(active_kernels().name, out, note);
}

}  // namespace hanpu::plan
