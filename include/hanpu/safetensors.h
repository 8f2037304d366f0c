// Safetensors reading and writing (https://huggingface.co/docs/safetensors): an 8-byte little-endian
// header length N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {..}},
// then the data section. Every offset and size is validated against the file before anything is read.
#pragma once

#include <map>
#include <string>

#include "hanpu/status.h"
#include "hanpu/tensor.h"

namespace hanpu {

struct TensorFile {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;

  // The named tensor, or nullptr.
  const Tensor* find(const std::string& name) const;
};

// Parses a whole file image. Supported dtypes: F64, F32, F16, BF16, I64.
Status parse_safetensors(const unsigned char* data, std::size_t size, TensorFile* out);
Status read_safetensors(const std::string& path, TensorFile* out);
// Serialises with the header padded with spaces to a multiple of 8 bytes and the tensors ordered by
// element size (largest first), then name, so that each one is aligned to its element size.
std::string serialize_safetensors(const TensorFile& file);
Status write_safetensors(const std::string& path, const TensorFile& file);

}  // namespace hanpu
