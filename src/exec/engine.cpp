#include "hanpu/engine.h"

#include <list>
#include <mutex>

#include "exec/calibrate.h"
#include "exec/strategies.h"
#include "kernels/simd.h"
#include "kernels/tril_inverse.h"
#include "plan/plan.h"
#include "plan/strategy.h"

namespace hanpu {

namespace {

// The registry's entry of a public strategy (plan/strategy.h holds the names).
const plan::StrategyInfo& registry_entry(Strategy s) {
  return plan::strategies()[static_cast<std::size_t>(s)];
}

// The host's device description (the planner's cost model of this CPU), loaded once.
Status host_device(const plan::Device** out) {
  static plan::Device d;
  static const Status st = plan::load_this_host(&d, nullptr);
  *out = &d;
  return st;
}

plan::Shape shape_of(const Problem& p, int workers) {
  plan::Shape sh;
  for (const Sequence& s : p.seqs) sh.seq_tokens.push_back(s.len);
  sh.C = p.opt.chunk_size;
  sh.HV = p.HV;
  sh.V = p.V;
  sh.workers = workers;
  return sh;
}

// The planner's bf16 cost model counts the engine's row blocks (plan/packing.h).
static_assert(plan::PlanOptions{}.row_block == kTrilBlock);

// The execution plan of a call without one: the strategy and switches of cfg on the host, with column
// slices aligned to the GEMM's column block (bit-identical results for any thread count).
Status plan_call(const Problem& p, const EngineConfig& cfg, int threads, plan::Plan* out) {
  const plan::Device* host;
  HANPU_RETURN_IF_ERROR(host_device(&host));
  const plan::StrategyInfo& info = registry_entry(cfg.strategy);
  plan::StrategyOptions so = info.opt;
  if (so.dataflow == plan::Dataflow::kHeadLevel) {
    so.tail_split = cfg.tail_split;
    so.chunk_first = cfg.chunk_first;
    so.gemm_first = cfg.gemm_first;
    so.layout_plan = cfg.layout_plan;  // else fixed layouts, the update's operand packed on request
  }
  plan::PlanOptions po;
  po.C = p.opt.chunk_size;
  po.K = p.K;
  po.V = p.V;
  po.packed_update = cfg.packed_operands;
  po.bf16 = p.bf16_gemm;
  po.packing = cfg.packing;
  plan::MapRequest req;
  req.shape = shape_of(p, threads);
  req.column_align = simd::gemm_column_block();
  req.segment_chunks = cfg.segment_chunks;
  req.chunk_parallel_fallback = cfg.chunk_parallel_fallback;
  return plan::make_execution_plan(p.kind, *host, info.name, so, po, req, out);
}

// The plans of recent calls without a plan, most recent first: repeated calls of one shape (a model's
// layers, a benchmark's repetitions) plan once.
Status cached_plan(const Problem& p, const EngineConfig& cfg, int threads, std::shared_ptr<const plan::Plan>* out) {
  static std::mutex mu;
  static std::list<std::pair<std::string, std::shared_ptr<const plan::Plan>>> recent;
  constexpr std::size_t kKept = 16;
  std::string key = std::string(kind_name(p.kind)) + ' ' + strategy_name(cfg.strategy);
  for (int64_t x : {int64_t{p.opt.chunk_size}, p.K, p.V, p.HV, int64_t{threads}, cfg.segment_chunks}) {
    key += ' ' + std::to_string(x);
  }
  for (bool b : {cfg.tail_split, cfg.chunk_first, cfg.gemm_first, cfg.layout_plan, cfg.packed_operands,
                 cfg.chunk_parallel_fallback}) {
    key += b ? '1' : '0';
  }
  key += std::string(p.bf16_gemm ? " bf16 " : " exact ") + plan::packing_name(cfg.packing);
  for (const Sequence& q : p.seqs) key += ' ' + std::to_string(q.len);
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto it = recent.begin(); it != recent.end(); ++it) {
      if (it->first == key) {
        recent.splice(recent.begin(), recent, it);
        *out = it->second;
        return Status::Ok();
      }
    }
  }
  auto pl = std::make_shared<plan::Plan>();
  HANPU_RETURN_IF_ERROR(plan_call(p, cfg, threads, pl.get()));
  std::lock_guard<std::mutex> lock(mu);
  recent.emplace_front(std::move(key), pl);
  if (recent.size() > kKept) recent.pop_back();
  *out = std::move(pl);
  return Status::Ok();
}

// The phase sequences the executor implements (each strategy's dataflow, plan/strategy.cpp).
enum class Executor { kHanpu, kMaterialising, kFlashQla };
Status executor_of(const plan::Mapping& m, Executor* out) {
  using W = plan::Work;
  std::vector<W> works;
  for (const plan::Phase& ph : m.phases) works.push_back(ph.work);
  const std::vector<std::pair<std::vector<W>, Executor>> known = {
      {{W::kHead}, Executor::kHanpu},
      {{W::kPrepare, W::kStatePart}, Executor::kHanpu},
      {{W::kLoad, W::kScores, W::kSolve, W::kWU, W::kRecurrence, W::kOutput}, Executor::kMaterialising},
      {{W::kPrepareWU, W::kRecurrence, W::kOutput}, Executor::kMaterialising},
      {{W::kPrepareWU, W::kWarmup, W::kHandOn, W::kSegment}, Executor::kFlashQla},
  };
  for (const auto& [seq, e] : known) {
    if (seq == works) {
      *out = e;
      return Status::Ok();
    }
  }
  std::string got;
  for (W w : works) got += std::string(got.empty() ? "" : ", ") + plan::work_name(w);
  return InvalidArgument("plan mapping: the CPU executor runs no dataflow with phases (" + got + ")");
}

// A given plan must be for this problem: kind, chunk size, dims, precision, sequence lengths, value heads,
// threads.
Status check_plan_fits(const plan::Plan& pl, const Problem& p, const EngineConfig& cfg) {
  auto mismatch = [](const char* what, const std::string& plan_v, const std::string& problem_v) {
    return InvalidArgument(std::string("plan ") + what + " is " + plan_v + ", the problem's is " + problem_v);
  };
  if (!pl.has_mapping) return InvalidArgument("plan has no mapping (make it with hanpu plan --strategy ...)");
  if (pl.kind != p.kind) return mismatch("kind", kind_name(pl.kind), kind_name(p.kind));
  if (pl.opt.C != p.opt.chunk_size) return mismatch("chunk size", std::to_string(pl.opt.C), std::to_string(p.opt.chunk_size));
  if (pl.opt.K != p.K) return mismatch("K", std::to_string(pl.opt.K), std::to_string(p.K));
  if (pl.opt.V != p.V) return mismatch("V", std::to_string(pl.opt.V), std::to_string(p.V));
  if (pl.opt.bf16 != p.bf16_gemm) {  // the packing plan is the bf16 unit's (hanpu plan --precision bf16)
    const std::string mode = p.bf16_gemm ? "bf16" : "exact";
    return mismatch("precision", pl.opt.bf16 ? "bf16" : "exact",
                    p.opt.precision == Precision::kAuto ? mode + " (precision auto's choice for these inputs here; "
                                                                  "give the plan's precision explicitly)"
                                                        : mode);
  }
  const plan::Shape want = shape_of(p, pl.mapping.shape.workers);
  if (want.HV != pl.mapping.shape.HV) {
    return mismatch("value heads", std::to_string(pl.mapping.shape.HV), std::to_string(want.HV));
  }
  if (want.seq_tokens != pl.mapping.shape.seq_tokens) {
    auto list = [](const std::vector<int64_t>& v) {
      std::string s;
      for (std::size_t i = 0; i < v.size() && i < 8; ++i) {
        if (i) s += ',';
        s += std::to_string(v[i]);
      }
      return s + (v.size() > 8 ? ",..." : "") + " (" + std::to_string(v.size()) + " sequences)";
    };
    return mismatch("sequence lengths", list(pl.mapping.shape.seq_tokens), list(want.seq_tokens));
  }
  if (cfg.threads != 0 && cfg.threads != pl.mapping.shape.workers) {
    return mismatch("worker count", std::to_string(pl.mapping.shape.workers), "threads=" + std::to_string(cfg.threads));
  }
  return Status::Ok();
}

}  // namespace

const char* strategy_name(Strategy s) { return registry_entry(s).name.c_str(); }

Status load_plan(const std::string& path, std::shared_ptr<const plan::Plan>* out) {
  auto pl = std::make_shared<plan::Plan>();
  HANPU_RETURN_IF_ERROR(plan::load_plan_file(path, pl.get()));
  *out = std::move(pl);
  return Status::Ok();
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

Status engine_chunk_program(const Problem& p, const EngineConfig& cfg, ChunkProgram* out) {
  std::shared_ptr<const plan::Plan> pl;
  HANPU_RETURN_IF_ERROR(cached_plan(p, cfg, 1, &pl));
  Executor ex;
  HANPU_RETURN_IF_ERROR(executor_of(pl->mapping, &ex));
  if (ex != Executor::kHanpu) {
    return InvalidArgument(std::string("strategy '") + strategy_name(cfg.strategy) +
                           "' does not run chunk programs (only the hanpu strategy does)");
  }
  return compile_chunk_program(pl->graph, pl->layouts.op_layout, pl->opt, out);
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
  std::shared_ptr<const plan::Plan> planned = cfg.plan;
  if (planned) {
    HANPU_RETURN_IF_ERROR(check_plan_fits(*planned, p, cfg));
  } else {
    HANPU_RETURN_IF_ERROR(cached_plan(p, cfg, ThreadPool::resolve(cfg.threads), &planned));
  }
  const plan::Plan* pl = planned.get();
  Executor ex;
  HANPU_RETURN_IF_ERROR(executor_of(pl->mapping, &ex));
  ChunkProgram prog;
  if (ex == Executor::kHanpu) HANPU_RETURN_IF_ERROR(compile_chunk_program(pl->graph, pl->layouts.op_layout, pl->opt, &prog));
  const int threads = pl->mapping.shape.workers;
  ThreadPool& pool = shared_pool(threads);
  RunStats local_stats;
  RunStats* st = stats ? stats : &local_stats;
  *st = RunStats();
  st->threads = threads;
  st->simd_target = simd::target_name();
  st->dataflow = pl->strategy;
  const Outputs o = with_strides(out);
  switch (ex) {
    case Executor::kHanpu:
      run_hanpu(p, prog, pl->mapping, pool, o, cfg.breakdown, st);
      st->chunk_program = prog.describe();
      break;
    case Executor::kFlashQla: run_flashqla(p, cfg, pl->mapping, pool, o, st); break;
    case Executor::kMaterialising: run_materialising(p, pl->mapping, pool, o, st); break;
  }
  return Status::Ok();
}

}  // namespace hanpu
