// The `hanpu` command line end to end: a small file through `hanpu run`, exit codes, `hanpu verify`.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include <filesystem>

#include "hanpu/layer.h"
#include "kernels/kernel_set.h"
#include "kernels/overlap_probe.h"
#include "layer/random_weights.h"
#include "plan/device.h"
#include "process_util.h"
#include "test_util.h"

namespace hanpu {
namespace {

using testing::temp;

// Runs the CLI in its own process (with HANPU_KERNELS=kernels when given), its output into *output.
int run_cli(const std::string& args, std::string* output = nullptr, const std::string& kernels = "") {
  const std::string env = kernels.empty() ? "" : "HANPU_KERNELS='" + kernels + "' ";
  return testing::run_shell(env + std::string(HANPU_CLI_PATH) + " " + args, output);
}

TEST(Cli, RunWritesWhatTheLibraryComputes) {
  for (Kind kind : {Kind::kGdn, Kind::kKda}) {
    // H = 2 q/k heads for 4 value heads, so that the head mapping (tiled here) decides the result
    TensorFile f = testing::small_problem(kind, DType::kBF16, 1, 40, 2, 4, 16, 8, 8);
    std::mt19937_64 rng(2);
    f.tensors["initial_state"] = testing::random_tensor(DType::kF32, {1, 4, 8, 16}, rng);  // v-first
    f.tensors["cu_seqlens"] = testing::tensor_of(DType::kI64, {3}, {0, 17, 40});
    std::vector<double> cu_init = to_doubles(f.find("initial_state")->view());
    cu_init.resize(2 * 4 * 8 * 16);  // two sequences
    f.tensors["initial_state"] = testing::tensor_of(DType::kF32, {2, 4, 8, 16}, cu_init);
    const std::string in = temp("cli_in.safetensors"), out = temp("cli_out.safetensors");
    ASSERT_TRUE(write_safetensors(in, f).ok());
    for (std::string mode : {"chunk", "recurrent"}) {
      std::string log;
      const int rc = run_cli(std::string("run --kind ") + kind_name(kind) + " --in " + in + " --out " + out +
                                 " --mode " + mode +
                                 " --chunk-size 16 --state-v-first --output-final-state --scale 0.3 --head-mapping tiled",
                             &log);
      ASSERT_EQ(rc, 0) << log;
      TensorFile got;
      ASSERT_TRUE(read_safetensors(out, &got).ok());
      Inputs inputs;
      ASSERT_TRUE(bind_inputs(f, &inputs).ok());
      Options opt;
      opt.kind = kind;
      opt.chunk_size = 16;
      opt.state_v_first = true;
      opt.scale = 0.3;
      opt.head_mapping = HeadMapping::kTiled;
      testing::Result want;
      ASSERT_TRUE(testing::run_op(mode == "chunk" ? chunk_forward : recurrent_forward, inputs, opt, DType::kBF16,
                                  DType::kF32, &want)
                      .ok());
      ASSERT_NE(got.find("o"), nullptr);
      ASSERT_NE(got.find("final_state"), nullptr);
      EXPECT_EQ(got.find("o")->dtype, DType::kBF16);  // o in the dtype of q
      EXPECT_EQ(got.find("o")->bytes, want.o.bytes);
      EXPECT_EQ(got.find("final_state")->shape, (std::vector<int64_t>{2, 4, 8, 16}));
      EXPECT_EQ(got.find("final_state")->bytes, want.state.bytes);
      EXPECT_EQ(got.metadata.at("mode"), mode);
    }
  }
}

TEST(Cli, EngineModeMatchesTheReferenceClosely) {
  TensorFile f = testing::small_problem(Kind::kKda, DType::kF32, 2, 50, 1, 2, 16, 24, 4);
  const std::string in = temp("cli_engine_in.safetensors"), out = temp("cli_engine_out.safetensors");
  const std::string ref = temp("cli_engine_ref.safetensors");
  ASSERT_TRUE(write_safetensors(in, f).ok());
  std::string log;
  ASSERT_EQ(run_cli("run --kind kda --in " + in + " --out " + ref + " --mode reference --output-final-state", &log), 0)
      << log;
  for (std::string strategy : {"hanpu", "fla", "fla-megakernel", "native", "flashqla"}) {
    ASSERT_EQ(run_cli("run --kind kda --in " + in + " --out " + out + " --mode engine --threads 2 --strategy " +
                          strategy + " --output-final-state",
                      &log),
              0)
        << log;
    TensorFile got, want;
    ASSERT_TRUE(read_safetensors(out, &got).ok());
    ASSERT_TRUE(read_safetensors(ref, &want).ok());
    EXPECT_EQ(want.find("o")->dtype, DType::kF64);
    EXPECT_LT(testing::nmse_of(*got.find("o"), *want.find("o")), 1e-10) << strategy;
    EXPECT_LT(testing::nmse_of(*got.find("final_state"), *want.find("final_state")), 1e-10) << strategy;
  }
  EXPECT_EQ(run_cli("run --kind kda --in " + in + " --out " + out + " --mode engine --strategy megakernel", &log), 2);
}

TEST(Cli, BenchAblationWritesOneRecordPerStepWithItsMeasurements) {
  const std::string json_path = temp("bench.json"), svg_path = temp("bench.svg");
  std::string log;
  ASSERT_EQ(run_cli("bench --ablation --tokens 64,130 --heads 2 --reps 1 --threads 2 --json " + json_path +
                        " --plot " + svg_path,
                    &log),
            0)
      << log;
  std::ifstream sf(svg_path);
  const std::string svg((std::istreambuf_iterator<char>(sf)), std::istreambuf_iterator<char>());
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  for (const char* step : {">fla<", ">+fusion<", ">+gemm-first<", ">+layout-plan<"}) EXPECT_NE(svg.find(step), std::string::npos) << step;
  EXPECT_EQ(std::count(svg.begin(), svg.end(), '\n') > 10, true);
  std::size_t polylines = 0;
  for (std::size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) ++polylines;
  EXPECT_EQ(polylines, 6u);
  EXPECT_NE(log.find("FMA peak"), std::string::npos) << log;
  std::ifstream jf(json_path);
  const auto j = nlohmann::json::parse(jf);
  EXPECT_GT(j["fma_peak_gflops"].get<double>(), 0.0);
  ASSERT_EQ(j["records"].size(), 12u);  // 6 ablation steps x 2 lengths
  for (const auto& r : j["records"]) {
    for (const char* field : {"median_ms", "gflops", "utilization", "peak_workspace_bytes", "traffic_bytes"}) {
      EXPECT_GT(r[field].get<double>(), 0.0) << field;
    }
    EXPECT_LT(r["nmse_o"].get<double>(), 1e-10);
    EXPECT_LT(r["nmse_state"].get<double>(), 1e-10);
  }
  // chunk-first keeps one state per thread instead of two
  EXPECT_LT(j["records"][3]["peak_workspace_bytes"].get<int64_t>(), j["records"][2]["peak_workspace_bytes"].get<int64_t>());
  EXPECT_EQ(run_cli("bench --tokens 64 --strategies nope --reps 1", &log), 2);
  EXPECT_NE(log.find("unknown strategy 'nope'"), std::string::npos) << log;
}

// In bf16 precision the ablation is the packing one: three rows, the same bits, each with the planner's
// estimate of a (chunk, head) step beside the measured thread time per step.
TEST(Cli, BenchAblationInBf16ComparesThePackingChoices) {
  const std::string json_path = temp("bench_packing.json");
  std::string log;
  ASSERT_EQ(run_cli("bench --ablation --precision bf16 --dtype bf16 --tokens 130 --heads 2 --reps 1 --threads 2 --json " +
                        json_path,
                    &log),
            0)
      << log;
  for (const char* line : {"packing pack-always: ", "bf16: every GEMM call packs", "packing never-keep: ",
                           "nothing kept packed", "packing planned: ", "kept packed S K^T", "the planner's estimate"}) {
    EXPECT_NE(log.find(line), std::string::npos) << line << "\n" << log;
  }
  std::ifstream jf(json_path);
  const auto j = nlohmann::json::parse(jf);
  ASSERT_EQ(j["records"].size(), 3u);
  std::vector<std::string> names;
  for (const auto& r : j["records"]) {
    names.push_back(r["strategy"]);
    EXPECT_GT(r["step_us"].get<double>(), 0.0);
    EXPECT_GT(r["estimate_step_us"].get<double>(), 0.0);
    EXPECT_EQ(r["rel_rms_o"], j["records"][0]["rel_rms_o"]);  // every choice gives the same bits
  }
  EXPECT_EQ(names, (std::vector<std::string>{"pack-always", "never-keep", "planned"}));
  EXPECT_GT(j["records"][0]["estimate_step_us"].get<double>(), j["records"][2]["estimate_step_us"].get<double>());
  ASSERT_EQ(run_cli("plan --device host --precision bf16 --packing never-keep", &log), 0) << log;
  EXPECT_NE(log.find("precision: bf16; packing never-keep"), std::string::npos) << log;
  EXPECT_EQ(run_cli("plan --device host --precision bf16 --packing sometimes", &log), 2) << log;
  EXPECT_EQ(run_cli("plan --device hexagon-v75 --precision bf16", &log), 2) << log;
  EXPECT_NE(log.find("requires blocked matrix operands"), std::string::npos) << log;
}

TEST(Cli, PrecisionModesThroughBenchAndVerify) {
  const std::string json = temp("bench_bf16.json");
  std::string log;
  ASSERT_EQ(run_cli("bench --heads 2 --tokens 130 --threads 2 --strategies hanpu,fla --reps 1 --dtype bf16 "
                    "--precision bf16 --breakdown --json " + json, &log), 0) << log;
  EXPECT_NE(log.find("bf16 GEMM unit:"), std::string::npos) << log;
  EXPECT_NE(log.find("breakdown gdn hanpu T=130 bf16"), std::string::npos) << log;
  std::ifstream f(json);
  const nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_EQ(j["precision"], "bf16");
  EXPECT_GT(j["matrix_peak_gflops"].get<double>(), 0);
  for (const auto& r : j["records"]) {
    EXPECT_EQ(r["precision"], "bf16");
    EXPECT_GT(r["rel_rms_o"].get<double>(), r["bf16_floor_o"].get<double>());  // bf16 operands cost accuracy
    EXPECT_LT(r["rel_rms_o"].get<double>(), 1e-2);
    EXPECT_EQ(r.contains("breakdown_ms"), r["strategy"] == "hanpu") << r.dump();
    // Beside the measured parts, the planner's estimate of a step by the same parts.
    EXPECT_EQ(r.contains("breakdown_estimate_step_us"), r["strategy"] == "hanpu") << r.dump();
    if (r["strategy"] != "hanpu") continue;
    EXPECT_EQ(r["breakdown_estimate_step_us"].size(), r["breakdown_ms"].size());
    EXPECT_GT(r["breakdown_estimate_step_us"]["gemm"].get<double>(), 0);
    // A whole run's steps also ask for the next step's rows (3 chunks of 2 heads on 2 threads: some do).
    EXPECT_GT(r["breakdown_ms"]["prefetch"].get<double>(), 0) << r.dump();
    EXPECT_TRUE(r["breakdown_estimate_step_us"].contains("prefetch")) << r.dump();
  }
  EXPECT_NE(log.find("the planner's estimate (host description), per step (us): load"), std::string::npos) << log;
  ASSERT_EQ(run_cli("bench --heads 2 --tokens 130 --threads 2 --strategies hanpu --reps 1 --dtype bf16 "
                    "--precision exact --json " + json, &log), 0) << log;
  std::ifstream g(json);
  const nlohmann::json e = nlohmann::json::parse(g);
  EXPECT_EQ(e["records"][0]["precision"], "exact");
  EXPECT_NEAR(e["records"][0]["rel_rms_o"].get<double>(), e["records"][0]["bf16_floor_o"].get<double>(),
              0.01 * e["records"][0]["bf16_floor_o"].get<double>());  // exact sits on the rounding floor
  EXPECT_EQ(run_cli("verify --instances 24 --precision bf16 --quiet", &log), 0) << log;
  EXPECT_NE(log.find("precision bf16"), std::string::npos) << log;
  EXPECT_EQ(run_cli("verify --instances 4 --precision fp8", &log), 2) << log;
  EXPECT_NE(log.find("--precision"), std::string::npos) << log;
}

// Several precision modes in one bench: each strategy in each mode, interleaved, the bf16 record with its
// speedup over exact (per-round ratios: median within their range), the exact one's workspace its own (not
// what the bf16 calls reserved on the same threads), and a mode given twice (auto resolves to exact or bf16 on
// bf16 inputs, ops.h resolve_precision) runs once; --parts compares the in-cache steps the same way; the
// one-mode benches refuse several, naming the option.
TEST(Cli, BenchRunsEachStrategyInEachPrecisionAndMeasuresTheSpeedup) {
  const std::string json = temp("bench_modes.json"), svg = temp("bench_modes.svg");
  std::string log;
  ASSERT_EQ(run_cli("bench --kind kda --heads 2 --tokens 130 --threads 2 --strategies hanpu,fla --reps 3 --dtype bf16 "
                    "--precision exact,bf16,auto --json " + json + " --plot " + svg, &log), 0) << log;
  EXPECT_NE(log.find("kda hanpu T=130: bf16 "), std::string::npos) << log;
  EXPECT_NE(log.find("x the speed of exact (median of 3 interleaved rounds"), std::string::npos) << log;
  EXPECT_NE(log.find("speedup kda fla T=130: bf16 "), std::string::npos) << log;
  std::ifstream f(json);
  const nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_EQ(j["precision"], "exact");
  EXPECT_EQ(j["precisions"], (nlohmann::json{"exact", "bf16", "auto"}));
  EXPECT_EQ(j["auto_bf16_mode"], precision_name(resolve_precision(Precision::kAuto, DType::kBF16)));
  ASSERT_EQ(j["records"].size(), 4u);
  std::vector<std::string> runs;
  for (const auto& r : j["records"]) runs.push_back(r["strategy"].get<std::string>() + " " + r["precision"].get<std::string>());
  EXPECT_EQ(runs, (std::vector<std::string>{"hanpu exact", "hanpu bf16", "fla exact", "fla bf16"}));
  for (const auto& r : j["records"]) {
    if (r["precision"] == "exact") {
      EXPECT_FALSE(r.contains("speedup_vs_exact")) << r.dump();
      EXPECT_TRUE(r["fla_emulation_rel_rms_o"].is_null()) << r.dump();
      continue;
    }
    const double s = r["speedup_vs_exact"].get<double>();
    const auto range = r["speedup_vs_exact_range"];
    EXPECT_GT(range[0].get<double>(), 0.0);
    EXPECT_LE(range[0].get<double>(), s);
    EXPECT_GE(range[1].get<double>(), s);
    EXPECT_GT(r["fla_emulation_rel_rms_o"].get<double>(), 0.0);
  }
  // The exact run's workspace as when it runs alone.
  ASSERT_EQ(run_cli("bench --kind kda --heads 2 --tokens 130 --threads 2 --strategies hanpu --reps 1 --dtype bf16 "
                    "--precision exact --json " + json, &log), 0) << log;
  std::ifstream g(json);
  const nlohmann::json alone = nlohmann::json::parse(g);
  EXPECT_EQ(alone["records"][0]["peak_workspace_bytes"], j["records"][0]["peak_workspace_bytes"]);
  EXPECT_EQ(alone["records"][0]["rel_rms_o"], j["records"][0]["rel_rms_o"]);
  std::ifstream sf(svg);
  const std::string plot((std::istreambuf_iterator<char>(sf)), std::istreambuf_iterator<char>());
  for (const char* series : {">hanpu exact<", ">hanpu bf16<", ">fla exact<", ">fla bf16<"}) {
    EXPECT_NE(plot.find(series), std::string::npos) << series;
  }
  for (const char* mode : {"--ablation --tokens 64", "--decode"}) {
    EXPECT_EQ(run_cli(std::string("bench --heads 2 --reps 1 --dtype bf16 --precision exact,bf16 ") + mode, &log), 2)
        << mode;
    EXPECT_NE(log.find(std::string("precision: ") + std::string(mode).substr(0, std::string(mode).find(' ')) +
                       " runs one precision mode; these resolve to exact and bf16 on BF16 inputs"),
              std::string::npos)
        << log;
  }
  // --parts: the two modes' in-cache steps take turns by rounds of 100 steps; the ratio is per round.
  ASSERT_EQ(run_cli("bench --parts --kind kda --reps 2 --dtype bf16 --precision bf16,exact --json " + json, &log), 0)
      << log;
  EXPECT_NE(log.find("kda parts T=64: bf16 "), std::string::npos) << log;
  std::ifstream pf(json);
  const nlohmann::json parts = nlohmann::json::parse(pf);
  ASSERT_EQ(parts["records"].size(), 2u);
  EXPECT_EQ(parts["records"][0]["precision"], "bf16");
  EXPECT_EQ(parts["records"][1]["precision"], "exact");
  for (const auto& r : parts["records"]) EXPECT_EQ(r["parts_steps"], 200) << r.dump();
  const auto sp = parts["records"][0]["speedup_vs_exact_range"];
  EXPECT_LE(sp[0].get<double>(), parts["records"][0]["speedup_vs_exact"].get<double>());
  EXPECT_GE(sp[1].get<double>(), parts["records"][0]["speedup_vs_exact"].get<double>());
  EXPECT_FALSE(parts["records"][1].contains("speedup_vs_exact"));
  EXPECT_EQ(run_cli("bench --heads 2 --reps 1 --tokens 64 --precision exact,fp8", &log), 2);
  EXPECT_NE(log.find("--precision"), std::string::npos) << log;
}

TEST(Cli, BenchDecodeReportsOneStepPerBatchSize) {
  const std::string json_path = temp("bench_decode.json");
  std::string log;
  ASSERT_EQ(run_cli("bench --decode --heads 2 --reps 1 --json " + json_path, &log), 0) << log;
  std::ifstream jf(json_path);
  const auto j = nlohmann::json::parse(jf);
  ASSERT_EQ(j["records"].size(), 7u);
  int64_t batch = 1;
  for (const auto& r : j["records"]) {
    EXPECT_EQ(r["batch"], batch);
    EXPECT_EQ(r["strategy"], "decode");
    EXPECT_GT(r["median_ms"].get<double>(), 0.0);
    EXPECT_TRUE(r["nmse_o"].is_null());
    batch *= 2;
  }
  EXPECT_EQ(log.find("note: --decode times fp32 inputs"), std::string::npos) << log;
  // --dtype and --precision do not apply to the decode step: said, not silently ignored.
  ASSERT_EQ(run_cli("bench --decode --heads 2 --reps 1 --dtype bf16 --precision bf16", &log), 0) << log;
  EXPECT_NE(log.find("note: --decode times fp32 inputs, and the decode step has no GEMMs"), std::string::npos) << log;
}

// bench --parts: one record per run, the hanpu strategy's chunk step timed in cache by part (each part's
// median and best, 100 x reps steps) beside the planner's estimate; it excludes the other modes.
TEST(Cli, BenchPartsTimesOneChunkStepByPart) {
  const std::string json_path = temp("bench_parts.json");
  std::string log;
  for (const char* args : {"--preset kimi-linear --dtype bf16 --precision bf16", "--dtype f32"}) {
    ASSERT_EQ(run_cli(std::string("bench --parts --reps 1 ") + args + " --json " + json_path, &log), 0) << log;
    EXPECT_NE(log.find("in cache on one thread, 100 steps"), std::string::npos) << log;
    EXPECT_NE(log.find("AMX tiles: "), std::string::npos) << log;  // usable, or why not
    std::ifstream jf(json_path);
    const auto j = nlohmann::json::parse(jf);
    ASSERT_TRUE(j["amx"]["usable"].is_boolean()) << j["amx"].dump();
    EXPECT_EQ(j["amx"]["usable"].get<bool>(), j["amx"]["reason"].get<std::string>().empty()) << j["amx"].dump();
    ASSERT_EQ(j["records"].size(), 1u);
    const auto& r = j["records"][0];
    EXPECT_EQ(r["strategy"], "parts");
    EXPECT_EQ(r["threads"], 1);
    EXPECT_EQ(r["tokens"], 64);
    EXPECT_EQ(r["parts_steps"], 100);
    EXPECT_EQ(r["precision"], std::string(args).find("bf16") != std::string::npos ? "bf16" : "exact");
    ASSERT_EQ(r["parts_us"].size(), 6u) << r.dump();
    ASSERT_EQ(r["breakdown_estimate_step_us"].size(), 6u) << r.dump();
    // Each part's best is no more than its time in the best step, so the bests sum to at most that step.
    double best_sum = 0;
    for (const auto& [part, us] : r["parts_min_us"].items()) {
      EXPECT_LE(us.get<double>(), r["parts_us"][part].get<double>()) << part;
      best_sum += us.get<double>();
    }
    EXPECT_GT(r["parts_us"]["gemm"].get<double>(), 0);
    EXPECT_LE(best_sum, 1e3 * r["min_ms"].get<double>() * (1 + 1e-9));
    EXPECT_LE(r["min_ms"].get<double>(), r["median_ms"].get<double>());
  }
  EXPECT_EQ(run_cli("bench --parts --decode", &log), 2);
  EXPECT_NE(log.find("--parts"), std::string::npos) << log;
  EXPECT_EQ(run_cli("bench --parts --tokens 64", &log), 2);
}

// `hanpu layer`: a preset layer with random weights, timed, checked against the fp64 layer reference, its
// decode steps timed, JSON written; a checkpoint written here loads by --model; bad input exits 2.
TEST(Cli, LayerRunsPresetsAndCheckpoints) {
  const std::string json_path = temp("layer.json");
  std::string log;
  ASSERT_EQ(run_cli("layer --preset kimi-linear --tokens 40 --reps 1 --threads 2 --check --decode 1,3 --json " + json_path,
                    &log), 0) << log;
  std::ifstream f(json_path);
  const nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_EQ(j["layer"]["arch"], "kimi_linear");
  EXPECT_EQ(j["precision"], "bf16");  // the preset's bf16 weights: auto is bf16
  EXPECT_GT(j["prefill"]["median_ms"].get<double>(), 0.0);
  EXPECT_EQ(j["prefill"]["parts_ms"].size(), 5u);
  ASSERT_EQ(j["decode"].size(), 2u);
  for (const auto& d : j["decode"]) {  // each decode step with its parts, as the prefill's
    ASSERT_EQ(d["parts_ms"].size(), 5u) << d;
    double sum = 0;
    for (const auto& [part, ms] : d["parts_ms"].items()) {
      EXPECT_GE(ms.get<double>(), 0.0) << part;
      sum += ms.get<double>();
    }
    EXPECT_GT(d["parts_ms"]["projections"].get<double>(), 0.0);
    EXPECT_GT(sum, 0.0);
  }
  EXPECT_NE(log.find("decode batch   3:"), std::string::npos) << log;
  EXPECT_LT(j["check"]["rel_rms"].get<double>(), 2e-2);  // the bf16 bar of tests/test_layer.cpp
  EXPECT_NE(log.find("CPU: "), std::string::npos);

  // A checkpoint directory of a small Qwen3.5 layer (config.json + model.safetensors), exact precision.
  const std::string dir = temp("model");
  std::filesystem::create_directories(dir);
  const LayerSpec spec{LayerArch::kQwen3_5, 64, 2, 4, 32, 16, 4, 1e-6};
  TensorFile ckpt;
  for (auto& [n, t] : layer::random_layer_weights(spec, DType::kF32, 3).tensors) ckpt.tensors["model.layers.0.linear_attn." + n] = t;
  ASSERT_TRUE(write_safetensors(dir + "/model.safetensors", ckpt).ok());
  std::ofstream(dir + "/config.json") << R"({"model_type": "qwen3_5_text", "num_hidden_layers": 2, "hidden_size": 64,
      "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 32, "linear_value_head_dim": 16,
      "layer_types": ["linear_attention", "full_attention"]})";
  ASSERT_EQ(run_cli("layer --model " + dir + " --layer 0 --tokens 70 --reps 1 --check --json " + json_path, &log), 0) << log;
  std::ifstream g(json_path);
  const nlohmann::json k = nlohmann::json::parse(g);
  EXPECT_EQ(k["precision"], "exact");
  EXPECT_LT(k["check"]["max_rel"].get<double>(), 1e-5);  // fp32 vs fp64

  EXPECT_EQ(run_cli("layer --model " + dir + " --layer 1 --tokens 8", &log), 2);
  EXPECT_NE(log.find("layer 1 is a 'full_attention' layer"), std::string::npos) << log;
  EXPECT_EQ(run_cli("layer --model " + dir + " --preset qwen3-next", &log), 2);  // excludes each other
  EXPECT_EQ(run_cli("layer --tokens 0", &log), 2);
}

// `hanpu fuse --dma-rates`: the same pair rerun at each global-memory DMA rate, one record per rate with the
// rate in it; a DMA-starved rate leaves fusion less to gain than a fast one (the pair is DMA-bound at 8 B/cycle).
TEST(Cli, FuseSweepsTheDmaRate) {
  const std::string json_path = temp("fuse.json");
  std::string log;
  ASSERT_EQ(run_cli("fuse --device hexagon-v75 --pair gemm:1024x1024x1024:f16,softmax:2048x2048:f16 --dma-rates 8,64 "
                    "--json " + json_path, &log), 0) << log;
  std::ifstream f(json_path);
  const nlohmann::json j = nlohmann::json::parse(f);
  ASSERT_EQ(j["records"].size(), 2u);
  EXPECT_EQ(j["records"][0]["dma_bytes_per_cycle"].get<double>(), 8.0);
  EXPECT_EQ(j["records"][1]["dma_bytes_per_cycle"].get<double>(), 64.0);
  EXPECT_GT(j["records"][0]["dma_us"].get<double>(), 4 * j["records"][1]["dma_us"].get<double>());
  EXPECT_LT(j["records"][0]["gain_over_2"].get<double>(), j["records"][1]["gain_over_2"].get<double>());
  EXPECT_NE(log.find("sweep: gain of group 4 over group 2 per DMA rate"), std::string::npos);
  EXPECT_EQ(run_cli("fuse --device host --pair gemm:64x64x64,softmax:64x64 --dma-rates 8", &log), 2);
  EXPECT_EQ(run_cli("fuse --device hexagon-v75 --pair gemm:64x64x64:f16,softmax:64x64:f16 --dma-rates 0", &log), 2);
}

// `hanpu fuse --device host --probe`: one record per (operand source, vector kind, rounds), the lane named (AMX tiles, a
// matrix engine, where usable), the absent matrix engine said where the lane is the vector unit; refused on a model device or beside a pair.
TEST(Cli, FuseProbeReportsTheOverlapCurve) {
  if (probe_matrix_lane() == ProbeLane::kNone) GTEST_SKIP() << "this CPU has no AVX-512: there is no lane to probe";
  const std::string json_path = temp("probe.json");
  std::string log;
  ASSERT_EQ(run_cli("fuse --device host --probe --probe-rounds 1,4 --reps 1 --json " + json_path, &log), 0) << log;
  std::ifstream f(json_path);
  const nlohmann::json j = nlohmann::json::parse(f);
  ASSERT_EQ(j["points"].size(), 18u);  // 3 operand sources x 3 vector kinds x 2 round counts
  EXPECT_EQ(j["points"][1]["rounds"].get<int>(), 4);
  EXPECT_EQ(j["points"][2]["vector"].get<std::string>(), "exp");
  EXPECT_EQ(j["points"][4]["vector"].get<std::string>(), "memory");
  EXPECT_EQ(j["points"][0]["operands"].get<std::string>(), "registers");
  EXPECT_EQ(j["points"][17]["operands"].get<std::string>(), "L2");
  const bool amx = probe_matrix_lane() == ProbeLane::kAmxTile;
  EXPECT_EQ(j["matrix_engine"].get<bool>(), amx);
  EXPECT_EQ(j["matrix_lane"].get<std::string>().find("AMX") != std::string::npos, amx);
  if (!amx) {
    EXPECT_NE(log.find("the matrix engine is absent"), std::string::npos) << log;
    EXPECT_NE(log.find("AMX tiles: not usable"), std::string::npos) << log;  // and why
  } else {
    EXPECT_EQ(log.find("the matrix engine is absent"), std::string::npos) << log;
  }
  // Then the kernel pair: the GEMM and the exp alone, alternated, and carried at three widths, carried only by
  // a set with a matrix engine (said otherwise).
  const nlohmann::json& kp = j["kernel_pair"];
  EXPECT_EQ(kp["kernel_set"].get<std::string>(), active_kernels().name);
  EXPECT_EQ(kp["carries"].get<bool>(), active_kernels().bf16_matrix_engine);
  ASSERT_EQ(kp["carried"].size(), 3u);
  EXPECT_EQ(kp["carried"][1]["floats_per_step"].get<int>(), 128);
  EXPECT_GT(kp["gemm_us"].get<double>(), 0);
  EXPECT_GT(kp["alternated_us"].get<double>(), 0);
  EXPECT_NE(log.find("alternated slice by slice"), std::string::npos) << log;
  EXPECT_EQ(log.find("nothing is carried") != std::string::npos, !active_kernels().bf16_matrix_engine) << log;
  EXPECT_EQ(run_cli("fuse --device ascend-310p --probe", &log), 2);
  EXPECT_NE(log.find("give --device host"), std::string::npos) << log;
  EXPECT_EQ(run_cli("fuse --device host --probe --pair gemm:64x64x64,softmax:64x64", &log), 2);
  EXPECT_EQ(run_cli("fuse --device host --probe --probe-rounds 0", &log), 2);
}

// hanpu fuse --cores 1: the four groups on one core and group 2 on two, recorded in the JSON, the lane
// named, the matrix engine's absence said where the kernel set has none; --cores is the host's option.
TEST(Cli, FuseOnOneCoreRunsTheFourGroups) {
  const std::string json_path = temp("fuse_core.json"), trace_path = temp("fuse_core_trace.json");
  std::string log;
  ASSERT_EQ(run_cli("fuse --device host --cores 1 --pair gemm:64x64x64,softmax:64x128:f32 --reps 1 --json " +
                        json_path + " --trace " + trace_path,
                    &log),
            0)
      << log;
  std::ifstream f(json_path);
  const nlohmann::json j = nlohmann::json::parse(f);
  ASSERT_EQ(j["records"].size(), 1u);
  const nlohmann::json& r = j["records"][0];
  EXPECT_EQ(r["executor"].get<std::string>(), "host-core");
  EXPECT_EQ(r["groups"].size(), 4u);
  if (!r["one_core"]["group2_two_cores"].is_null()) {  // where the process may use two CPUs
    EXPECT_EQ(r["one_core"]["group2_two_cores"]["group"].get<int>(), 2);
    EXPECT_GT(r["one_core"]["gain_over_2_two_cores"].get<double>(), 0);
  }
  EXPECT_EQ(r["one_core"]["model"].size(), 4u);
  EXPECT_NE(log.find("measured / model"), std::string::npos) << log;
  EXPECT_NE(log.find("matrix lane: "), std::string::npos) << log;
  EXPECT_NE(log.find("4 one entry, interleaved"), std::string::npos) << log;
  if (!r["one_core"]["matrix_engine"].get<bool>()) {
    EXPECT_NE(log.find("the matrix engine is absent"), std::string::npos) << log;
    EXPECT_NE(log.find("model with the GEMMs on an engine beside the core"), std::string::npos) << log;
    EXPECT_TRUE(r["one_core"]["model_with_matrix_engine"].is_object());
  }
  std::ifstream t(trace_path);
  EXPECT_TRUE(nlohmann::json::parse(t).contains("traceEvents"));
  EXPECT_EQ(run_cli("fuse --device ascend-310p --cores 1 --pair gemm:64x64x64,softmax:64x64", &log), 2);
  EXPECT_NE(log.find("--cores places the host executor"), std::string::npos) << log;
  EXPECT_EQ(run_cli("fuse --device host --cores 3 --pair gemm:64x64x64,softmax:64x64", &log), 2);
  // A stream on one host core: every policy's record; on two cores it is refused.
  const std::string stream_path = temp("fuse_core_stream.txt");
  std::ofstream(stream_path) << "0 gemm:64x64x64 100000\n10 softmax:64x128:f32\n";
  ASSERT_EQ(run_cli("fuse --device host --cores 1 --stream " + stream_path + " --json " + json_path, &log), 0) << log;
  std::ifstream fs(json_path);
  const nlohmann::json js = nlohmann::json::parse(fs);
  EXPECT_EQ(js["executor"].get<std::string>(), "host-core");
  EXPECT_EQ(js["stream"].size(), 3u);
  EXPECT_EQ(run_cli("fuse --device host --stream " + stream_path, &log), 2);
  EXPECT_NE(log.find("add --cores 1"), std::string::npos) << log;
}

// scripts/compare-binaries.py (old vs new binaries interleaved in one run): the binary against itself over
// two rounds gives one row per bench record with both sides' medians, their per-round ratios and, with
// --breakdown, the parts; a bad round count is refused.
TEST(Cli, CompareBinariesInterleavesTwoBinaries) {
  std::string cli = HANPU_CLI_PATH;
  cli.erase(0, cli.find_first_not_of(' '));
  if (cli.find(' ') != std::string::npos) GTEST_SKIP() << "the CLI runs under an emulator: " << cli;
  if (!testing::python3_available()) GTEST_SKIP() << "python3 is not installed";
  const std::string script = std::string(HANPU_FUZZ_DIR) + "/../../scripts/compare-binaries.py";
  const std::string json = temp("compare.json"), log = temp("compare.log");
  const std::string cmd = "python3 " + script + " --rounds 2 --json " + json + " " + cli + " " + cli +
                          " -- --heads 2 --tokens 70 --threads 1 --strategies hanpu,fla --reps 1 --breakdown > " + log +
                          " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream f(json);
  const nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_NE(j["machine"].get<std::string>().find("CPUs"), std::string::npos);
  ASSERT_EQ(j["records"].size(), 2u) << j.dump();
  for (const auto& r : j["records"]) {
    EXPECT_EQ(r["old_ms"]["all"].size(), 2u);
    EXPECT_EQ(r["new_ms"]["all"].size(), 2u);
    EXPECT_GT(r["ratio"]["median"].get<double>(), 0);
    // each binary's fastest run over the rounds, at most its median run
    EXPECT_GT(r["best_ms"]["ratio"].get<double>(), 0);
    EXPECT_LE(r["best_ms"]["old"].get<double>(), r["old_ms"]["max"].get<double>());
    const bool hanpu = r["record"].get<std::string>().find(" hanpu ") != std::string::npos;
    EXPECT_EQ(r["parts_us"].contains("gemm"), hanpu) << r.dump();
  }
  // --parts records compare part by part as well.
  const std::string parts = "python3 " + script + " --rounds 2 --json " + json + " " + cli + " " + cli +
                            " -- --parts --reps 1 > " + log + " 2>&1";
  ASSERT_EQ(std::system(parts.c_str()), 0) << parts;
  std::ifstream g(json);
  const nlohmann::json jp = nlohmann::json::parse(g);
  ASSERT_EQ(jp["records"].size(), 1u) << jp.dump();
  EXPECT_TRUE(jp["records"][0]["parts_us"].contains("scores")) << jp.dump();
  // and by each part's fastest in-cache step
  EXPECT_GT(jp["records"][0]["parts_us"]["scores"]["best"]["new"].get<double>(), 0) << jp.dump();
  // --layer: `hanpu layer` runs, a record for the prefill and one per decode batch, each with its parts.
  const std::string layer = "python3 " + script + " --rounds 1 --layer --json " + json + " " + cli + " " + cli +
                            " -- --tokens 8 --reps 1 --decode 2 --threads 2 > " + log + " 2>&1";
  ASSERT_EQ(std::system(layer.c_str()), 0) << layer;
  std::ifstream h(json);
  const nlohmann::json jl = nlohmann::json::parse(h);
  ASSERT_EQ(jl["records"].size(), 2u) << jl.dump();
  EXPECT_EQ(jl["records"][0]["record"], "layer prefill B=1 T=8") << jl.dump();
  EXPECT_EQ(jl["records"][1]["record"], "layer decode batch 2") << jl.dump();
  for (const auto& r : jl["records"]) {
    EXPECT_TRUE(r["parts_us"].contains("projections")) << r.dump();
    EXPECT_GT(r["ratio"]["median"].get<double>(), 0);
  }
  const std::string bad = "python3 " + script + " --rounds 0 " + cli + " " + cli + " -- --tokens 70 > " + log + " 2>&1";
  EXPECT_NE(std::system(bad.c_str()), 0);
}

TEST(Cli, BadInputExitsWithCode2AndAMessage) {
  TensorFile f = testing::small_problem(Kind::kGdn, DType::kF32, 1, 8, 1, 1, 4, 4, 1);
  const std::string in = temp("cli_bad_in.safetensors"), out = temp("cli_bad_out.safetensors");
  ASSERT_TRUE(write_safetensors(in, f).ok());
  std::string log;
  EXPECT_EQ(run_cli("run --kind gdn --in " + in + " --out " + out + " --chunk-size 48", &log), 2);
  EXPECT_NE(log.find("chunk_size must be 16, 32 or 64, got 48"), std::string::npos) << log;
  EXPECT_EQ(run_cli("run --kind kda --in " + in + " --out " + out, &log), 2);
  EXPECT_NE(log.find("g must have rank 4"), std::string::npos) << log;
  EXPECT_EQ(run_cli("run --kind gdn --in /nonexistent.safetensors --out " + out, &log), 2);
  EXPECT_NE(log.find("cannot open '/nonexistent.safetensors'"), std::string::npos) << log;
  EXPECT_EQ(run_cli("run --kind xyz --in " + in + " --out " + out, &log), 2);
  EXPECT_EQ(run_cli("run --kind gdn --out " + out, &log), 2);
  f.tensors.erase("beta");
  ASSERT_TRUE(write_safetensors(in, f).ok());
  EXPECT_EQ(run_cli("run --kind gdn --in " + in + " --out " + out, &log), 2);
  EXPECT_NE(log.find("missing tensor 'beta'"), std::string::npos) << log;
  {
    std::ofstream bad(in, std::ios::binary | std::ios::trunc);
    const char header_length_16[8] = {16, 0, 0, 0, 0, 0, 0, 0};
    bad.write(header_length_16, 8);
    bad << "{\"x\":";  // 5 of the 16 announced header bytes
  }
  EXPECT_EQ(run_cli("run --kind gdn --in " + in + " --out " + out, &log), 2);
  EXPECT_NE(log.find("runs past the end of the file"), std::string::npos) << log;
}

// Sizes no machine here can hold are refused before anything is allocated or measured, naming the options
// that set them.
TEST(Cli, RunsTooLargeForMemoryAreRefusedUpFront) {
  std::string log;
  EXPECT_EQ(run_cli("bench --tokens 64,1000000000 --strategies hanpu --reps 1", &log), 2);
  EXPECT_NE(log.find("hanpu bench: invalid argument: tokens 1000000000 (16 q/k heads, 16 value heads) needs at least"),
            std::string::npos) << log;
  EXPECT_NE(log.find("GiB of memory, and this machine has"), std::string::npos) << log;
  EXPECT_EQ(log.find("fp32 FMA peak"), std::string::npos) << "refused before measuring anything: " << log;
  EXPECT_EQ(run_cli("layer --tokens 16777216 --batch 4096 --reps 1", &log), 2);
  EXPECT_NE(log.find("hanpu layer: invalid argument: tokens 16777216 x batch 4096 needs at least"), std::string::npos)
      << log;
}

// A size that passes that bound but still cannot be allocated (here: under a 2 GiB address-space limit) ends
// with a message and exit code 2, not in std::terminate.
TEST(Cli, AFailedAllocationExitsWith2AndAMessage) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizer runtimes reserve more address space than the limit below and abort on a failed "
                  "allocation instead of throwing std::bad_alloc";
#else
  const std::string out = temp("oom.txt");
  const int rc = std::system(("ulimit -v 2000000; " + std::string(HANPU_CLI_PATH) +
                              " bench --tokens 150000 --strategies hanpu --reps 1 > " + out + " 2>&1").c_str());
  std::ifstream f(out);
  const std::string log(std::istreambuf_iterator<char>(f), {});
  ASSERT_TRUE(WIFEXITED(rc)) << log;
  EXPECT_EQ(WEXITSTATUS(rc), 2) << log;
  EXPECT_NE(log.find("hanpu bench: out of memory: the request needs more memory than this process can allocate"),
            std::string::npos) << log;
#endif
}

// The CLI column of the README's bad-input table: each bad file or option exits with code 2, a message
// naming the argument, and no output file.
TEST(Cli, BadInputTableRowsExitWith2AndWriteNothing) {
  struct Row {
    std::string name;
    std::function<void(TensorFile&)> mutate;
    std::string args, fragment;
  };
  const auto set = [](const char* n, Tensor t) { return [n, t](TensorFile& f) { f.tensors[n] = t; }; };
  const std::vector<Row> rows = {
      {"wrong dtype", set("q", Tensor(DType::kI64, {1, 8, 2, 4})), "", "q.dtype must be F64, F32, F16 or BF16, got I64"},
      {"wrong rank", set("k", Tensor(DType::kF32, {8, 2, 4})), "", "k must have rank 4, got shape [8, 2, 4]"},
      {"mismatched shapes", set("k", Tensor(DType::kF32, {1, 8, 2, 5})), "", "k must have shape [B, T, H, K]"},
      {"HV not a multiple of H", set("v", Tensor(DType::kF32, {1, 8, 3, 4})), "",
       "v.shape[2] (HV) = 3 must be a positive multiple of q.shape[2] (H) = 2"},
      {"K > 256",
       [](TensorFile& f) { f.tensors["q"] = f.tensors["k"] = Tensor(DType::kF32, {1, 8, 2, 300}); }, "",
       "q.shape[3] (K) = 300, expected 1..256"},
      {"V = 0", set("v", Tensor(DType::kF32, {1, 8, 4, 0})), "", "v.shape[3] (V) = 0, expected 1..256"},
      {"zero tokens",
       [](TensorFile& f) {
         for (auto& [n, t] : f.tensors) t.shape[1] = 0, t.bytes.clear();
       },
       "", "q.shape[1] (T) must be >= 1"},
      {"cu_seqlens of a float dtype", set("cu_seqlens", testing::tensor_of(DType::kF32, {2}, {0, 8})), "",
       "cu_seqlens.dtype must be I64, got F32"},
      {"cu_seqlens decreasing", set("cu_seqlens", testing::tensor_of(DType::kI64, {3}, {0, 6, 5})), "",
       "cu_seqlens must be non-decreasing"},
      {"state of the v-first layout", set("initial_state", Tensor(DType::kF32, {1, 4, 4, 4 + 1})), "",
       "initial_state must have shape [N, HV, K, V] = [1, 4, 4, 4]"},
      {"NaN with --check-finite",
       [](TensorFile& f) {
         std::vector<double> x = to_doubles(f.tensors["beta"].view());
         x[5] = NAN;
         fill_from_doubles(f.tensors["beta"], x);
       },
       "--check-finite", "beta has a non-finite value (nan) at flat index 5"},
      {"bad option value", [](TensorFile&) {}, "--threads -1", "--threads"},
      {"unknown option", [](TensorFile&) {}, "--chunk 64", "--chunk"},
      {"option without its value", [](TensorFile&) {}, "--scale", "--scale"},
      {"non-numeric option value", [](TensorFile&) {}, "--chunk-size sixty-four", "--chunk-size"},
  };
  const std::string in = temp("row_in.safetensors"), out = temp("row_out.safetensors");
  for (const Row& row : rows) {
    TensorFile f = testing::small_problem(Kind::kGdn, DType::kF32, 1, 8, 2, 4, 4, 4, 1);
    row.mutate(f);
    ASSERT_TRUE(write_safetensors(in, f).ok()) << row.name;
    std::remove(out.c_str());
    std::string log;
    for (const char* mode : {"chunk", "engine", "recurrent", "reference"}) {
      EXPECT_EQ(run_cli("run --kind gdn --output-final-state --mode " + std::string(mode) + " --in " + in + " --out " +
                            out + " " + row.args,
                        &log),
                2)
          << row.name << " (" << mode << "): " << log;
      EXPECT_NE(log.find(row.fragment), std::string::npos) << row.name << " (" << mode << "): " << log;
      EXPECT_FALSE(std::ifstream(out).good()) << row.name << ": " << out << " was written";
    }
  }
  // NaN without --check-finite propagates and the run succeeds
  TensorFile f = testing::small_problem(Kind::kGdn, DType::kF32, 1, 8, 2, 4, 4, 4, 1);
  std::vector<double> x = to_doubles(f.tensors["beta"].view());
  x[5] = NAN;
  fill_from_doubles(f.tensors["beta"], x);
  ASSERT_TRUE(write_safetensors(in, f).ok());
  EXPECT_EQ(run_cli("run --kind gdn --in " + in + " --out " + out), 0);
  // an output path that cannot be written
  std::string log;
  EXPECT_EQ(run_cli("run --kind gdn --in " + in + " --out /nonexistent-dir/o.safetensors", &log), 2);
  EXPECT_NE(log.find("/nonexistent-dir/o.safetensors"), std::string::npos) << log;
}

TEST(Cli, VerifyPrintsATableAndWritesJson) {
  const std::string json_path = temp("verify.json");
  std::string log;
  ASSERT_EQ(run_cli("verify --instances 24 --seed 5 --threads 2 --json " + json_path, &log), 0) << log;
  EXPECT_NE(log.find("24 instances, 0 failed"), std::string::npos) << log;
  EXPECT_NE(log.find("[  24/24]"), std::string::npos) << log;  // progress lines
  std::ifstream jf(json_path);
  const auto j = nlohmann::json::parse(jf);
  EXPECT_EQ(j["instances"], 24);
  EXPECT_EQ(j["failures"], 0);
  EXPECT_EQ(j["results"].size(), 24u);
  EXPECT_EQ(j["groups"].size(), 24u);  // 12 scenarios x 2 kinds of the first dtype
  EXPECT_TRUE(j["results"][0]["nmse"]["chunk_o"].is_number());
  EXPECT_TRUE(j["results"][0]["engine_checked"].get<bool>());  // every engine strategy checked by default
  EXPECT_GT(j["results"][0]["nmse"]["engine_o"].get<double>(), 0.0);
  EXPECT_FALSE(j["results"][0]["engine_worst_strategy"].get<std::string>().empty());
  EXPECT_EQ(run_cli("verify --instances 0", &log), 2);
  // bf16: the scenarios' pooled bars beside each instance's guard
  const std::string bf16_run = "verify --instances 24 --seed 5 --threads 2 --no-engine --precision bf16 --json ";
  ASSERT_EQ(run_cli(bf16_run + json_path, &log), 0) << log;
  EXPECT_NE(log.find("24 instances, 0 failed (bf16: each instance within 8x its bars in relative RMS, every scenario "
                     "pooled within them: 0 over)"),
            std::string::npos)
      << log;
  std::ifstream bf(json_path);
  const auto b = nlohmann::json::parse(bf);
  EXPECT_EQ(b["group_failures"], 0);
  for (const auto& g : b["groups"]) {
    EXPECT_TRUE(g["pooled_passed"].get<bool>()) << g.dump();
    EXPECT_GT(g["pooled_ratio_to_bar"]["state"].get<double>(), 0.0) << g.dump();
  }
  EXPECT_GT(b["results"][0]["values_o"].get<int64_t>(), 0);
}

TEST(Cli, PlanPrintsTheReportAndWritesALoadablePlan) {
  const std::string json_path = temp("plan.json");
  std::string log;
  ASSERT_EQ(run_cli("plan --kind kda --device ascend-310p --chunk-size 32 --json " + json_path, &log), 0) << log;
  EXPECT_NE(log.find("plan: kda chunk on ascend-310p, C=32"), std::string::npos) << log;
  EXPECT_NE(log.find("state updated in place: yes"), std::string::npos) << log;
  std::ifstream jf(json_path);
  const auto j = nlohmann::json::parse(jf);
  for (const char* field : {"steps", "macs_per_chunk", "peak_bytes", "transforms", "estimated_cost"}) {
    EXPECT_TRUE(j.contains(field)) << field;
  }
  EXPECT_TRUE(j["peak_bytes"].contains("UB"));
  std::string again;
  ASSERT_EQ(run_cli("plan --load " + json_path, &again), 0) << again;
  EXPECT_EQ(again, log);  // the loaded plan prints exactly as planned
  ASSERT_EQ(run_cli("plan --device host --strategy +fusion", &log), 0) << log;
  EXPECT_NE(log.find("state updated in place: no"), std::string::npos) << log;
  EXPECT_EQ(run_cli("plan --device nope", &log), 2);
  EXPECT_NE(log.find("unknown device 'nope'"), std::string::npos) << log;
  EXPECT_EQ(run_cli("plan --kind gdn", &log), 2);
  EXPECT_NE(log.find("--device is required"), std::string::npos) << log;
  // The engine runs a saved plan: same result as without it (the plan is the default order).
  const std::string plan16 = temp("plan16.json"), in = temp("plan_in.safetensors");
  ASSERT_EQ(run_cli("plan --kind gdn --device host --k 16 --v 8 --heads 2 --tokens 90 --json " + plan16, &log), 0) << log;
  ASSERT_TRUE(write_safetensors(in, testing::small_problem(Kind::kGdn, DType::kF32, 1, 90, 2, 2, 16, 8, 3)).ok());
  ASSERT_EQ(run_cli("run --kind gdn --mode engine --in " + in + " --out " + temp("o_plan.safetensors") +
                        " --plan " + plan16, &log), 0) << log;
  ASSERT_EQ(run_cli("run --kind gdn --mode engine --in " + in + " --out " + temp("o_noplan.safetensors"), &log), 0);
  TensorFile a, b;
  ASSERT_TRUE(read_safetensors(temp("o_plan.safetensors"), &a).ok());
  ASSERT_TRUE(read_safetensors(temp("o_noplan.safetensors"), &b).ok());
  EXPECT_EQ(a.tensors.at("o").bytes, b.tensors.at("o").bytes);
  EXPECT_EQ(run_cli("run --kind gdn --mode engine --chunk-size 32 --in " + in + " --out " + temp("x.safetensors") +
                        " --plan " + plan16, &log), 2);
  EXPECT_NE(log.find("plan chunk size is 64, the problem's is 32"), std::string::npos) << log;
  std::ofstream(temp("bad_plan.json")) << "{\"schema\": \"hanpu-plan/1\"}";
  EXPECT_EQ(run_cli("plan --load " + temp("bad_plan.json"), &log), 2);
  EXPECT_NE(log.find("hanpu-plan/1\" plans have no mapping"), std::string::npos) << log;
  EXPECT_EQ(run_cli("plan --device host --strategy flq", &log), 2);
  EXPECT_NE(log.find("unknown strategy 'flq' (known: native, fla"), std::string::npos) << log;
}

// One plan file, two interpreters: the NPU model simulates a saved plan exactly as it simulates the
// strategy it was planned from.
TEST(Cli, SimRunsASavedPlan) {
  const std::string plan_path = temp("sim_plan.json"), a = temp("sim_plan_a.json"), b = temp("sim_plan_b.json");
  std::string log;
  ASSERT_EQ(run_cli("plan --device ascend-310b --strategy flashqla --heads 3 --tokens 700 --json " + plan_path, &log), 0)
      << log;
  ASSERT_EQ(run_cli("sim --plan " + plan_path + " --json " + a, &log), 0) << log;
  ASSERT_EQ(run_cli("sim --device ascend-310b --strategies flashqla --heads 3 --tokens 700 --json " + b, &log), 0) << log;
  std::ifstream fa(a), fb(b);
  const auto ja = nlohmann::json::parse(fa), jb = nlohmann::json::parse(fb);
  EXPECT_EQ(ja["records"][0], jb["records"][0]);
  EXPECT_EQ(run_cli("sim --plan " + temp("no_such_plan.json"), &log), 2);
  EXPECT_NE(log.find("cannot read plan file"), std::string::npos) << log;
}

TEST(Cli, SimPrintsATableAndWritesRecords) {
  const std::string json_path = temp("sim.json");
  std::string log;
  ASSERT_EQ(run_cli("sim --device ascend-310b --kind kda --heads 2 --tokens 128,256 --json " + json_path, &log), 0)
      << log;
  EXPECT_NE(log.find("device ascend-310b (1 cores"), std::string::npos) << log;
  std::ifstream jf(json_path);
  const auto j = nlohmann::json::parse(jf);
  EXPECT_EQ(j["device"], "ascend-310b");
  ASSERT_EQ(j["records"].size(), 10u);  // 2 lengths x 5 strategies
  for (const auto& r : j["records"]) {
    EXPECT_TRUE(r["energy_uj"].is_number());
    for (const char* f : {"strategy", "kind", "tokens", "latency_us", "gm_bytes", "l1_to_l0_bytes", "peak_bytes",
                          "matrix_util", "vector_util", "engine_busy", "energy_uj", "matrix_macs"}) {
      EXPECT_TRUE(r.contains(f)) << f;
    }
    EXPECT_TRUE(r["engine_busy"].contains("Cube"));
  }
  ASSERT_EQ(run_cli("sim --device hexagon-v75 --heads 2 --tokens 128 --strategies hanpu --trace " + temp("t.json"), &log),
            0) << log;
  std::ifstream tf(temp("t.json"));
  EXPECT_TRUE(nlohmann::json::parse(tf).contains("traceEvents"));
  EXPECT_EQ(run_cli("sim --device hexagon-v75 --tokens 128,256 --trace " + temp("t.json"), &log), 2);
  // A sweep over devices and head counts, with progress and a plot.
  const std::string svg = temp("sim.svg");
  ASSERT_EQ(run_cli("sim --device ascend-310b,hexagon-v75 --heads 2,4 --tokens 128,256 --strategies fla,hanpu --plot " +
                        svg + " --json " + json_path, &log), 0) << log;
  EXPECT_NE(log.find("[16/16] hexagon-v75 hanpu gdn heads=4 T=256"), std::string::npos) << log;
  std::ifstream sj(json_path);
  const auto sweep = nlohmann::json::parse(sj);
  EXPECT_EQ(sweep["device"], nlohmann::json({"ascend-310b", "hexagon-v75"}));
  EXPECT_EQ(sweep["records"].size(), 16u);
  std::ifstream sf(svg);
  const std::string svg_text((std::istreambuf_iterator<char>(sf)), std::istreambuf_iterator<char>());
  EXPECT_EQ(svg_text.rfind("<svg", 0), 0u);
  EXPECT_NE(svg_text.find("hanpu hexagon-v75 h4"), std::string::npos);
  ASSERT_EQ(run_cli("sim --device ascend-310p --ablation --heads 2 --tokens 128", &log), 0) << log;
  EXPECT_NE(log.find("+layout-plan"), std::string::npos) << log;
  EXPECT_EQ(run_cli("sim --device host --tokens 64", &log), 2);
  EXPECT_NE(log.find("no \"sim\" section"), std::string::npos) << log;
}

// The calibration report: every figure C4-C9 has a row on the paper's 310P with the paper's value and the
// model's, the path rates fitted to C9 reproduce it, and another device gets the same rows without figures.
TEST(Cli, SimCalibrationReportsEveryFigure) {
  const std::string json_path = temp("calibration.json");
  std::string log;
  ASSERT_EQ(run_cli("sim --calibration --device ascend-310p,ascend-310b --json " + json_path, &log), 0) << log;
  EXPECT_NE(log.find("calibration report: ascend-310p"), std::string::npos) << log;
  EXPECT_NE(log.find("[calibration] ascend-310p native gdn T=512"), std::string::npos) << log;  // progress
  std::ifstream jf(json_path);
  const auto j = nlohmann::json::parse(jf)["calibration"];
  ASSERT_EQ(j.size(), 2u);
  std::set<std::string> figures;
  for (const auto& r : j[0]["rows"]) {
    figures.insert(r["figure"].get<std::string>());
    ASSERT_TRUE(r.contains("paper")) << r.dump();
    EXPECT_TRUE(r["within_25_percent"].is_boolean());
    if (r["figure"] == "C9") {
      EXPECT_TRUE(r["calibrated"].get<bool>());
      EXPECT_NEAR(r["model"][0].get<double>(), r["paper"][0].get<double>(), 0.01 * r["paper"][0].get<double>());
    }
  }
  EXPECT_EQ(figures, (std::set<std::string>{"C4", "C5", "C6", "C7", "C8", "C9"}));
  EXPECT_EQ(j[1]["device"], "ascend-310b");
  for (const auto& r : j[1]["rows"]) EXPECT_FALSE(r.contains("paper")) << r.dump();
  EXPECT_EQ(run_cli("sim --calibration --device host", &log), 2);
  EXPECT_NE(log.find("no \"sim\" section"), std::string::npos) << log;
}

TEST(Cli, FuseRunsTheFourGroups) {
  const std::string json_path = temp("fuse.json");
  std::string log;
  ASSERT_EQ(run_cli("fuse --device hexagon-v75 --pair gemm:256x256x256:f16,softmax:512x512:f32 --json " + json_path, &log),
            0) << log;
  EXPECT_NE(log.find("4 one entry, concurrent"), std::string::npos) << log;
  std::ifstream jf(json_path);
  const auto j = nlohmann::json::parse(jf);
  ASSERT_EQ(j["records"].size(), 1u);
  const auto& r = j["records"][0];
  for (const char* f : {"e_effect", "a_effect", "gain_over_2", "ideal", "dma_us", "vector_us", "matrix_us"}) {
    EXPECT_TRUE(r[f].is_number()) << f;
  }
  ASSERT_EQ(r["groups"].size(), 4u);
  EXPECT_EQ(r["groups"][3]["completion_us"].size(), 2u);
  EXPECT_EQ(run_cli("fuse --device hexagon-v75 --pair gemm:8x8,softmax:8x8", &log), 2);
  EXPECT_NE(log.find("task 'gemm:8x8'"), std::string::npos) << log;
  EXPECT_EQ(run_cli("fuse --device ascend-310p --pair gemm:8x8x8,softmax:8x99999999:f32", &log), 2);
  EXPECT_NE(log.find("does not fit"), std::string::npos) << log;
  ASSERT_EQ(run_cli("fuse --device host --reps 1 --pair gemm:64x64x64,softmax:64x64", &log), 0) << log;
  EXPECT_NE(log.find("host executor"), std::string::npos) << log;
  // A sweep file with a plot, and a stream under the three policies.
  const std::string pairs = temp("pairs.txt"), stream = temp("stream.txt"), svg = temp("fuse.svg");
  std::ofstream(pairs) << "# pairs\ngemm:128x128x128,softmax:256x256\ngemm:128x128x128,rmsnorm:256x256\n";
  ASSERT_EQ(run_cli("fuse --device hexagon-v75 --sweep " + pairs + " --plot " + svg, &log), 0) << log;
  EXPECT_NE(log.find("[2/2]"), std::string::npos) << log;
  std::ifstream sf(svg);
  const std::string svg_text((std::istreambuf_iterator<char>(sf)), std::istreambuf_iterator<char>());
  EXPECT_NE(svg_text.find("4 one entry, concurrent"), std::string::npos);
  std::ofstream(stream) << "0 gemm:256x256x256 400\n10 softmax:256x512 -\n20 rmsnorm:256x512\n";
  ASSERT_EQ(run_cli("fuse --device hexagon-v75 --stream " + stream + " --json " + json_path, &log), 0) << log;
  EXPECT_NE(log.find("admission"), std::string::npos) << log;
  std::ifstream st(json_path);
  EXPECT_EQ(nlohmann::json::parse(st)["stream"].size(), 3u);
  std::ofstream(stream) << "0 gemm:256x256x256 soon\n";
  EXPECT_EQ(run_cli("fuse --device hexagon-v75 --stream " + stream, &log), 2);
  EXPECT_NE(log.find("stream line 1"), std::string::npos) << log;
}

// Where the active set has no bf16 unit, bench's header says why: the CPU has no dot product, or the
// registry ranked the best set with one behind (AVX3+BF16 on Intel's cores without usable AMX), or
// HANPU_KERNELS chose this set over it.
TEST(Cli, BenchSaysWhyTheBf16ModeRunsOnTheFma) {
  const std::vector<KernelSet>& sets = kernel_sets();
  const auto dot = std::find_if(sets.begin(), sets.end(), [](const KernelSet& k) { return k.bf16_peak != nullptr; });
  int checked = 0;
  for (auto it = sets.begin(); it != sets.end(); ++it) {
    if (it->bf16_peak || it->name == "reference") continue;
    std::string log;
    ASSERT_EQ(run_cli("bench --kind gdn --tokens 64 --threads 1 --reps 1 --strategies hanpu", &log, it->name), 0)
        << log;
    const std::string want = dot == sets.end() ? "no bf16 dot product on this CPU"
                             : dot > it ? "is ranked behind this one; HANPU_KERNELS=" + dot->name + " selects it"
                                        : "HANPU_KERNELS chose this set over " + dot->name;
    EXPECT_NE(log.find("bf16 GEMM unit: fp32 FMA on rounded operands"), std::string::npos) << it->name << log;
    EXPECT_NE(log.find(want), std::string::npos) << it->name << ": " << log;
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "every kernel set of this build and CPU has a bf16 unit";
}

TEST(Cli, CalibrateWritesAHostDescriptionThePlannerReads) {
  const std::string path = temp("host-calibrated.json");
  std::string log;
  ASSERT_EQ(run_cli("calibrate --reps 5 --out " + path, &log), 0) << log;
  EXPECT_NE(log.find("update gemm"), std::string::npos) << log;  // progress lines
  plan::Device d;
  const Status st = plan::load_device(path, &d);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_GT(d.matrix_macs_per_cycle, 0);
  EXPECT_GT(d.matrix_dense_penalty, 0);
  EXPECT_EQ(d.clock_ghz, 1.0);
  ASSERT_TRUE(d.has_bf16_matrix);  // the bf16 unit in use and its packing
  EXPECT_GT(d.bf16_macs_per_cycle, 0);
  EXPECT_GT(d.bf16_pack_bytes_per_cycle, 0);
  EXPECT_GE(d.bf16_pack_fixed_cycles, 0);
  EXPECT_GT(d.bf16_dense_penalty, 0);
  EXPECT_EQ(d.bf16_tile_rows, active_kernels().bf16_tile_rows);  // the unit's tile, from the kernel set
  EXPECT_EQ(d.bf16_tile_cols, active_kernels().bf16_tile_cols);
  EXPECT_EQ(d.bf16_tile_k, active_kernels().bf16_tile_k);
  EXPECT_NE(log.find("bf16 update gemm"), std::string::npos) << log;
  EXPECT_GT(d.solve_macs_per_cycle, 0);  // the inverse and the chunk rows, measured
  EXPECT_GT(d.rows_load_bytes_per_cycle, 0);
  EXPECT_GT(d.rows_store_bytes_per_cycle, 0);
  EXPECT_GT(d.rows_memory_bytes_per_cycle, 0);  // and their trip from memory
  EXPECT_NE(log.find("triangular inverse"), std::string::npos) << log;
  EXPECT_NE(log.find("chunk rows from memory"), std::string::npos) << log;
  EXPECT_EQ(d.calibration_format, plan::kCalibrationFormat);  // what it measured, for load_host_device
  EXPECT_EQ(d.calibration_kernel_set, active_kernels().name);
  EXPECT_GT(d.calibration_fma_peak_gflops, 0);  // the speed it measured at
  EXPECT_NE(log.find("fp32 FMA peak, one core:"), std::string::npos) << log;
  ::setenv("HANPU_HOST_DEVICE", path.c_str(), 1);
  ASSERT_EQ(run_cli("plan --device host", &log), 0) << log;
  EXPECT_NE(log.find("device description: " + path), std::string::npos) << log;
  ASSERT_EQ(run_cli("plan --device host --precision bf16", &log), 0) << log;  // planned on the measured unit
  EXPECT_NE(log.find("precision: bf16; packing planned"), std::string::npos) << log;
  // bench's estimates say which description they come from, and how to get this machine's when shipped.
  const std::string bench_json = temp("bench-host.json");
  const auto bench_host = [&] {
    EXPECT_EQ(run_cli("bench --parts --reps 1 --json " + bench_json, &log), 0) << log;
    std::ifstream jf(bench_json);
    return nlohmann::json::parse(jf)["host_description"].get<std::string>();
  };
  EXPECT_EQ(bench_host(), "calibrated");
  EXPECT_EQ(log.find("hanpu calibrate` measures"), std::string::npos) << log;
  EXPECT_EQ(log.find("note: the calibrated host description"), std::string::npos) << log;
  const auto bench_field = [&](const char* key) {
    std::ifstream jf(bench_json);
    return nlohmann::json::parse(jf)[key];
  };
  EXPECT_GT(bench_field("fma_peak_vs_calibration").get<double>(), 0);  // this run's speed over the calibration's
  std::string text;
  {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    text = ss.str();
  }
  // A calibration said to have run at ten times this machine's speed: bench says the speeds differ, beside
  // the estimates too.
  {
    nlohmann::json fast = nlohmann::json::parse(text);
    fast["calibration"]["fma_peak_gflops"] = 10 * d.calibration_fma_peak_gflops;
    const std::string fast_path = temp("host-fast.json");
    std::ofstream(fast_path) << fast.dump(2);
    ::setenv("HANPU_HOST_DEVICE", fast_path.c_str(), 1);
    EXPECT_EQ(bench_host(), "calibrated");
    EXPECT_LT(bench_field("fma_peak_vs_calibration").get<double>(), 0.2);
    EXPECT_NE(log.find("note: this run's FMA peak"), std::string::npos) << log;
    EXPECT_NE(log.find("the calibration's: the estimate is at its speed"), std::string::npos) << log;
    ::setenv("HANPU_HOST_DEVICE", path.c_str(), 1);
  }
  // The same calibration said to measure another kernel set: set aside for the shipped default, and said.
  const std::string set_field = "\"kernel_set\": \"" + active_kernels().name + "\"";
  ASSERT_NE(text.find(set_field), std::string::npos) << text;
  const std::string other = temp("host-other-set.json");
  std::ofstream(other) << text.replace(text.find(set_field), set_field.size(), "\"kernel_set\": \"elsewhere\"");
  ::setenv("HANPU_HOST_DEVICE", other.c_str(), 1);
  ASSERT_EQ(run_cli("plan --device host", &log), 0) << log;
  EXPECT_NE(log.find("note: the calibrated host description " + other + " measured the kernel set elsewhere"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("devices/host.json"), std::string::npos) << log;
  EXPECT_EQ(bench_host(), "shipped default");
  EXPECT_NE(log.find("note: the calibrated host description " + other), std::string::npos) << log;
  {
    std::ifstream jf(bench_json);
    EXPECT_NE(nlohmann::json::parse(jf)["host_description_note"].get<std::string>().find("re-run"),
              std::string::npos);
  }
  ::setenv("HANPU_HOST_DEVICE", temp("no-such-file.json").c_str(), 1);  // absent: the shipped default
  ASSERT_EQ(run_cli("plan --device host", &log), 0) << log;
  EXPECT_NE(log.find("devices/host.json"), std::string::npos) << log;
  EXPECT_EQ(bench_host(), "shipped default");
  EXPECT_NE(log.find("the shipped host description, not this machine's: `hanpu calibrate` measures"),
            std::string::npos)
      << log;
  ::unsetenv("HANPU_HOST_DEVICE");
  EXPECT_EQ(run_cli("calibrate --reps 1", &log), 2);
}

}  // namespace
}  // namespace hanpu
