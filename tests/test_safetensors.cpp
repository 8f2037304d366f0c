#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace hanpu {
namespace {

std::string with_header(const std::string& json, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + json + data;
}

Status parse(const std::string& bytes, TensorFile* f) {
  return parse_safetensors(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), f);
}

TEST(Safetensors, RoundTripsEveryDtypeAndMetadata) {
  std::mt19937_64 rng(1);
  TensorFile f;
  f.tensors["a64"] = testing::random_tensor(DType::kF64, {3, 2}, rng);
  f.tensors["b32"] = testing::random_tensor(DType::kF32, {5}, rng);
  f.tensors["c16"] = testing::random_tensor(DType::kF16, {1, 3}, rng);
  f.tensors["dbf"] = testing::random_tensor(DType::kBF16, {7}, rng);
  f.tensors["e64"] = testing::tensor_of(DType::kI64, {4}, {0, -3, 1ll << 40, 9});
  f.tensors["scalar"] = testing::tensor_of(DType::kF32, {}, {2.5});
  f.tensors["empty"] = Tensor(DType::kF32, {0, 4});
  f.metadata["format"] = "pt";
  const std::string path = ::testing::TempDir() + "roundtrip.safetensors";
  ASSERT_TRUE(write_safetensors(path, f).ok());
  TensorFile g;
  ASSERT_TRUE(read_safetensors(path, &g).ok());
  EXPECT_EQ(g.metadata, f.metadata);
  ASSERT_EQ(g.tensors.size(), f.tensors.size());
  for (const auto& [name, t] : f.tensors) {
    const Tensor* u = g.find(name);
    ASSERT_NE(u, nullptr) << name;
    EXPECT_EQ(u->dtype, t.dtype) << name;
    EXPECT_EQ(u->shape, t.shape) << name;
    EXPECT_EQ(u->bytes, t.bytes) << name;
  }
  EXPECT_EQ(to_doubles(g.find("e64")->view())[2], static_cast<double>(1ll << 40));
}

TEST(Safetensors, HeaderIsPaddedAndTensorsAreAlignedToTheirElementSize) {
  TensorFile f;
  f.tensors["a"] = Tensor(DType::kF16, {3});
  f.tensors["b"] = Tensor(DType::kF64, {2});
  f.tensors["c"] = Tensor(DType::kF32, {1});
  const std::string bytes = serialize_safetensors(f);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ(n % 8, 0u);
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(header["b"]["data_offsets"][0], 0);  // F64 first
  EXPECT_EQ(header["c"]["data_offsets"][0], 16);
  EXPECT_EQ(header["a"]["data_offsets"][0], 20);
}

TEST(Safetensors, MalformedFilesAreRejectedWithAReason) {
  TensorFile f;
  const std::string good = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  ASSERT_TRUE(parse(with_header(good, std::string(8, '\0')), &f).ok());
  struct Bad {
    std::string bytes, fragment;
  } cases[] = {
      {"abc", "fewer than the 8-byte header length"},
      {with_header(good, std::string(8, '\0')).substr(0, 30), "runs past the end of the file"},
      {with_header(good, std::string(4, '\0')), "past the data section (4 bytes); the file is truncated"},
      {with_header("{not json", ""), "header is not valid JSON"},
      {with_header("[1,2]", ""), "header is not a JSON object"},
      {with_header(R"({"x":{"dtype":"F8_E5M2","shape":[2],"data_offsets":[0,2]}})", "zz"), "unsupported dtype 'F8_E5M2'"},
      {with_header(R"({"x":{"shape":[2],"data_offsets":[0,8]}})", std::string(8, 0)), "missing string field 'dtype'"},
      {with_header(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", std::string(8, 0)), "non-negative integers"},
      {with_header(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, 0)), "expected numel * 4 = 12"},
      {with_header(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", std::string(8, 0)), "begin > end"},
      {with_header(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", std::string(8, 0)), "data_offsets must be [begin, end]"},
      {with_header(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"y":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})",
                   std::string(8, 0)), "overlap"},
      {with_header(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", std::string(8, 0)), "gap in the data section"},
      {with_header(good, std::string(12, '\0')), "4 trailing bytes"},
      {with_header(R"({"__metadata__":{"k":1}})", ""), "is not a string"},
  };
  for (const Bad& b : cases) {
    const Status s = parse(b.bytes, &f);
    EXPECT_FALSE(s.ok()) << b.fragment;
    EXPECT_NE(s.message().find(b.fragment), std::string::npos) << "message: " << s.message();
  }
  // A header length that is absurdly large does not allocate.
  std::string huge(8, '\xff');
  EXPECT_NE(parse(huge, &f).message().find("exceeds 100 MiB"), std::string::npos);
}

TEST(Safetensors, MissingFileIsNotFound) {
  TensorFile f;
  const Status s = read_safetensors("/nonexistent/x.safetensors", &f);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("/nonexistent/x.safetensors"), std::string::npos);
}

}  // namespace
}  // namespace hanpu
