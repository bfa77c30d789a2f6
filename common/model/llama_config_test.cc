#include "common/model/llama_config.h"

#include <cstdlib>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/base/files.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_paths.h"

namespace windquant::model {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::windquant::testing::StatusIs;

// A LLaMA-3.2-1B-like config.json.
nlohmann::json Llama3Json() {
  return nlohmann::json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64,
    "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "tie_word_embeddings": true, "vocab_size": 128256, "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009], "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16"})");
}

std::string ErrorOf(const nlohmann::json& j) {
  auto c = LlamaConfig::FromJson(j.dump(), "/m/config.json");
  return c.ok() ? "OK" : std::string(c.status().message());
}

TEST(LlamaConfigTest, ParsesLlama3WithRopeScalingAndEosList) {
  auto c = LlamaConfig::FromJson(Llama3Json().dump(), "/m/config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->hidden_size, 2048);
  EXPECT_EQ(c->intermediate_size, 8192);
  EXPECT_EQ(c->num_hidden_layers, 16);
  EXPECT_EQ(c->num_attention_heads, 32);
  EXPECT_EQ(c->num_key_value_heads, 8);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c->rope_theta, 500000.0);
  ASSERT_TRUE(c->rope_scaling.has_value());
  EXPECT_EQ(c->rope_scaling->rope_type, "llama3");
  EXPECT_DOUBLE_EQ(c->rope_scaling->factor, 32.0);
  EXPECT_DOUBLE_EQ(c->rope_scaling->low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c->rope_scaling->high_freq_factor, 4.0);
  EXPECT_EQ(c->rope_scaling->original_max_position_embeddings, 8192);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->vocab_size, 128256);
  EXPECT_EQ(c->bos_token_id, 128000);
  EXPECT_THAT(c->eos_token_ids, ElementsAre(128001, 128008, 128009));
  EXPECT_EQ(c->max_position_embeddings, 131072);
  EXPECT_EQ(c->torch_dtype, "bfloat16");
}

TEST(LlamaConfigTest, DefaultsKvHeadsHeadDimAndNullRopeScaling) {
  nlohmann::json j = Llama3Json();
  j.erase("num_key_value_heads");
  j.erase("head_dim");
  j["rope_scaling"] = nullptr;
  j["eos_token_id"] = 7;
  j.erase("tie_word_embeddings");
  auto c = LlamaConfig::FromJson(j.dump(), "x");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_key_value_heads, 32);
  EXPECT_EQ(c->head_dim, 2048 / 32);
  EXPECT_FALSE(c->rope_scaling.has_value());
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_THAT(c->eos_token_ids, ElementsAre(7));
}

TEST(LlamaConfigTest, ToJsonRoundTrips) {
  auto c = LlamaConfig::FromJson(Llama3Json().dump(), "x");
  ASSERT_TRUE(c.ok());
  auto back = LlamaConfig::FromJson(c->ToJson(), "y");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ToJson(), c->ToJson());
  EXPECT_EQ(back->head_dim, 64);
  EXPECT_THAT(back->eos_token_ids, ElementsAre(128001, 128008, 128009));
  ASSERT_TRUE(back->rope_scaling.has_value());
  EXPECT_DOUBLE_EQ(back->rope_scaling->factor, 32.0);
  c->rope_scaling.reset();
  c->eos_token_ids = {2};
  auto plain = LlamaConfig::FromJson(c->ToJson(), "z");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->rope_scaling.has_value());
  EXPECT_THAT(plain->eos_token_ids, ElementsAre(2));
}

TEST(LlamaConfigTest, InvalidJsonIsOneLineNamingFile) {
  auto c = LlamaConfig::FromJson("{\"hidden_size\": 64,", "/m/config.json");
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument, "/m/config.json: invalid JSON"));
  std::string m(c.status().message());
  EXPECT_THAT(m, HasSubstr("/m/config.json: invalid JSON"));
  EXPECT_EQ(m.find('\n'), std::string::npos);
  EXPECT_THAT(ErrorOf(nlohmann::json::array()),
              HasSubstr("/m/config.json: expected a JSON object"));
}

TEST(LlamaConfigTest, MissingRequiredKeyNamesIt) {
  for (const char* key : {"hidden_size", "intermediate_size", "num_hidden_layers",
                          "num_attention_heads", "vocab_size", "rms_norm_eps"}) {
    nlohmann::json j = Llama3Json();
    j.erase(key);
    EXPECT_EQ(ErrorOf(j), std::string("/m/config.json: ") + key + ": missing required key");
  }
}

TEST(LlamaConfigTest, WrongTypesNameTheKey) {
  nlohmann::json j = Llama3Json();
  j["hidden_size"] = "2048";
  EXPECT_THAT(ErrorOf(j),
              HasSubstr("/m/config.json: hidden_size: expected an integer, got \"2048\""));
  j = Llama3Json();
  j["hidden_size"] = 64.5;
  EXPECT_THAT(ErrorOf(j), HasSubstr("hidden_size: expected an integer"));
  j = Llama3Json();
  j["tie_word_embeddings"] = 1;
  EXPECT_THAT(ErrorOf(j), HasSubstr("/m/config.json: tie_word_embeddings: expected true or false"));
  j = Llama3Json();
  j["rope_theta"] = "big";
  EXPECT_THAT(ErrorOf(j), HasSubstr("/m/config.json: rope_theta: expected a number"));
  j = Llama3Json();
  j["eos_token_id"] = {1, "x"};
  EXPECT_THAT(ErrorOf(j), HasSubstr("/m/config.json: eos_token_id: expected an integer"));
  j = Llama3Json();
  j["num_hidden_layers"] = 0;
  EXPECT_THAT(ErrorOf(j), HasSubstr("num_hidden_layers: must be >= 1, got 0"));
  j = Llama3Json();
  j["num_key_value_heads"] = 5;
  EXPECT_THAT(ErrorOf(j), HasSubstr("num_key_value_heads: 5 does not divide"));
  j = Llama3Json();
  j["torch_dtype"] = 3;
  EXPECT_THAT(ErrorOf(j), HasSubstr("torch_dtype: expected a string"));
  j = Llama3Json();
  j["rope_scaling"] = 2;
  EXPECT_THAT(ErrorOf(j), HasSubstr("rope_scaling: expected an object or null"));
}

TEST(LlamaConfigTest, RopeScalingErrors) {
  nlohmann::json j = Llama3Json();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_THAT(ErrorOf(j),
              HasSubstr("/m/config.json: rope_scaling.rope_type: unsupported rope type \"yarn\""));
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  EXPECT_THAT(ErrorOf(j), HasSubstr("rope_scaling.type: unsupported rope type \"linear\""));
  j = Llama3Json();
  j["rope_scaling"].erase("low_freq_factor");
  EXPECT_EQ(ErrorOf(j), "/m/config.json: rope_scaling.low_freq_factor: missing required key");
  j = Llama3Json();
  j["rope_scaling"]["factor"] = "x";
  EXPECT_THAT(ErrorOf(j), HasSubstr("rope_scaling.factor: expected a number"));
  j["rope_scaling"] = {{"rope_type", "default"}};
  auto c = LlamaConfig::FromJson(j.dump(), "x");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->rope_scaling.has_value());
}

TEST(LlamaConfigTest, FromDirectoryErrorsNameThePath) {
  const std::string dir = ::testing::TempDir() + "/llama_config_test_dir";
  ASSERT_TRUE(base::WriteFileAtomic(dir + "/config.json", "{\"hidden_size\": true}").ok());
  auto c = LlamaConfig::FromDirectory(dir);
  ASSERT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(std::string(c.status().message()),
            dir + "/config.json: hidden_size: expected an integer, got true");
  EXPECT_THAT(LlamaConfig::FromDirectory(dir + "/nope"),
              StatusIs(absl::StatusCode::kNotFound, dir + "/nope/config.json"));
}

// The real test model (stories260k, or the project's default model on a fresh
// clone): every field agrees with config.json read as plain JSON, and
// stories260k's known shape is checked exactly.
TEST(LlamaConfigTest, RealModel) {
  const testing::TestModel m = testing::RealModel();
  auto c = LlamaConfig::FromDirectory(m.dir);
  ASSERT_TRUE(c.ok()) << c.status();
  auto text = base::ReadFile(m.dir + "/config.json");
  ASSERT_TRUE(text.ok()) << text.status();
  const nlohmann::json j = nlohmann::json::parse(*text);
  EXPECT_EQ(c->hidden_size, j.at("hidden_size").get<int64_t>());
  EXPECT_EQ(c->intermediate_size, j.at("intermediate_size").get<int64_t>());
  EXPECT_EQ(c->num_hidden_layers, j.at("num_hidden_layers").get<int64_t>());
  EXPECT_EQ(c->num_attention_heads, j.at("num_attention_heads").get<int64_t>());
  EXPECT_EQ(c->num_key_value_heads,
            j.value("num_key_value_heads", j.at("num_attention_heads").get<int64_t>()));
  EXPECT_EQ(c->head_dim, j.value("head_dim", c->hidden_size / c->num_attention_heads));
  EXPECT_EQ(c->vocab_size, j.at("vocab_size").get<int64_t>());
  EXPECT_EQ(c->tie_word_embeddings, j.value("tie_word_embeddings", false));
  EXPECT_EQ(c->rope_scaling.has_value(),
            j.contains("rope_scaling") && !j["rope_scaling"].is_null());
  if (m.stories260k) {
    EXPECT_EQ(c->hidden_size, 64);
    EXPECT_EQ(c->intermediate_size, 172);
    EXPECT_EQ(c->num_hidden_layers, 5);
    EXPECT_EQ(c->num_attention_heads, 8);
    EXPECT_EQ(c->num_key_value_heads, 4);
    EXPECT_EQ(c->head_dim, 8);
    EXPECT_EQ(c->vocab_size, 512);
    EXPECT_TRUE(c->tie_word_embeddings);
    EXPECT_FALSE(c->rope_scaling.has_value());
    EXPECT_THAT(c->eos_token_ids, ElementsAre(2));
    EXPECT_EQ(c->torch_dtype, "float32");
  } else {
    // The shape `scripts/default-model.sh --small` asks `windquant pretrain` for.
    EXPECT_EQ(c->hidden_size, 128);
    EXPECT_EQ(c->num_hidden_layers, 4);
    EXPECT_EQ(c->num_attention_heads, 4);
    EXPECT_EQ(c->num_key_value_heads, 2);
    EXPECT_EQ(c->vocab_size, 2048);
  }
}

}  // namespace
}  // namespace windquant::model
