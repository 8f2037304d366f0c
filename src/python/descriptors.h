// Tensor descriptors from Python (see module.cpp) and the Status -> exception rule, shared by the
// extension's files.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "hanpu/status.h"
#include "hanpu/tensor.h"

namespace py = pybind11;

namespace hanpu {

// (address, dtype name as in safetensors, shape, strides in elements)
using Descriptor = std::tuple<std::uintptr_t, std::string, std::vector<int64_t>, std::vector<int64_t>>;

inline TensorView to_view(const std::string& name, const Descriptor& d) {
  const auto& [addr, dtype_name, shape, strides] = d;
  DType dt;
  if (!parse_dtype(dtype_name, &dt)) throw py::value_error(name + ": unsupported dtype " + dtype_name);
  if (shape.size() != strides.size()) {
    throw py::value_error(name + ": " + std::to_string(shape.size()) + " dims but " +
                          std::to_string(strides.size()) + " strides");
  }
  return TensorView(reinterpret_cast<const void*>(addr), dt, shape, strides);
}

inline std::optional<TensorView> optional_view(const py::dict& t, const char* name) {
  if (!t.contains(name) || t[name].is_none()) return std::nullopt;
  return to_view(name, t[name].cast<Descriptor>());
}

inline TensorView required_view(const py::dict& t, const char* name) {
  auto v = optional_view(t, name);
  if (!v) throw py::value_error(std::string(name) + " is required");
  return *v;
}

// Status -> Python exception: bad arguments are ValueError (the message names the argument).
inline void raise_if_error(const Status& st) {
  if (st.ok()) return;
  if (st.code() == StatusCode::kInvalidArgument) throw py::value_error(st.message());
  throw std::runtime_error(st.message());
}

// The layer bindings (python/layer_binding.cpp).
void register_layers(py::module_& m);

}  // namespace hanpu
