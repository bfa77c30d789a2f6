// Bad model folders: FIFOs and symlink loops instead of files, config.json
// values the tensors contradict, architectures windquant does not implement,
// NaN/Inf weights. Each case asserts the status code and the culprit (file,
// key or tensor) named in a one-line message; nothing throws or blocks.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/model/checkpoint.h"
#include "common/model/llama_model.h"
#include "common/model/perplexity.h"
#include "common/model/safetensors_writer.h"
#include "common/testing/status_matchers.h"

namespace windquant::model {
namespace {

using ::testing::HasSubstr;
using ::windquant::testing::StatusIs;

LlamaConfig TinyConfig() {
  LlamaConfig c;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 4;
  c.vocab_size = 32;
  c.tie_word_embeddings = true;
  c.torch_dtype = "float32";
  return c;
}

std::map<std::string, at::Tensor> Weights(const LlamaConfig& c) {
  at::manual_seed(7);
  const int64_t h = c.hidden_size, q = c.num_attention_heads * c.head_dim,
                kv = c.num_key_value_heads * c.head_dim, in = c.intermediate_size;
  const std::vector<std::vector<int64_t>> shapes = {{q, h},  {kv, h}, {kv, h}, {h, q},
                                                    {in, h}, {in, h}, {h, in}};
  std::map<std::string, at::Tensor> t;
  t["model.embed_tokens.weight"] = at::randn({c.vocab_size, h});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    for (int m = 0; m < kNumMatrices; ++m) {
      t[LinearTensorName(l, static_cast<Matrix>(m))] = at::randn(shapes[m]);
    }
    t[absl::StrCat("model.layers.", l, ".input_layernorm.weight")] = at::ones({h});
    t[absl::StrCat("model.layers.", l, ".post_attention_layernorm.weight")] = at::ones({h});
  }
  t["model.norm.weight"] = at::ones({h});
  return t;
}

class ModelFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/wq_model_folder_test";
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void WriteModel(const std::string& config_json, std::map<std::string, at::Tensor> weights) {
    ASSERT_TRUE(base::WriteFileAtomic(dir_ + "/config.json", config_json).ok());
    SafetensorsWriter w;
    for (const auto& [name, t] : weights) ASSERT_TRUE(w.Add(name, t, Dtype::kF32).ok());
    ASSERT_TRUE(w.Write(dir_ + "/model.safetensors").ok());
  }
  void WriteModel() { WriteModel(TinyConfig().ToJson(), Weights(TinyConfig())); }
  // config.json with `key` set to `value` (JSON text).
  std::string ConfigWith(const std::string& key, const std::string& value) {
    nlohmann::json j = nlohmann::json::parse(TinyConfig().ToJson());
    j[key] = nlohmann::json::parse(value);
    return j.dump();
  }
  // The error of opening and loading the whole model; OK when both work.
  absl::Status OpenAndLoad() {
    absl::StatusOr<std::unique_ptr<Checkpoint>> ckpt = Checkpoint::Open(dir_);
    if (!ckpt.ok()) return ckpt.status();
    return (*ckpt)->LoadWeights(LoadRequest{}).status();
  }
  static void ExpectOneLine(const absl::Status& s) {
    EXPECT_EQ(std::string(s.message()).find('\n'), std::string::npos) << s;
  }

  std::string dir_;
};

TEST_F(ModelFolderTest, TheValidFolderLoads) {
  WriteModel();
  EXPECT_TRUE(OpenAndLoad().ok());
}

// error-case: model.weights-fifo
TEST_F(ModelFolderTest, FifoAsModelFileIsRefusedWithoutBlocking) {
  WriteModel();
  std::filesystem::remove(dir_ + "/model.safetensors");
  ASSERT_EQ(::mkfifo((dir_ + "/model.safetensors").c_str(), 0644), 0);
  absl::Status s = OpenAndLoad();
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                          dir_ + "/model.safetensors: not a regular file"));
  ExpectOneLine(s);
}

// error-case: model.config-fifo
TEST_F(ModelFolderTest, FifoAsConfigIsRefusedWithoutBlocking) {
  WriteModel();
  std::filesystem::remove(dir_ + "/config.json");
  ASSERT_EQ(::mkfifo((dir_ + "/config.json").c_str(), 0644), 0);
  EXPECT_THAT(OpenAndLoad(), StatusIs(absl::StatusCode::kInvalidArgument,
                                      dir_ + "/config.json: is a FIFO, not a regular file"));
}

// error-case: model.weights-symlink-loop
TEST_F(ModelFolderTest, SymlinkLoopAsModelFileIsNamed) {
  WriteModel();
  std::filesystem::remove(dir_ + "/model.safetensors");
  ASSERT_EQ(::symlink("model.safetensors", (dir_ + "/model.safetensors").c_str()), 0);
  EXPECT_THAT(OpenAndLoad(), StatusIs(absl::StatusCode::kInvalidArgument,
                                      dir_ + "/model.safetensors: symlink loop"));
}

// error-case: model.config-symlink-loop
TEST_F(ModelFolderTest, SymlinkLoopAsConfigIsNamed) {
  WriteModel();
  std::filesystem::remove(dir_ + "/config.json");
  ASSERT_EQ(::symlink("config.json", (dir_ + "/config.json").c_str()), 0);
  EXPECT_THAT(OpenAndLoad(),
              StatusIs(absl::StatusCode::kInvalidArgument, dir_ + "/config.json: symlink loop"));
}

// error-case: model.index-symlink-loop
TEST_F(ModelFolderTest, SymlinkLoopAsShardIndexIsNamed) {
  WriteModel();
  ASSERT_EQ(
      ::symlink("model.safetensors.index.json", (dir_ + "/model.safetensors.index.json").c_str()),
      0);
  EXPECT_THAT(OpenAndLoad(), StatusIs(absl::StatusCode::kInvalidArgument,
                                      dir_ + "/model.safetensors.index.json: symlink loop"));
}

// error-case: model.config-fewer-layers
TEST_F(ModelFolderTest, FewerLayersInConfigThanInTheCheckpointIsRefused) {
  WriteModel(ConfigWith("num_hidden_layers", "2"), Weights(TinyConfig()));
  absl::Status s = OpenAndLoad();
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                          "config.json: num_hidden_layers: 2, the checkpoint's tensors hold 3"));
  ExpectOneLine(s);
}

// error-case: model.config-more-layers
TEST_F(ModelFolderTest, MoreLayersInConfigThanInTheCheckpointIsRefused) {
  WriteModel(ConfigWith("num_hidden_layers", "5"), Weights(TinyConfig()));
  EXPECT_THAT(OpenAndLoad(), StatusIs(absl::StatusCode::kInvalidArgument,
                                      "num_hidden_layers: 5, the checkpoint's tensors hold 3"));
}

// error-case: model.config-hidden-size
TEST_F(ModelFolderTest, HiddenSizeTheTensorsContradictIsRefused) {
  WriteModel(ConfigWith("hidden_size", "32"), Weights(TinyConfig()));
  absl::Status s = OpenAndLoad();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("disagrees with the expected"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("model.safetensors: tensor "));
}

// error-case: model.config-hidden-act
TEST_F(ModelFolderTest, HiddenActOtherThanSiluIsRefused) {
  WriteModel(ConfigWith("hidden_act", "\"gelu\""), Weights(TinyConfig()));
  EXPECT_THAT(OpenAndLoad(), StatusIs(absl::StatusCode::kInvalidArgument,
                                      "config.json: hidden_act: unsupported \"gelu\""));
}

// error-case: model.config-model-type
TEST_F(ModelFolderTest, ModelTypeOtherThanLlamaIsRefused) {
  WriteModel(ConfigWith("model_type", "\"gpt2\""), Weights(TinyConfig()));
  EXPECT_THAT(OpenAndLoad(), StatusIs(absl::StatusCode::kInvalidArgument,
                                      "config.json: model_type: unsupported \"gpt2\""));
}

// error-case: model.config-non-finite
TEST_F(ModelFolderTest, NonFiniteConfigNumberIsRefused) {
  // JSON has no Inf; a number past the double range is how one is written.
  std::string text = ConfigWith("rms_norm_eps", "1.0");
  const size_t at = text.find("\"rms_norm_eps\":1.0");
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, 19, "\"rms_norm_eps\":1e999");
  WriteModel(text, Weights(TinyConfig()));
  absl::Status s = OpenAndLoad();
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument, "config.json: invalid JSON"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("1e999"));
  ExpectOneLine(s);
}

// error-case: model.weights-nan
TEST_F(ModelFolderTest, NanWeightIsRefusedNamingTheTensor) {
  auto w = Weights(TinyConfig());
  const std::string name = LinearTensorName(1, Matrix::kUp);
  w[name][3][5] = std::nan("");
  WriteModel(TinyConfig().ToJson(), w);
  absl::Status s = OpenAndLoad();
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                          absl::StrCat("tensor ", name, ": contains NaN or Inf values")));
  ExpectOneLine(s);
}

// error-case: model.weights-inf
TEST_F(ModelFolderTest, InfWeightIsRefusedNamingTheTensor) {
  auto w = Weights(TinyConfig());
  w["model.norm.weight"][0] = -INFINITY;
  WriteModel(TinyConfig().ToJson(), w);
  EXPECT_THAT(OpenAndLoad(), StatusIs(absl::StatusCode::kInvalidArgument,
                                      "tensor model.norm.weight: contains NaN or Inf values"));
}

// error-case: model.perplexity-non-finite
TEST_F(ModelFolderTest, NonFinitePerplexityIsAnErrorNotNull) {
  WriteModel();
  auto ckpt = Checkpoint::Open(dir_);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto weights = (*ckpt)->LoadWeights(LoadRequest{});
  ASSERT_TRUE(weights.ok()) << weights.status();
  weights->final_norm.fill_(1e38f);  // finite weights whose logits overflow to Inf
  LlamaModel model(*std::move(weights));
  std::vector<int32_t> ids(64);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(3 + i % 20);
  PerplexityOptions o;
  o.context = 16;
  o.batch_size = 2;
  auto r = ComputePerplexity(model, ids, o);
  EXPECT_THAT(r.status(), StatusIs(absl::StatusCode::kInvalidArgument, "perplexity: not finite"));
}

}  // namespace
}  // namespace windquant::model
