// safetensors files: the writer and reader round trip, dtype conversions,
// sharded folders, and every bad input as one error naming file and tensor.
#include "data/safetensors.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "tests/common/test_util.hpp"

namespace meshloom::data {
namespace {

using test::TempDir;
using test::write_file;

// A file of header `json` (the size prefix added) and `buffer`.
std::string st_bytes(const std::string& json, const std::string& buffer) {
  std::string out(8, '\0');
  for (int k = 0; k < 8; ++k) out[k] = char(uint64_t(json.size()) >> (8 * k));
  return out + json + buffer;
}

std::string parse_error(const std::string& bytes) {
  try {
    parse_safetensors("x.safetensors", bytes);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Safetensors, RoundTripF32AndBf16) {
  TempDir dir;
  const std::vector<float> a = {1.0f, -2.5f, 3.14159f, 1e-30f, -0.0f, 65504.0f};
  const std::vector<float> b = {0.1f, 0.2f};
  for (const StDtype dtype : {StDtype::F32, StDtype::BF16}) {
    const std::string path = dir.file(std::string(st_dtype_name(dtype)) + ".safetensors");
    write_safetensors(path,
                      {{"a", {2, 3}, a.data()}, {"b.w", {2}, b.data()}, {"e", {0, 4}, b.data()}},
                      dtype, {{"format", "pt"}});
    const SafetensorsFile f(path);
    ASSERT_EQ(f.tensors().size(), 3u);
    EXPECT_EQ(f.metadata().at("format"), "pt");
    EXPECT_EQ(f.find("a")->shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(f.find("a")->dtype, dtype);
    EXPECT_EQ(f.find("e")->numel(), 0);
    EXPECT_EQ(f.find("zz"), nullptr);
    const std::vector<float> got = f.read("a");
    for (size_t i = 0; i < a.size(); ++i) {
      const float want = dtype == StDtype::F32 ? a[i] : bf16_to_float(float_to_bf16(a[i]));
      EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want)) << i;
    }
    EXPECT_TRUE(f.read("e").empty());
  }
}

// The writer's files as an independent numpy reader sees them.
TEST(Safetensors, WriterMatchesPythonReader) {
  if (std::system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0)
    GTEST_SKIP() << "needs /usr/bin/python3 with numpy";
  TempDir dir;
  std::vector<float> a(300), b(7);
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = std::sin(float(i) * 0.37f) * std::ldexp(1.0f, int(i % 40) - 20);
  for (size_t i = 0; i < b.size(); ++i) b[i] = 1.0f + float(i) * std::ldexp(1.0f, -8);  // ties
  const std::vector<StWriteTensor> ts = {{"w.a", {10, 30}, a.data()}, {"b", {7}, b.data()}};
  write_safetensors(dir.file("f32.safetensors"), ts, StDtype::F32, {{"format", "pt"}});
  write_safetensors(dir.file("bf16.safetensors"), ts, StDtype::BF16);
  const std::string cmd = "/usr/bin/python3 " MESHLOOM_SOURCE_DIR
                          "/tests/data/check_safetensors.py " +
                          dir.file("f32.safetensors") + " " + dir.file("bf16.safetensors");
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST(Safetensors, Conversions) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  // Round to nearest even: 1 + 2^-8 is halfway, rounds down to 1.
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  EXPECT_EQ(bf16_to_float(0xc000), -2.0f);
  EXPECT_EQ(f16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_float(0xc000), -2.0f);
  EXPECT_EQ(f16_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_float(0x03ff), 1023 * std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(f16_to_float(0x7c00)));
  EXPECT_TRUE(std::isnan(f16_to_float(0x7e00)));
  EXPECT_TRUE(std::signbit(f16_to_float(0x8000)));
}

TEST(Safetensors, F16Reads) {
  const std::string buf = std::string("\x00\x3c\x00\xc0", 4);
  const StHeader h = parse_safetensors(
      "x", st_bytes(R"({"t":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", buf));
  ASSERT_EQ(h.tensors.size(), 1u);
  TempDir dir;
  write_file(dir.file("h.safetensors"),
             st_bytes(R"({"t":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", buf));
  EXPECT_EQ(SafetensorsFile(dir.file("h.safetensors")).read("t"),
            (std::vector<float>{1.0f, -2.0f}));
}

TEST(Safetensors, BadHeadersNameFileAndTensor) {
  const std::string ok_entry = R"("dtype":"F32","shape":[2],"data_offsets":[0,8])";
  auto expect = [](const std::string& bytes, const std::string& want) {
    const std::string msg = parse_error(bytes);
    EXPECT_NE(msg.find("x.safetensors: "), std::string::npos) << msg;
    EXPECT_NE(msg.find(want), std::string::npos) << "want '" << want << "' in: " << msg;
  };
  expect("abc", "truncated: 3 bytes");
  expect(st_bytes("{}", "").substr(0, 9), "truncated: header size 2");
  std::string huge(8, '\xff');
  expect(huge + "{}", "over the 100000000-byte limit");
  expect(st_bytes("[1,2]", ""), "header is not a JSON object");
  expect(st_bytes("{\"a\":", ""), "header is not a JSON object");
  expect(st_bytes(R"({"w":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", std::string(8, 'x')),
         "tensor 'w': unsupported dtype 'I64'");
  expect(st_bytes(R"({"w":{)" + ok_entry + "}}", std::string(4, 'x')),
         "tensor 'w': data_offsets end 8 is past the data buffer (4 bytes)");
  expect(
      st_bytes(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(12, 'x')),
      "tensor 'w': data_offsets span 8 bytes but shape x dtype needs 12");
  expect(st_bytes(
             R"({"w":{)" + ok_entry + R"(},"v":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
             std::string(12, 'x')),
         "overlaps");
  expect(st_bytes(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", ""),
         "tensor 'w': a \"shape\" dimension is not a count");
  expect(
      st_bytes(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", ""),
      "tensor 'w': shape too large");
  expect(st_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", ""),
         "tensor 'w': \"data_offsets\" are not 0 <= begin <= end");
  expect(st_bytes(R"({"w":{"dtype":"F32","shape":[2]}})", ""),
         "tensor 'w': \"data_offsets\" is not [begin, end]");
  expect(st_bytes(R"({"w":3})", ""), "tensor 'w': entry is not an object");
  expect(st_bytes(R"({"__metadata__":{"k":1}})", ""), "\"__metadata__\" key 'k' is not a string");
}

TEST(Safetensors, ShardedFolder) {
  TempDir dir;
  const std::vector<float> a = {1, 2, 3, 4}, b = {5, 6};
  write_safetensors(dir.file("s1.safetensors"), {{"a", {2, 2}, a.data()}}, StDtype::BF16);
  write_safetensors(dir.file("s2.safetensors"), {{"b", {2}, b.data()}}, StDtype::F32);
  const std::string index = dir.file("model.safetensors.index.json");
  write_file(index, R"({"metadata":{},"weight_map":{"a":"s1.safetensors","b":"s2.safetensors"}})");
  const SafetensorsCheckpoint ckpt(dir.path());
  EXPECT_EQ(ckpt.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ckpt.read("a"), a);
  EXPECT_EQ(ckpt.read("b"), b);
  EXPECT_EQ(ckpt.file_of("b"), dir.file("s2.safetensors"));

  auto error = [&](const std::string& json) -> std::string {
    write_file(index, json);
    try {
      SafetensorsCheckpoint c(dir.path());
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(error(R"({"weight_map":{"a":"s9.safetensors"}})")
                .find(index + ": weight_map: tensor 'a': shard file '" +
                      dir.file("s9.safetensors") + "' is missing"),
            std::string::npos);
  EXPECT_NE(error(R"({"weight_map":{"b":"s1.safetensors"}})")
                .find(index + ": weight_map: tensor 'b' is not in its shard"),
            std::string::npos);
  EXPECT_NE(error(R"({"weight_map":{"a":"../s1.safetensors"}})").find("is not a file name"),
            std::string::npos);
  EXPECT_NE(error(R"({"weight":{}})").find(index + ": no object \"weight_map\""),
            std::string::npos);
  EXPECT_NE(error("{").find(index + ": not a JSON object"), std::string::npos);

  // A lone file in the folder, or none.
  std::filesystem::remove(index);
  std::filesystem::rename(dir.file("s1.safetensors"), dir.file("model.safetensors"));
  EXPECT_EQ(SafetensorsCheckpoint(dir.path()).read("a"), a);
  std::filesystem::remove(dir.file("model.safetensors"));
  try {
    SafetensorsCheckpoint c(dir.path());
    ADD_FAILURE() << "no error for an empty folder";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no model.safetensors.index.json or model.safetensors"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace meshloom::data
