#include "common/quant/quantized_checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "common/base/files.h"
#include "common/config/run_config.h"
#include "common/model/checkpoint.h"
#include "common/model/llama_model.h"
#include "common/model/perplexity.h"
#include "common/model/safetensors.h"
#include "common/quant/effective_bits.h"
#include "common/quant/exporter.h"
#include "common/quant/quantization_session.h"
#include "common/quant/reference_quantizer.h"
#include "common/quant/unit_table_builder.h"
#include "common/testing/test_paths.h"
#include "gtest/gtest.h"

namespace windquant::quant {
namespace {

struct Fixture {
  model::LlamaWeights weights;
  ActivationStats stats;
  StageFits sq;
  QuantizerOptions qopts;
  std::string model_dir;
};

// Tiny LLaMA (uneven down_proj chunks, untied head) fitted with chunk 16.
const Fixture& Tiny() {
  static const Fixture* f = [] {
    auto* x = new Fixture();
    at::manual_seed(21);
    auto& c = x->weights.config;
    c.hidden_size = 32;
    c.intermediate_size = 40;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.head_dim = 8;
    c.vocab_size = 40;
    c.max_position_embeddings = 64;
    c.bos_token_id = 1;
    c.eos_token_ids = {2};
    c.tie_word_embeddings = false;
    x->weights.embed_tokens = at::randn({40, 32});
    x->weights.lm_head = at::randn({40, 32});
    x->weights.final_norm = at::rand({32}) + 0.5;
    x->stats.layers.resize(2);
    const int64_t out[7] = {32, 16, 16, 32, 40, 40, 32};
    const int64_t in[7] = {32, 32, 32, 32, 32, 32, 40};
    for (int l = 0; l < 2; ++l) {
      model::LayerWeights lw;
      for (int m = 0; m < 7; ++m) {
        lw.linear[m] = at::randn({out[m], in[m]}) * 0.2;
        x->stats.layers[l][m].mean_abs = at::rand({in[m]}) + 0.05;
      }
      lw.input_layernorm = at::rand({32}) + 0.5;
      lw.post_attention_layernorm = at::rand({32}) + 0.5;
      x->weights.layers.push_back(lw);
    }
    x->qopts.salient_fraction = 0.02;  // several salient entries per unit
    UnitTableOptions o;
    o.chunk_size = 16;
    o.quantizer = x->qopts;
    auto sq = BuildStageFits(x->weights, x->stats, o, "fp-export");
    if (!sq.ok()) std::abort();
    x->sq = *std::move(sq);
    x->model_dir = ::testing::TempDir() + "/qckpt_test_model";
    std::filesystem::create_directories(x->model_dir);
    if (!base::WriteFileAtomic(x->model_dir + "/tokenizer.json", "{\"stub\": true}").ok())
      std::abort();
    return x;
  }();
  return *f;
}

Plan MixedPlan(const UnitTable& t) {
  std::vector<int> a(t.units.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int>((i * 3 + 1) % kNumActions);
  return Plan::Make(t, a, "test", 0);
}

ExportInputs Inputs(const Fixture& f, const Plan* plan) {
  ExportInputs in;
  in.weights = &f.weights;
  in.table = &f.sq.table();
  in.fits = &f.sq;
  in.plan = plan;
  in.model_dir = f.model_dir;
  return in;
}

// The plan's weights the slow, obvious way: every unit dequantized by the ATen reference
// from the stored parameters, into a float32 copy of the whole model.
model::LlamaWeights Applied(const Fixture& f, const Plan& p) {
  model::LlamaWeights w = f.weights;
  for (auto& l : w.layers) {
    for (auto& m : l.linear) m = m.clone();
  }
  const UnitTable& t = f.sq.table();
  for (size_t i = 0; i < t.units.size(); ++i) {
    const Unit& u = t.units[i];
    const int a = p.actions[u.id];
    at::Tensor cols =
        w.layers[u.layer].linear[u.matrix].slice(1, u.col_begin, u.col_begin + u.cols);
    cols.copy_(reference::ReferenceDequantize(cols, kAllActions[a], f.sq.Scales(i, a),
                                              f.sq.Offsets(i, a), f.sq.params(i).salient));
  }
  return w;
}

TEST(QuantizedCheckpointTest, ReaderRebuildsTheEvaluatedWeightsBitExactly) {
  const Fixture& f = Tiny();
  const Plan plan = MixedPlan(f.sq.table());
  std::array<int, kNumActions> seen{};
  for (int a : plan.actions) seen[a]++;
  for (int a = 0; a < kNumActions; ++a) ASSERT_GT(seen[a], 0) << "plan misses action " << a;

  const std::string dir = ::testing::TempDir() + "/qckpt_test_out";
  std::filesystem::remove_all(dir);
  const ExportInputs in = Inputs(f, &plan);
  ASSERT_TRUE(WriteQuantizedCheckpoint(in, dir).ok());
  auto q = QuantizedCheckpoint::Read(dir);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->actions, plan.actions);
  EXPECT_EQ(q->chunk_size, 16);
  const model::LlamaWeights expect = Applied(f, plan);
  for (int l = 0; l < 2; ++l) {
    for (int m = 0; m < 7; ++m) {
      EXPECT_TRUE(at::equal(q->weights.layers[l].linear[m], expect.layers[l].linear[m]))
          << l << " " << m;
    }
    EXPECT_TRUE(at::equal(q->weights.layers[l].input_layernorm,
                          f.weights.layers[l].input_layernorm.to(at::kHalf).to(at::kFloat)));
  }
  EXPECT_TRUE(at::equal(q->weights.lm_head, f.weights.lm_head.to(at::kHalf).to(at::kFloat)));

  // The stored codes really are packed: a 1-bit unit's code tensor holds the n - k
  // non-salient entries at one bit each; the k positions take IndexBits(n) bits each.
  auto file = model::SafetensorsFile::Open(dir + "/" + kQuantizedFileName);
  ASSERT_TRUE(file.ok());
  for (const Unit& u : f.sq.table().units) {
    const std::string prefix = UnitTensorPrefix(u.layer, u.matrix, u.chunk);
    if (kAllActions[plan.actions[u.id]] == Action::k1) {
      const auto* info = (*file)->Find(prefix + ".codes");
      ASSERT_NE(info, nullptr);
      EXPECT_EQ(info->num_bytes(), static_cast<uint64_t>((u.n() - u.salient_count + 7) / 8));
      ASSERT_NE((*file)->Find(prefix + ".offsets"), nullptr);
      EXPECT_EQ((*file)->Find(prefix + ".salient_values")->num_elements(), u.salient_count);
      EXPECT_EQ((*file)->Find(prefix + ".salient_index")->num_bytes(),
                static_cast<uint64_t>((u.salient_count * IndexBits(u.n()) + 7) / 8));
    }
    if (kAllActions[plan.actions[u.id]] == Action::k16) {
      EXPECT_EQ((*file)->Find(prefix + ".codes"), nullptr);
      EXPECT_NE((*file)->Find(prefix + ".weight"), nullptr);
    }
  }
}

TEST(QuantizedCheckpointTest, FakeQuantCheckpointLoadsAsAnyCheckpoint) {
  const Fixture& f = Tiny();
  const Plan plan = MixedPlan(f.sq.table());
  const std::string dir = ::testing::TempDir() + "/qckpt_test_fake";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(WriteFakeQuantCheckpoint(Inputs(f, &plan), dir).ok());
  EXPECT_TRUE(base::PathExists(dir + "/tokenizer.json"));
  auto ckpt = model::Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ((*ckpt)->config().torch_dtype, "float16");
  auto w = (*ckpt)->LoadWeights(model::LoadRequest{});
  ASSERT_TRUE(w.ok()) << w.status();
  const model::LlamaWeights expect = Applied(f, plan);
  for (int l = 0; l < 2; ++l) {
    for (int m = 0; m < 7; ++m) {
      EXPECT_TRUE(at::equal(w->layers[l].linear[m],
                            expect.layers[l].linear[m].to(at::kHalf).to(at::kFloat)));
    }
  }
}

TEST(QuantizedCheckpointTest, ExportRefusesAPlanForAnotherTable) {
  const Fixture& f = Tiny();
  Plan plan = MixedPlan(f.sq.table());
  plan.model_fingerprint = "other";
  const absl::Status other =
      WriteQuantizedCheckpoint(Inputs(f, &plan), ::testing::TempDir() + "/qckpt_bad");
  EXPECT_EQ(other.code(), absl::StatusCode::kInvalidArgument);
  // And fits of another table (one stage only) are refused.
  Plan ok = MixedPlan(f.sq.table());
  UnitTable half = f.sq.table();
  half.units.resize(half.units.size() / 2);
  half.end_layer = 1;
  ExportInputs in = Inputs(f, &ok);
  in.table = &half;
  absl::Status st = WriteFakeQuantCheckpoint(in, ::testing::TempDir() + "/qckpt_bad2");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("global unit table"), std::string::npos) << st;
}

// Bytes of the tensors of every unit whose name starts with its prefix.
std::map<std::string, uint64_t> UnitBytes(const model::SafetensorsFile& file) {
  std::map<std::string, uint64_t> out;
  for (const model::TensorInfo& t : file.tensors()) {
    const size_t chunk = t.name.find(".chunk.");
    if (chunk == std::string::npos) continue;
    const size_t end = t.name.find('.', chunk + 7);
    out[t.name.substr(0, end)] += t.num_bytes();
  }
  return out;
}

// The real test model at its run config (stories260k: chunk 64, salient 0.5 %), every
// unit at one action, for every action: the bytes of each unit's tensors are its counted
// bits / 8 within 0.5 % (never fewer), and so is the total; the checkpoint decodes to
// the model `eval --plan` measures (perplexity within 1e-6 relative).
TEST(QuantizedCheckpointRealModelTest, ExportedBytesAreTheCountedBitsForEveryAction) {
  const testing::TestModel m = testing::RealModel();
  absl::StatusOr<config::RunConfig> c = config::LoadRunConfig(m.config);
  ASSERT_TRUE(c.ok()) << c.status();
  c->model.dir = m.dir;
  c->calibration.text = m.text_path;
  c->evaluation.heldout.text = m.text_path;
  c->calibration.samples = 8;  // the bytes do not depend on the fits' values
  c->calibration.seq_len = 128;
  c->quant.cache_dir = "";
  SessionOptions so;
  so.use_cache = false;
  auto session = QuantizationSession::Create(*c, so);
  ASSERT_TRUE(session.ok()) << session.status();
  const QuantizationSession& s = **session;
  const UnitTable& t = s.table();
  constexpr double kTolerance = 0.005;
  for (int a = 0; a < kNumActions; ++a) {
    const Plan plan = s.MakePlan(std::vector<int>(t.units.size(), a), "test", 0);
    ExportInputs in;
    in.weights = &s.model().weights();
    in.table = &t;
    in.fits = &s.fits();
    in.plan = &plan;
    in.model_dir = m.dir;
    const std::string dir = ::testing::TempDir() + "/qckpt_bytes_" + std::to_string(a);
    std::filesystem::remove_all(dir);
    ASSERT_TRUE(WriteQuantizedCheckpoint(in, dir).ok());
    auto file = model::SafetensorsFile::Open(dir + "/" + kQuantizedFileName);
    ASSERT_TRUE(file.ok()) << file.status();
    const std::map<std::string, uint64_t> bytes = UnitBytes(**file);
    double total_bytes = 0, total_counted = 0, worst = 0;
    for (const Unit& u : t.units) {
      const std::string prefix = UnitTensorPrefix(u.layer, u.matrix, u.chunk);
      ASSERT_TRUE(bytes.count(prefix)) << prefix;
      const double got = static_cast<double>(bytes.at(prefix));
      const double counted =
          UnitEffectiveBits(u.rows, u.cols, u.salient_count, kAllActions[a]) / 8.0;
      EXPECT_GE(got, counted - 1e-9) << prefix << " action " << ActionName(kAllActions[a]);
      EXPECT_LE(got, counted * (1 + kTolerance))
          << prefix << " action " << ActionName(kAllActions[a]);
      worst = std::max(worst, got / counted - 1);
      total_bytes += got;
      total_counted += counted;
    }
    EXPECT_LE(total_bytes, total_counted * (1 + kTolerance));
    EXPECT_EQ(bytes.size(), t.units.size());
    // `eval --quantized DIR` (the decoded checkpoint) is `eval --plan`.
    auto decoded = QuantizedCheckpoint::Read(dir);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    const model::LlamaModel from_file(std::move(decoded->weights));
    auto planned = s.PlanModel(plan.actions);
    ASSERT_TRUE(planned.ok()) << planned.status();
    model::PerplexityOptions po;
    po.context = 128;
    po.max_tokens = 1024;
    auto p_file = model::ComputePerplexity(from_file, s.eval_ids(), po);
    auto p_plan = model::ComputePerplexity(**planned, s.eval_ids(), po);
    ASSERT_TRUE(p_file.ok() && p_plan.ok());
    EXPECT_NEAR(p_file->perplexity, p_plan->perplexity, 1e-6 * p_plan->perplexity)
        << "action " << ActionName(kAllActions[a]);
    std::printf(
        "action %-4s  %zu units  %.0f bytes  counted %.1f  (+%.3f %%, worst unit +%.3f %%)\n",
        std::string(ActionName(kAllActions[a])).c_str(), t.units.size(), total_bytes, total_counted,
        100 * (total_bytes / total_counted - 1), 100 * worst);
  }
}

TEST(QuantizedCheckpointTest, ReaderRejectsMissingFiles) {
  auto r = QuantizedCheckpoint::Read(::testing::TempDir() + "/no_such_dir");
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace windquant::quant
