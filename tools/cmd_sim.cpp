// hanpu sim --device NAME|FILE --kind gdn|kda [--preset NAME | --heads H --v-heads HV --k K --v V]
//           [--tokens LIST] [--strategies LIST | --ablation] [--json FILE] [--trace FILE]
#include <cstdio>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "bench/bench.h"
#include "commands.h"
#include "sim/lower.h"

namespace hanpu::cli {

namespace {

struct SimArgs {
  std::string device, kind, preset, json_path, trace_path;
  bool ablation = false;
  int64_t heads = 0, v_heads = 0, k = 0, v = 0;
  std::vector<int64_t> tokens = {512, 1024, 2048, 4096, 8192, 16384, 32768, 65536};
  std::vector<std::string> strategies = sim::sim_strategies();
};

int fail(const std::string& msg) {
  std::fprintf(stderr, "hanpu sim: %s\n", msg.c_str());
  return 2;
}

int run(const SimArgs& a) {
  plan::Device d;
  Status st = plan::load_device(a.device, &d);
  if (!st.ok()) return fail(st.ToString());
  sim::Workload w;
  w.kind = Kind::kGdn;
  int64_t H = 16, HV = 16;
  if (!a.preset.empty()) {
    bool found = false;
    for (const Preset& p : bench_presets()) {
      if (a.preset != p.name) continue;
      found = true;
      w.kind = p.kind;
      H = p.H;
      HV = p.HV;
      w.K = p.K;
      w.V = p.V;
    }
    if (!found) return fail("unknown preset '" + a.preset + "' (qwen3.5-0.8b, qwen3-next, kimi-linear)");
  }
  if (!a.kind.empty()) w.kind = a.kind == "kda" ? Kind::kKda : Kind::kGdn;
  if (a.heads > 0) H = HV = a.heads;
  if (a.v_heads > 0) HV = a.v_heads;
  if (HV % H != 0) return fail("--v-heads must be a multiple of --heads");
  if (a.k > 0) w.K = a.k;
  if (a.v > 0) w.V = a.v;
  w.heads = HV;  // every value head is an independent unit of work
  const std::vector<std::string>& strategies = a.ablation ? sim::sim_ablation_steps() : a.strategies;
  if (!a.trace_path.empty() && (strategies.size() != 1 || a.tokens.size() != 1)) {
    return fail("--trace records one run: give one strategy (--strategies NAME) and one token count");
  }
  std::vector<sim::SimRecord> recs;
  std::string trace;
  for (int64_t T : a.tokens) {
    if (T < 1) return fail("--tokens must be >= 1");
    for (const std::string& s : strategies) {
      w.tokens = T;
      sim::SimRecord r;
      st = sim::simulate_strategy(s, d, w, &r, a.trace_path.empty() ? nullptr : &trace);
      if (!st.ok()) return fail(st.ToString());
      std::fprintf(stderr, "%s %s T=%lld: %.1f us (%lld tasks)\n", s.c_str(), kind_name(w.kind),
                   static_cast<long long>(T), r.latency_us, static_cast<long long>(r.tasks));
      recs.push_back(r);
    }
  }
  std::printf("device %s (%d cores at %.2f GHz), %s, %lld value heads, K=%lld V=%lld\n", d.name.c_str(), d.cores,
              d.clock_ghz, kind_name(w.kind), static_cast<long long>(w.heads), static_cast<long long>(w.K),
              static_cast<long long>(w.V));
  std::printf("%-13s %7s %12s %10s %10s %12s %7s %7s  %s\n", "strategy", "tokens", "latency_us", "GM_MB", "L1->L0_MB",
              "matrix_MACs", "m_util", "v_util", "peak bytes");
  for (const sim::SimRecord& r : recs) {
    std::string peaks;
    for (const auto& [m, b] : r.peak_bytes) peaks += m + " " + std::to_string(b) + "  ";
    std::printf("%-13s %7lld %12.1f %10.2f %10.2f %12.3e %7.3f %7.3f  %s\n", r.strategy.c_str(),
                static_cast<long long>(r.tokens), r.latency_us, r.gm_bytes / 1e6, r.l1_to_l0_bytes / 1e6, r.matrix_macs,
                r.matrix_util, r.vector_util, peaks.c_str());
  }
  if (!a.trace_path.empty()) {
    std::ofstream f(a.trace_path);
    f << trace;
    if (!f) return fail("cannot write '" + a.trace_path + "'");
  }
  if (!a.json_path.empty()) {
    nlohmann::json j;
    j["device"] = d.name;
    j["device_file"] = d.origin;
    j["records"] = nlohmann::json::array();
    for (const sim::SimRecord& r : recs) {
      j["records"].push_back({{"strategy", r.strategy}, {"kind", r.kind}, {"tokens", r.tokens}, {"heads", r.heads},
                              {"latency_us", r.latency_us}, {"gm_bytes", r.gm_bytes},
                              {"l1_to_l0_bytes", r.l1_to_l0_bytes}, {"peak_bytes", r.peak_bytes},
                              {"matrix_util", r.matrix_util}, {"vector_util", r.vector_util},
                              {"engine_busy", r.engine_busy}, {"energy_uj", nullptr}, {"matrix_macs", r.matrix_macs},
                              {"tasks", r.tasks}});
    }
    std::ofstream f(a.json_path);
    f << j.dump(2) << "\n";
    if (!f) return fail("cannot write '" + a.json_path + "'");
  }
  return 0;
}

}  // namespace

Runner add_sim_command(CLI::App& app) {
  auto a = std::make_shared<SimArgs>();
  app.add_option("--device", a->device, "A device with a \"sim\" section: ascend-310p, ascend-310p3, ascend-310b, "
                                        "hexagon-v75, or a JSON file")->required();
  app.add_option("--kind", a->kind, "gdn or kda (default: the preset's, else gdn)")->check(CLI::IsMember({"gdn", "kda"}));
  app.add_option("--preset", a->preset, "qwen3.5-0.8b, qwen3-next or kimi-linear (default: 16 heads, K=V=128)");
  app.add_option("--heads", a->heads, "q/k heads")->check(CLI::Range(1, 4096));
  app.add_option("--v-heads", a->v_heads, "value heads (default: --heads)")->check(CLI::Range(1, 4096));
  app.add_option("--k", a->k, "key head dim")->check(CLI::Range(1, 256));
  app.add_option("--v", a->v, "value head dim")->check(CLI::Range(1, 256));
  app.add_option("--tokens", a->tokens, "Sequence lengths (default 512 ... 65536)")->delimiter(',');
  app.add_option("--strategies", a->strategies, "Strategies (modelled: fla, hanpu)")->delimiter(',');
  app.add_flag("--ablation", a->ablation, "Run fla, +fusion, +chunk-first, +gemm-first, +layout-plan instead");
  app.add_option("--trace", a->trace_path, "Write a Chrome/Perfetto trace of the run (one strategy, one length)");
  app.add_option("--json", a->json_path, "Also write one record per (strategy, tokens)");
  return [a] { return run(*a); };
}

}  // namespace hanpu::cli
