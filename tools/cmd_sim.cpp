// hanpu sim --calibration [--device LIST] [--json FILE]: the calibration report (sim/calibration.h).
// hanpu sim --device LIST --kind gdn|kda [--preset NAME | --heads LIST --v-heads HV --k K --v V]
//           [--tokens LIST] [--strategies LIST | --ablation] [--warmup-chunks N] [--segment-chunks N]
//           [--json FILE] [--trace FILE] [--plot FILE]
// Every (device, heads, tokens, strategy) combination is one simulation: a sweep, with progress on stderr.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "bench/bench.h"
#include "bench/plot.h"
#include "commands.h"
#include "plan/strategy.h"
#include "sim/calibration.h"
#include "sim/lower.h"

namespace hanpu::cli {

namespace {

struct SimArgs {
  std::vector<std::string> devices;
  std::string kind, preset, json_path, trace_path, plot_path, plan_path;
  bool ablation = false, calibration = false;
  std::vector<int64_t> heads;
  int64_t v_heads = 0, k = 0, v = 0, warmup_chunks = 2, segment_chunks = 0;
  std::vector<int64_t> tokens = {512, 1024, 2048, 4096, 8192, 16384, 32768, 65536};
  std::vector<std::string> strategies = plan::names_of(plan::strategies());
};

int fail(const std::string& msg) {
  std::fprintf(stderr, "hanpu sim: %s\n", msg.c_str());
  return 2;
}

std::string peaks_text(const std::map<std::string, int64_t>& peaks) {
  std::string s;
  for (const auto& [m, b] : peaks) s += m + " " + std::to_string(b) + "  ";
  return s;
}

nlohmann::json record_json(const sim::SimRecord& r) {
  return {{"device", r.device}, {"strategy", r.strategy}, {"kind", r.kind}, {"tokens", r.tokens},
          {"heads", r.heads}, {"latency_us", r.latency_us}, {"gm_bytes", r.gm_bytes},
          {"executed_macs", r.executed_macs}, {"gm_share", r.gm_share}, {"transform_share", r.transform_share},
          {"gm_footprint_bytes", r.gm_footprint_bytes},
          {"spill_bytes", r.spill_bytes}, {"l1_to_l0_bytes", r.l1_to_l0_bytes}, {"peak_bytes", r.peak_bytes},
          {"sim_peak_bytes", r.sim_peak_bytes}, {"matrix_util", r.matrix_util}, {"vector_util", r.vector_util},
          {"engine_busy", r.engine_busy}, {"energy_uj", r.energy_uj}, {"matrix_macs", r.matrix_macs},
          {"launches", r.launches}, {"tail_split", r.tail_split}, {"tasks", r.tasks}, {"tiled_steps", r.tiled_steps}};
}

// One run of an execution plan file on the device it was made for.
int run_plan(const SimArgs& a) {
  plan::Plan pl;
  Status st = plan::load_plan_file(a.plan_path, &pl);
  if (!st.ok()) return fail(st.ToString());
  plan::Device d;
  st = plan::load_device(std::filesystem::exists(pl.device_file) ? pl.device_file : pl.device, &d);
  if (!st.ok()) return fail(st.ToString());
  sim::Workload w;
  w.warmup_chunks = a.warmup_chunks;
  sim::SimRecord r;
  std::string trace;
  st = sim::simulate_plan(pl, d, w, &r, a.trace_path.empty() ? nullptr : &trace);
  if (!st.ok()) return fail(st.ToString());
  std::printf("%s on %s (%d cores): %s, %lld heads, %lld tokens: %.1f us, GM %.2f MB, %lld tasks, %lld launches\n",
              a.plan_path.c_str(), d.name.c_str(), d.cores, r.strategy.c_str(), static_cast<long long>(r.heads),
              static_cast<long long>(r.tokens), r.latency_us, r.gm_bytes / 1e6, static_cast<long long>(r.tasks),
              static_cast<long long>(r.launches));
  if (!a.trace_path.empty() && !write_file(a.trace_path, trace)) return fail("cannot write '" + a.trace_path + "'");
  if (!a.json_path.empty() && !write_file(a.json_path, nlohmann::json({{"records", {record_json(r)}}}).dump(2) + "\n")) {
    return fail("cannot write '" + a.json_path + "'");
  }
  return 0;
}

// The calibration report (sim/calibration.h) for each device (default: the paper's 310P).
int run_calibration(const SimArgs& a) {
  const std::vector<std::string> names = a.devices.empty() ? std::vector<std::string>{"ascend-310p"} : a.devices;
  nlohmann::json j = nlohmann::json::array();
  for (const std::string& name : names) {
    plan::Device d;
    Status st = plan::load_device(name, &d);
    if (!st.ok()) return fail(st.ToString());
    std::vector<sim::CalibrationRow> rows;
    st = sim::calibration_report(d, &rows, true);
    if (!st.ok()) return fail(st.ToString());
    std::printf("calibration report: %s (%d cores at %.4f GHz), Qwen3.5-2B linear-attention layers (16 heads, K=V=128)\n",
                d.name.c_str(), d.cores, d.clock_ghz);
    std::printf("%-4s %-48s %-62s %-16s %-16s %s\n", "fig", "quantity", "configuration", "figure", "model", "status");
    nlohmann::json dj = {{"device", d.name}, {"device_file", d.origin}, {"rows", nlohmann::json::array()}};
    for (const sim::CalibrationRow& r : rows) {
      auto range = [&](double lo, double hi) {
        char buf[64];
        if (lo == hi) std::snprintf(buf, sizeof buf, "%.4g %s", lo, r.unit.c_str());
        else std::snprintf(buf, sizeof buf, "%.4g-%.4g %s", lo, hi, r.unit.c_str());
        return std::string(buf);
      };
      std::string status = "no figure for this device";
      if (r.has_figure) {
        const double ratio = r.model_hi < r.figure_lo ? r.model_hi / r.figure_lo
                             : r.model_lo > r.figure_hi ? r.model_lo / r.figure_hi
                                                        : 1.0;
        char buf[96];
        std::snprintf(buf, sizeof buf, "%s (model/figure %.2f)", r.within_25_percent() ? "within 25%" : "OUTSIDE 25%",
                      ratio);
        status = std::string(r.calibrated ? "calibrated to it; " : "") + buf;
      }
      std::printf("%-4s %-48s %-62s %-16s %-16s %s\n", r.figure.c_str(), r.what.c_str(), r.configuration.c_str(),
                  r.has_figure ? range(r.figure_lo, r.figure_hi).c_str() : "-", range(r.model_lo, r.model_hi).c_str(),
                  status.c_str());
      nlohmann::json rj = {{"figure", r.figure}, {"quantity", r.what}, {"configuration", r.configuration},
                           {"unit", r.unit}, {"model", {r.model_lo, r.model_hi}}, {"calibrated", r.calibrated}};
      if (r.has_figure) {
        rj["paper"] = {r.figure_lo, r.figure_hi};
        rj["within_25_percent"] = r.within_25_percent();
      }
      dj["rows"].push_back(rj);
    }
    j.push_back(dj);
  }
  if (!a.json_path.empty() && !write_file(a.json_path, nlohmann::json({{"calibration", j}}).dump(2) + "\n")) {
    return fail("cannot write '" + a.json_path + "'");
  }
  return 0;
}

int run(const SimArgs& a) {
  if (a.calibration) return run_calibration(a);
  if (!a.plan_path.empty()) return run_plan(a);
  std::vector<plan::Device> devices;
  for (const std::string& name : a.devices) {
    plan::Device d;
    Status st = plan::load_device(name, &d);
    if (!st.ok()) return fail(st.ToString());
    if (!d.has_sim) return fail("device '" + d.name + "' has no \"sim\" section (the NPU model needs one)");
    devices.push_back(std::move(d));
  }
  sim::Workload w;
  int64_t H = 16, HV = 16;
  if (!a.preset.empty()) {
    const auto& presets = bench_presets();
    const auto p = std::find_if(presets.begin(), presets.end(), [&](const Preset& x) { return a.preset == x.name; });
    if (p == presets.end()) return fail("unknown preset '" + a.preset + "' (qwen3.5-0.8b, qwen3.5-2b, qwen3-next, kimi-linear)");
    w.kind = p->kind;
    H = p->H;
    HV = p->HV;
    w.K = p->K;
    w.V = p->V;
  }
  if (!a.kind.empty()) w.kind = a.kind == "kda" ? Kind::kKda : Kind::kGdn;
  if (a.k > 0) w.K = a.k;
  if (a.v > 0) w.V = a.v;
  w.warmup_chunks = a.warmup_chunks;
  w.segment_chunks = a.segment_chunks;
  // Value-head counts of the sweep: every value head is an independent unit of work.
  std::vector<int64_t> value_heads;
  if (a.heads.empty()) {
    value_heads.push_back(a.v_heads > 0 ? a.v_heads : HV);
    if (a.v_heads > 0 && a.v_heads % H != 0) return fail("--v-heads must be a multiple of the preset's heads");
  } else {
    if (a.v_heads > 0 && a.heads.size() != 1) return fail("--v-heads needs exactly one --heads value");
    for (int64_t h : a.heads) {
      if (a.v_heads > 0 && a.v_heads % h != 0) return fail("--v-heads must be a multiple of --heads");
      value_heads.push_back(a.v_heads > 0 ? a.v_heads : h);
    }
  }
  const std::vector<std::string>& strategies = a.ablation ? plan::names_of(plan::ablation_ladder()) : a.strategies;
  const size_t runs = devices.size() * value_heads.size() * a.tokens.size() * strategies.size();
  if (!a.trace_path.empty() && runs != 1) {
    return fail("--trace records one run: give one device, one head count, one token count and one strategy");
  }
  std::vector<sim::SimRecord> recs;
  std::string trace;
  size_t done = 0;
  for (const plan::Device& d : devices) {
    for (int64_t hv : value_heads) {
      for (int64_t T : a.tokens) {
        if (T < 1) return fail("--tokens must be >= 1");
        for (const std::string& s : strategies) {
          w.heads = hv;
          w.tokens = T;
          sim::SimRecord r;
          const Status st = sim::simulate_strategy(s, d, w, &r, a.trace_path.empty() ? nullptr : &trace);
          if (!st.ok()) return fail(st.ToString());
          std::fprintf(stderr, "[%zu/%zu] %s %s %s heads=%lld T=%lld: %.1f us (%lld tasks)\n", ++done, runs,
                       d.name.c_str(), s.c_str(), kind_name(w.kind), static_cast<long long>(hv),
                       static_cast<long long>(T), r.latency_us, static_cast<long long>(r.tasks));
          recs.push_back(r);
        }
      }
    }
  }
  for (const plan::Device& d : devices) {
    std::printf("device %s (%d cores at %.2f GHz)\n", d.name.c_str(), d.cores, d.clock_ghz);
  }
  std::printf("%s, K=%lld V=%lld; spl: column slices per tail head; peaks: planned on-chip bytes per buffer after "
              "spills\n", kind_name(w.kind), static_cast<long long>(w.K), static_cast<long long>(w.V));
  std::printf("%-12s %-14s %5s %6s %11s %9s %8s %9s %11s %11s %6s %6s %6s %6s %9s %10s %3s  %s\n", "device",
              "strategy", "heads", "tokens", "latency_us", "GM_MB", "spill_MB", "L1->L0_MB", "matrix_MACs",
              "exec_MACs", "m_util", "v_util", "GM_sh", "xf_sh", "GM_fp_MB", "energy_uJ", "spl", "peak bytes");
  for (const sim::SimRecord& r : recs) {
    std::printf("%-12s %-14s %5lld %6lld %11.1f %9.2f %8.2f %9.2f %11.3e %11.3e %6.3f %6.3f %6.3f %6.3f %9.2f %10.1f "
                "%3d  %s\n",
                r.device.c_str(), r.strategy.c_str(), static_cast<long long>(r.heads),
                static_cast<long long>(r.tokens), r.latency_us, r.gm_bytes / 1e6, r.spill_bytes / 1e6,
                r.l1_to_l0_bytes / 1e6, r.matrix_macs, r.executed_macs, r.matrix_util, r.vector_util, r.gm_share,
                r.transform_share, r.gm_footprint_bytes / 1e6, r.energy_uj, r.tail_split, peaks_text(r.peak_bytes).c_str());
  }
  if (!a.trace_path.empty() && !write_file(a.trace_path, trace)) return fail("cannot write '" + a.trace_path + "'");
  if (!a.json_path.empty()) {
    nlohmann::json j;
    nlohmann::json names = nlohmann::json::array(), files = nlohmann::json::array();
    for (const plan::Device& d : devices) {
      names.push_back(d.name);
      files.push_back(d.origin);
    }
    j["device"] = devices.size() == 1 ? names[0] : names;
    j["device_file"] = devices.size() == 1 ? files[0] : files;
    j["records"] = nlohmann::json::array();
    for (const sim::SimRecord& r : recs) j["records"].push_back(record_json(r));
    if (!write_file(a.json_path, j.dump(2) + "\n")) return fail("cannot write '" + a.json_path + "'");
  }
  if (!a.plot_path.empty()) {
    // Latency vs tokens, a line per (strategy[, device][, heads]).
    std::vector<PlotSeries> series;
    for (const sim::SimRecord& r : recs) {
      std::string name = r.strategy;
      if (devices.size() > 1) name += " " + r.device;
      if (value_heads.size() > 1) name += " h" + std::to_string(r.heads);
      auto it = std::find_if(series.begin(), series.end(), [&](const PlotSeries& l) { return l.name == name; });
      if (it == series.end()) it = series.insert(series.end(), PlotSeries{name, {}});
      it->points.emplace_back(static_cast<double>(r.tokens), r.latency_us);
    }
    const std::string title = std::string("simulated latency vs sequence length, ") + kind_name(w.kind) +
                              (devices.size() == 1 ? ", " + devices[0].name : std::string());
    if (!write_file(a.plot_path, svg_log_log(title, "tokens T", "us", std::move(series)))) {
      return fail("cannot write '" + a.plot_path + "'");
    }
  }
  return 0;
}

}  // namespace

Runner add_sim_command(CLI::App& app) {
  auto a = std::make_shared<SimArgs>();
  app.add_option("--device", a->devices, "Devices with a \"sim\" section (ascend-310p, ascend-310p3, ascend-310b, "
                                         "hexagon-v75, or JSON files), comma-separated for a sweep")
      ->delimiter(',');
  app.add_option("--kind", a->kind, "gdn or kda (default: the preset's, else gdn)")->check(CLI::IsMember({"gdn", "kda"}));
  app.add_option("--preset", a->preset, "qwen3.5-0.8b, qwen3.5-2b, qwen3-next or kimi-linear (default: 16 heads, K=V=128)");
  app.add_option("--heads", a->heads, "q/k heads, comma-separated for a sweep (each also the value heads unless "
                                      "--v-heads)")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  app.add_option("--v-heads", a->v_heads, "value heads (default: --heads)")->check(CLI::Range(1, 4096));
  app.add_option("--k", a->k, "key head dim")->check(CLI::Range(1, 256));
  app.add_option("--v", a->v, "value head dim")->check(CLI::Range(1, 256));
  app.add_option("--tokens", a->tokens, "Sequence lengths (default 512 ... 65536)")->delimiter(',');
  app.add_option("--strategies", a->strategies, "Strategies: native, fla, fla-megakernel, flashqla, hanpu (default "
                                                "all)")
      ->delimiter(',');
  app.add_flag("--calibration", a->calibration,
               "Print the calibration report: the model at the HA-NPU paper's profiling configurations (C4-C9) "
               "beside the figures (default device: ascend-310p; other devices: no figures, the same runs)");
  app.add_flag("--ablation", a->ablation,
               "Run fla, +fusion, +tail-split, +chunk-first, +gemm-first, +layout-plan instead");
  app.add_option("--warmup-chunks", a->warmup_chunks,
                 "flashqla: warm-up chunks per segment (data-dependent on hardware; default 2)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--segment-chunks", a->segment_chunks, "flashqla: chunks per segment (default: FlashQLA's rule)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--trace", a->trace_path, "Write a Chrome/Perfetto trace of the run (a single run only)");
  app.add_option("--json", a->json_path, "Also write one record per run");
  app.add_option("--plan", a->plan_path, "Simulate this execution plan (hanpu plan --device D --json FILE) on its "
                                         "device instead of planning (sweep options are ignored)");
  app.add_option("--plot", a->plot_path, "Write an SVG of latency vs tokens per strategy");
  return [a] {
    if (a->plan_path.empty() && a->devices.empty() && !a->calibration) {
      return fail("--device is required (or --plan FILE, or --calibration)");
    }
    return run(*a);
  };
}

}  // namespace hanpu::cli
