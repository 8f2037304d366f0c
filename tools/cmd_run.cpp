// hanpu run --kind gdn|kda --in IN.safetensors --out OUT.safetensors [FLA keyword options]
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "plan/plan.h"
#include "hanpu/hanpu.h"
#include "ops/named_inputs.h"

namespace hanpu::cli {

namespace {

struct RunArgs {
  std::string kind = "gdn", in_path, out_path, mode = "chunk", strategy = "hanpu", plan_path, precision = "auto",
              head_mapping = "grouped";
  int threads = 0;
  double scale = 0, lower_bound = 0;
  int chunk_size = 64;
  bool l2norm = false, gate_in_kernel = false, beta_sigmoid = false, neg_eigval = false, v_first = false;
  bool final_state = false, check_finite = false;
};

int fail(const Status& s) {
  std::fprintf(stderr, "hanpu run: %s\n", s.ToString().c_str());
  return 2;
}

int run(const RunArgs& a, const CLI::App& app) {
  Options opt;
  opt.kind = a.kind == "kda" ? Kind::kKda : Kind::kGdn;
  if (app.count("--scale")) opt.scale = a.scale;
  if (app.count("--lower-bound")) opt.lower_bound = a.lower_bound;
  opt.chunk_size = a.chunk_size;
  opt.use_qk_l2norm_in_kernel = a.l2norm;
  opt.use_gate_in_kernel = a.gate_in_kernel;
  opt.use_beta_sigmoid_in_kernel = a.beta_sigmoid;
  opt.allow_neg_eigval = a.neg_eigval;
  opt.state_v_first = a.v_first;
  opt.check_finite = a.check_finite;
  parse_precision(a.precision, &opt.precision);  // the option's check admits known names only
  parse_head_mapping(a.head_mapping, &opt.head_mapping);  // likewise

  TensorFile in_file;
  Status st = read_safetensors(a.in_path, &in_file);
  if (!st.ok()) return fail(st);
  Inputs in;
  st = bind_inputs(in_file, &in);
  if (!st.ok()) return fail(Status(st.code(), a.in_path + ": " + st.message()));

  // o follows FLA: the dtype of q (F64 in reference mode, the fp64 ground truth); final_state is F32
  // (F64 in reference mode) in the layout of the options.
  const bool reference = a.mode == "reference";
  const DType o_dtype = reference ? DType::kF64 : in.q.dtype;
  const DType s_dtype = reference ? DType::kF64 : DType::kF32;
  if (in.q.rank() != 4 || in.v.rank() != 4) {
    return fail(InvalidArgument("q and v must have rank 4, got " + in.q.describe() + " and " + in.v.describe()));
  }
  Tensor o(o_dtype, {in.q.shape[0], in.q.shape[1], in.v.shape[2], in.v.shape[3]});
  std::unique_ptr<Tensor> state;
  if (a.final_state) {
    const int64_t N = in.cu_seqlens && in.cu_seqlens->rank() == 1 ? in.cu_seqlens->shape[0] - 1 : in.q.shape[0];
    const int64_t K = in.q.shape[3], V = in.v.shape[3], HV = in.v.shape[2];
    state = std::make_unique<Tensor>(s_dtype, a.v_first ? std::vector<int64_t>{std::max<int64_t>(N, 0), HV, V, K}
                                                        : std::vector<int64_t>{std::max<int64_t>(N, 0), HV, K, V});
  }
  Outputs out{o.view(), std::nullopt};
  if (state) out.final_state = state->view();
  if (a.mode == "engine") {
    EngineConfig ec;
    ec.threads = a.threads;
    parse_strategy(a.strategy, &ec.strategy);  // the option's check admits known names only
    if (!a.plan_path.empty()) {  // the plan's strategy and mapping run
      st = load_plan(a.plan_path, &ec.plan);
      if (!st.ok()) return fail(st);
    }
    st = engine_forward(in, opt, ec, out);
  } else if (a.mode == "chunk") {
    st = chunk_forward(in, opt, out);
  }
  else if (a.mode == "recurrent") st = recurrent_forward(in, opt, out);
  else st = reference_forward(in, opt, out);
  if (!st.ok()) return fail(st);

  TensorFile out_file;
  out_file.metadata = {{"producer", "hanpu " HANPU_VERSION}, {"kind", a.kind}, {"mode", a.mode}};
  out_file.tensors["o"] = std::move(o);
  if (state) out_file.tensors["final_state"] = std::move(*state);
  st = write_safetensors(a.out_path, out_file);
  if (!st.ok()) return fail(st);
  return 0;
}

}  // namespace

Runner add_run_command(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  app.add_option("--kind", a->kind, "Operator: gdn or kda")->check(CLI::IsMember({"gdn", "kda"}))->required();
  app.add_option("--in", a->in_path, "Input safetensors: q, k, v, g, beta [, initial_state, cu_seqlens, A_log, dt_bias]")
      ->required();
  app.add_option("--out", a->out_path, "Output safetensors: o [, final_state]")->required();
  app.add_option("--mode", a->mode,
                 "chunk (prefill), engine (prefill on the multi-threaded SIMD engine), recurrent (decode) or "
                 "reference (fp64, F64 outputs)")
      ->check(CLI::IsMember({"chunk", "engine", "recurrent", "reference"}));
  std::vector<std::string> names;
  for (Strategy s : all_strategies()) names.push_back(strategy_name(s));
  app.add_option("--strategy", a->strategy, "Engine strategy with --mode engine: hanpu, fla, fla-megakernel, flashqla, native")
      ->check(CLI::IsMember(names));
  app.add_option("--plan", a->plan_path, "With --mode engine: run this execution plan (hanpu plan --json): its strategy and mapping");
  app.add_option("--threads", a->threads, "Engine threads with --mode engine (default: all CPUs)")
      ->check(CLI::Range(0, 1024));
  app.add_option("--scale", a->scale, "Query scale (default K^-1/2)");
  app.add_option("--chunk-size", a->chunk_size, "Chunk size: 16, 32 or 64");
  app.add_flag("--use-qk-l2norm-in-kernel", a->l2norm, "l2-normalise q and k in the kernel");
  app.add_flag("--use-gate-in-kernel", a->gate_in_kernel, "g is the raw gate: -exp(A_log) softplus(g + dt_bias)");
  app.add_option("--lower-bound", a->lower_bound, "KDA lower-bound gate: lb * sigmoid(exp(A_log) (g + dt_bias))");
  app.add_flag("--use-beta-sigmoid-in-kernel", a->beta_sigmoid, "beta is a logit: beta = sigmoid(beta)");
  app.add_flag("--allow-neg-eigval", a->neg_eigval, "beta = 2 sigmoid(beta) (needs --use-beta-sigmoid-in-kernel)");
  app.add_flag("--state-v-first", a->v_first, "States are [N, HV, V, K] instead of [N, HV, K, V]");
  app.add_flag("--output-final-state", a->final_state, "Write final_state");
  app.add_flag("--check-finite", a->check_finite, "Reject NaN/Inf inputs instead of propagating them");
  app.add_option("--precision", a->precision,
                 "GEMM precision of the chunk and engine modes: auto (bf16 for bf16 inputs where the CPU has a bf16 "
                 "unit faster than its fp32 FMA, else exact), exact (fp32 operands) or bf16 (operands rounded to "
                 "bf16, fp32 accumulation)")
      ->check(CLI::IsMember({"auto", "exact", "bf16"}));
  app.add_option("--head-mapping", a->head_mapping,
                 "The q/k head of value head hv when HV = G H: grouped (hv / G, as FLA and transformers) or tiled "
                 "(hv % H, as ggml's GGML_OP_GATED_DELTA_NET)")
      ->check(CLI::IsMember({"grouped", "tiled"}));
  return [a, &app] { return run(*a, app); };
}

}  // namespace hanpu::cli
