#include "core/json_reader.h"

#include <cmath>

namespace hanpu {

using nlohmann::json;

namespace {
const json& null_json() {
  static const json kNull;
  return kNull;
}
}  // namespace

JsonReader::JsonReader(const json& j, std::string path) : j_(j), path_(std::move(path)), st_(std::make_shared<Status>()) {}

JsonReader::JsonReader(const json& j, std::string path, const JsonReader& parent)
    : j_(j), path_(std::move(path)), st_(parent.st_) {}

void JsonReader::fail(const std::string& path, const std::string& what) const {
  if (ok()) *st_ = InvalidArgument(path + ": " + what);
}

const json* JsonReader::get(const char* key) const {
  if (!ok()) return nullptr;
  if (!j_.is_object() || !j_.contains(key)) {
    fail_at(key, "missing");
    return nullptr;
  }
  return &j_.at(key);
}

JsonReader JsonReader::child(const char* key) const {
  const json* v = get(key);
  return JsonReader(v ? *v : null_json(), path_of(key), st_);
}

const json& JsonReader::array(const char* key, bool non_empty) const {
  static const json kEmpty = json::array();
  const json* v = get(key);
  if (!v) return kEmpty;
  if (!v->is_array() || (non_empty && v->empty())) {
    fail_at(key, non_empty ? "expected a non-empty array" : "expected an array");
    return kEmpty;
  }
  return *v;
}

std::string JsonReader::str(const char* key, bool non_empty) const {
  const json* v = get(key);
  if (!v) return "";
  if (!v->is_string() || (non_empty && v->get<std::string>().empty())) {
    fail_at(key, non_empty ? "expected a non-empty string" : "expected a string");
    return "";
  }
  return v->get<std::string>();
}

double JsonReader::num(const char* key) const {
  const json* v = get(key);
  if (!v) return 0;
  if (!v->is_number()) {
    fail_at(key, "expected a number");
    return 0;
  }
  return v->get<double>();
}

int64_t JsonReader::integer(const char* key, int64_t lo, int64_t hi) const {
  const json* v = get(key);
  if (!v) return 0;
  if (!v->is_number_integer()) {
    fail_at(key, "expected an integer");
    return 0;
  }
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) {
    fail_at(key, "expected " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " + std::to_string(x));
    return 0;
  }
  return x;
}

bool JsonReader::flag(const char* key) const {
  const json* v = get(key);
  if (!v) return false;
  if (!v->is_boolean()) {
    fail_at(key, "expected true or false");
    return false;
  }
  return v->get<bool>();
}

double JsonReader::sourced_number(const char* key, bool positive) const {
  const JsonReader r = child(key);
  r.str("source", true);
  const json* v = r.get("value");
  if (!v || !ok()) return 0;
  if (!v->is_number() || (positive && !(v->get<double>() > 0))) {
    r.fail_at("value", positive ? "expected a positive number" : "expected a number");
    return 0;
  }
  return v->get<double>();
}

int64_t JsonReader::sourced_integer(const char* key, int64_t lo, int64_t hi) const {
  const JsonReader r = child(key);
  r.str("source", true);
  const json* v = r.get("value");
  if (!v || !ok()) return 0;
  // Compared as doubles before any conversion: a float outside int64's range has no integer value.
  const double x = v->is_number() ? v->get<double>() : 0;
  if (!v->is_number() || x != std::floor(x) || x < static_cast<double>(lo) || x > static_cast<double>(hi)) {
    r.fail_at("value", "expected an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
    return 0;
  }
  return static_cast<int64_t>(x);
}

bool JsonReader::sourced_flag(const char* key) const {
  const JsonReader r = child(key);
  r.str("source", true);
  return r.flag("value");
}

}  // namespace hanpu
