#include "hanpu/engine.h"

#include "exec/strategies.h"
#include "kernels/simd.h"

namespace hanpu {

const char* strategy_name(Strategy s) {
  switch (s) {
    case Strategy::kNative: return "native";
    case Strategy::kFla: return "fla";
    case Strategy::kFlaMegakernel: return "fla-megakernel";
    case Strategy::kFlashQla: return "flashqla";
    case Strategy::kHanpu: return "hanpu";
  }
  return "?";
}

const std::vector<Strategy>& all_strategies() {
  static const std::vector<Strategy> all = {Strategy::kNative, Strategy::kFla, Strategy::kFlaMegakernel,
                                            Strategy::kFlashQla, Strategy::kHanpu};
  return all;
}

bool parse_strategy(const std::string& name, Strategy* out) {
  for (Strategy s : all_strategies()) {
    if (name == strategy_name(s)) {
      *out = s;
      return true;
    }
  }
  return false;
}

Status engine_forward(const Inputs& in, const Options& opt, const EngineConfig& cfg, const Outputs& out,
                      RunStats* stats) {
  if (cfg.threads < 0) return InvalidArgument("threads must be >= 0, got " + std::to_string(cfg.threads));
  if (cfg.segment_chunks < 0) {
    return InvalidArgument("segment_chunks must be >= 0, got " + std::to_string(cfg.segment_chunks));
  }
  if (!(cfg.flashqla_log_threshold < 0)) {
    return InvalidArgument("flashqla_log_threshold must be < 0, got " + std::to_string(cfg.flashqla_log_threshold));
  }
  Problem p;
  HANPU_RETURN_IF_ERROR(validate_problem(in, opt, Mode::kChunk, &p));
  HANPU_RETURN_IF_ERROR(validate_outputs(p, out, Mode::kChunk));
  const int threads = ThreadPool::resolve(cfg.threads);
  ThreadPool& pool = shared_pool(threads);
  RunStats local;
  RunStats* st = stats ? stats : &local;
  *st = RunStats();
  st->threads = threads;
  st->simd_target = simd::target_name();
  st->dataflow = strategy_name(cfg.strategy);
  const Outputs o = with_strides(out);
  if (cfg.strategy == Strategy::kHanpu) {
    run_hanpu(p, cfg, pool, o, st);
  } else if (cfg.strategy == Strategy::kFlashQla) {
    run_flashqla(p, cfg, pool, o, st);
  } else {
    run_materialising(p, cfg.strategy, pool, o, st);
  }
  return Status::Ok();
}

}  // namespace hanpu
