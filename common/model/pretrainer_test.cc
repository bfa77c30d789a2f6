#include "common/model/pretrainer.h"

#include <c10/core/GradMode.h>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "common/base/files.h"
#include "common/model/checkpoint.h"
#include "common/model/llama_model.h"
#include "common/model/safetensors.h"
#include "common/testing/scoped_test_dir.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace windquant::model {
namespace {

using ::windquant::testing::StatusIs;

namespace fs = std::filesystem;

// Logits of the written checkpoint vs the in-memory model: both float32, the
// same ops, so only summation order could differ (it does not; keep a margin).
constexpr double kLogitsTolerance = 1e-5;

constexpr char kText[] =
    "It was the best of times, it was the worst of times, it was the age of wisdom, it "
    "was the age of foolishness, it was the epoch of belief, it was the epoch of "
    "incredulity, it was the season of Light, it was the season of Darkness, it was the "
    "spring of hope, it was the winter of despair, we had everything before us, we had "
    "nothing before us, we were all going direct to Heaven, we were all going direct the "
    "other way. ";

// Bytes of the text as ids (vocab 256): the test needs no tokenizer.
std::vector<int32_t> TextIds(int repeats) {
  std::vector<int32_t> ids;
  for (int r = 0; r < repeats; ++r) {
    for (const char* p = kText; *p; ++p) ids.push_back(static_cast<unsigned char>(*p));
  }
  return ids;
}

PretrainConfig TinyConfig() {
  PretrainConfig c;
  c.layers = 2;
  c.hidden = 32;
  c.heads = 4;
  c.kv_heads = 2;
  c.vocab = 256;
  c.seq_len = 32;
  c.batch = 8;
  c.steps = 60;
  c.lr = 1e-2;
  c.warmup_steps = 5;
  c.seed = 7;
  c.threads = 1;
  c.bos_id = 1;
  c.eos_id = 2;
  return c;
}

TEST(PretrainConfigTest, DefaultIntermediateIsAbout2_7xRoundedTo32) {
  EXPECT_EQ(DefaultIntermediateSize(128), 352);  // 345.6 -> 352
  EXPECT_EQ(DefaultIntermediateSize(192), 512);  // 518.4 -> 512
  EXPECT_EQ(DefaultIntermediateSize(8), 32);
}

TEST(PretrainConfigTest, RejectsBadFieldsNamingThem) {
  PretrainConfig c = TinyConfig();
  c.kv_heads = 3;
  absl::Status s = c.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("pretrain.kv_heads"), std::string::npos) << s;
  c = TinyConfig();
  c.vocab = 0;
  EXPECT_NE(c.Validate().message().find("pretrain.vocab"), std::string::npos);
  EXPECT_TRUE(TinyConfig().Validate().ok());
}

TEST(PretrainConfigTest, LearningRateWarmsUpThenDecaysToTenPercent) {
  PretrainConfig c = TinyConfig();
  c.lr = 1.0;
  c.steps = 105;
  c.warmup_steps = 5;
  c.min_lr_ratio = 0.1;
  EXPECT_NEAR(LearningRateAt(c, 0), 0.2, 1e-12);
  EXPECT_NEAR(LearningRateAt(c, 4), 1.0, 1e-12);
  EXPECT_NEAR(LearningRateAt(c, 5), 1.0, 1e-12);
  EXPECT_NEAR(LearningRateAt(c, 5 + 99 / 2.0), 0.55, 1e-2);  // half way: (1 + 0.1) / 2
  EXPECT_NEAR(LearningRateAt(c, 104), 0.1, 1e-12);
  for (int64_t s = 6; s < 105; ++s) EXPECT_LE(LearningRateAt(c, s), LearningRateAt(c, s - 1));
}

TEST(PretrainerTest, InitIsSeededTiedAndRequiresGrad) {
  const LlamaConfig lc = TinyConfig().ToLlamaConfig();
  LlamaWeights a = InitLlamaWeights(lc, 3, true);
  LlamaWeights b = InitLlamaWeights(lc, 3, true);
  LlamaWeights other = InitLlamaWeights(lc, 4, true);
  EXPECT_TRUE(a.lm_head.is_same(a.embed_tokens));
  EXPECT_TRUE(a.embed_tokens.requires_grad());
  EXPECT_TRUE(at::equal(a.layers[1].at(Matrix::kDown), b.layers[1].at(Matrix::kDown)));
  EXPECT_FALSE(at::equal(a.layers[1].at(Matrix::kDown), other.layers[1].at(Matrix::kDown)));
  EXPECT_NEAR(a.embed_tokens.std().item<double>(), 0.02, 0.002);
  EXPECT_TRUE(at::equal(a.final_norm, at::ones({32})));
  EXPECT_EQ(a.layers[0].at(Matrix::kK).sizes(), (std::vector<int64_t>{16, 32}));  // 2 kv heads
}

TEST(PretrainerTest, RejectsIdsOutsideVocabAndTooShortStreams) {
  Pretrainer p(TinyConfig());
  std::vector<int32_t> ids = TextIds(4);
  ids[10] = 300;
  absl::StatusOr<PretrainResult> r = p.Train(ids);
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kInvalidArgument, "position 10"));
  EXPECT_THAT(p.Train(std::vector<int32_t>(40, 5)),
              StatusIs(absl::StatusCode::kInvalidArgument, "too few"));
}

TEST(PretrainerTest, TinyRunLowersLossAndWritesReloadableHfFolder) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-pretrainer");
  const PretrainConfig config = TinyConfig();
  const std::vector<int32_t> ids = TextIds(40);  // ~18k ids, 5% held out
  absl::StatusOr<PretrainResult> r = Pretrainer(config).Train(ids);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->losses.size(), 60u);
  // Untrained: near-uniform over 256 bytes.
  EXPECT_GT(r->untrained_held_out_ppl, 150.0);
  EXPECT_NEAR(r->first_loss, std::log(256.0), 0.3);
  EXPECT_LT(r->final_loss, r->first_loss - 1.5);
  EXPECT_LT(r->held_out_ppl, r->untrained_held_out_ppl / 5);
  EXPECT_FALSE(r->weights.embed_tokens.requires_grad());
  EXPECT_TRUE(r->weights.lm_head.is_same(r->weights.embed_tokens));

  const std::string dir = test_dir.path() + "/hf";
  PretrainedModelInfo info{"built-in test text", R"({"model": {"type": "BPE"}})", "stamp-1"};
  // Written twice: the second write replaces the first directory whole.
  ASSERT_TRUE(WritePretrainedModel(dir, config, *r, info).ok());
  base::WriteFileAtomic(dir + "/stale.txt", "x").IgnoreError();
  absl::Status written = WritePretrainedModel(dir, config, *r, info);
  ASSERT_TRUE(written.ok()) << written;
  EXPECT_FALSE(fs::exists(dir + "/stale.txt"));
  EXPECT_FALSE(fs::exists(dir + ".tmp"));
  for (const char* f :
       {"config.json", "model.safetensors", "tokenizer.json", "README.md", "pretrain.json"}) {
    EXPECT_TRUE(fs::exists(dir + "/" + f)) << f;
  }
  absl::StatusOr<LlamaConfig> lc = LlamaConfig::FromDirectory(dir);
  ASSERT_TRUE(lc.ok()) << lc.status();
  EXPECT_TRUE(lc->tie_word_embeddings);
  EXPECT_EQ(lc->vocab_size, 256);
  EXPECT_EQ(lc->num_key_value_heads, 2);
  const nlohmann::json cj = nlohmann::json::parse(*base::ReadFile(dir + "/config.json"));
  EXPECT_EQ(cj["architectures"][0], "LlamaForCausalLM");
  const nlohmann::json meta = nlohmann::json::parse(*base::ReadFile(dir + "/pretrain.json"));
  EXPECT_DOUBLE_EQ(meta["held_out_perplexity"]["trained"].get<double>(), r->held_out_ppl);
  EXPECT_EQ(meta["data_source"], "built-in test text");
  EXPECT_EQ(*base::ReadFile(dir + "/tokenizer.json"), info.tokenizer_json);

  absl::StatusOr<std::unique_ptr<SafetensorsFile>> st =
      SafetensorsFile::Open(dir + "/model.safetensors");
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ((*st)->Find("lm_head.weight"), nullptr);  // tied
  ASSERT_NE((*st)->Find("model.layers.1.mlp.down_proj.weight"), nullptr);
  EXPECT_EQ((*st)->Find("model.layers.1.mlp.down_proj.weight")->dtype, Dtype::kF32);
  EXPECT_EQ((*st)->tensors().size(), 2u * 9 + 2);

  absl::StatusOr<std::unique_ptr<Checkpoint>> ck = Checkpoint::Open(dir);
  ASSERT_TRUE(ck.ok()) << ck.status();
  absl::StatusOr<LlamaWeights> loaded = (*ck)->LoadWeights(LoadRequest{});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const LlamaModel reloaded(*std::move(loaded));
  const LlamaModel in_memory(r->weights);
  const at::Tensor window =
      at::tensor(std::vector<int64_t>(ids.end() - 33, ids.end() - 1), at::kLong).view({1, 32});
  c10::NoGradGuard no_grad;
  const at::Tensor a = in_memory.Logits(window), b = reloaded.Logits(window);
  EXPECT_LE((a - b).abs().max().item<double>(), kLogitsTolerance);
}

}  // namespace
}  // namespace windquant::model
