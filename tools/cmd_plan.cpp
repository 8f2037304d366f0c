// hanpu plan --device NAME|FILE [--strategy S] [--kind gdn|kda] [--heads HV] [--tokens T[,T...]] [--workers W]
//            [--chunk-size C] [--k K] [--v V] [--segment-chunks L] [--precision exact|bf16]
//            [--packing planned|never-keep|pack-always] [--json FILE] [--load FILE]
#include <cstdio>
#include <fstream>
#include <memory>

#include "commands.h"
#include "exec/calibrate.h"
#include "plan/plan.h"

namespace hanpu::cli {

namespace {

struct PlanArgs {
  std::string kind = "gdn", device, json_path, load_path, strategy = "hanpu", precision = "exact", packing = "planned";
  plan::PlanOptions opt;
  int64_t heads = 16, segment_chunks = 0;
  std::vector<int64_t> tokens = {4096};
  int workers = 0;
};

int fail(const Status& st) {
  std::fprintf(stderr, "hanpu plan: %s\n", st.ToString().c_str());
  return 2;
}

int run(const PlanArgs& a) {
  plan::Plan p;
  if (!a.load_path.empty()) {
    const Status st = plan::load_plan_file(a.load_path, &p);  // validate and print a saved plan
    if (!st.ok()) return fail(st);
  } else {
    plan::Device d;
    // "host": this machine's calibration where it fits this process's kernels (else the shipped default,
    // with a note saying why).
    std::string note;
    Status st = a.device == "host" ? plan::load_this_host(&d, &note) : plan::load_device(a.device, &d);
    if (!note.empty()) std::fprintf(stderr, "note: %s\n", note.c_str());
    plan::PlanOptions opt = a.opt;
    opt.bf16 = a.precision == "bf16";
    plan::parse_packing(a.packing, &opt.packing);  // CLI11 checked the name
    if (!st.ok()) return fail(st);
    plan::MapRequest req;
    req.shape.seq_tokens = a.tokens;
    req.shape.C = a.opt.C;
    req.shape.HV = a.heads;
    req.shape.V = a.opt.V;
    req.shape.workers = a.workers > 0 ? a.workers : d.cores;
    req.segment_chunks = a.segment_chunks;
    st = plan::make_execution_plan(a.kind == "kda" ? Kind::kKda : Kind::kGdn, d, a.strategy, opt, req, &p);
    if (!st.ok()) return fail(st);
  }
  std::fputs(plan::plan_report(p).c_str(), stdout);
  if (!a.json_path.empty()) {
    std::ofstream f(a.json_path);
    f << plan::plan_to_json(p).dump(1) << "\n";
    if (!f) return fail(InvalidArgument("cannot write '" + a.json_path + "'"));
  }
  return 0;
}

}  // namespace

Runner add_plan_command(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  app.add_option("--strategy", a->strategy, "A strategy or ablation step: " + plan::strategy_names(true) +
                                                " (default hanpu)");
  app.add_option("--kind", a->kind, "gdn or kda (default gdn)")->check(CLI::IsMember({"gdn", "kda"}));
  app.add_option("--device", a->device, "A shipped device (" + [] {
    std::string n;
    for (const std::string& s : plan::shipped_devices()) n += (n.empty() ? "" : ", ") + s;
    return n;
  }() + ") or a device JSON file");
  app.add_option("--heads", a->heads, "Value heads per sequence (default 16)")->check(CLI::Range(1, 65536));
  app.add_option("--tokens", a->tokens, "Sequence lengths, one per sequence (default 4096)")->delimiter(',')
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  app.add_option("--workers", a->workers, "Threads or cores the work is mapped onto (default: the device's cores)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--chunk-size", a->opt.C, "Chunk size: 16, 32 or 64 (default 64)")->check(CLI::IsMember({16, 32, 64}));
  app.add_option("--k", a->opt.K, "Key head dim (default 128)")->check(CLI::Range(1, 256));
  app.add_option("--v", a->opt.V, "Value head dim (default 128)")->check(CLI::Range(1, 256));
  app.add_option("--segment-chunks", a->segment_chunks, "flashqla: chunks per segment (default: FlashQLA's rule)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--precision", a->precision,
                 "GEMM precision the layouts are planned for: exact (default) or bf16 (the bf16 unit's packed "
                 "right operands: where each is packed and kept, plan/packing.h)")
      ->check(CLI::IsMember({"exact", "bf16"}));
  app.add_option("--packing", a->packing,
                 "bf16: planned (the layout DP, default), or a fixed choice: never-keep (every product packs its "
                 "operand) or pack-always (every GEMM call does)")
      ->check(CLI::IsMember({"planned", "never-keep", "pack-always"}));
  app.add_option("--json", a->json_path, "Also write the execution plan as JSON (schema hanpu-plan/2) to FILE");
  app.add_option("--load", a->load_path, "Validate and print a plan JSON file instead of planning");
  return [a, &app] {
    if (a->load_path.empty() && a->device.empty()) {
      std::fprintf(stderr, "hanpu plan: --device is required (or --load FILE)\n%s", app.help().c_str());
      return 2;
    }
    return run(*a);
  };
}

}  // namespace hanpu::cli
