// The `hanpu._hanpu` extension: the engine behind the Python package (python/hanpu). Python hands over
// every tensor as a plain descriptor (address, dtype name, shape, element strides) taken from the
// caller's own torch tensor or NumPy array, so nothing is copied; outputs are allocated in Python (so
// they are the caller's kind of object) and filled here. The GIL is released while the engine runs.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "exec/thread_pool.h"
#include "hanpu/engine.h"
#include "hanpu/version.h"
#include "kernels/kernel_set.h"
#include "kernels/simd.h"
#include "python/descriptors.h"

namespace hanpu {
namespace {

Options parse_options(const std::string& kind, const py::dict& o) {
  Options opt;
  if (kind == "gdn") opt.kind = Kind::kGdn;
  else if (kind == "kda") opt.kind = Kind::kKda;
  else throw py::value_error("kind must be gdn or kda, got " + kind);
  auto flag = [&](const char* key, bool* dst) {
    if (o.contains(key)) *dst = o[key].cast<bool>();
  };
  if (o.contains("scale") && !o["scale"].is_none()) opt.scale = o["scale"].cast<double>();
  if (o.contains("lower_bound") && !o["lower_bound"].is_none()) opt.lower_bound = o["lower_bound"].cast<double>();
  if (o.contains("chunk_size")) opt.chunk_size = o["chunk_size"].cast<int>();
  flag("use_qk_l2norm_in_kernel", &opt.use_qk_l2norm_in_kernel);
  flag("use_gate_in_kernel", &opt.use_gate_in_kernel);
  flag("use_beta_sigmoid_in_kernel", &opt.use_beta_sigmoid_in_kernel);
  flag("allow_neg_eigval", &opt.allow_neg_eigval);
  flag("state_v_first", &opt.state_v_first);
  flag("check_finite", &opt.check_finite);
  if (o.contains("head_mapping") && !parse_head_mapping(o["head_mapping"].cast<std::string>(), &opt.head_mapping)) {
    throw py::value_error("head_mapping must be grouped or tiled, got " + o["head_mapping"].cast<std::string>());
  }
  if (o.contains("precision") && !parse_precision(o["precision"].cast<std::string>(), &opt.precision)) {
    throw py::value_error("precision must be auto, exact or bf16, got " + o["precision"].cast<std::string>());
  }
  return opt;
}

Inputs parse_inputs(const py::dict& t) {
  Inputs in;
  in.q = required_view(t, "q");
  in.k = required_view(t, "k");
  in.v = required_view(t, "v");
  in.g = required_view(t, "g");
  in.beta = required_view(t, "beta");
  in.initial_state = optional_view(t, "initial_state");
  in.cu_seqlens = optional_view(t, "cu_seqlens");
  in.A_log = optional_view(t, "A_log");
  in.dt_bias = optional_view(t, "dt_bias");
  return in;
}

EngineConfig parse_config(const std::string& strategy, int threads) {
  EngineConfig cfg;
  if (!parse_strategy(strategy, &cfg.strategy)) {
    std::string names;
    for (Strategy s : all_strategies()) names += std::string(names.empty() ? "" : ", ") + strategy_name(s);
    throw py::value_error("strategy must be one of " + names + "; got " + strategy);
  }
  if (threads < 0) throw py::value_error("threads must be >= 0 (0: every CPU), got " + std::to_string(threads));
  cfg.threads = threads;
  return cfg;
}

py::dict stats_dict(const RunStats& s) {
  py::dict d;
  d["flops"] = s.flops;
  d["peak_workspace_bytes"] = s.peak_workspace_bytes;
  d["traffic_bytes"] = s.traffic_bytes;
  d["threads"] = s.threads;
  d["simd_target"] = s.simd_target;
  d["dataflow"] = s.dataflow;
  return d;
}

// Chunkwise prefill on the engine. `tensors` maps FLA's argument names (and "o", "final_state") to
// descriptors; `options` holds the operator options by their FLA names.
py::dict chunk(const std::string& kind, const py::dict& tensors, const py::dict& options, const std::string& strategy,
               int threads) {
  const Options opt = parse_options(kind, options);
  const Inputs in = parse_inputs(tensors);
  const Outputs out{required_view(tensors, "o"), optional_view(tensors, "final_state")};
  const EngineConfig cfg = parse_config(strategy, threads);
  RunStats stats;
  Status st;
  {
    py::gil_scoped_release release;
    st = engine_forward(in, opt, cfg, out, &stats);
  }
  raise_if_error(st);
  return stats_dict(stats);
}

// FLA's fused_recurrent semantics. One token per sequence without cu_seqlens is a decode step: it runs
// on the engine's SIMD decode kernel over the state slots `state_pool` (already holding the initial
// states, one slot per sequence, updated in place). Longer inputs run the token-by-token recurrence.
py::dict recurrent(const std::string& kind, const py::dict& tensors, const py::dict& options, int threads) {
  const Options opt = parse_options(kind, options);
  Inputs in = parse_inputs(tensors);
  const TensorView o = required_view(tensors, "o");
  const auto pool = optional_view(tensors, "state_pool");
  const auto slots = optional_view(tensors, "slot_indices");
  const EngineConfig cfg = parse_config("hanpu", threads);
  RunStats stats;
  Status st;
  if (pool && slots) {
    if (in.initial_state) throw py::value_error("initial_state must be empty when the state pool is given");
    py::gil_scoped_release release;
    st = engine_decode_slots(in, opt, cfg, *pool, *slots, o, &stats);
  } else {
    const Outputs out{o, optional_view(tensors, "final_state")};
    py::gil_scoped_release release;
    st = recurrent_forward(in, opt, out);
    stats.threads = 1;
    stats.dataflow = "recurrent";
  }
  raise_if_error(st);
  return stats_dict(stats);
}

// The fp64 per-token reference (ops.h reference_forward): the ground truth the tests compare against.
void reference(const std::string& kind, const py::dict& tensors, const py::dict& options) {
  const Options opt = parse_options(kind, options);
  const Inputs in = parse_inputs(tensors);
  const Outputs out{required_view(tensors, "o"), optional_view(tensors, "final_state")};
  Status st;
  {
    py::gil_scoped_release release;
    st = reference_forward(in, opt, out);
  }
  raise_if_error(st);
}

}  // namespace
}  // namespace hanpu

PYBIND11_MODULE(_hanpu, m) {
  m.doc() = "hanpu's C++ engine (use the hanpu package, not this module)";
  m.attr("__version__") = HANPU_VERSION;
  m.def("chunk", &hanpu::chunk, py::arg("kind"), py::arg("tensors"), py::arg("options"), py::arg("strategy"),
        py::arg("threads"));
  m.def("recurrent", &hanpu::recurrent, py::arg("kind"), py::arg("tensors"), py::arg("options"),
        py::arg("threads"));
  m.def("reference", &hanpu::reference, py::arg("kind"), py::arg("tensors"), py::arg("options"));
  m.def("simd_target", [] { return std::string(hanpu::simd::target_name()); });
  m.def("kernel_sets", [] {
    std::vector<std::string> names;
    for (const hanpu::KernelSet& k : hanpu::kernel_sets()) names.push_back(k.name);
    return names;
  });
  m.def("bf16_unit", [] { return hanpu::active_kernels().bf16_unit; });
  m.def("auto_bf16_mode", [] {
    return std::string(hanpu::precision_name(hanpu::resolve_precision(hanpu::Precision::kAuto, hanpu::DType::kBF16)));
  });
  m.def("resolve_threads", &hanpu::ThreadPool::resolve, py::arg("threads"));
  hanpu::register_layers(m);
  m.def("strategies", [] {
    std::vector<std::string> names;
    for (hanpu::Strategy s : hanpu::all_strategies()) names.emplace_back(hanpu::strategy_name(s));
    return names;
  });
}
