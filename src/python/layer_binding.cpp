// hanpu._hanpu.Layer: the whole linear-attention layer (hanpu/layer.h) for python/hanpu/layers.py.
// Weights come as descriptors by their transformers names (copied into the layer when it is built);
// hidden states, outputs and states as descriptors read and written in place. The GIL is released
// while a layer runs.
#include <map>
#include <memory>

#include "hanpu/layer.h"
#include "python/descriptors.h"

namespace hanpu {
namespace {

LayerArch parse_arch(const std::string& a) {
  if (a == "qwen3_next") return LayerArch::kQwen3Next;
  if (a == "qwen3_5") return LayerArch::kQwen3_5;
  if (a == "kimi_linear") return LayerArch::kKimiLinear;
  throw py::value_error("arch must be qwen3_next, qwen3_5 or kimi_linear, got " + a);
}

Precision parse_layer_precision(const std::string& p) {
  Precision out;
  if (!parse_precision(p, &out)) throw py::value_error("precision must be auto, exact or bf16, got " + p);
  return out;
}

LayerRunConfig run_config(int threads, const std::string& strategy, bool breakdown) {
  LayerRunConfig run;
  if (threads < 0) throw py::value_error("threads must be >= 0 (0: every CPU), got " + std::to_string(threads));
  if (!parse_strategy(strategy, &run.strategy)) throw py::value_error("unknown strategy " + strategy);
  run.threads = threads;
  run.breakdown = breakdown;
  return run;
}

py::dict parts(const LayerStats& s) {
  py::dict d;
  for (const auto& [name, ms] : s.parts_ms) d[py::str(name)] = ms;
  return d;
}

std::unique_ptr<Layer> create(const std::string& arch, const py::dict& spec, const py::dict& weights,
                              const std::string& precision) {
  LayerSpec s;
  s.arch = parse_arch(arch);
  auto integer = [&](const char* key) -> int64_t {
    if (!spec.contains(key)) throw py::value_error(std::string("spec is missing ") + key);
    return spec[key].cast<int64_t>();
  };
  s.hidden_size = integer("hidden_size");
  s.num_k_heads = integer("num_k_heads");
  s.num_v_heads = integer("num_v_heads");
  s.head_k_dim = integer("head_k_dim");
  s.head_v_dim = integer("head_v_dim");
  s.conv_kernel = integer("conv_kernel");
  if (!spec.contains("rms_norm_eps")) throw py::value_error("spec is missing rms_norm_eps");
  s.rms_norm_eps = spec["rms_norm_eps"].cast<double>();
  std::map<std::string, TensorView> views;
  for (const auto& [k, v] : weights) {
    const std::string name = k.cast<std::string>();
    views[name] = to_view(name, v.cast<Descriptor>());
  }
  const WeightLookup lookup = [&](const std::string& name, std::string* where) -> const TensorView* {
    *where = "weights['" + name + "']";
    auto it = views.find(name);
    return it == views.end() ? nullptr : &it->second;
  };
  std::unique_ptr<Layer> out;
  Status st;
  {
    py::gil_scoped_release release;
    st = Layer::create(s, lookup, parse_layer_precision(precision), &out);
  }
  raise_if_error(st);
  return out;
}

std::unique_ptr<Layer> load(const std::string& dir, int64_t index, const std::string& precision) {
  std::unique_ptr<Layer> out;
  Status st;
  {
    py::gil_scoped_release release;
    st = load_layer(dir, index, parse_layer_precision(precision), &out);
  }
  raise_if_error(st);
  return out;
}

py::dict prefill(const Layer& L, const Descriptor& x, const Descriptor& y, const std::optional<Descriptor>& conv,
                 const std::optional<Descriptor>& recurrent, bool continuing, int threads, const std::string& strategy,
                 bool breakdown) {
  if (conv.has_value() != recurrent.has_value())
    throw py::value_error("conv_state and recurrent_state go together: give both or neither");
  const TensorView xv = to_view("hidden_states", x), yv = to_view("out", y);
  std::optional<LayerState> state;
  if (conv) state = LayerState{to_view("conv_state", *conv), to_view("recurrent_state", *recurrent), continuing};
  const LayerRunConfig run = run_config(threads, strategy, breakdown);
  LayerStats stats;
  Status st;
  {
    py::gil_scoped_release release;
    st = L.prefill(xv, yv, state ? &*state : nullptr, run, &stats);
  }
  raise_if_error(st);
  return parts(stats);
}

py::dict decode(const Layer& L, const Descriptor& x, const Descriptor& y, const Descriptor& conv_pool,
                const Descriptor& state_pool, const Descriptor& slots, int threads, const std::string& strategy,
                bool breakdown) {
  const TensorView xv = to_view("hidden_states", x), yv = to_view("out", y), cp = to_view("conv_pool", conv_pool),
                   sp = to_view("state_pool", state_pool), sl = to_view("slots", slots);
  const LayerRunConfig run = run_config(threads, strategy, breakdown);
  LayerStats stats;
  Status st;
  {
    py::gil_scoped_release release;
    st = L.decode(xv, yv, cp, sp, sl, run, &stats);
  }
  raise_if_error(st);
  return parts(stats);
}

py::dict spec_dict(const Layer& L) {
  const LayerSpec& s = L.spec();
  py::dict d;
  d["arch"] = layer_arch_name(s.arch);
  d["hidden_size"] = s.hidden_size;
  d["num_k_heads"] = s.num_k_heads;
  d["num_v_heads"] = s.num_v_heads;
  d["head_k_dim"] = s.head_k_dim;
  d["head_v_dim"] = s.head_v_dim;
  d["conv_kernel"] = s.conv_kernel;
  d["rms_norm_eps"] = s.rms_norm_eps;
  d["conv_dim"] = s.conv_dim();
  return d;
}

}  // namespace

void register_layers(py::module_& m) {
  py::class_<Layer>(m, "Layer")
      .def_property_readonly("spec", &spec_dict)
      .def_property_readonly("activation_dtype", [](const Layer& L) { return std::string(dtype_name(L.activation_dtype())); })
      .def_property_readonly("precision", [](const Layer& L) { return std::string(precision_name(L.precision())); })
      .def("prefill", &prefill, py::arg("x"), py::arg("y"), py::arg("conv_state"), py::arg("recurrent_state"),
           py::arg("continuing"), py::arg("threads"), py::arg("strategy"), py::arg("breakdown"))
      .def("decode", &decode, py::arg("x"), py::arg("y"), py::arg("conv_pool"), py::arg("state_pool"), py::arg("slots"),
           py::arg("threads"), py::arg("strategy"), py::arg("breakdown"));
  m.def("layer_create", &create, py::arg("arch"), py::arg("spec"), py::arg("weights"), py::arg("precision"));
  m.def("layer_load", &load, py::arg("model_dir"), py::arg("layer"), py::arg("precision"));
}

}  // namespace hanpu
