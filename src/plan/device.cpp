#include "plan/device.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "plan/calibrate.h"

namespace hanpu::plan {

using nlohmann::json;

const Memory* Device::memory(const std::string& n) const {
  for (const Memory& m : memories) {
    if (m.name == n) return &m;
  }
  return nullptr;
}

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
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

// Reads fields of one JSON object, building "a.b.c" paths for error messages. The first error sticks.
class Reader {
 public:
  Reader(const json& j, std::string path, Status* st) : j_(j), path_(std::move(path)), st_(st) {}

  Reader child(const char* key) const {
    static const json kNull;
    const std::string p = join(key);
    if (!ok()) return Reader(kNull, p, st_);
    if (!j_.is_object() || !j_.contains(key)) {
      fail(p + ": missing");
      return Reader(kNull, p, st_);
    }
    return Reader(j_.at(key), p, st_);
  }

  std::string str(const char* key) const {
    Reader r = child(key);
    if (!ok()) return "";
    if (!r.j_.is_string() || r.j_.get<std::string>().empty()) {
      fail(r.path_ + ": expected a non-empty string");
      return "";
    }
    return r.j_.get<std::string>();
  }

  // A sourced number {"value": x, "source": "..."}; `positive` rejects x <= 0.
  double number(const char* key, bool positive = true) const {
    Reader r = child(key);
    if (!ok()) return 0;
    r.str("source");
    Reader v = r.child("value");
    if (!ok()) return 0;
    if (!v.j_.is_number() || (positive && !(v.j_.get<double>() > 0))) {
      fail(v.path_ + (positive ? ": expected a positive number" : ": expected a number"));
      return 0;
    }
    return v.j_.get<double>();
  }

  bool flag(const char* key) const {
    Reader r = child(key);
    if (!ok()) return false;
    r.str("source");
    Reader v = r.child("value");
    if (!ok()) return false;
    if (!v.j_.is_boolean()) {
      fail(v.path_ + ": expected true or false");
      return false;
    }
    return v.j_.get<bool>();
  }

  const json& raw() const { return j_; }
  const std::string& path() const { return path_; }
  bool ok() const { return st_->ok(); }
  void fail(const std::string& msg) const {
    if (ok()) *st_ = InvalidArgument(msg);
  }

 private:
  std::string join(const char* key) const { return path_.empty() ? key : path_ + "." + key; }
  const json& j_;
  std::string path_;
  Status* st_;
};

int64_t as_int(double x) { return static_cast<int64_t>(x); }

}  // namespace

Status parse_device(const std::string& text, const std::string& origin, Device* out) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return InvalidArgument(origin + ": not JSON: " + e.what());
  }
  Status st;
  Reader r(j, "", &st);
  Device d;
  d.origin = origin;
  if (r.str("schema") != "hanpu-device/1" && st.ok()) st = InvalidArgument("schema: expected \"hanpu-device/1\"");
  d.name = r.str("name");
  d.description = r.str("description");
  d.clock_ghz = r.number("clock_ghz");
  d.cores = static_cast<int>(r.number("cores"));
  d.operand_bytes = static_cast<int>(r.number("operand_bytes"));
  if (st.ok() && d.operand_bytes != 2 && d.operand_bytes != 4) st = InvalidArgument("operand_bytes.value: expected 2 or 4");
  Reader mems = r.child("memories");
  if (st.ok() && (!mems.raw().is_array() || mems.raw().empty())) st = InvalidArgument("memories: expected a non-empty array");
  for (std::size_t i = 0; st.ok() && i < mems.raw().size(); ++i) {
    Reader m(mems.raw()[i], "memories[" + std::to_string(i) + "]", &st);
    Memory mem;
    mem.name = m.str("name");
    mem.bytes = as_int(m.number("bytes"));
    Reader oc = m.child("on_chip");
    if (st.ok() && !oc.raw().is_boolean()) st = InvalidArgument(oc.path() + ": expected true or false");
    if (st.ok()) mem.on_chip = oc.raw().get<bool>();
    if (st.ok() && d.memory(mem.name)) st = InvalidArgument(m.path() + ".name: duplicate memory '" + mem.name + "'");
    d.memories.push_back(mem);
  }
  Reader pl = r.child("placement");
  pl.str("source");
  const std::pair<const char*, std::string*> places[] = {
      {"vector_operands", &d.vector_mem}, {"matrix_operands", &d.matrix_operand_mem},
      {"matrix_results", &d.matrix_result_mem}, {"state", &d.state_mem}, {"materialised", &d.materialised_mem}};
  for (const auto& [key, dst] : places) {
    *dst = pl.str(key);
    if (st.ok() && !d.memory(*dst)) {
      st = InvalidArgument("placement." + std::string(key) + ": '" + *dst + "' is not one of the memories");
    }
  }
  // Optional: the buffers the matrix unit reads its left and right operands from (Ascend's L0A / L0B).
  for (const auto& [key, dst] : {std::pair<const char*, std::string*>{"matrix_left", &d.matrix_left_mem},
                                 {"matrix_right", &d.matrix_right_mem}}) {
    if (!st.ok() || !pl.raw().contains(key)) continue;
    *dst = pl.str(key);
    if (st.ok() && !d.memory(*dst)) {
      st = InvalidArgument("placement." + std::string(key) + ": '" + *dst + "' is not one of the memories");
    }
  }
  Reader mx = r.child("matrix");
  d.matrix_macs_per_cycle = mx.number("macs_per_cycle");
  d.matrix_requires_blocked = mx.flag("requires_blocked");
  d.matrix_dense_penalty = mx.number("dense_penalty");
  Reader vx = r.child("vector");
  d.vector_allows_blocked = vx.flag("allows_blocked");
  d.vector_bytes_per_cycle = vx.number("bytes_per_cycle");
  d.vector_blocked_row_wise_penalty = vx.number("blocked_row_wise_penalty");
  if (st.ok() && d.vector_blocked_row_wise_penalty < 1) {
    st = InvalidArgument("vector.blocked_row_wise_penalty.value: expected >= 1 (vector work is never faster on tiles)");
  }
  Reader lx = r.child("layout");
  d.block_rows = as_int(lx.number("block_rows"));
  d.block_cols = as_int(lx.number("block_cols"));
  d.transform_bytes_per_cycle = lx.number("transform_bytes_per_cycle");
  d.transform_fixed_cycles = lx.number("transform_fixed_cycles", false);
  if (st.ok() && d.transform_fixed_cycles < 0) st = InvalidArgument("layout.transform_fixed_cycles.value: expected >= 0");
  if (st.ok() && j.contains("sim")) {
    Reader sx = r.child("sim");
    d.has_sim = true;
    d.sim.global_gbps = sx.number("global_gbps");
    d.sim.global_read_bytes_per_cycle = sx.number("global_read_bytes_per_cycle");
    d.sim.global_write_bytes_per_cycle = sx.number("global_write_bytes_per_cycle");
    d.sim.l1_to_l0_bytes_per_cycle = sx.number("l1_to_l0_bytes_per_cycle");
    d.sim.l0c_to_ub_bytes_per_cycle = sx.number("l0c_to_ub_bytes_per_cycle");
    d.sim.transfer_setup_cycles = sx.number("transfer_setup_cycles", false);
    d.sim.launch_overhead_us = sx.number("launch_overhead_us", false);
    d.sim.barrier_us = sx.number("barrier_us", false);
    d.sim.l0c_to_ub_via_vector = sx.flag("l0c_to_ub_via_vector");
    Reader ex = sx.child("energy");
    d.sim.pj_per_mac = ex.number("pj_per_mac");
    d.sim.pj_per_vector_cycle = ex.number("pj_per_vector_cycle");
    d.sim.pj_per_global_byte = ex.number("pj_per_global_byte");
    d.sim.pj_per_on_chip_byte = ex.number("pj_per_on_chip_byte");
    d.sim.static_w = ex.number("static_w", false);
    for (const auto& [field, v] : {std::pair<const char*, double>{"transfer_setup_cycles", d.sim.transfer_setup_cycles},
                                   {"launch_overhead_us", d.sim.launch_overhead_us},
                                   {"barrier_us", d.sim.barrier_us},
                                   {"energy.static_w", d.sim.static_w}}) {
      if (st.ok() && v < 0) st = InvalidArgument(std::string("sim.") + field + ".value: expected >= 0");
    }
  }
  if (!st.ok()) return InvalidArgument(origin + ": " + st.message());
  *out = std::move(d);
  return Status::Ok();
}

Status load_device(const std::string& name_or_path, Device* out) {
  std::string path = name_or_path;
  const bool is_path = name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".json");
  if (!is_path) path = devices_dir() + "/" + name_or_path + ".json";
  // "host": this machine's calibrated description when `hanpu calibrate` has written one.
  if (name_or_path == "host" && std::filesystem::exists(calibrated_host_path())) path = calibrated_host_path();
  std::ifstream f(path);
  if (!f) {
    if (is_path) return NotFound("device file " + path + " cannot be read");
    std::string names;
    for (const std::string& n : shipped_devices()) names += (names.empty() ? "" : ", ") + n;
    return InvalidArgument("unknown device '" + name_or_path + "' (shipped: " + names + "; or give a path to a JSON file)");
  }
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_device(ss.str(), path, out);
}

}  // namespace hanpu::plan
