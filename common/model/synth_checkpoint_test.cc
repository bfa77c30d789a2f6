#include "common/model/synth_checkpoint.h"

#include <c10/core/GradMode.h>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "common/base/files.h"
#include "common/model/checkpoint.h"
#include "common/model/llama_model.h"
#include "common/model/safetensors.h"
#include "common/model/safetensors_stream_writer.h"
#include "common/testing/scoped_test_dir.h"
#include "gtest/gtest.h"

namespace windquant::model {
namespace {

// A byte-level BPE tokenizer.json with a vocabulary of 260 ids (256 bytes + merges +
// specials), enough for the synth to size its embeddings from; in `parent`/tokenizer.
std::string TokenizerDir(const std::string& parent) {
  const std::string dir = parent + "/tokenizer";
  std::filesystem::create_directories(dir);
  nlohmann::json vocab = nlohmann::json::object();
  // GPT-2 bytes_to_unicode for the printable ASCII range is the identity.
  int id = 0;
  for (int b = 33; b < 127; ++b) vocab[std::string(1, static_cast<char>(b))] = id++;
  nlohmann::json tok = {
      {"version", "1.0"},
      {"added_tokens",
       {{{"id", id}, {"content", "<s>"}, {"special", true}},
        {{"id", id + 1}, {"content", "</s>"}, {"special", true}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}}};
  EXPECT_TRUE(base::WriteFileAtomic(dir + "/tokenizer.json", tok.dump()).ok());
  return dir;
}

TEST(SafetensorsStreamWriterTest, WritesWhatSafetensorsFileReadsAndChecksSizes) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-synth-checkpoint");
  const std::string path = test_dir.path() + "/a.safetensors";
  auto w = SafetensorsStreamWriter::Open(
      path, {{"x", Dtype::kF32, {2, 3}}, {"y", Dtype::kI8, {5}}, {"z", Dtype::kBF16, {0}}},
      {{"k", "v"}});
  ASSERT_TRUE(w.ok()) << w.status();
  const float x[6] = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE((*w)->Append(std::string_view(reinterpret_cast<const char*>(x), 8)).ok());
  EXPECT_EQ((*w)->current()->name, "x");
  ASSERT_TRUE((*w)->Append(std::string_view(reinterpret_cast<const char*>(x) + 8, 16)).ok());
  EXPECT_EQ((*w)->current()->name, "y");
  const absl::Status early = (*w)->Finish();
  EXPECT_EQ(early.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(early.message().find("tensor y"), std::string::npos) << early;
  EXPECT_FALSE(std::filesystem::exists(path));  // nothing visible before Finish
  ASSERT_TRUE((*w)->Append("abcde").ok());
  EXPECT_EQ((*w)->Append("!").code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE((*w)->Finish().ok());
  auto f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->data_offset() % 8, 0u);
  EXPECT_EQ((*f)->metadata().at("k"), "v");
  EXPECT_EQ((*f)->metadata().at("format"), "pt");
  EXPECT_EQ((*f)->Data(*(*f)->Find("y")), "abcde");
  float back[6];
  std::memcpy(back, (*f)->Data(*(*f)->Find("x")).data(), 24);
  EXPECT_EQ(back[5], 6.0f);
  auto dup =
      SafetensorsStreamWriter::Open(path, {{"x", Dtype::kF32, {1}}, {"x", Dtype::kF32, {1}}});
  EXPECT_EQ(dup.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SynthCheckpointTest, ShapesAreTheRealOnes) {
  auto c1 = SynthShapeConfig("llama3.2-1b");
  ASSERT_TRUE(c1.ok());
  EXPECT_EQ(c1->hidden_size, 2048);
  EXPECT_EQ(c1->intermediate_size, 8192);
  EXPECT_EQ(c1->num_attention_heads, 32);
  EXPECT_EQ(c1->num_key_value_heads, 8);
  EXPECT_EQ(c1->num_hidden_layers, 16);
  EXPECT_TRUE(c1->tie_word_embeddings);
  ASSERT_TRUE(c1->rope_scaling.has_value());
  EXPECT_EQ(c1->rope_scaling->rope_type, "llama3");
  auto c8 = SynthShapeConfig("llama3-8b");
  ASSERT_TRUE(c8.ok());
  EXPECT_EQ(c8->hidden_size, 4096);
  EXPECT_EQ(c8->intermediate_size, 14336);
  EXPECT_EQ(c8->num_hidden_layers, 32);
  EXPECT_FALSE(c8->tie_word_embeddings);
  auto c70 = SynthShapeConfig("llama3-70b");
  ASSERT_TRUE(c70.ok());
  EXPECT_EQ(c70->hidden_size, 8192);
  EXPECT_EQ(c70->intermediate_size, 28672);
  EXPECT_EQ(c70->num_attention_heads, 64);
  EXPECT_EQ(c70->num_hidden_layers, 80);
  auto bad = SynthShapeConfig("llama2-7b");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("llama2-7b"), std::string::npos);
}

// One layer of the 1B shape: a sharded BF16 checkpoint that Checkpoint opens and the
// forward pass runs, with realistic weight statistics; the same seed gives the same
// bytes, and a 1-layer cut holds the first layer of a 2-layer one.
TEST(SynthCheckpointTest, WritesALoadableShardedBf16Checkpoint) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-synth-checkpoint");
  const std::string tok = TokenizerDir(test_dir.path());
  SynthOptions o;
  o.shape = "llama3.2-1b";
  o.layers = 1;
  o.tokenizer_dir = tok;
  o.out_dir = test_dir.path() + "/one";
  o.shard_bytes = 64 << 20;  // several shards
  int64_t last_done = 0, total = 0;
  o.progress = [&](int64_t done, int64_t t) {
    EXPECT_GE(done, last_done);
    last_done = done;
    total = t;
  };
  auto r = WriteSynthCheckpoint(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(last_done, total);
  EXPECT_GT(r->shards.size(), 1u);
  EXPECT_EQ(r->decoder_linear_weights, 60817408);  // 4.19M * 2 + 1.05M * 2 + 16.8M * 3
  EXPECT_EQ(r->config.vocab_size, 96);
  EXPECT_TRUE(base::PathExists(o.out_dir + "/tokenizer.json"));

  auto cfg_text = base::ReadFile(o.out_dir + "/config.json");
  ASSERT_TRUE(cfg_text.ok());
  const nlohmann::json cfg = nlohmann::json::parse(*cfg_text);
  EXPECT_EQ(cfg["torch_dtype"], "bfloat16");
  EXPECT_EQ(cfg["num_hidden_layers"], 1);
  EXPECT_NE(cfg["windquant_synth"]["vocab"].get<std::string>().find("96"), std::string::npos);

  auto ckpt = Checkpoint::Open(o.out_dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto w = (*ckpt)->LoadWeights(LoadRequest{});
  ASSERT_TRUE(w.ok()) << w.status();
  const at::Tensor gate = w->layers[0].at(Matrix::kGate);
  EXPECT_EQ(gate.scalar_type(), at::kBFloat16);
  EXPECT_EQ(gate.sizes(), (std::vector<int64_t>{8192, 2048}));
  const at::Tensor g = gate.to(at::kFloat);
  const double std = g.std().item<double>();
  EXPECT_GT(std, 0.02);  // N(0, 0.02^2) plus outlier channels
  EXPECT_LT(std, 0.03);
  const at::Tensor col_norm = g.square().mean(0).sqrt();
  const double outlier_share = (col_norm > 0.06).to(at::kFloat).mean().item<double>();
  EXPECT_GT(outlier_share, 0.002);
  EXPECT_LT(outlier_share, 0.01);
  LlamaModel model(*std::move(w));
  c10::NoGradGuard no_grad;
  const at::Tensor logits = model.Logits(at::randint(0, 96, {1, 8}, at::kLong));
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{1, 8, 96}));
  EXPECT_TRUE(at::isfinite(logits).all().item<bool>());

  // Deterministic in (seed, name): the 2-layer cut's layer 0 is the 1-layer cut's.
  o.layers = 2;
  o.out_dir = test_dir.path() + "/two";
  o.progress = nullptr;
  ASSERT_TRUE(WriteSynthCheckpoint(o).ok());
  auto two = Checkpoint::Open(o.out_dir);
  ASSERT_TRUE(two.ok());
  auto q2 = (*two)->LoadTensor(LinearTensorName(0, Matrix::kQ), {});
  auto q1 = (*ckpt)->LoadTensor(LinearTensorName(0, Matrix::kQ), {});
  ASSERT_TRUE(q1.ok() && q2.ok());
  EXPECT_TRUE(at::equal(*q1, *q2));
}

TEST(SynthCheckpointTest, RejectsBadOptionsNamingThem) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-synth-checkpoint");
  SynthOptions o;
  o.tokenizer_dir = TokenizerDir(test_dir.path());
  o.out_dir = test_dir.path() + "/bad";
  o.layers = 17;
  auto r = WriteSynthCheckpoint(o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("--layers"), std::string::npos) << r.status();
  o.layers = 1;
  o.tokenizer_dir = test_dir.path() + "/no_tokenizer";
  r = WriteSynthCheckpoint(o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("tokenizer.json"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace windquant::model
