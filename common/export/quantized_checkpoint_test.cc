#include "common/export/quantized_checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"

#include "common/base/files.h"
#include "common/config/run_config.h"
#include "common/export/exporter.h"
#include "common/model/checkpoint.h"
#include "common/model/llama_model.h"
#include "common/model/perplexity.h"
#include "common/model/safetensors.h"
#include "common/model/safetensors_writer.h"
#include "common/plan/effective_bits.h"
#include "common/quant/quantization_session.h"
#include "common/quant/reference_quantizer.h"
#include "common/quant/unit_table_builder.h"
#include "common/testing/real_model_session.h"
#include "common/testing/test_paths.h"
#include "gtest/gtest.h"

namespace windquant::exporter {
namespace {

struct Fixture {
  model::LlamaWeights weights;
  quant::ActivationStats stats;
  quant::StageFits sq;
  quant::QuantizerOptions qopts;
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
    quant::UnitTableOptions o;
    o.chunk_size = 16;
    o.salient_fraction = x->qopts.salient_fraction;
    auto sq = quant::BuildStageFits(x->weights, x->stats, o, "fp-export");
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

plan::Plan MixedPlan(const plan::UnitTable& t) {
  std::vector<int> a(t.units.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int>((i * 3 + 1) % plan::kNumActions);
  return plan::Plan::Make(t, a, "test", 0);
}

ExportInputs Inputs(const Fixture& f, const plan::Plan* plan) {
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
model::LlamaWeights Applied(const Fixture& f, const plan::Plan& p) {
  model::LlamaWeights w = f.weights;
  for (auto& l : w.layers) {
    for (auto& m : l.linear) m = m.clone();
  }
  const plan::UnitTable& t = f.sq.table();
  for (size_t i = 0; i < t.units.size(); ++i) {
    const plan::Unit& u = t.units[i];
    const int a = p.actions[u.id];
    at::Tensor cols =
        w.layers[u.layer].linear[u.matrix].slice(1, u.col_begin, u.col_begin + u.cols);
    cols.copy_(quant::reference::ReferenceDequantize(cols, plan::kAllActions[a], f.sq.Scales(i, a),
                                                     f.sq.Offsets(i, a), f.sq.params(i).salient));
  }
  return w;
}

TEST(QuantizedCheckpointTest, ReaderRebuildsTheEvaluatedWeightsBitExactly) {
  const Fixture& f = Tiny();
  const plan::Plan plan = MixedPlan(f.sq.table());
  std::array<int, plan::kNumActions> seen{};
  for (int a : plan.actions) seen[a]++;
  for (int a = 0; a < plan::kNumActions; ++a) ASSERT_GT(seen[a], 0) << "plan misses action " << a;

  const std::string dir = ::testing::TempDir() + "/qckpt_test_out";
  std::filesystem::remove_all(dir);
  const ExportInputs in = Inputs(f, &plan);
  ASSERT_TRUE(WriteQuantizedCheckpoint(in, dir).ok());
  EXPECT_TRUE(VerifyQuantizedCheckpoint(in, dir, "out").ok());
  auto opened = QuantizedCheckpoint::Open(dir);
  ASSERT_TRUE(opened.ok()) << opened.status();
  const QuantizedCheckpoint& q = **opened;
  EXPECT_EQ(q.actions(), plan.actions);
  EXPECT_EQ(q.chunk_size(), 16);
  EXPECT_EQ(q.plan_id(), plan.plan_id);
  auto all = q.ReadAll();
  ASSERT_TRUE(all.ok()) << all.status();
  const model::LlamaWeights expect = Applied(f, plan);
  for (int l = 0; l < 2; ++l) {
    auto layer = q.DecodeLayer(l);
    ASSERT_TRUE(layer.ok()) << layer.status();
    for (int m = 0; m < 7; ++m) {
      EXPECT_TRUE(at::equal((*layer)[m], expect.layers[l].linear[m])) << l << " " << m;
      EXPECT_TRUE(at::equal(all->layers[l].linear[m], expect.layers[l].linear[m]));
    }
    EXPECT_TRUE(at::equal(all->layers[l].input_layernorm,
                          f.weights.layers[l].input_layernorm.to(at::kHalf).to(at::kFloat)));
  }
  EXPECT_TRUE(at::equal(all->lm_head, f.weights.lm_head.to(at::kHalf).to(at::kFloat)));
  EXPECT_EQ(q.DecodeLayer(2).status().code(), absl::StatusCode::kInvalidArgument);

  // The stored codes really are packed: a 1-bit unit's code tensor holds the n - k
  // non-salient entries at one bit each; the k positions take IndexBits(n) bits each.
  auto file = model::SafetensorsFile::Open(dir + "/" + kQuantizedFileName);
  ASSERT_TRUE(file.ok());
  for (const plan::Unit& u : f.sq.table().units) {
    const std::string prefix = UnitTensorPrefix(u.layer, u.matrix, u.chunk);
    if (plan::kAllActions[plan.actions[u.id]] == plan::Action::k1) {
      const auto* info = (*file)->Find(prefix + ".codes");
      ASSERT_NE(info, nullptr);
      EXPECT_EQ(info->num_bytes(), static_cast<uint64_t>((u.n() - u.salient_count + 7) / 8));
      ASSERT_NE((*file)->Find(prefix + ".offsets"), nullptr);
      EXPECT_EQ((*file)->Find(prefix + ".salient_values")->num_elements(), u.salient_count);
      EXPECT_EQ((*file)->Find(prefix + ".salient_index")->num_bytes(),
                static_cast<uint64_t>((u.salient_count * plan::IndexBits(u.n()) + 7) / 8));
    }
    if (plan::kAllActions[plan.actions[u.id]] == plan::Action::k16) {
      EXPECT_EQ((*file)->Find(prefix + ".codes"), nullptr);
      EXPECT_NE((*file)->Find(prefix + ".weight"), nullptr);
    }
  }
}

TEST(QuantizedCheckpointTest, FakeQuantCheckpointLoadsAsAnyCheckpoint) {
  const Fixture& f = Tiny();
  const plan::Plan plan = MixedPlan(f.sq.table());
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
  plan::Plan plan = MixedPlan(f.sq.table());
  plan.model_fingerprint = "other";
  const absl::Status other =
      WriteQuantizedCheckpoint(Inputs(f, &plan), ::testing::TempDir() + "/qckpt_bad");
  EXPECT_EQ(other.code(), absl::StatusCode::kInvalidArgument);
  // And fits of another table (one stage only) are refused.
  plan::Plan ok = MixedPlan(f.sq.table());
  plan::UnitTable half = f.sq.table();
  half.units.resize(half.units.size() / 2);
  half.end_layer = 1;
  ExportInputs in = Inputs(f, &ok);
  in.table = &half;
  absl::Status st = WriteFakeQuantCheckpoint(in, ::testing::TempDir() + "/qckpt_bad2");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("global unit table"), std::string::npos) << st;
}

// Bytes of every tensor of the file (the header excluded).
uint64_t TensorBytes(const model::SafetensorsFile& file) {
  uint64_t n = 0;
  for (const model::TensorInfo& t : file.tensors()) n += t.num_bytes();
  return n;
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
  // A short calibration: the bytes do not depend on the fits' values.
  const testing::TestModel m = testing::RealModel();
  absl::StatusOr<config::RunConfig> c = testing::RealModelRunConfig(m, 8, 128);
  ASSERT_TRUE(c.ok()) << c.status();
  quant::SessionOptions so = testing::SessionOptionsOf(*c);
  so.compensation = quant::Compensation::kNone;  // as before: the rounded plans' bytes
  auto session = quant::QuantizationSession::Create(so);
  ASSERT_TRUE(session.ok()) << session.status();
  const quant::QuantizationSession& s = **session;
  const plan::UnitTable& t = s.table();
  constexpr double kTolerance = 0.005;
  for (int a = 0; a < plan::kNumActions; ++a) {
    const plan::Plan plan = s.MakePlan(std::vector<int>(t.units.size(), a), "test", 0);
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
    for (const plan::Unit& u : t.units) {
      const std::string prefix = UnitTensorPrefix(u.layer, u.matrix, u.chunk);
      ASSERT_TRUE(bytes.count(prefix)) << prefix;
      const double got = static_cast<double>(bytes.at(prefix));
      const double counted =
          plan::UnitEffectiveBits(u.rows, u.cols, u.salient_count, plan::kAllActions[a]) / 8.0;
      EXPECT_GE(got, counted - 1e-9)
          << prefix << " action " << plan::ActionName(plan::kAllActions[a]);
      EXPECT_LE(got, counted * (1 + kTolerance))
          << prefix << " action " << plan::ActionName(plan::kAllActions[a]);
      worst = std::max(worst, got / counted - 1);
      total_bytes += got;
      total_counted += counted;
    }
    EXPECT_LE(total_bytes, total_counted * (1 + kTolerance));
    EXPECT_EQ(bytes.size(), t.units.size());
    // Bits = bytes over the whole file: every tensor (units and the fixed tensors, at
    // the dtype they are stored in) against the plan's whole-model bits.
    const plan::PlanTotals totals = plan.Totals(t);
    const double file_bits = 8.0 * static_cast<double>(TensorBytes(**file));
    const double counted_bits = totals.whole_model_bits *
                                static_cast<double>(totals.quantized_weights + t.fixed_fp16_params);
    EXPECT_GE(file_bits, counted_bits - 1e-6)
        << "action " << plan::ActionName(plan::kAllActions[a]);
    EXPECT_LE(file_bits, counted_bits * (1 + kTolerance))
        << "action " << plan::ActionName(plan::kAllActions[a]);
    // `eval --quantized DIR` (decoded a layer at a time) is `eval --plan`.
    auto decoded = QuantizedCheckpoint::Open(dir);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    auto from_file = QuantizedCheckpoint::Model(*std::move(decoded));
    ASSERT_TRUE(from_file.ok()) << from_file.status();
    auto planned = s.PlanModel(plan.actions);
    ASSERT_TRUE(planned.ok()) << planned.status();
    model::PerplexityOptions po;
    po.context = 128;
    po.max_tokens = 1024;
    auto p_file = model::ComputePerplexity(**from_file, s.eval_ids(), po);
    auto p_plan = model::ComputePerplexity(**planned, s.eval_ids(), po);
    ASSERT_TRUE(p_file.ok() && p_plan.ok());
    EXPECT_NEAR(p_file->perplexity, p_plan->perplexity, 1e-6 * p_plan->perplexity)
        << "action " << plan::ActionName(plan::kAllActions[a]);
    std::printf(
        "action %-4s  %zu units  %.0f bytes  counted %.1f  (+%.3f %%, worst unit +%.3f %%); "
        "whole file %.0f tensor bytes, counted %.1f (+%.3f %%)\n",
        std::string(plan::ActionName(plan::kAllActions[a])).c_str(), t.units.size(), total_bytes,
        total_counted, 100 * (total_bytes / total_counted - 1), 100 * worst, file_bits / 8,
        counted_bits / 8, 100 * (file_bits / counted_bits - 1));
  }
}

// A BF16 checkpoint on disk (2 layers, hidden 128, chunk 64, untied head) and its fits.
struct Bf16Model {
  std::string dir;
  std::unique_ptr<model::Checkpoint> ckpt;
  model::LlamaWeights weights;  // as loaded: BF16
  quant::StageFits fits;
};

const Bf16Model& Bf16() {
  static const Bf16Model* f = [] {
    auto* x = new Bf16Model();
    at::manual_seed(5);
    model::LlamaConfig c;
    c.hidden_size = 128;
    c.intermediate_size = 256;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.head_dim = 32;
    c.vocab_size = 256;
    c.max_position_embeddings = 64;
    c.bos_token_id = 1;
    c.eos_token_ids = {2};
    c.tie_word_embeddings = false;
    c.torch_dtype = "bfloat16";
    x->dir = ::testing::TempDir() + "/qckpt_bf16_model";
    std::filesystem::remove_all(x->dir);
    model::SafetensorsWriter w;
    auto add = [&](const std::string& name, at::Tensor t) {
      if (!w.Add(name, t, model::Dtype::kBF16).ok()) std::abort();
    };
    add("model.embed_tokens.weight", at::randn({256, 128}) * 0.02);
    add("lm_head.weight", at::randn({256, 128}) * 0.02);
    add("model.norm.weight", at::rand({128}) + 0.5);
    const int64_t out[7] = {128, 64, 64, 128, 256, 256, 128};
    const int64_t in[7] = {128, 128, 128, 128, 128, 128, 256};
    quant::ActivationStats stats;
    stats.layers.resize(2);
    for (int l = 0; l < 2; ++l) {
      for (int m = 0; m < 7; ++m) {
        add(model::LinearTensorName(l, static_cast<model::Matrix>(m)),
            at::randn({out[m], in[m]}) * 0.05);
        stats.layers[l][m].mean_abs = at::rand({in[m]}) + 0.05;
      }
      add(absl::StrCat("model.layers.", l, ".input_layernorm.weight"), at::rand({128}) + 0.5);
      add(absl::StrCat("model.layers.", l, ".post_attention_layernorm.weight"),
          at::rand({128}) + 0.5);
    }
    if (!w.Write(x->dir + "/model.safetensors").ok() ||
        !base::WriteFileAtomic(x->dir + "/config.json", c.ToJson()).ok() ||
        !base::WriteFileAtomic(x->dir + "/tokenizer.json", "{\"stub\": true}").ok()) {
      std::abort();
    }
    auto ckpt = model::Checkpoint::Open(x->dir);
    if (!ckpt.ok()) std::abort();
    x->ckpt = *std::move(ckpt);
    auto weights = x->ckpt->LoadWeights(model::LoadRequest{});
    if (!weights.ok() || weights->layers[0].linear[0].scalar_type() != at::kBFloat16) std::abort();
    x->weights = *std::move(weights);
    quant::UnitTableOptions o;
    o.chunk_size = 64;
    auto fits = quant::BuildStageFits(x->weights, stats, o, "fp-bf16");
    if (!fits.ok()) std::abort();
    x->fits = *std::move(fits);
    return x;
  }();
  return *f;
}

// Streaming from the checkpoint (one layer loaded at a time) writes the same bytes as
// from the model in memory; the file's tensor bytes are the plan's whole-model bits
// (fixed tensors stored and counted as BF16); the stream writer lays the file out
// exactly as the whole-file SafetensorsWriter would.
TEST(QuantizedCheckpointTest, Bf16CheckpointStreamsAndItsBytesAreTheCountedBits) {
  const Bf16Model& f = Bf16();
  const plan::UnitTable& t = f.fits.table();
  EXPECT_EQ(t.fixed_param_bits, 16);
  const plan::Plan plan = MixedPlan(t);
  ExportInputs in;
  in.checkpoint = f.ckpt.get();
  in.table = &t;
  in.fits = &f.fits;
  in.plan = &plan;
  in.model_dir = f.dir;
  const std::string dir = ::testing::TempDir() + "/qckpt_bf16_out";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(WriteQuantizedCheckpoint(in, dir + "/streamed").ok());
  ASSERT_TRUE(VerifyQuantizedCheckpoint(in, dir + "/streamed", "streamed").ok());
  ExportInputs resident = in;
  resident.checkpoint = nullptr;
  resident.weights = &f.weights;
  ASSERT_TRUE(WriteQuantizedCheckpoint(resident, dir + "/resident").ok());
  const std::string name = std::string("/") + kQuantizedFileName;
  auto streamed = base::ReadFile(dir + "/streamed" + name);
  auto in_memory = base::ReadFile(dir + "/resident" + name);
  ASSERT_TRUE(streamed.ok() && in_memory.ok());
  EXPECT_TRUE(*streamed == *in_memory);

  auto file = model::SafetensorsFile::Open(dir + "/streamed" + name);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->Find("model.embed_tokens.weight")->dtype, model::Dtype::kBF16);
  EXPECT_EQ((*file)->Find("lm_head.weight")->dtype, model::Dtype::kBF16);
  const plan::PlanTotals totals = plan.Totals(t);
  const double counted =
      totals.whole_model_bits * static_cast<double>(totals.quantized_weights + t.fixed_fp16_params);
  const double written = 8.0 * static_cast<double>(TensorBytes(**file));
  EXPECT_GE(written, counted - 1e-6);
  EXPECT_LE(written, counted * 1.005);
  std::printf("bf16 model: %.0f tensor bytes written, %.1f counted (+%.3f %%)\n", written / 8,
              counted / 8, 100 * (written / counted - 1));

  // The same tensors through the whole-file writer: the same bytes.
  model::SafetensorsWriter w;
  for (const auto& [k, v] : (*file)->metadata()) w.SetMetadata(k, v);
  for (const model::TensorInfo& ti : (*file)->tensors()) {
    ASSERT_TRUE(w.AddRaw(ti.name, ti.dtype, ti.shape, std::string((*file)->Data(ti))).ok());
  }
  EXPECT_TRUE(w.Serialize() == *streamed);
}

// error-case: model.export-fixed-bits
TEST(QuantizedCheckpointTest, ExportRefusesATableCountingOtherFixedBits) {
  const Fixture& f = Tiny();
  const plan::Plan plan = MixedPlan(f.sq.table());
  plan::UnitTable other = f.sq.table();
  other.fixed_param_bits = 32;  // the Tiny model stores its embeddings as F16
  ExportInputs in = Inputs(f, &plan);
  in.table = &other;
  const absl::Status st = WriteQuantizedCheckpoint(in, ::testing::TempDir() + "/qckpt_bits");
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_NE(std::string(st.message()).find("at 32 bits"), std::string::npos) << st;
}

// A file missing one unit tensor is refused at Open, naming it; corrupt codes fail the
// forward that decodes them with a status naming the tensor, not a crash.
// error-case: model.quantized-missing-tensor
// error-case: model.quantized-corrupt-codes
TEST(QuantizedCheckpointTest, ReaderNamesMissingTensorsAndCorruptCodes) {
  const Fixture& f = Tiny();
  const plan::Plan plan = MixedPlan(f.sq.table());
  const std::string dir = ::testing::TempDir() + "/qckpt_corrupt";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(WriteQuantizedCheckpoint(Inputs(f, &plan), dir).ok());
  const std::string path = dir + "/" + kQuantizedFileName;
  std::string victim;  // the codes of the first ternary unit
  for (const plan::Unit& u : f.sq.table().units) {
    if (plan::kAllActions[plan.actions[u.id]] == plan::Action::k1_58 && victim.empty()) {
      victim = UnitTensorPrefix(u.layer, u.matrix, u.chunk) + ".codes";
    }
  }
  ASSERT_FALSE(victim.empty());
  auto file = model::SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok());
  const uint64_t at_byte = (*file)->data_offset() + (*file)->Find(victim)->begin;
  const uint64_t size = (*file)->Find(victim)->num_bytes();
  {  // without the tensor
    model::SafetensorsWriter w;
    for (const auto& [k, v] : (*file)->metadata()) w.SetMetadata(k, v);
    for (const model::TensorInfo& ti : (*file)->tensors()) {
      if (ti.name == victim) continue;
      ASSERT_TRUE(w.AddRaw(ti.name, ti.dtype, ti.shape, std::string((*file)->Data(ti))).ok());
    }
    const std::string cut = dir + "_cut";
    std::filesystem::remove_all(cut);
    std::filesystem::copy(dir, cut);
    ASSERT_TRUE(w.Write(cut + "/" + kQuantizedFileName).ok());
    auto q = QuantizedCheckpoint::Open(cut);
    ASSERT_FALSE(q.ok());
    EXPECT_EQ(q.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(std::string(q.status().message()).find(victim + " missing"), std::string::npos)
        << q.status();
  }
  file->reset();
  auto bytes = base::ReadFile(path);
  ASSERT_TRUE(bytes.ok());
  for (uint64_t i = 0; i < size; ++i) (*bytes)[at_byte + i] = '\xff';  // groups >= 3^17
  ASSERT_TRUE(base::WriteFileAtomic(path, *bytes).ok());
  auto q = QuantizedCheckpoint::Open(dir);
  ASSERT_TRUE(q.ok()) << q.status();  // the header is intact
  auto llama = QuantizedCheckpoint::Model(*std::move(q));
  ASSERT_TRUE(llama.ok()) << llama.status();
  std::vector<int32_t> ids(200);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(3 + i % 30);
  model::PerplexityOptions po;
  po.context = 32;
  auto p = model::ComputePerplexity(**llama, ids, po);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(std::string(p.status().message()).find(victim), std::string::npos) << p.status();
}

TEST(QuantizedCheckpointTest, ReaderRejectsMissingFiles) {
  auto r = QuantizedCheckpoint::Open(::testing::TempDir() + "/no_such_dir");
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace windquant::exporter
