// Safetensors: 8-byte little-endian header length, JSON header, data section. Validation follows the
// format's rules: the header fits in the file, every entry has a known dtype, a non-negative shape and
// data_offsets [begin, end] with end - begin == numel * dtype size, and the entries tile the data section
// exactly (no overlap, no gap, nothing after the last tensor).
#include "hanpu/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

namespace hanpu {

namespace {

using nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the reference implementation's limit

uint64_t read_le64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

Status parse_entry(const std::string& name, const json& e, uint64_t data_size, DType* dt,
                   std::vector<int64_t>* shape, uint64_t* begin, uint64_t* end) {
  const std::string where = "tensor '" + name + "': ";
  if (!e.is_object()) return DataLoss(where + "header entry is not an object");
  if (!e.contains("dtype") || !e["dtype"].is_string()) return DataLoss(where + "missing string field 'dtype'");
  const std::string dts = e["dtype"].get<std::string>();
  if (!parse_dtype(dts, dt)) {
    return InvalidArgument(where + "unsupported dtype '" + dts + "' (supported: F64, F32, F16, BF16, I64)");
  }
  if (!e.contains("shape") || !e["shape"].is_array()) return DataLoss(where + "missing array field 'shape'");
  uint64_t numel = 1;
  for (const json& d : e["shape"]) {
    if (!d.is_number_unsigned()) return DataLoss(where + "shape entries must be non-negative integers");
    const uint64_t v = d.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) || (v != 0 && numel > UINT64_MAX / v)) {
      return DataLoss(where + "shape overflows");
    }
    numel *= v;
    shape->push_back(static_cast<int64_t>(v));
  }
  if (!e.contains("data_offsets") || !e["data_offsets"].is_array() || e["data_offsets"].size() != 2 ||
      !e["data_offsets"][0].is_number_unsigned() || !e["data_offsets"][1].is_number_unsigned()) {
    return DataLoss(where + "data_offsets must be [begin, end] of non-negative integers");
  }
  *begin = e["data_offsets"][0].get<uint64_t>();
  *end = e["data_offsets"][1].get<uint64_t>();
  if (*begin > *end) return DataLoss(where + "data_offsets begin > end");
  if (*end > data_size) {
    return DataLoss(where + "data_offsets end " + std::to_string(*end) + " is past the data section (" +
                    std::to_string(data_size) + " bytes); the file is truncated");
  }
  const uint64_t es = dtype_size(*dt);
  if (numel > UINT64_MAX / es || *end - *begin != numel * es) {
    return DataLoss(where + "data_offsets span " + std::to_string(*end - *begin) + " bytes, expected numel * " +
                    std::to_string(es) + " = " + std::to_string(numel * es));
  }
  return Status::Ok();
}

}  // namespace

const Tensor* TensorFile::find(const std::string& name) const {
  auto it = tensors.find(name);
  return it == tensors.end() ? nullptr : &it->second;
}

Status parse_safetensors(const unsigned char* data, std::size_t size, TensorFile* out) {
  *out = TensorFile();
  if (size < 8) return DataLoss("file has " + std::to_string(size) + " bytes, fewer than the 8-byte header length");
  const uint64_t n = read_le64(data);
  if (n > kMaxHeaderBytes) return DataLoss("header length " + std::to_string(n) + " exceeds 100 MiB");
  if (n > size - 8) {
    return DataLoss("header length " + std::to_string(n) + " runs past the end of the file (" + std::to_string(size) +
                    " bytes)");
  }
  json header;
  try {
    header = json::parse(data + 8, data + 8 + n);
  } catch (const json::exception& e) {
    return DataLoss(std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) return DataLoss("header is not a JSON object");
  const unsigned char* section = data + 8 + n;
  const uint64_t data_size = size - 8 - n;
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object()) return DataLoss("__metadata__ must be an object of strings");
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string()) return DataLoss("__metadata__['" + m.key() + "'] is not a string");
        out->metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    DType dt;
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0;
    HANPU_RETURN_IF_ERROR(parse_entry(it.key(), it.value(), data_size, &dt, &shape, &begin, &end));
    Tensor t(dt, shape);
    if (end > begin) std::memcpy(t.bytes.data(), section + begin, end - begin);
    out->tensors.emplace(it.key(), std::move(t));
    spans.emplace_back(begin, end);
  }
  std::sort(spans.begin(), spans.end());
  uint64_t cursor = 0;
  for (const auto& [b, e] : spans) {
    if (b != cursor) {
      return DataLoss(b < cursor ? "tensor data regions overlap at byte " + std::to_string(b)
                                 : "gap in the data section at bytes " + std::to_string(cursor) + ".." +
                                       std::to_string(b));
    }
    cursor = e;
  }
  if (cursor != data_size) {
    return DataLoss("data section has " + std::to_string(data_size - cursor) + " trailing bytes no tensor covers");
  }
  return Status::Ok();
}

Status read_safetensors(const std::string& path, TensorFile* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound("cannot open '" + path + "' for reading");
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return IoError("read of '" + path + "' failed");
  const std::string bytes = ss.str();
  Status s = parse_safetensors(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), out);
  if (!s.ok()) return Status(s.code(), path + ": " + s.message());
  return Status::Ok();
}

std::string serialize_safetensors(const TensorFile& file) {
  // Larger elements first, then by name: with the header padded to 8 bytes every tensor starts at a
  // multiple of its element size, so readers may map the data without copying.
  std::vector<const std::pair<const std::string, Tensor>*> order;
  for (const auto& entry : file.tensors) order.push_back(&entry);
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return dtype_size(a->second.dtype) > dtype_size(b->second.dtype);
  });
  json header = json::object();
  uint64_t offset = 0;
  for (const auto* entry : order) {
    const std::string& name = entry->first;
    const Tensor& t = entry->second;
    const uint64_t nbytes = t.bytes.size();
    header[name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  if (!file.metadata.empty()) header["__metadata__"] = file.metadata;
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out += h;
  for (const auto* entry : order) {
    out.append(reinterpret_cast<const char*>(entry->second.bytes.data()), entry->second.bytes.size());
  }
  return out;
}

Status write_safetensors(const std::string& path, const TensorFile& file) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return IoError("cannot open '" + path + "' for writing");
  const std::string bytes = serialize_safetensors(file);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) return IoError("write of '" + path + "' failed");
  return Status::Ok();
}

}  // namespace hanpu
