#include "hanpu/engine.h"

#include "exec/strategies.h"
#include "kernels/simd.h"
#include "plan/plan.h"

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

Status hanpu_program(const Problem& p, const EngineConfig& cfg, ChunkProgram* prog) {
  if (cfg.plan) {
    const plan::Plan& pl = *cfg.plan;
    auto mismatch = [](const char* what, const std::string& plan_v, const std::string& problem_v) {
      return InvalidArgument(std::string("plan ") + what + " is " + plan_v + ", the problem's is " + problem_v);
    };
    if (pl.kind != p.kind) return mismatch("kind", kind_name(pl.kind), kind_name(p.kind));
    if (pl.opt.C != p.opt.chunk_size) return mismatch("chunk size", std::to_string(pl.opt.C), std::to_string(p.opt.chunk_size));
    if (pl.opt.K != p.K) return mismatch("K", std::to_string(pl.opt.K), std::to_string(p.K));
    if (pl.opt.V != p.V) return mismatch("V", std::to_string(pl.opt.V), std::to_string(p.V));
    return compile_chunk_program(pl.graph, pl.layouts.op_layout, prog);
  }
  plan::GraphOptions go;
  go.chunk_first = cfg.chunk_first;
  go.gemm_first = cfg.gemm_first;
  const plan::Graph g = plan::build_chunk_graph(p.kind, p.opt.chunk_size, p.K, p.V, go);
  std::vector<plan::Layout> layouts(g.ops.size(), plan::Layout::kDense);
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    if (cfg.packed_operands && g.tensors[g.ops[i].outputs[0]].name == "KtV") layouts[i] = plan::Layout::kBlocked;
  }
  return compile_chunk_program(g, layouts, prog);
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
    ChunkProgram prog;
    HANPU_RETURN_IF_ERROR(hanpu_program(p, cfg, &prog));
    run_hanpu(p, cfg, prog, pool, o, st);
    st->chunk_program = prog.describe();
  } else if (cfg.strategy == Strategy::kFlashQla) {
    run_flashqla(p, cfg, pool, o, st);
  } else {
    run_materialising(p, cfg.strategy, pool, o, st);
  }
  return Status::Ok();
}

}  // namespace hanpu
