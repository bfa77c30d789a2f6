#include "common/quant/unit_table_cache.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <ATen/ATen.h>

#include "common/base/files.h"
#include "common/quant/quantization_session.h"
#include "common/quant/unit_table_builder.h"
#include "common/testing/scoped_test_dir.h"
#include "common/testing/test_paths.h"
#include "gtest/gtest.h"

namespace windquant::quant {
namespace {

model::LlamaWeights TinyWeights(uint64_t seed) {
  at::manual_seed(seed);
  model::LlamaWeights w;
  auto& c = w.config;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.head_dim = 8;
  c.vocab_size = 20;
  c.tie_word_embeddings = true;
  w.embed_tokens = at::randn({20, 16});
  w.final_norm = at::ones({16});
  w.lm_head = w.embed_tokens;
  const int64_t out[7] = {16, 8, 8, 16, 24, 24, 16};
  const int64_t in[7] = {16, 16, 16, 16, 16, 16, 24};
  for (int l = 0; l < 2; ++l) {
    model::LayerWeights lw;
    for (int m = 0; m < 7; ++m) lw.linear[m] = at::randn({out[m], in[m]}) * 0.1;
    lw.input_layernorm = at::ones({16});
    lw.post_attention_layernorm = at::ones({16});
    w.layers.push_back(lw);
  }
  return w;
}

ActivationStats RandomStats(const model::LlamaWeights& w) {
  ActivationStats s;
  s.layers.resize(w.layers.size());
  for (size_t l = 0; l < w.layers.size(); ++l) {
    for (int m = 0; m < 7; ++m)
      s.layers[l][m].mean_abs = at::rand({w.layers[l].linear[m].size(1)}) + 0.1;
  }
  return s;
}

FingerprintInputs Inputs(const model::LlamaWeights* w) {
  FingerprintInputs in;
  in.config_json = "{\"hidden_size\": 16}";
  in.weights = w;
  in.calibration_text_sha256 = base::Sha256Hex("some text");
  in.chunk_size = 8;
  return in;
}

TEST(UnitTableFingerprintTest, ChangesWithEveryInput) {
  const model::LlamaWeights w = TinyWeights(1);
  const FingerprintInputs base_in = Inputs(&w);
  auto base = UnitTableFingerprint(base_in);
  ASSERT_TRUE(base.ok());
  EXPECT_EQ(base->size(), 64u);
  EXPECT_EQ(*base, *UnitTableFingerprint(Inputs(&w)));  // deterministic

  std::vector<FingerprintInputs> variants(7, base_in);
  variants[0].config_json += " ";
  variants[1].calibration_text_sha256 = base::Sha256Hex("other text");
  variants[2].calibration.seed = 1;
  variants[3].calibration.samples = 31;
  variants[4].chunk_size = 16;
  variants[5].quantizer.salient_fraction = 0.006;
  variants[6].quantizer.refine_steps = 5;
  variants.push_back(base_in);
  variants.back().quantizer.switch_margin = 2e-4;
  for (size_t i = 0; i < variants.size(); ++i) {
    auto fp = UnitTableFingerprint(variants[i]);
    ASSERT_TRUE(fp.ok());
    EXPECT_NE(*fp, *base) << "variant " << i;
  }
  // One weight changed by one ulp.
  model::LlamaWeights w2 = TinyWeights(1);
  w2.layers[1].linear[6] = w2.layers[1].linear[6].clone();
  float* p = w2.layers[1].linear[6].data_ptr<float>();
  p[5] = std::nextafter(p[5], 1.0f);
  EXPECT_NE(*UnitTableFingerprint(Inputs(&w2)), *base);
}

TEST(UnitTableCacheTest, StoreLoadRoundTripAndNotFound) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-unit-table-cache");
  const model::LlamaWeights w = TinyWeights(2);
  const ActivationStats stats = RandomStats(w);
  UnitTableOptions o;
  o.chunk_size = 8;
  auto sq = BuildStageFits(w, stats, o, "abc123");
  ASSERT_TRUE(sq.ok()) << sq.status();
  UnitTableCache cache(test_dir.path() + "/roundtrip");
  EXPECT_TRUE(absl::IsNotFound(cache.Load("abc123", 0, 2).status()));
  ASSERT_TRUE(cache.Store("abc123", *sq, stats).ok());
  auto hit = cache.Load("abc123", 0, 2);
  ASSERT_TRUE(hit.ok()) << hit.status();
  const plan::UnitTable& t = hit->fits.table();
  ASSERT_EQ(t.units.size(), sq->table().units.size());
  for (size_t i = 0; i < t.units.size(); ++i) {
    EXPECT_EQ(t.units[i].error, sq->table().units[i].error);
    EXPECT_EQ(t.units[i].bits, sq->table().units[i].bits);
    EXPECT_EQ(hit->fits.params(i).scales, sq->params(i).scales);
    EXPECT_EQ(hit->fits.params(i).offsets, sq->params(i).offsets);
    EXPECT_EQ(hit->fits.params(i).salient.index, sq->params(i).salient.index);
    EXPECT_EQ(hit->fits.params(i).salient.codes, sq->params(i).salient.codes);
    EXPECT_EQ(hit->fits.params(i).salient.scale, sq->params(i).salient.scale);
  }
  // The same plan weights from the loaded fits.
  std::vector<int> plan(t.units.size());
  for (size_t i = 0; i < plan.size(); ++i) plan[i] = static_cast<int>(i % plan::kNumActions);
  std::array<at::Tensor, model::kNumMatrices> x, y;
  for (int m = 0; m < 7; ++m) x[m] = w.layers[1].linear[m].clone(), y[m] = x[m].clone();
  sq->ApplyToLayer(1, plan, &x);
  hit->fits.ApplyToLayer(1, plan, &y);
  for (int m = 0; m < 7; ++m) {
    EXPECT_TRUE(at::equal(x[m], y[m]));
    EXPECT_TRUE(at::equal(hit->stats.at(1, static_cast<model::Matrix>(m)).mean_abs,
                          stats.at(1, static_cast<model::Matrix>(m)).mean_abs));
  }
  EXPECT_TRUE(absl::IsNotFound(cache.Load("other", 0, 2).status()));
  // An entry holds one layer range: asked for another, it is unusable.
  EXPECT_EQ(cache.Load("abc123", 0, 1).status().code(), absl::StatusCode::kDataLoss);
}

// The layer range is part of the key: two stages (or a stage and the whole model) of one
// identity never share an entry.
TEST(UnitTableCacheTest, KeyNamesTheIdentityAndTheLayerRange) {
  const std::string k = FitCacheKey("fp", 0, 4);
  EXPECT_EQ(k.size(), 64u);
  EXPECT_EQ(FitCacheKey("fp", 0, 4), k);
  EXPECT_NE(FitCacheKey("fp", 0, 2), k);
  EXPECT_NE(FitCacheKey("fp", 2, 4), k);
  EXPECT_NE(FitCacheKey("fq", 0, 4), k);
}

TEST(UnitTableCacheTest, CorruptedFileIsDataLoss) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-unit-table-cache");
  const model::LlamaWeights w = TinyWeights(3);
  const ActivationStats stats = RandomStats(w);
  UnitTableOptions o;
  o.chunk_size = 8;
  auto sq = BuildStageFits(w, stats, o, "fp1");
  ASSERT_TRUE(sq.ok());
  const std::string dir = test_dir.path() + "/corrupt";
  UnitTableCache cache(dir);
  for (const char* f :
       {"unit_table.pb", "fits.safetensors", "act_stats.safetensors", "manifest.json"}) {
    ASSERT_TRUE(cache.Store("fp1", *sq, stats).ok());
    ASSERT_TRUE(cache.Load("fp1", 0, 2).ok());
    const std::string path = cache.EntryDir("fp1") + "/" + f;
    auto bytes = base::ReadFile(path);
    ASSERT_TRUE(bytes.ok());
    std::string bad = *bytes;
    bad[bad.size() / 2] ^= 0x01;
    ASSERT_TRUE(base::WriteFileAtomic(path, bad).ok());
    auto r = cache.Load("fp1", 0, 2);
    ASSERT_FALSE(r.ok()) << f;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << f << ": " << r.status();
  }
}

// The session on the real test model (stories260k, or the default model on a fresh
// clone): the second run fits nothing, a corrupted cache is recomputed, another
// quant config misses the cache.
TEST(QuantizationSessionTest, CacheHitFitsNothingAndCorruptionRecomputes) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-unit-table-cache");
  const testing::TestModel m = testing::RealModel();
  SessionOptions so;
  so.model_dir = m.dir;
  so.calibration.text = m.text_path;
  so.calibration.samples = 4;
  so.calibration.seq_len = 64;
  so.heldout.text = so.calibration.text;
  so.context = 64;
  so.units.chunk_size = 32;
  so.cache_dir = test_dir.path() + "/session";
  std::vector<std::string> lines;
  so.log = [&](const std::string& l) { lines.push_back(l); };
  auto first = QuantizationSession::Create(so);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE((*first)->from_cache());
  auto second = QuantizationSession::Create(so);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE((*second)->from_cache());
  EXPECT_EQ((*second)->fingerprint(), (*first)->fingerprint());
  ASSERT_EQ((*second)->table().units.size(), (*first)->table().units.size());
  EXPECT_EQ((*second)->table().units[7].error, (*first)->table().units[7].error);

  // Same plan, same perplexity from the cached fits.
  std::vector<int> plan((*first)->table().units.size(), plan::ActionIndex(plan::Action::k3));
  auto p1 = (*first)->Perplexity(plan, 2000), p2 = (*second)->Perplexity(plan, 2000);
  ASSERT_TRUE(p1.ok() && p2.ok());
  EXPECT_EQ(p1->perplexity, p2->perplexity);

  // Corrupt the fits: detected, warned about, recomputed, and the entry rewritten.
  const std::string fits =
      so.cache_dir + "/" +
      FitCacheKey((*first)->fingerprint(), 0, (*first)->model().config().num_hidden_layers) +
      "/fits.safetensors";
  auto bytes = base::ReadFile(fits);
  ASSERT_TRUE(bytes.ok());
  std::string bad = *bytes;
  bad[bad.size() - 3] ^= 0x40;
  ASSERT_TRUE(base::WriteFileAtomic(fits, bad).ok());
  lines.clear();
  auto third = QuantizationSession::Create(so);
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE((*third)->from_cache());
  bool warned = false;
  for (const auto& l : lines) warned |= l.find("warning") != std::string::npos;
  EXPECT_TRUE(warned);
  auto fourth = QuantizationSession::Create(so);
  ASSERT_TRUE(fourth.ok());
  EXPECT_TRUE((*fourth)->from_cache());

  // Any config difference recomputes.
  so.calibration.seed = 1;
  auto fifth = QuantizationSession::Create(so);
  ASSERT_TRUE(fifth.ok());
  EXPECT_FALSE((*fifth)->from_cache());
  EXPECT_NE((*fifth)->fingerprint(), (*first)->fingerprint());
}

}  // namespace
}  // namespace windquant::quant
