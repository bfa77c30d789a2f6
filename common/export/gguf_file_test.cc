#include "common/export/gguf_file.h"

#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/base/files.h"
#include "common/export/gguf_format.h"
#include "common/testing/py_reference.h"
#include "common/testing/scoped_test_dir.h"
#include "common/testing/shell.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_paths.h"
#include "gtest/gtest.h"

namespace windquant::exporter::gguf {
namespace {

using ::windquant::testing::IsOk;
using ::windquant::testing::StatusIs;

// Closed-form blocks: every code of the type's range, decoded by the type's formula.
TEST(GgufFormatTest, BlocksDecodeToTheirFormula) {
  const uint16_t d = HalfBitsOf(0.25f), m = HalfBitsOf(-1.5f);
  int8_t q8[32], q4[32];
  uint8_t n4[32];
  for (int j = 0; j < 32; ++j) {
    q8[j] = static_cast<int8_t>(j * 8 - 128);
    q4[j] = static_cast<int8_t>(j % 16 - 8);
    n4[j] = static_cast<uint8_t>((j * 7) % 16);
  }
  uint8_t b8[34], b40[18], b41[20];
  EncodeQ8_0(d, q8, b8);
  EncodeQ4_0(d, q4, b40);
  EncodeQ4_1(d, m, n4, b41);
  float o8[32], o40[32], o41[32];
  ASSERT_THAT(DecodeRow(TensorType::kQ8_0, b8, 32, o8), IsOk());
  ASSERT_THAT(DecodeRow(TensorType::kQ4_0, b40, 32, o40), IsOk());
  ASSERT_THAT(DecodeRow(TensorType::kQ4_1, b41, 32, o41), IsOk());
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(o8[j], 0.25f * q8[j]) << j;
    EXPECT_EQ(o40[j], 0.25f * q4[j]) << j;
    EXPECT_EQ(o41[j], 0.25f * n4[j] - 1.5f) << j;
  }
  // The nibble layout: byte j holds value j (low) and j + 16 (high).
  EXPECT_EQ(b40[2], static_cast<uint8_t>((q4[0] + 8) | ((q4[16] + 8) << 4)));
  EXPECT_EQ(TypeBits(TensorType::kQ4_0), 4.5);
  EXPECT_EQ(TypeBits(TensorType::kQ8_0), 8.5);
  EXPECT_EQ(TypeBits(TensorType::kQ2_K), 2.625);
  EXPECT_THAT(RowBytes(TensorType::kQ4_0, 48).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "multiple of Q4_0's block of 32"));
  EXPECT_THAT(DecodeRow(TensorType::kQ2_K, {}, 256, o8),
              StatusIs(absl::StatusCode::kInvalidArgument, "Q2_K row of 256 values: 0 bytes"));
}

// The 256-value types, random codes and scales: llama.cpp's own `gguf` package
// (tests/py/gguf_check.py, gguf.quants.dequantize) decodes every tensor bit for bit as
// windquant's decoder does (TQ2_0 too, which the exact export never chooses).
TEST(GgufFileTest, GgufPackageDecodesThe256ValueTypesAsWindquant) {
  testing::ScopedTestDir dir("gguf_file_k");
  Metadata md;
  md.AddString("general.architecture", "llama");
  md.AddU32("llama.vocab_size", 2);
  md.AddStringArray("tokenizer.ggml.tokens", {"a", "b"});
  const TensorType types[4] = {TensorType::kQ2_K, TensorType::kQ3_K, TensorType::kTQ1_0,
                               TensorType::kTQ2_0};
  std::vector<TensorInfo> infos;
  for (TensorType t : types) infos.push_back({TensorTypeName(t), {512, 3}, t});
  auto w = GgufWriter::Open(dir.path() + "/k.gguf", md, infos);
  ASSERT_THAT(w.status(), IsOk());
  std::mt19937 rng(5);
  for (TensorType t : types) {
    std::string bytes(6 * BlockBytes(t), '\0');
    for (int b = 0; b < 6; ++b) {
      uint8_t* out = reinterpret_cast<uint8_t*>(bytes.data()) + b * BlockBytes(t);
      uint8_t scales[16], u[256];
      int8_t q[256];
      for (int j = 0; j < 256; ++j) u[j] = static_cast<uint8_t>(rng() % 4);
      for (int j = 0; j < 256; ++j) q[j] = static_cast<int8_t>(static_cast<int>(rng() % 3) - 1);
      const uint16_t d = HalfBitsOf(0.01f * static_cast<float>(rng() % 100) - 0.4f);
      if (t == TensorType::kQ2_K) {
        for (uint8_t& s : scales) s = static_cast<uint8_t>(rng() & 0xFF);
        EncodeQ2_K(d, HalfBitsOf(0.0625f * (b + 1)), scales, u, out);
      } else if (t == TensorType::kQ3_K) {
        for (uint8_t& s : scales) s = static_cast<uint8_t>(rng() % 64);
        for (int j = 0; j < 256; ++j) q[j] = static_cast<int8_t>(u[j] + q[j] - 1);  // -4..3
        EncodeQ3_K(d, scales, q, out);
      } else if (t == TensorType::kTQ1_0) {
        EncodeTQ1_0(d, q, out);
      } else {
        EncodeTQ2_0(d, q, out);
      }
    }
    ASSERT_THAT((*w)->AppendTensor(TensorTypeName(t), bytes), IsOk());
  }
  ASSERT_THAT((*w)->Finish(), IsOk());
  auto f = GgufFile::Open(dir.path() + "/k.gguf");
  ASSERT_THAT(f.status(), IsOk());
  for (const TensorInfo& t : (*f)->tensors()) {
    auto decoded = (*f)->Decode(t);
    ASSERT_THAT(decoded.status(), IsOk());
    std::ofstream(dir.path() + "/" + t.name + ".decoded.f32", std::ios::binary)
        .write(reinterpret_cast<const char*>(decoded->data()), decoded->size() * 4);
  }
  const testing::CommandOutput r = testing::RunInDir(
      dir.path(), testing::ShellQuote(testing::ReferencePython()) + " " +
                      testing::ShellQuote(testing::SourceDir() + "/tests/py/gguf_check.py") +
                      " k.gguf .");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"bit_equal\": 4"), std::string::npos) << r.out;
}

// A small valid file: two keys, a Q8_0 and an F32 tensor.
std::string WriteSmall(const std::string& path) {
  Metadata md;
  md.AddString("general.architecture", "llama");
  md.AddStringArray("tokenizer.ggml.tokens", {"a", "b"});
  std::vector<TensorInfo> t = {{"w", {32, 2}, TensorType::kQ8_0}, {"n", {3}, TensorType::kF32}};
  auto w = GgufWriter::Open(path, md, t);
  EXPECT_THAT(w.status(), IsOk());
  int8_t codes[32];
  for (int j = 0; j < 32; ++j) codes[j] = static_cast<int8_t>(j - 16);
  std::string q(68, '\0');
  EncodeQ8_0(HalfBitsOf(0.5f), codes, reinterpret_cast<uint8_t*>(q.data()));
  EncodeQ8_0(HalfBitsOf(-2.0f), codes, reinterpret_cast<uint8_t*>(q.data()) + 34);
  EXPECT_THAT((*w)->AppendTensor("w", q), IsOk());
  const float n[3] = {1.0f, -2.0f, 3.5f};
  EXPECT_THAT((*w)->AppendTensor("n", std::string(reinterpret_cast<const char*>(n), 12)), IsOk());
  EXPECT_THAT((*w)->Finish(), IsOk());
  return *base::ReadFile(path);
}

TEST(GgufFileTest, ReadsWhatTheWriterWrote) {
  testing::ScopedTestDir dir("gguf_file");
  const std::string path = dir.path() + "/a.gguf";
  const std::string bytes = WriteSmall(path);
  auto f = GgufFile::Open(path);
  ASSERT_THAT(f.status(), IsOk());
  EXPECT_EQ((*f)->version(), 3u);
  EXPECT_EQ(*(*f)->Text("general.architecture"), "llama");
  EXPECT_EQ((*f)->metadata().at("tokenizer.ggml.tokens").texts,
            (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ((*f)->tensors().size(), 2u);
  EXPECT_EQ((*f)->tensors()[1].offset % kAlignment, 0u);
  auto w = (*f)->Decode(*(*f)->Find("w"));
  ASSERT_THAT(w.status(), IsOk());
  EXPECT_EQ((*w)[0], -8.0f);
  EXPECT_EQ((*w)[32 + 31], -30.0f);
  auto n = (*f)->Decode(*(*f)->Find("n"));
  EXPECT_EQ(*n, (std::vector<float>{1.0f, -2.0f, 3.5f}));
  EXPECT_EQ((*f)->size_bytes(), bytes.size());
}

TEST(GgufFileTest, WriterRefusesUndeclaredTensorsAndBadRows) {
  testing::ScopedTestDir dir("gguf_file");
  Metadata md;
  EXPECT_THAT(
      GgufWriter::Open(dir.path() + "/x.gguf", md, {{"w", {48, 2}, TensorType::kQ4_0}}).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, "tensor w"));
  auto w = GgufWriter::Open(dir.path() + "/y.gguf", md, {{"n", {2}, TensorType::kF32}});
  ASSERT_THAT(w.status(), IsOk());
  EXPECT_THAT((*w)->AppendTensor("m", std::string(8, '\0')),
              StatusIs(absl::StatusCode::kInternal, "declaration has n"));
  EXPECT_THAT((*w)->Finish(), StatusIs(absl::StatusCode::kFailedPrecondition, "never written"));
}

// Every refusal is one line naming the file.
TEST(GgufFileTest, RefusesWhatIsNotAWholeGgufFile) {
  testing::ScopedTestDir dir("gguf_file");
  const std::string good = WriteSmall(dir.path() + "/good.gguf");
  auto write = [&](const std::string& name, const std::string& bytes) {
    const std::string p = dir.path() + "/" + name;
    EXPECT_THAT(base::WriteFileAtomic(p, bytes), IsOk());
    return p;
  };
  const std::string text = write("text.gguf", "hello, not a model\n");
  EXPECT_THAT(GgufFile::Open(text).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, text + ": not a GGUF file"));
  EXPECT_THAT(GgufFile::Open(dir.path() + "/none.gguf").status(),
              StatusIs(absl::StatusCode::kNotFound, "none.gguf"));
  EXPECT_THAT(GgufFile::Open(dir.path()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "not a regular file"));
  std::string v9 = good;
  v9[4] = 9;
  EXPECT_THAT(GgufFile::Open(write("v9.gguf", v9)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "GGUF version 9"));
  // Cut anywhere: in the header, in a key, in the tensor infos, in the data.
  for (size_t cut : {size_t{6}, size_t{30}, size_t{60}, size_t{120}, good.size() - 1}) {
    const std::string p = write("cut.gguf", good.substr(0, cut));
    EXPECT_THAT(GgufFile::Open(p).status(), StatusIs(absl::StatusCode::kDataLoss, "truncated"))
        << "cut at " << cut;
  }
  // An unknown tensor type (the Q8_0 tensor "w" becomes type 99).
  std::string bad_type = good;
  const size_t at = bad_type.find(std::string("\x01\x00\x00\x00\x00\x00\x00\x00w", 9));
  ASSERT_NE(at, std::string::npos);
  const size_t type_at = at + 9 + 4 + 16;  // name, n_dims, two dims
  ASSERT_EQ(static_cast<uint8_t>(bad_type[type_at]), 8);
  bad_type[type_at] = 99;
  EXPECT_THAT(GgufFile::Open(write("type.gguf", bad_type)).status(),
              StatusIs(absl::StatusCode::kDataLoss, "tensor w: unknown type 99"));
}

}  // namespace
}  // namespace windquant::exporter::gguf
