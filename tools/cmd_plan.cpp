// hanpu plan --kind gdn|kda --device NAME|FILE [--chunk-size C] [--k K] [--v V] [--no-reorder]
//            [--no-gemm-first] [--no-layout-plan] [--json FILE] [--load FILE]
#include <cstdio>
#include <fstream>
#include <memory>

#include "commands.h"
#include "plan/plan.h"

namespace hanpu::cli {

namespace {

struct PlanArgs {
  std::string kind = "gdn", device, json_path, load_path;
  plan::PlanOptions opt;
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
    Status st = plan::load_device(a.device, &d);
    if (!st.ok()) return fail(st);
    st = plan::make_plan(a.kind == "kda" ? Kind::kKda : Kind::kGdn, d, a.opt, &p);
    if (!st.ok()) return fail(st);
  }
  std::fputs(plan::plan_report(p).c_str(), stdout);
  if (!a.json_path.empty()) {
    std::ofstream f(a.json_path);
    f << plan::plan_to_json(p).dump(2) << "\n";
    if (!f) return fail(InvalidArgument("cannot write '" + a.json_path + "'"));
  }
  return 0;
}

}  // namespace

Runner add_plan_command(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  app.add_option("--kind", a->kind, "gdn or kda (default gdn)")->check(CLI::IsMember({"gdn", "kda"}));
  app.add_option("--device", a->device, "A shipped device (devices/*.json: ascend-310p, ascend-310p3, ascend-310b, "
                                        "hexagon-v75, host) or a device JSON file");
  app.add_option("--chunk-size", a->opt.C, "Chunk size: 16, 32 or 64 (default 64)")->check(CLI::IsMember({16, 32, 64}));
  app.add_option("--k", a->opt.K, "Key head dim (default 128)")->check(CLI::Range(1, 256));
  app.add_option("--v", a->opt.V, "Value head dim (default 128)")->check(CLI::Range(1, 256));
  app.add_flag("!--no-reorder", a->opt.reorder, "Keep FLA's state-first order (no chunk-first pass)");
  app.add_flag("!--no-gemm-first", a->opt.gemm_first, "Keep the inversion-first order (no GEMM-first rewriting)");
  app.add_flag("!--no-layout-plan", a->opt.layout_plan, "Fixed layouts instead of the layout DP");
  app.add_option("--json", a->json_path, "Also write the plan as JSON (schema hanpu-plan/1) to FILE");
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
