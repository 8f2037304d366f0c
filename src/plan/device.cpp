#include "plan/device.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/json_reader.h"

namespace hanpu::plan {

using nlohmann::json;

const Memory* Device::memory(const std::string& n) const {
  for (const Memory& m : memories) {
    if (m.name == n) return &m;
  }
  return nullptr;
}

double Device::vector_cycles(double bytes) const { return std::ceil(bytes / vector_bytes_per_cycle); }

std::string devices_dir() {
  if (const char* env = std::getenv("HANPU_DEVICES_DIR")) return env;
  return HANPU_DEVICES_DIR;
}

std::vector<std::string> shipped_devices() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(devices_dir(), ec)) {
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  }
  for (const auto& [name, text] : embedded_devices()) {
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

// The variable's value, "" where unset: an empty variable counts as unset (`HANPU_HOST_DEVICE= hanpu ...` asks
// for the default).
std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

}  // namespace

std::string calibrated_host_path() {
  if (const std::string p = env("HANPU_HOST_DEVICE"); !p.empty()) return p;
  if (const std::string x = env("XDG_CACHE_HOME"); !x.empty()) return x + "/hanpu/host.json";
  if (const std::string h = env("HOME"); !h.empty()) return h + "/.cache/hanpu/host.json";
  return "host-calibrated.json";
}

namespace {

Status read_text(const std::string& path, std::string* text) {
  // Only regular files: a path from a plan file could name a device or a pipe that never ends.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return NotFound("device file " + path + " cannot be read");
  std::ifstream f(path);
  if (!f) return NotFound("device file " + path + " cannot be read");
  std::stringstream ss;
  ss << f.rdbuf();
  *text = ss.str();
  return Status::Ok();
}

// A shipped description's text: the devices directory's file, else the copy compiled in.
Status shipped_text(const std::string& name, std::string* text) {
  if (read_text(devices_dir() + "/" + name + ".json", text).ok()) return Status::Ok();
  for (const auto& [n, t] : embedded_devices()) {
    if (n == name) {
      *text = t;
      return Status::Ok();
    }
  }
  return NotFound("no shipped device '" + name + "'");
}

// A description with "base": NAME is the shipped description NAME with this document's fields merged over
// it (RFC 7386 merge patch: objects merge field by field, anything else replaces). Bases may not chain.
Status resolve_base(json& j, const std::string& origin) {
  if (!j.is_object() || !j.contains("base")) return Status::Ok();
  if (!j["base"].is_string()) return InvalidArgument(origin + ": base: expected the name of a shipped device");
  const std::string name = j["base"].get<std::string>();
  if (name.empty() || name.find_first_of("/\\") != std::string::npos) {
    return InvalidArgument(origin + ": base: unknown device '" + name + "'");
  }
  std::string text;
  const Status st = shipped_text(name, &text);
  if (!st.ok()) return InvalidArgument(origin + ": base: unknown device '" + name + "'");
  json base;
  try {
    base = json::parse(text);
  } catch (const json::exception& e) {
    return InvalidArgument(origin + ": base '" + name + "' is not JSON: " + e.what());
  }
  if (base.is_object() && base.contains("base")) return InvalidArgument(origin + ": base '" + name + "' has a base itself");
  j.erase("base");
  base.merge_patch(j);
  j = std::move(base);
  return Status::Ok();
}

void read_memories(const JsonReader& r, Device& d) {
  const json& mems = r.array("memories", true);
  for (std::size_t i = 0; r.ok() && i < mems.size(); ++i) {
    const JsonReader m(mems[i], "memories[" + std::to_string(i) + "]", r);
    Memory mem;
    mem.name = m.str("name", true);
    mem.bytes = m.sourced_integer("bytes", 1, int64_t{1} << 50);
    mem.on_chip = m.flag("on_chip");
    if (r.ok() && d.memory(mem.name)) m.fail_at("name", "duplicate memory '" + mem.name + "'");
    d.memories.push_back(mem);
  }
}

void read_placement(const JsonReader& r, Device& d) {
  const JsonReader pl = r.child("placement");
  pl.str("source", true);
  const std::pair<const char*, std::string*> places[] = {
      {"vector_operands", &d.vector_mem}, {"matrix_operands", &d.matrix_operand_mem},
      {"matrix_results", &d.matrix_result_mem}, {"state", &d.state_mem}, {"materialised", &d.materialised_mem},
      {"matrix_left", &d.matrix_left_mem}, {"matrix_right", &d.matrix_right_mem}};
  for (const auto& [key, dst] : places) {
    // The buffers the matrix unit reads its operands from (Ascend's L0A / L0B) are optional.
    const bool optional = std::string(key).starts_with("matrix_left") || std::string(key).starts_with("matrix_right");
    if (!r.ok() || (optional && !pl.raw().contains(key))) continue;
    *dst = pl.str(key, true);
    if (r.ok() && !d.memory(*dst)) pl.fail_at(key, "'" + *dst + "' is not one of the memories");
  }
}

void read_sim(const JsonReader& r, Device& d) {
  const JsonReader sx = r.child("sim");
  d.has_sim = true;
  SimParams& s = d.sim;
  s.global_gbps = sx.sourced_number("global_gbps");
  s.global_read_bytes_per_cycle = sx.sourced_number("global_read_bytes_per_cycle");
  s.global_write_bytes_per_cycle = sx.sourced_number("global_write_bytes_per_cycle");
  s.l1_to_l0_bytes_per_cycle = sx.sourced_number("l1_to_l0_bytes_per_cycle");
  s.l0c_to_ub_bytes_per_cycle = sx.sourced_number("l0c_to_ub_bytes_per_cycle");
  if (d.matrix_operand_mem != d.vector_mem || sx.raw().contains("ub_to_l1_bytes_per_cycle")) {
    s.ub_to_l1_bytes_per_cycle = sx.sourced_number("ub_to_l1_bytes_per_cycle");
  }
  s.transfer_setup_cycles = sx.sourced_number("transfer_setup_cycles", false);
  s.launch_overhead_us = sx.sourced_number("launch_overhead_us", false);
  s.barrier_us = sx.sourced_number("barrier_us", false);
  s.framework_op_us = sx.raw().contains("framework_op_us") ? sx.sourced_number("framework_op_us") : s.launch_overhead_us;
  s.l0c_to_ub_via_vector = sx.sourced_flag("l0c_to_ub_via_vector");
  const JsonReader q = sx.child("queues");
  q.str("source", true);
  const std::pair<const char*, std::string*> queues[] = {
      {"load", &s.queues.load},     {"store", &s.queues.store},   {"matrix_load", &s.queues.matrix_load},
      {"matrix", &s.queues.matrix}, {"matrix_out", &s.queues.matrix_out}, {"vector", &s.queues.vector},
      {"control", &s.queues.control}};
  for (const auto& [key, dst] : queues) *dst = q.str(key, true);
  if (s.l0c_to_ub_via_vector) s.queues.matrix_out = s.queues.vector;
  const JsonReader ex = sx.child("energy");
  s.pj_per_mac = ex.sourced_number("pj_per_mac");
  s.pj_per_vector_cycle = ex.sourced_number("pj_per_vector_cycle");
  s.pj_per_global_byte = ex.sourced_number("pj_per_global_byte");
  s.pj_per_on_chip_byte = ex.sourced_number("pj_per_on_chip_byte");
  s.static_w = ex.sourced_number("static_w", false);
  for (const auto& [field, v] : {std::pair<const char*, double>{"sim.transfer_setup_cycles", s.transfer_setup_cycles},
                                 {"sim.launch_overhead_us", s.launch_overhead_us},
                                 {"sim.barrier_us", s.barrier_us},
                                 {"sim.energy.static_w", s.static_w}}) {
    if (r.ok() && v < 0) r.fail(std::string(field) + ".value", "expected >= 0");
  }
}

}  // namespace

Status parse_device(const std::string& text, const std::string& origin, Device* out) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return InvalidArgument(origin + ": not JSON: " + e.what());
  }
  HANPU_RETURN_IF_ERROR(resolve_base(j, origin));
  JsonReader r(j, "");
  Device d;
  d.origin = origin;
  if (r.str("schema") != "hanpu-device/1" && r.ok()) r.fail("schema", "expected \"hanpu-device/1\"");
  d.name = r.str("name", true);
  d.description = r.str("description", true);
  d.clock_ghz = r.sourced_number("clock_ghz");
  d.cores = static_cast<int>(r.sourced_integer("cores", 1, 4096));
  d.operand_bytes = static_cast<int>(r.sourced_integer("operand_bytes", 2, 4));
  if (r.ok() && d.operand_bytes != 2 && d.operand_bytes != 4) r.fail("operand_bytes.value", "expected 2 or 4");
  read_memories(r, d);
  read_placement(r, d);
  const JsonReader mx = r.child("matrix");
  d.matrix_macs_per_cycle = mx.sourced_number("macs_per_cycle");
  d.matrix_requires_blocked = mx.sourced_flag("requires_blocked");
  d.matrix_dense_penalty = mx.sourced_number("dense_penalty");
  if (r.ok() && mx.raw().contains("scales_accumulator_rows")) {
    d.matrix_scales_accumulator = mx.sourced_flag("scales_accumulator_rows");
  }
  if (r.ok() && mx.raw().contains("solve_macs_per_cycle")) d.solve_macs_per_cycle = mx.sourced_number("solve_macs_per_cycle");
  const JsonReader vx = r.child("vector");
  d.vector_allows_blocked = vx.sourced_flag("allows_blocked");
  d.vector_bytes_per_cycle = vx.sourced_number("bytes_per_cycle");
  d.vector_blocked_row_wise_penalty = vx.sourced_number("blocked_row_wise_penalty");
  if (r.ok() && d.vector_blocked_row_wise_penalty < 1) {
    r.fail("vector.blocked_row_wise_penalty.value", "expected >= 1 (vector work is never faster on tiles)");
  }
  const JsonReader lx = r.child("layout");
  d.block_rows = lx.sourced_integer("block_rows", 1, 4096);
  d.block_cols = lx.sourced_integer("block_cols", 1, 4096);
  d.transform_bytes_per_cycle = lx.sourced_number("transform_bytes_per_cycle");
  d.transform_fixed_cycles = lx.sourced_number("transform_fixed_cycles", false);
  if (r.ok() && d.transform_fixed_cycles < 0) r.fail("layout.transform_fixed_cycles.value", "expected >= 0");
  for (const auto& [key, dst] : {std::pair<const char*, bool*>{"load_converts", &d.load_converts},
                                 {"result_move_converts", &d.result_move_converts},
                                 {"store_converts", &d.store_converts}}) {
    if (r.ok() && lx.raw().contains(key)) *dst = lx.sourced_flag(key);
  }
  if (r.ok() && j.contains("bf16_matrix")) {
    const JsonReader bx = r.child("bf16_matrix");
    d.has_bf16_matrix = true;
    d.bf16_macs_per_cycle = bx.sourced_number("macs_per_cycle");
    d.bf16_pack_bytes_per_cycle = bx.sourced_number("pack_bytes_per_cycle");
    d.bf16_pack_fixed_cycles = bx.sourced_number("pack_fixed_cycles", false);
    if (r.ok() && d.bf16_pack_fixed_cycles < 0) r.fail("bf16_matrix.pack_fixed_cycles.value", "expected >= 0");
    if (r.ok() && bx.raw().contains("dense_penalty")) d.bf16_dense_penalty = bx.sourced_number("dense_penalty");
    for (const auto& [key, dst] : {std::pair<const char*, int64_t*>{"tile_rows", &d.bf16_tile_rows},
                                   {"tile_cols", &d.bf16_tile_cols},
                                   {"tile_k", &d.bf16_tile_k}}) {
      if (r.ok() && bx.raw().contains(key)) *dst = bx.sourced_integer(key, 1, 4096);
    }
  }
  if (r.ok() && j.contains("buffers")) {
    const JsonReader bx = r.child("buffers");
    d.load_slots = static_cast<int>(bx.sourced_integer("load_slots", 1, 4));
    const Memory* vm = d.memory(d.vector_mem);
    d.vector_scratch_bytes = bx.sourced_integer("vector_scratch_bytes", 0, vm != nullptr ? vm->bytes : 0);
  }
  if (r.ok() && j.contains("chunk_rows")) {
    const JsonReader cx = r.child("chunk_rows");
    d.rows_load_bytes_per_cycle = cx.sourced_number("load_bytes_per_cycle");
    d.rows_store_bytes_per_cycle = cx.sourced_number("store_bytes_per_cycle");
    if (r.ok() && cx.raw().contains("memory_bytes_per_cycle")) {
      d.rows_memory_bytes_per_cycle = cx.sourced_number("memory_bytes_per_cycle");
    }
  }
  if (r.ok() && j.contains("sim")) read_sim(r, d);
  if (r.ok() && j.contains("calibration")) {
    const JsonReader cx = r.child("calibration");
    d.calibration_format = static_cast<int>(cx.integer("format", 1, 1 << 20));
    d.calibration_kernel_set = cx.str("kernel_set", true);
    if (r.ok() && cx.raw().contains("fma_peak_gflops")) {
      d.calibration_fma_peak_gflops = cx.num("fma_peak_gflops");
      if (!(d.calibration_fma_peak_gflops > 0) || !std::isfinite(d.calibration_fma_peak_gflops)) {
        cx.fail_at("fma_peak_gflops", "expected a positive number");
      }
    }
  }
  if (!r.ok()) return InvalidArgument(origin + ": " + r.status().message());
  *out = std::move(d);
  return Status::Ok();
}

Status load_device(const std::string& name_or_path, Device* out) {
  std::string path = name_or_path;
  const bool is_path = name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".json");
  if (!is_path) path = devices_dir() + "/" + name_or_path + ".json";
  std::string text;
  const bool found = path != devices_dir() + "/" + name_or_path + ".json" ? read_text(path, &text).ok()
                                                                          : shipped_text(name_or_path, &text).ok();
  if (!found) {
    if (is_path) return NotFound("device file " + path + " cannot be read");
    std::string names;
    for (const std::string& n : shipped_devices()) names += (names.empty() ? "" : ", ") + n;
    return InvalidArgument("unknown device '" + name_or_path + "' (shipped: " + names + "; or give a path to a JSON file)");
  }
  return parse_device(text, path, out);
}

Status load_host_device(const std::string& kernel_set, Device* out, std::string* note) {
  if (note) note->clear();
  const std::string path = calibrated_host_path();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return load_device("host", out);
  Device d;
  const Status loaded = load_device(path, &d);
  // A file the user named (HANPU_HOST_DEVICE) must load; the cache's own file, which a user may not know
  // exists, is set aside like a stale one, so that a damaged cache does not fail every engine call.
  if (!loaded.ok() && !env("HANPU_HOST_DEVICE").empty()) return loaded;
  std::string why;
  if (!loaded.ok()) {
    why = "does not load (" + loaded.message() + ")";
  } else if (d.calibration_format == 0) {
    why = "was written by an older `hanpu calibrate` (no calibration format)";
  } else if (d.calibration_format != kCalibrationFormat) {
    why = "has calibration format " + std::to_string(d.calibration_format) + ", this hanpu reads format " +
          std::to_string(kCalibrationFormat);
  } else if (d.calibration_kernel_set != kernel_set) {
    why = "measured the kernel set " + d.calibration_kernel_set + ", this process runs " + kernel_set;
  }
  if (why.empty()) {
    *out = std::move(d);
    return Status::Ok();
  }
  if (note) {
    *note = "the calibrated host description " + path + " " + why +
            ": the planner uses the shipped default; re-run `hanpu calibrate`";
  }
  return load_device("host", out);
}

}  // namespace hanpu::plan
