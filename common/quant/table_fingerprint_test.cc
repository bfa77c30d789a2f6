#include "common/quant/table_fingerprint.h"

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/quant/quantizer.h"
#include "common/testing/scoped_test_dir.h"
#include "gtest/gtest.h"

namespace windquant::quant {
namespace {

namespace fs = std::filesystem;

// A directory with config.json and one safetensors-shaped file: an 8-byte
// little-endian header length, the header, then `data`.
class ModelDir {
 public:
  explicit ModelDir(const std::string& name) : temp_(name), dir_(temp_.path()) {}
  void Write(const std::string& config, const std::string& header, const std::string& data,
             const std::string& file = "model.safetensors") {
    ASSERT_TRUE(base::WriteFileAtomic(dir_ + "/config.json", config).ok());
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    ASSERT_TRUE(base::WriteFileAtomic(dir_ + "/" + file, bytes + header + data).ok());
  }
  const std::string& dir() const { return dir_; }

 private:
  ::windquant::testing::ScopedTestDir temp_;
  std::string dir_;
};

std::string Data(size_t n, char fill) { return std::string(n, fill); }

TEST(ModelKeyTest, DeterministicAndChangesWithModelAndQuantSettings) {
  ModelDir m("model_key_test");
  const std::string header = R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
  const std::string data = Data(3 * kModelKeySampleBytes, 'a');
  m.Write(R"({"hidden_size":4})", header, data);
  QuantizerOptions q;
  auto base = ModelKey(m.dir(), 64, q);
  ASSERT_TRUE(base.ok()) << base.status();
  EXPECT_EQ(*ModelKey(m.dir(), 64, q), *base);

  EXPECT_NE(*ModelKey(m.dir(), 32, q), *base) << "chunk size";
  QuantizerOptions salient = q;
  salient.salient_fraction = 0.01;
  EXPECT_NE(*ModelKey(m.dir(), 64, salient), *base) << "salient fraction";
  QuantizerOptions clip = q;
  clip.clip_min_ratio += 1e-12;
  EXPECT_NE(*ModelKey(m.dir(), 64, clip), *base) << "every quantizer field, exactly";

  // Same sizes, one weight byte changed (the first data byte is always sampled).
  std::string tuned = data;
  tuned[0] = 'b';
  m.Write(R"({"hidden_size":4})", header, tuned);
  EXPECT_NE(*ModelKey(m.dir(), 64, q), *base) << "weights of the same layout";
  m.Write(R"({"hidden_size":5})", header, data);
  EXPECT_NE(*ModelKey(m.dir(), 64, q), *base) << "config.json";
  m.Write(R"({"hidden_size":4})", R"({"v":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
          data);
  EXPECT_NE(*ModelKey(m.dir(), 64, q), *base) << "tensor names in the header";
  m.Write(R"({"hidden_size":4})", header, data);
  EXPECT_EQ(*ModelKey(m.dir(), 64, q), *base) << "back to the original";
}

TEST(ModelKeyTest, ErrorsNameTheFile) {
  ModelDir m("model_key_errors_test");
  QuantizerOptions q;
  absl::StatusOr<std::string> none = ModelKey(m.dir(), 64, q);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("config.json"), std::string::npos) << none.status();

  ASSERT_TRUE(base::WriteFileAtomic(m.dir() + "/config.json", "{}").ok());
  absl::StatusOr<std::string> no_tensors = ModelKey(m.dir(), 64, q);
  EXPECT_EQ(no_tensors.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(no_tensors.status().message().find("no *.safetensors"), std::string::npos);

  // A header length past the end of the file.
  std::string bytes(8, '\0');
  bytes[0] = 100;
  ASSERT_TRUE(base::WriteFileAtomic(m.dir() + "/bad.safetensors", bytes + "{}").ok());
  absl::StatusOr<std::string> bad = ModelKey(m.dir(), 64, q);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("bad.safetensors"), std::string::npos) << bad.status();
}

TEST(CalibrationKeyTest, ChangesWithEveryInput) {
  const std::vector<int32_t> ids = {5, 6, 7, 8};
  const std::string base = CalibrationKey(8, 128, 0, ids);
  EXPECT_EQ(CalibrationKey(8, 128, 0, ids), base);
  EXPECT_NE(CalibrationKey(9, 128, 0, ids), base);
  EXPECT_NE(CalibrationKey(8, 64, 0, ids), base);
  EXPECT_NE(CalibrationKey(8, 128, 1, ids), base);
  EXPECT_NE(CalibrationKey(8, 128, 0, {5, 6, 7, 9}), base);
  EXPECT_EQ(base.size(), 64u);
}

TEST(TableFingerprintTest, CombinesBothKeys) {
  const std::string fp = TableFingerprint("model", "calib");
  EXPECT_EQ(fp, base::Sha256Hex("model\ncalib"));
  EXPECT_NE(TableFingerprint("model", "calib2"), fp);
  EXPECT_NE(TableFingerprint("model2", "calib"), fp);
}

}  // namespace
}  // namespace windquant::quant
