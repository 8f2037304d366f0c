// Reading a JSON document field by field with the path of each field in error messages, e.g.
// "steps[3].inputs[1]: unknown tensor 'Wx'" or "sim.launch_overhead_us.value: expected >= 0". Every reader
// derived from one root shares its status, and the first error sticks: later reads return defaults, so a
// parser reads straight through and checks status() once. Used by every file format hanpu reads (plans,
// device descriptions).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "hanpu/status.h"

namespace hanpu {

class JsonReader {
 public:
  // A root reader of `j`, whose fields' paths start with `path` ("" for none).
  JsonReader(const nlohmann::json& j, std::string path);
  // A reader of `j` at `path` sharing `parent`'s status (for array elements).
  JsonReader(const nlohmann::json& j, std::string path, const JsonReader& parent);

  // The object field `key` (an error when missing; the child then reads null).
  JsonReader child(const char* key) const;
  // The field itself, or nullptr after recording "missing".
  const nlohmann::json* get(const char* key) const;
  const nlohmann::json& array(const char* key, bool non_empty = false) const;
  std::string str(const char* key, bool non_empty = false) const;
  double num(const char* key) const;
  int64_t integer(const char* key, int64_t lo, int64_t hi) const;
  bool flag(const char* key) const;
  // A sourced value {"value": x, "source": "..."} (device descriptions); `positive` rejects x <= 0.
  double sourced_number(const char* key, bool positive = true) const;
  bool sourced_flag(const char* key) const;
  // A sourced whole number in [lo, hi] (written as an integer or as a float with no fraction).
  int64_t sourced_integer(const char* key, int64_t lo, int64_t hi) const;

  const nlohmann::json& raw() const { return j_; }
  const std::string& path() const { return path_; }
  std::string path_of(const char* key) const { return path_.empty() ? key : path_ + "." + key; }
  bool ok() const { return st_->ok(); }
  const Status& status() const { return *st_; }
  // Records "path: what" unless an error is recorded already.
  void fail(const std::string& path, const std::string& what) const;
  void fail_at(const char* key, const std::string& what) const { fail(path_of(key), what); }

 private:
  JsonReader(const nlohmann::json& j, std::string path, std::shared_ptr<Status> st)
      : j_(j), path_(std::move(path)), st_(std::move(st)) {}
  const nlohmann::json& j_;
  std::string path_;
  std::shared_ptr<Status> st_;
};

}  // namespace hanpu
