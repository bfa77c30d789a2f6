#include "common/model/checkpoint.h"

#include <cstdlib>
#include <map>
#include <string>

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/model/safetensors_writer.h"
#include "common/testing/scoped_test_dir.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_paths.h"

namespace windquant::model {
namespace {

using ::windquant::testing::StatusIs;

using ::testing::HasSubstr;
using TensorMap = std::map<std::string, at::Tensor>;

LlamaConfig TinyConfig(bool tied) {
  LlamaConfig c;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 4;
  c.vocab_size = 32;
  c.tie_word_embeddings = tied;
  c.eos_token_ids = {2};
  c.torch_dtype = "float32";
  return c;
}

// Random weights in Hugging Face names and shapes.
TensorMap RandomWeights(const LlamaConfig& c, uint64_t seed) {
  at::manual_seed(seed);
  const int64_t h = c.hidden_size, q = c.num_attention_heads * c.head_dim,
                kv = c.num_key_value_heads * c.head_dim, in = c.intermediate_size;
  const std::vector<std::vector<int64_t>> shapes = {{q, h},  {kv, h}, {kv, h}, {h, q},
                                                    {in, h}, {in, h}, {h, in}};
  TensorMap t;
  t["model.embed_tokens.weight"] = at::randn({c.vocab_size, h});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    for (int m = 0; m < kNumMatrices; ++m) {
      t[LinearTensorName(l, static_cast<Matrix>(m))] = at::randn(shapes[m]);
    }
    t[absl::StrCat("model.layers.", l, ".input_layernorm.weight")] = at::rand({h}) + 0.5;
    t[absl::StrCat("model.layers.", l, ".post_attention_layernorm.weight")] = at::rand({h}) + 0.5;
  }
  t["model.norm.weight"] = at::rand({h}) + 0.5;
  if (!c.tie_word_embeddings) t["lm_head.weight"] = at::randn({c.vocab_size, h});
  return t;
}

const char* TorchDtype(Dtype d) {
  return d == Dtype::kF16 ? "float16" : d == Dtype::kBF16 ? "bfloat16" : "float32";
}

// Writes config.json and the weights, in one file or `shards` shards + index.
void WriteCheckpoint(const std::string& dir, LlamaConfig c, const TensorMap& weights, Dtype dtype,
                     int shards = 1) {
  c.torch_dtype = TorchDtype(dtype);
  ASSERT_TRUE(base::WriteFileAtomic(dir + "/config.json", c.ToJson()).ok());
  if (shards == 1) {
    SafetensorsWriter w;
    for (const auto& [name, t] : weights) ASSERT_TRUE(w.Add(name, t, dtype).ok());
    ASSERT_TRUE(w.Write(dir + "/model.safetensors").ok());
    return;
  }
  std::vector<SafetensorsWriter> writers(shards);
  nlohmann::json index = {{"metadata", {{"total_size", 0}}},
                          {"weight_map", nlohmann::json::object()}};
  int i = 0;
  for (const auto& [name, t] : weights) {
    const int s = i++ % shards;
    ASSERT_TRUE(writers[s].Add(name, t, dtype).ok());
    index["weight_map"][name] =
        absl::StrCat("model-0000", s + 1, "-of-0000", shards, ".safetensors");
  }
  for (int s = 0; s < shards; ++s) {
    ASSERT_TRUE(
        writers[s]
            .Write(absl::StrCat(dir, "/model-0000", s + 1, "-of-0000", shards, ".safetensors"))
            .ok());
  }
  ASSERT_TRUE(base::WriteFileAtomic(dir + "/model.safetensors.index.json", index.dump(2)).ok());
}

// Every tensor of `w` against `expected` after rounding through `dtype`.
void ExpectWeightsEqual(const LlamaWeights& w, const TensorMap& expected, Dtype dtype) {
  auto round = [&](const at::Tensor& t) {
    if (dtype == Dtype::kF16) return t.to(at::kHalf).to(at::kFloat);
    if (dtype == Dtype::kBF16) return t.to(at::kBFloat16).to(at::kFloat);
    return t;
  };
  // Tensors stay in their stored dtype (2 bytes per weight for F16 / BF16).
  const at::ScalarType stored = dtype == Dtype::kF16    ? at::kHalf
                                : dtype == Dtype::kBF16 ? at::kBFloat16
                                                        : at::kFloat;
  auto check = [&](const at::Tensor& got, const std::string& name) {
    ASSERT_TRUE(got.defined()) << name;
    EXPECT_EQ(got.scalar_type(), stored) << name;
    EXPECT_TRUE(at::equal(got.to(at::kFloat), round(expected.at(name)))) << name;
  };
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const int64_t l = w.first_layer + static_cast<int64_t>(i);
    for (int m = 0; m < kNumMatrices; ++m) {
      check(w.layers[i].linear[m], LinearTensorName(l, static_cast<Matrix>(m)));
    }
    check(w.layers[i].input_layernorm, absl::StrCat("model.layers.", l, ".input_layernorm.weight"));
    check(w.layers[i].post_attention_layernorm,
          absl::StrCat("model.layers.", l, ".post_attention_layernorm.weight"));
  }
  if (w.embed_tokens.defined()) check(w.embed_tokens, "model.embed_tokens.weight");
  if (w.final_norm.defined()) check(w.final_norm, "model.norm.weight");
  if (w.lm_head.defined()) {
    check(w.lm_head, w.config.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight");
  }
}

struct RoundTripCase {
  const char* name;
  Dtype dtype;
  int shards;
  bool tied;
};

class CheckpointRoundTripTest : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(CheckpointRoundTripTest, LoadsWhatWasWritten) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-checkpoint");
  const RoundTripCase& p = GetParam();
  const std::string dir = test_dir.path() + "/" + p.name;
  LlamaConfig c = TinyConfig(p.tied);
  TensorMap weights = RandomWeights(c, 42);
  WriteCheckpoint(dir, c, weights, p.dtype, p.shards);
  auto ckpt = Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ((*ckpt)->TensorNames().size(), weights.size());
  EXPECT_EQ((*ckpt)->bytes_read(), 0);
  auto w = (*ckpt)->LoadWeights(LoadRequest{});
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->layers.size(), 3u);
  ExpectWeightsEqual(*w, weights, p.dtype);
  int64_t total = 0;
  for (const auto& [n, t] : weights) total += t.numel() * (p.dtype == Dtype::kF32 ? 4 : 2);
  EXPECT_EQ((*ckpt)->bytes_read(), total);
  if (p.tied) {
    EXPECT_TRUE(w->lm_head.is_same(w->embed_tokens));
  }
  // F16/BF16 really round: the loaded values differ from the float32 source.
  if (p.dtype != Dtype::kF32) {
    EXPECT_FALSE(at::equal(w->layers[0].linear[0].to(at::kFloat),
                           weights.at(LinearTensorName(0, Matrix::kQ))));
  }
  // On request, every tensor comes widened to float32 with the same values.
  LoadRequest widen;
  widen.widen_to_float32 = true;
  auto wf = (*ckpt)->LoadWeights(widen);
  ASSERT_TRUE(wf.ok()) << wf.status();
  EXPECT_EQ(wf->layers[2].linear[6].scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(wf->layers[2].linear[6], w->layers[2].linear[6].to(at::kFloat)));
  EXPECT_EQ(wf->embed_tokens.scalar_type(), at::kFloat);
}

INSTANTIATE_TEST_SUITE_P(Formats, CheckpointRoundTripTest,
                         ::testing::Values(RoundTripCase{"f32", Dtype::kF32, 1, true},
                                           RoundTripCase{"f16", Dtype::kF16, 1, false},
                                           RoundTripCase{"bf16", Dtype::kBF16, 1, true},
                                           RoundTripCase{"sharded2_f32", Dtype::kF32, 2, false},
                                           RoundTripCase{"sharded3_bf16", Dtype::kBF16, 3, true}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(CheckpointTest, LayerRangeReadsOnlyItsTensors) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-checkpoint");
  const std::string dir = test_dir.path() + "/range";
  LlamaConfig c = TinyConfig(false);
  TensorMap weights = RandomWeights(c, 7);
  WriteCheckpoint(dir, c, weights, Dtype::kF32, 2);
  auto ckpt = Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto w = (*ckpt)->LoadWeights(LoadRequest{1, 2, false, false});
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->layers.size(), 1u);
  EXPECT_EQ(w->first_layer, 1);
  EXPECT_FALSE(w->embed_tokens.defined());
  EXPECT_FALSE(w->lm_head.defined());
  EXPECT_FALSE(w->final_norm.defined());
  int64_t layer_bytes = 0;
  for (const auto& [n, t] : weights) {
    if (n.rfind("model.layers.1.", 0) == 0) layer_bytes += t.numel() * 4;
  }
  EXPECT_EQ((*ckpt)->bytes_read(), layer_bytes);
  ExpectWeightsEqual(*w, weights, Dtype::kF32);
}

TEST(CheckpointTest, TiedHeadOnlyLoadsEmbeddingsAsLmHead) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-checkpoint");
  const std::string dir = test_dir.path() + "/tied_head";
  LlamaConfig c = TinyConfig(true);
  TensorMap weights = RandomWeights(c, 3);
  WriteCheckpoint(dir, c, weights, Dtype::kF32);
  auto ckpt = Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto w = (*ckpt)->LoadWeights(LoadRequest{3, 3, false, true});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(w->layers.empty());
  EXPECT_FALSE(w->embed_tokens.defined());
  ASSERT_TRUE(w->lm_head.defined());
  EXPECT_TRUE(at::equal(w->lm_head, weights.at("model.embed_tokens.weight")));
  EXPECT_TRUE(at::equal(w->final_norm, weights.at("model.norm.weight")));
}

TEST(CheckpointTest, RejectsBadLoadRequest) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-checkpoint");
  const std::string dir = test_dir.path() + "/bad_request";
  LlamaConfig c = TinyConfig(true);
  WriteCheckpoint(dir, c, RandomWeights(c, 1), Dtype::kF32);
  auto ckpt = Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok());
  EXPECT_THAT(std::string((*ckpt)->LoadWeights(LoadRequest{2, 5}).status().message()),
              HasSubstr("layers [2, 5) outside [0, 3)"));
  EXPECT_THAT((*ckpt)->LoadWeights(LoadRequest{-1, 2}),
              StatusIs(absl::StatusCode::kInvalidArgument, "layers [-1, 2) outside [0, 3)"));
  EXPECT_THAT((*ckpt)->LoadWeights(LoadRequest{2, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument, "layers [2, 1) outside [0, 3)"));
}

// ---- Malformed checkpoints: one line naming the file and the tensor. ----

std::string OpenError(const std::string& dir) {
  auto ckpt = Checkpoint::Open(dir);
  if (ckpt.ok()) return "OK";
  std::string m(ckpt.status().message());
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  return m;
}

std::string LoadError(const std::string& dir) {
  auto ckpt = Checkpoint::Open(dir);
  if (!ckpt.ok()) return "open failed: " + std::string(ckpt.status().message());
  auto w = (*ckpt)->LoadWeights(LoadRequest{});
  if (w.ok()) return "OK";
  std::string m(w.status().message());
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  return m;
}

TEST(CheckpointErrorsTest, MissingTensor) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-checkpoint");
  const std::string dir = test_dir.path() + "/missing_tensor";
  LlamaConfig c = TinyConfig(false);
  TensorMap weights = RandomWeights(c, 1);
  weights.erase(LinearTensorName(2, Matrix::kDown));
  WriteCheckpoint(dir, c, weights, Dtype::kF32);
  EXPECT_EQ(LoadError(dir), dir +
                                "/model.safetensors: tensor model.layers.2.mlp.down_proj.weight: "
                                "missing from the checkpoint");
  auto ckpt = Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok());
  EXPECT_EQ((*ckpt)->LoadTensor("nope", {}).status().code(), absl::StatusCode::kNotFound);
  // Untied without lm_head.
  const std::string dir2 = test_dir.path() + "/missing_lm_head";
  TensorMap w2 = RandomWeights(c, 1);
  w2.erase("lm_head.weight");
  WriteCheckpoint(dir2, c, w2, Dtype::kF32);
  EXPECT_THAT(LoadError(dir2), HasSubstr("tensor lm_head.weight: missing"));
}

TEST(CheckpointErrorsTest, ShapeDisagreesWithConfig) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-checkpoint");
  const std::string dir = test_dir.path() + "/bad_shape";
  LlamaConfig c = TinyConfig(true);
  TensorMap weights = RandomWeights(c, 1);
  weights[LinearTensorName(1, Matrix::kK)] = at::randn({16, 16});  // GQA wants [8, 16]
  WriteCheckpoint(dir, c, weights, Dtype::kF32);
  EXPECT_EQ(LoadError(dir),
            dir +
                "/model.safetensors: tensor model.layers.1.self_attn.k_proj.weight: "
                "shape [16, 16] disagrees with the expected [8, 16] (config.json)");
  auto ckpt = Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok());
  EXPECT_TRUE((*ckpt)->LoadTensor(LinearTensorName(1, Matrix::kK), {}).ok());
  EXPECT_THAT(
      (*ckpt)->LoadTensor(LinearTensorName(1, Matrix::kK), {8, 16}),
      StatusIs(absl::StatusCode::kInvalidArgument, "model.layers.1.self_attn.k_proj.weight"));
}

TEST(CheckpointErrorsTest, DtypeDisagreesWithConfig) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-checkpoint");
  const std::string dir = test_dir.path() + "/bad_dtype";
  LlamaConfig c = TinyConfig(true);
  WriteCheckpoint(dir, c, RandomWeights(c, 1), Dtype::kF16);
  // Claim float32 in config.json while the file holds F16.
  c.torch_dtype = "float32";
  ASSERT_TRUE(base::WriteFileAtomic(dir + "/config.json", c.ToJson()).ok());
  EXPECT_THAT(LoadError(dir), HasSubstr(dir + "/model.safetensors: tensor "));
  EXPECT_THAT(LoadError(dir),
              HasSubstr("dtype F16 disagrees with config.json torch_dtype float32"));
  // A non-float tensor where a weight belongs.
  const std::string dir2 = test_dir.path() + "/int_weight";
  ASSERT_TRUE(base::WriteFileAtomic(dir2 + "/config.json", c.ToJson()).ok());
  SafetensorsWriter w;
  ASSERT_TRUE(w.AddRaw("model.norm.weight", Dtype::kI8, {16}, std::string(16, '\1')).ok());
  ASSERT_TRUE(w.Write(dir2 + "/model.safetensors").ok());
  auto ckpt = Checkpoint::Open(dir2);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_THAT(std::string((*ckpt)->LoadTensor("model.norm.weight", {16}).status().message()),
              HasSubstr("tensor model.norm.weight: dtype I8 cannot be loaded as float32"));
}

TEST(CheckpointErrorsTest, UnknownDtype) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-checkpoint");
  const std::string dir = test_dir.path() + "/unknown_dtype";
  ASSERT_TRUE(base::WriteFileAtomic(dir + "/config.json", TinyConfig(true).ToJson()).ok());
  std::string header =
      R"({"model.norm.weight":{"dtype":"Q4_0","shape":[16],"data_offsets":[0,16]}})";
  std::string file(8, '\0');
  file[0] = static_cast<char>(header.size());
  ASSERT_TRUE(
      base::WriteFileAtomic(dir + "/model.safetensors", file + header + std::string(16, 'x')).ok());
  EXPECT_EQ(OpenError(dir),
            dir + "/model.safetensors: tensor model.norm.weight: unknown dtype \"Q4_0\"");
}

TEST(CheckpointErrorsTest, TruncatedFile) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-checkpoint");
  const std::string dir = test_dir.path() + "/truncated";
  LlamaConfig c = TinyConfig(true);
  WriteCheckpoint(dir, c, RandomWeights(c, 1), Dtype::kF32);
  auto bytes = base::ReadFile(dir + "/model.safetensors");
  ASSERT_TRUE(bytes.ok());
  ASSERT_TRUE(
      base::WriteFileAtomic(dir + "/model.safetensors", bytes->substr(0, bytes->size() / 2)).ok());
  EXPECT_THAT(OpenError(dir), HasSubstr(dir + "/model.safetensors: tensor "));
  EXPECT_THAT(OpenError(dir), HasSubstr("outside the data"));
  // Cut inside the header: the header length is beyond the file.
  ASSERT_TRUE(base::WriteFileAtomic(dir + "/model.safetensors", bytes->substr(0, 100)).ok());
  EXPECT_THAT(OpenError(dir), HasSubstr(dir + "/model.safetensors: header length"));
  ASSERT_TRUE(base::WriteFileAtomic(dir + "/model.safetensors", bytes->substr(0, 3)).ok());
  EXPECT_THAT(OpenError(dir), HasSubstr(dir + "/model.safetensors: truncated file"));
}

TEST(CheckpointErrorsTest, OverlappingAndUncoveredOffsets) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-checkpoint");
  const std::string dir = test_dir.path() + "/overlap";
  ASSERT_TRUE(base::WriteFileAtomic(dir + "/config.json", TinyConfig(true).ToJson()).ok());
  auto write = [&](const std::string& header, size_t data) {
    std::string file(8, '\0');
    file[0] = static_cast<char>(header.size());
    ASSERT_TRUE(
        base::WriteFileAtomic(dir + "/model.safetensors", file + header + std::string(data, 'x'))
            .ok());
  };
  write(
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
      24);
  EXPECT_EQ(OpenError(dir),
            dir + "/model.safetensors: tensor b: data_offsets [8, 24] overlap tensor a");
  write(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 20);
  EXPECT_THAT(OpenError(dir),
              HasSubstr("/model.safetensors: 4 bytes of data after the last tensor (a)"));
}

TEST(CheckpointErrorsTest, InvalidJsonHeader) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-checkpoint");
  const std::string dir = test_dir.path() + "/bad_json";
  ASSERT_TRUE(base::WriteFileAtomic(dir + "/config.json", TinyConfig(true).ToJson()).ok());
  std::string header = "{\"a\": nope}";
  std::string file(8, '\0');
  file[0] = static_cast<char>(header.size());
  ASSERT_TRUE(base::WriteFileAtomic(dir + "/model.safetensors", file + header).ok());
  EXPECT_THAT(OpenError(dir), HasSubstr(dir + "/model.safetensors: invalid JSON header"));
}

TEST(CheckpointErrorsTest, MissingShardFile) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-checkpoint");
  const std::string dir = test_dir.path() + "/missing_shard";
  LlamaConfig c = TinyConfig(true);
  WriteCheckpoint(dir, c, RandomWeights(c, 1), Dtype::kF32, 3);
  ASSERT_EQ(std::remove((dir + "/model-00002-of-00003.safetensors").c_str()), 0);
  EXPECT_THAT(OpenError(dir),
              HasSubstr(dir + "/model-00002-of-00003.safetensors: missing shard file "
                              "(named by model.safetensors.index.json for tensor "));
}

TEST(CheckpointErrorsTest, IndexNamesTensorMissingFromShard) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-checkpoint");
  const std::string dir = test_dir.path() + "/index_mismatch";
  LlamaConfig c = TinyConfig(true);
  WriteCheckpoint(dir, c, RandomWeights(c, 1), Dtype::kF32, 2);
  auto text = base::ReadFile(dir + "/model.safetensors.index.json");
  ASSERT_TRUE(text.ok());
  nlohmann::json index = nlohmann::json::parse(*text);
  // Point a tensor at the other shard.
  std::string& shard = index["weight_map"]["model.norm.weight"].get_ref<std::string&>();
  shard = shard == "model-00001-of-00002.safetensors" ? "model-00002-of-00002.safetensors"
                                                      : "model-00001-of-00002.safetensors";
  ASSERT_TRUE(base::WriteFileAtomic(dir + "/model.safetensors.index.json", index.dump()).ok());
  EXPECT_EQ(OpenError(dir), dir +
                                "/model.safetensors.index.json: tensor model.norm.weight: not in "
                                "its shard " +
                                dir + "/" + shard);
  ASSERT_TRUE(
      base::WriteFileAtomic(dir + "/model.safetensors.index.json", "{\"weight_map\": [").ok());
  EXPECT_THAT(OpenError(dir), HasSubstr(dir + "/model.safetensors.index.json: invalid JSON"));
  ASSERT_TRUE(base::WriteFileAtomic(dir + "/model.safetensors.index.json",
                                    R"({"weight_map": {"x": "../etc/passwd"}})")
                  .ok());
  EXPECT_THAT(OpenError(dir), HasSubstr("weight_map.x: invalid shard file name"));
}

TEST(CheckpointErrorsTest, NoWeightsOrConfig) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-checkpoint");
  const std::string dir = test_dir.path() + "/empty";
  EXPECT_THAT(OpenError(dir), HasSubstr(dir + "/config.json"));
  ASSERT_TRUE(base::WriteFileAtomic(dir + "/config.json", TinyConfig(true).ToJson()).ok());
  EXPECT_EQ(OpenError(dir), dir + ": neither model.safetensors nor model.safetensors.index.json");
}

// ---- The real model (stories260k, or the default model on a fresh clone). ----

// Bytes of one stored element of `dtype` (config.json's torch_dtype).
int64_t DtypeBytes(const std::string& dtype) {
  return dtype == "float32" ? 4 : 2;  // float16 / bfloat16
}

TEST(CheckpointRealModelTest, OpensAndLoadsLayerRange) {
  const testing::TestModel m = testing::RealModel();
  const std::string dir = m.dir;
  auto ckpt = Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const LlamaConfig& c = (*ckpt)->config();
  // Expected sizes from the config's dimensions alone (the independent reference):
  // per layer q, k, v, o, gate, up, down and two norms; then embeddings, final norm
  // and an untied head.
  const int64_t H = c.hidden_size, I = c.intermediate_size, L = c.num_hidden_layers;
  const int64_t q_out = c.num_attention_heads * c.head_dim;
  const int64_t kv_out = c.num_key_value_heads * c.head_dim;
  const int64_t layer_params = H * q_out + 2 * H * kv_out + q_out * H + 3 * H * I + 2 * H;
  const int64_t all_params =
      c.vocab_size * H * (c.tie_word_embeddings ? 1 : 2) + H + L * layer_params;
  const int64_t elem = DtypeBytes(c.torch_dtype);
  EXPECT_EQ((*ckpt)->TensorNames().size(),
            static_cast<size_t>(9 * L + 2 + (c.tie_word_embeddings ? 0 : 1)));
  if (m.stories260k) {
    EXPECT_EQ((*ckpt)->TensorNames().size(), 47u);
    EXPECT_TRUE(c.tie_word_embeddings);
    EXPECT_EQ(c.num_attention_heads, 8);
    EXPECT_EQ(c.num_key_value_heads, 4);
    EXPECT_EQ(c.head_dim, 8);
    EXPECT_EQ(c.num_hidden_layers, 5);
    EXPECT_EQ(layer_params, 45440);
    EXPECT_EQ(all_params, 260032);
  }
  ASSERT_GE(L, 4) << "the layer range below needs 4 layers";

  auto part = (*ckpt)->LoadWeights(LoadRequest{2, 4, false, false});
  ASSERT_TRUE(part.ok()) << part.status();
  const int64_t part_bytes = (*ckpt)->bytes_read();
  EXPECT_EQ(part_bytes, 2 * layer_params * elem);  // only layers 2 and 3

  auto full_ckpt = Checkpoint::Open(dir);
  ASSERT_TRUE(full_ckpt.ok());
  auto full = (*full_ckpt)->LoadWeights(LoadRequest{});
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ((*full_ckpt)->bytes_read(), all_params * elem);
  EXPECT_LT(part_bytes, (*full_ckpt)->bytes_read());
  EXPECT_EQ(full->lm_head.is_same(full->embed_tokens), c.tie_word_embeddings);
  ASSERT_EQ(part->layers.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    for (int mi = 0; mi < kNumMatrices; ++mi) {
      EXPECT_TRUE(at::equal(part->layers[i].linear[mi], full->layers[2 + i].linear[mi]));
    }
    EXPECT_TRUE(at::equal(part->layers[i].input_layernorm, full->layers[2 + i].input_layernorm));
    EXPECT_TRUE(at::equal(part->layers[i].post_attention_layernorm,
                          full->layers[2 + i].post_attention_layernorm));
  }
  EXPECT_EQ(full->layers[L - 1].at(Matrix::kK).sizes(), (at::IntArrayRef{kv_out, H}));
  EXPECT_EQ(full->layers[L - 1].at(Matrix::kDown).sizes(), (at::IntArrayRef{H, I}));
  EXPECT_GT(full->embed_tokens.abs().sum().item<float>(), 0.0f);
}

}  // namespace
}  // namespace windquant::model
