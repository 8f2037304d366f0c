// hanpu fuse --device NAME|FILE|host --pair TASK_A,TASK_B [--pair ...] [--sweep FILE] [--reps 5] [--json FILE]
//            [--trace FILE] [--plot FILE] [--cores 1|2]
// hanpu fuse --device NAME|FILE|host --stream FILE [--cap-us 500] [--json FILE] (host: with --cores 1)
// hanpu fuse --device host --probe [--probe-rounds 1,2,5,10,20] [--reps 5] [--json FILE]: the overlap curve, then
//            the kernel pair (fuse/probe.h)
// The four-group experiment of the fusion notes on the NPU model or this CPU (fuse/runtime.h).
#include <cstdio>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "bench/plot.h"
#include "commands.h"
#include "fuse/probe.h"
#include "fuse/runtime.h"
#include "fuse/stream.h"
#include "kernels/amx_support.h"
#include "kernels/kernel_set.h"

namespace hanpu::cli {

namespace {

struct FuseArgs {
  std::string device, sweep_path, json_path, trace_path, stream_path, plot_path;
  std::vector<std::string> pairs;
  std::vector<double> dma_rates;  // model devices: global-memory bytes per cycle to sweep
  std::vector<int> probe_rounds = {1, 2, 5, 10, 20};
  bool probe = false;
  int reps = 5;
  int cores = 2;  // host: the matrix lane on one core and the rest on the other, or everything on one core
  double cap_us = 500;
};


int fail(const std::string& msg) {
  std::fprintf(stderr, "hanpu fuse: %s\n", msg.c_str());
  return 2;
}

// Pairing under deadlines: every policy on the stream, a table and JSON records.
int run_stream(const FuseArgs& a, const plan::Device& d, fuse::Executor ex) {
  std::ifstream f(a.stream_path);
  if (!f) return fail("cannot read --stream file '" + a.stream_path + "'");
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<fuse::StreamTask> stream;
  Status st = fuse::parse_stream(text, &stream);
  if (!st.ok()) return fail(a.stream_path + ": " + st.message());
  std::printf("device %s (%s), %zu tasks, cap %.0f us\n", d.name.c_str(),
              ex == fuse::Executor::kModel ? "NPU model"
                                           : "one core in real time, real kernels; decisions by times measured first",
              stream.size(), a.cap_us);
  std::printf("%-10s %12s %14s %22s %14s %8s %6s\n", "policy", "makespan_us", "throughput/s", "avg_norm_turnaround",
              "deadline_miss", "entries", "pairs");
  nlohmann::json records = nlohmann::json::array();
  for (const std::string& p : fuse::stream_policies()) {
    fuse::StreamResult r;
    if (ex != fuse::Executor::kModel) std::fprintf(stderr, "stream: running policy %s\n", p.c_str());
    st = fuse::run_stream(stream, d, p, a.cap_us, &r, ex);
    if (!st.ok()) return fail(st.ToString());
    std::printf("%-10s %12.1f %14.1f %22.3f %13.1f%% %8d %6d\n", p.c_str(), r.makespan_us, r.throughput_per_s,
                r.avg_normalised_turnaround, 100 * r.deadline_miss_rate, r.entries, r.pairs);
    records.push_back({{"policy", p}, {"makespan_us", r.makespan_us}, {"throughput_per_s", r.throughput_per_s},
                       {"avg_normalised_turnaround", r.avg_normalised_turnaround},
                       {"deadline_miss_rate", r.deadline_miss_rate}, {"entries", r.entries}, {"pairs", r.pairs},
                       {"completion_us", r.completion_us}});
  }
  const std::string json = nlohmann::json({{"device", d.name},
                                           {"executor", ex == fuse::Executor::kModel ? "model" : "host-core"},
                                           {"cap_us", a.cap_us},
                                           {"stream", records}})
                               .dump(2) +
                           "\n";
  if (!a.json_path.empty() && !write_file(a.json_path, json)) return fail("cannot write '" + a.json_path + "'");
  return 0;
}

// The host's overlap curve on one core (fuse/probe.h): a table and JSON records.
int run_probe(const FuseArgs& a) {
  fuse::ProbeResult r;
  const auto progress = [](const std::string& line) { std::fprintf(stderr, "probe: %s\n", line.c_str()); };
  const Status st = fuse::run_overlap_probe(a.reps, a.probe_rounds, 200000, progress, &r);
  if (!st.ok()) return fail(st.ToString());
  std::printf("host overlap probe on one core (cpu %d), %lld steps per stream, median of %d interleaved repetitions\n",
              r.cpu, static_cast<long long>(r.steps), a.reps);
  std::printf("matrix lane: %s, %d per step, alone %.1f GFLOP/s\n", r.lane_name.c_str(),
              probe_matrix_instructions(r.lane), r.matrix_gflops);
  if (!r.matrix_engine) {
    std::printf("%s\nthe matrix engine is absent, so the matrix lane runs on the vector unit itself; overlap here "
                "is the vector unit's own pipes sharing two instruction mixes\n",
                amx_support_line(amx_support()).c_str());
  }
  std::printf("overlap = (matrix + vector - both) / min(matrix, vector): 1 hidden, 0 serial\n");
  std::printf("matrix operands: registers (loaded once), or 4 KiB a step from a 16 KiB (L1) or 1 MiB (L2) buffer; "
              "vector rounds: 8 FMAs (fma), exp of 2 registers (exp), 8 load-FMA-stores on an 8 KiB buffer (memory)\n");
  std::printf("%-9s %-6s %7s %11s %11s %11s %8s\n", "operands", "vector", "rounds", "matrix_us", "vector_us", "both_us",
              "overlap");
  nlohmann::json points = nlohmann::json::array();
  for (const fuse::ProbePoint& p : r.points) {
    const char* kind = fuse::probe_vector_name(p.kind);
    const char* ops = fuse::probe_operands_name(p.operands);
    std::printf("%-9s %-6s %7d %11.1f %11.1f %11.1f %8.2f\n", ops, kind, p.rounds, p.matrix_us, p.vector_us,
                p.both_us, p.overlap);
    points.push_back({{"operands", ops}, {"vector", kind}, {"rounds", p.rounds}, {"matrix_us", p.matrix_us},
                      {"vector_us", p.vector_us}, {"both_us", p.both_us}, {"overlap", p.overlap}});
  }
  // The same question of the registry's own kernels (fuse/probe.h run_kernel_pair_probe).
  fuse::KernelPairResult kp;
  const Status pst = fuse::run_kernel_pair_probe(a.reps, 256, {32, 128, 512}, progress, &kp);
  if (!pst.ok()) return fail(pst.ToString());
  std::printf("\nkernel pair (kernel set %s): %lld slices of the bf16 GEMM (%lld x 128 x 128, fp32 A rows) and the "
              "exp of %lld values a slice (L2)%s\n",
              kp.kernel_set.c_str(), static_cast<long long>(kp.slices), static_cast<long long>(fuse::kPairSliceRows),
              static_cast<long long>(fuse::kPairExpFloats),
              kp.carries ? "" : "; this set has no matrix engine, so nothing is carried (the exp runs after each slice)");
  std::printf("%-28s %11s %8s\n", "schedule", "time_us", "overlap");
  std::printf("%-28s %11.1f %8s\n", "gemm alone", kp.gemm_us, "");
  std::printf("%-28s %11.1f %8s\n", "exp alone", kp.exp_us, "");
  std::printf("%-28s %11.1f %8.2f\n", "alternated slice by slice", kp.alternated_us, kp.alternated_overlap);
  nlohmann::json carried = nlohmann::json::array();
  for (const fuse::PairPoint& p : kp.points) {
    const std::string name = "carried, " + std::to_string(p.floats) + " values a step";
    std::printf("%-28s %11.1f %8.2f\n", name.c_str(), p.carried_us, p.overlap);
    carried.push_back({{"floats_per_step", p.floats}, {"time_us", p.carried_us}, {"overlap", p.overlap}});
  }
  const nlohmann::json pair = {{"kernel_set", kp.kernel_set},   {"carries", kp.carries},
                               {"slices", kp.slices},           {"slice_rows", fuse::kPairSliceRows},
                               {"exp_floats", fuse::kPairExpFloats}, {"gemm_us", kp.gemm_us},
                               {"exp_us", kp.exp_us},           {"alternated_us", kp.alternated_us},
                               {"alternated_overlap", kp.alternated_overlap}, {"carried", carried}};
  const std::string json = nlohmann::json({{"probe", "overlap"}, {"matrix_lane", r.lane_name},
                                           {"matrix_engine", r.matrix_engine}, {"cpu", r.cpu}, {"steps", r.steps},
                                           {"reps", a.reps}, {"matrix_gflops", r.matrix_gflops}, {"points", points},
                                           {"kernel_pair", pair}})
                               .dump(2) +
                           "\n";
  if (!a.json_path.empty() && !write_file(a.json_path, json)) return fail("cannot write '" + a.json_path + "'");
  return 0;
}

const char* const kGroups[4] = {"1 serial entries", "2 concurrent entries", "3 one entry, barrier",
                                "4 one entry, concurrent"};
// On one core: group 2's entries are two threads on the core; group 4 is one interleaved stream.
const char* const kCoreGroups[4] = {"1 serial entries", "2 concurrent, one core", "3 one entry, barrier",
                                    "4 one entry, interleaved"};

nlohmann::json group_json(const fuse::GroupResult& g) {
  return {{"group", g.group}, {"makespan_us", g.makespan_us}, {"completion_us", g.completion_us},
          {"engine_busy_us", g.engine_busy_us}, {"gm_bytes", g.gm_bytes},
          {"dma_stall_us", g.dma_stall_us < 0 ? nlohmann::json(nullptr) : nlohmann::json(g.dma_stall_us)},
          {"peak_on_chip_bytes", g.peak_on_chip_bytes}};
}

int run(const FuseArgs& a) {
  plan::Device d;
  Status st = plan::load_device(a.device, &d);
  if (!st.ok()) return fail(st.ToString());
  // "host": this CPU, its engines pinned worker threads running the real kernels; else the NPU model.
  const fuse::Executor ex = a.device != "host" ? fuse::Executor::kModel
                            : a.cores == 1        ? fuse::Executor::kHostCore
                                                  : fuse::Executor::kHost;
  if (ex == fuse::Executor::kModel && !d.has_sim) {
    return fail("device '" + d.name + "' has no \"sim\" section (the NPU model needs one; use host for this CPU)");
  }
  if (a.cores != 2 && ex == fuse::Executor::kModel) return fail("--cores places the host executor: give --device host");
  if (a.probe) {
    if (ex == fuse::Executor::kModel) return fail("--probe measures this CPU: give --device host");
    if (!a.pairs.empty() || !a.sweep_path.empty() || !a.stream_path.empty()) {
      return fail("--probe runs alone: drop --pair, --sweep and --stream");
    }
    return run_probe(a);
  }
  if (!a.stream_path.empty()) {
    if (ex == fuse::Executor::kHost) return fail("--stream on the host runs on one core: add --cores 1");
    return run_stream(a, d, ex);
  }
  std::vector<std::string> pairs = a.pairs;
  if (!a.sweep_path.empty()) {
    std::ifstream f(a.sweep_path);
    if (!f) return fail("cannot read --sweep file '" + a.sweep_path + "'");
    for (std::string line; std::getline(f, line);) {
      if (!line.empty() && line[0] != '#') pairs.push_back(line);
    }
  }
  if (pairs.empty()) return fail("give --pair TASK_A,TASK_B or --sweep FILE");
  if (!a.trace_path.empty() && pairs.size() != 1) return fail("--trace records one pair");
  if (!a.dma_rates.empty() && ex != fuse::Executor::kModel) return fail("--dma-rates sweeps the NPU model: give a model device");
  if (a.dma_rates.size() > 1 && (!a.trace_path.empty() || !a.plot_path.empty()))
    return fail("--trace and --plot record one DMA rate");
  nlohmann::json records = nlohmann::json::array();
  const char* const* group_names = ex == fuse::Executor::kHostCore ? kCoreGroups : kGroups;
  std::string trace;
  std::vector<std::string> labels;
  std::vector<std::vector<double>> relative;  // per pair: each group's makespan / group 1's
  // (rate, pair) -> gain over group 2, for the sweep's summary
  std::vector<std::pair<double, std::vector<double>>> sweep;
  std::vector<double> rates = a.dma_rates;
  if (rates.empty()) rates.push_back(0);  // 0: the device file's own rates
  for (double rate : rates) {
    plan::Device dr = d;
    if (rate > 0) {
      dr.sim.global_read_bytes_per_cycle = dr.sim.global_write_bytes_per_cycle = rate;
      std::printf("\n=== global-memory DMA at %g B/cycle (the device file: read %g, write %g) ===\n", rate,
                  d.sim.global_read_bytes_per_cycle, d.sim.global_write_bytes_per_cycle);
    }
    sweep.emplace_back(rate, std::vector<double>());
    const char* where = ex == fuse::Executor::kModel  ? "NPU model"
                        : ex == fuse::Executor::kHost ? "host executor, real kernels, matrix lane on one core"
                                                      : "host executor on one core, real kernels";
    std::printf("device %s (%s); times in us%s; E = group 1 / group 3, A = group 3 / group 4, ideal = %s\n",
                dr.name.c_str(), where,
                ex == fuse::Executor::kModel
                    ? ""
                    : (", median of " + std::to_string(a.reps) + " interleaved repetitions").c_str(),
                ex == fuse::Executor::kHostCore ? "(D+V+M)/max(D+V,M) with a matrix engine, else 1"
                                                : "(D+V+M)/max(D,V,M)");
    if (ex == fuse::Executor::kHostCore) {
      std::printf("matrix lane: %s (kernel set %s)\n", active_kernels().bf16_unit.c_str(),
                  active_kernels().name.c_str());
      if (!fuse::host_matrix_engine()) {
        std::printf("%s\nthe matrix engine is absent, so the GEMMs run on the vector unit itself and group 4's "
                    "interleaving shares one engine\n",
                    amx_support_line(amx_support()).c_str());
      }
    }
    for (size_t i = 0; i < pairs.size(); ++i) {
      const size_t comma = pairs[i].find(',');
      if (comma == std::string::npos) return fail("pair '" + pairs[i] + "': expected TASK_A,TASK_B");
      const std::string ta = pairs[i].substr(0, comma), tb = pairs[i].substr(comma + 1);
      std::fprintf(stderr, "[%zu/%zu] %s + %s\n", i + 1, pairs.size(), ta.c_str(), tb.c_str());
      fuse::PairReport r;
      st = fuse::run_pair(ta, tb, dr, ex, &r, a.trace_path.empty() ? nullptr : &trace, a.reps);
      if (!st.ok()) return fail(st.ToString());
      std::printf("\n%s + %s (D %.1f, V %.1f, M %.1f us alone)\n", ta.c_str(), tb.c_str(), r.dma_us, r.vector_us,
                  r.matrix_us);
      // On one core the lanes' busy times are the core's time in each kind of slice: where group 4
      // loses against group 3 they show which work got slower.
      const bool core = ex == fuse::Executor::kHostCore;
      std::printf("  %-26s %11s %11s %11s %9s %9s %10s%s\n", "group", "makespan", "A done", "B done", "GM_MB",
                  "stall", "on-chip_B", core ? "    copy_us  vector_us  matrix_us   model_us" : "");
      auto row = [core](const char* name, const fuse::GroupResult& g, const fuse::GroupResult* model) {
        char stall[32] = "-";
        if (g.dma_stall_us >= 0) std::snprintf(stall, sizeof stall, "%.1f", g.dma_stall_us);
        std::printf("  %-26s %11.1f %11.1f %11.1f %9.2f %9s %10lld", name, g.makespan_us, g.completion_us[0],
                    g.completion_us[1], g.gm_bytes / 1e6, stall, static_cast<long long>(g.peak_on_chip_bytes));
        if (core) {
          auto busy = [&](fuse::Lane l) {
            const auto it = g.lane_busy_us.find(l);
            return it == g.lane_busy_us.end() ? 0.0 : it->second;
          };
          std::printf(" %10.1f %10.1f %10.1f", busy(fuse::Lane::kDma), busy(fuse::Lane::kVector),
                      busy(fuse::Lane::kMatrix));
          if (model) std::printf(" %10.1f", model->makespan_us);
        }
        std::printf("\n");
      };
      for (const fuse::GroupResult& g : r.groups) row(group_names[g.group - 1], g, core ? &r.model[g.group - 1] : nullptr);
      if (r.has_two_cores) row("2 concurrent, two cores", r.group2_two_cores, nullptr);
      std::printf("  E %.3fx   A %.3fx   gain over 2 %.3fx   ideal %.3fx", r.e_effect, r.a_effect, r.gain_over_2,
                  r.ideal);
      if (r.has_two_cores) std::printf("   gain over 2 on two cores %.3fx", r.gain_over_2_two_cores);
      std::printf("\n");
      if (core) {
        std::printf("  model (the tasks' stages at each engine's alone rate, %s): A %.3fx; measured / model: "
                    "group 1 %.3f, 2 %.3f, 3 %.3f, 4 %.3f\n",
                    r.matrix_engine ? "the matrix engine its own queue" : "one queue for the whole core",
                    r.model[2].makespan_us / r.model[3].makespan_us, r.groups[0].makespan_us / r.model[0].makespan_us,
                    r.groups[1].makespan_us / r.model[1].makespan_us, r.groups[2].makespan_us / r.model[2].makespan_us,
                    r.groups[3].makespan_us / r.model[3].makespan_us);
        if (r.has_engine_model) {
          std::printf("  model with the GEMMs on an engine beside the core at their rate here: group 4 %.1f us, A %.3fx\n",
                      r.engine_model[3].makespan_us, r.engine_model[2].makespan_us / r.engine_model[3].makespan_us);
        }
      }
      labels.push_back(ta + " + " + tb);
      relative.emplace_back();
      for (const fuse::GroupResult& g : r.groups) relative.back().push_back(g.makespan_us / r.groups[0].makespan_us);
      nlohmann::json groups = nlohmann::json::array();
      for (const fuse::GroupResult& g : r.groups) groups.push_back(group_json(g));
      sweep.back().second.push_back(r.gain_over_2);
      nlohmann::json one_core = nullptr;
      if (core) {
        nlohmann::json model = nlohmann::json::array();
        for (const fuse::GroupResult& g : r.model) model.push_back(group_json(g));
        const nlohmann::json none = nullptr;
        one_core = {{"matrix_lane", r.matrix_lane},
                    {"matrix_engine", r.matrix_engine},
                    {"group2_two_cores", r.has_two_cores ? group_json(r.group2_two_cores) : none},
                    {"gain_over_2_two_cores", r.has_two_cores ? nlohmann::json(r.gain_over_2_two_cores) : none},
                    {"model", model},
                    {"model_with_matrix_engine", r.has_engine_model ? group_json(r.engine_model[3]) : none}};
      }
      records.push_back({{"executor", r.executor}, {"task_a", ta}, {"task_b", tb}, {"dma_us", r.dma_us},
                         {"one_core", one_core},
                         {"dma_bytes_per_cycle", ex != fuse::Executor::kModel ? nlohmann::json(nullptr)
                                                                               : nlohmann::json(dr.sim.global_read_bytes_per_cycle)},
                         {"vector_us", r.vector_us},
                         {"matrix_us", r.matrix_us}, {"ideal", r.ideal}, {"e_effect", r.e_effect},
                         {"a_effect", r.a_effect}, {"gain_over_2", r.gain_over_2}, {"groups", groups}});
    }
  }
  if (rates.size() > 1) {
    // The sweep in one table: how the gain of one fused entry over two concurrent ones moves with the rate.
    std::printf("\nsweep: gain of group 4 over group 2 per DMA rate (B/cycle)\n  %-48s", "pair");
    for (double r : rates) std::printf(" %8g", r);
    std::printf("\n");
    for (size_t i = 0; i < pairs.size(); ++i) {
      std::printf("  %-48s", pairs[i].c_str());
      for (const auto& [r, gains] : sweep) std::printf(" %7.3fx", gains[i]);
      std::printf("\n");
    }
  }
  if (!a.trace_path.empty() && !write_file(a.trace_path, trace)) return fail("cannot write '" + a.trace_path + "'");
  if (!a.plot_path.empty()) {
    const std::string where = ex == fuse::Executor::kHostCore ? d.name + " (one core)" : d.name;
    const std::string svg = svg_grouped_bars("four groups on " + where + ": makespan relative to serial entries",
                                             "makespan / group 1", labels, {group_names[0], group_names[1], group_names[2], group_names[3]},
                                             relative);
    if (!write_file(a.plot_path, svg)) return fail("cannot write '" + a.plot_path + "'");
  }
  const std::string json = nlohmann::json({{"device", d.name}, {"records", records}}).dump(2) + "\n";
  if (!a.json_path.empty() && !write_file(a.json_path, json)) return fail("cannot write '" + a.json_path + "'");
  return 0;
}

}  // namespace

Runner add_fuse_command(CLI::App& app) {
  auto a = std::make_shared<FuseArgs>();
  app.add_option("--device", a->device, "host (this CPU, real kernels) or an NPU model device: ascend-310p, "
                                        "ascend-310p3, ascend-310b, hexagon-v75, or a JSON file")
      ->required();
  app.add_option("--reps", a->reps, "host: interleaved repetitions of every run, the median kept (default 5)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--stream", a->stream_path, "Pairing under deadlines: a file of 'ARRIVAL_US SPEC [DEADLINE_US|-] "
                                             "[CHAIN_US]' lines, run by the fifo, pairing and admission policies "
                                             "(on the NPU model, or on one host core in real time with --cores 1)");
  app.add_option("--cap-us", a->cap_us, "--stream: a best-effort task's longest wait for a partner, and the "
                                        "admission rule's cap on a partner's time (default 500)")
      ->check(CLI::PositiveNumber);
  app.add_option("--pair", a->pairs, "TASK_A,TASK_B, e.g. gemm:1024x1024x1024:f16,softmax:4096x4096:f32 "
                                     "(repeatable)");
  app.add_option("--sweep", a->sweep_path, "A file of pairs, one TASK_A,TASK_B per line (# comments)");
  app.add_option("--dma-rates", a->dma_rates,
                 "NPU model: rerun every pair with the global-memory DMA rate set to each of these bytes/cycle "
                 "(e.g. 8,16,32,64,128: Hexagon's 32 is an estimate) and print the gains side by side")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  app.add_flag("--probe", a->probe,
               "host: the one-core overlap curve of the matrix lane's instructions and vector work interleaved in "
               "one instruction stream (FMA rounds and exp rounds)");
  app.add_option("--probe-rounds", a->probe_rounds, "--probe: vector rounds per matrix step (default 1,2,5,10,20)")
      ->delimiter(',')
      ->check(CLI::Range(1, 10000));
  app.add_option("--cores", a->cores,
                 "host: 2 (default) runs the matrix lane on one core and the vector and copy lanes on the other; 1 "
                 "runs both tasks on one core, group 4 interleaving their instruction streams slice by slice")
      ->check(CLI::Range(1, 2));
  app.add_option("--json", a->json_path, "Also write one record per pair");
  app.add_option("--trace", a->trace_path, "Write group 4's Chrome/Perfetto trace (one pair only)");
  app.add_option("--plot", a->plot_path, "Write an SVG of the pairs' group makespans relative to group 1");
  return [a] { return run(*a); };
}

}  // namespace hanpu::cli
