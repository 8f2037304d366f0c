// hanpu calibrate [--out FILE] [--reps N]: measures this machine's engine kernels and writes the host
// device description the planner reads (exec/calibrate.h).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <unistd.h>

#include "commands.h"
#include "exec/calibrate.h"

namespace hanpu::cli {

namespace {

struct CalibrateArgs {
  std::string out;
  plan::CalibrateOptions opt;
};

int run(const CalibrateArgs& a) {
  const std::string path = a.out.empty() ? plan::calibrated_host_path() : a.out;
  std::string text;
  const Status st = plan::calibrate_host(a.opt, [](const std::string& l) { std::fprintf(stderr, "%s\n", l.c_str()); },
                                         &text);
  if (!st.ok()) {
    std::fprintf(stderr, "hanpu calibrate: %s\n", st.ToString().c_str());
    return 2;
  }
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  // Written beside it and renamed over it, so that a reader (every engine call plans on it) never sees half a
  // file, and an interrupted calibrate leaves the previous one.
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream f(tmp);
    f << text;
    f.close();
    if (!f) {
      std::filesystem::remove(tmp, ec);
      std::fprintf(stderr, "hanpu calibrate: cannot write '%s'\n", path.c_str());
      return 2;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    std::fprintf(stderr, "hanpu calibrate: cannot write '%s'\n", path.c_str());
    return 2;
  }
  std::printf("wrote %s (hanpu plan --device host reads it from there%s)\n", path.c_str(),
              a.out.empty() ? "" : " when HANPU_HOST_DEVICE names it");
  return 0;
}

}  // namespace

Runner add_calibrate_command(CLI::App& app) {
  auto a = std::make_shared<CalibrateArgs>();
  app.add_option("--out", a->out, "Where to write (default: $HANPU_HOST_DEVICE, else ~/.cache/hanpu/host.json)");
  app.add_option("--reps", a->opt.reps, "Timed repetitions per kernel (default 200)")->check(CLI::Range(5, 100000));
  return [a] { return run(*a); };
}

}  // namespace hanpu::cli
