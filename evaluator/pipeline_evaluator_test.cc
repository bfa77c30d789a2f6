#include "evaluator/pipeline_evaluator.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>

#include <gtest/gtest.h>

#include "common/base/files.h"
#include "common/model/checkpoint.h"
#include "common/model/tokenizer.h"
#include "common/quant/calibration.h"
#include "common/quant/quantized_stage.h"
#include "common/quant/unit_table_builder.h"
#include "common/stage/stage_worker.h"
#include "common/testing/stage_test_util.h"
#include "common/testing/status_matchers.h"
#include "common/transport/fake_activation_transport.h"
#include "common/transport/local_activation_transport.h"

namespace windquant::evaluator {
namespace {

using ::windquant::testing::StatusIs;
constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

// Perplexity through the pipeline vs model::ComputePerplexity: same windows,
// same micro-batches, same double accumulation, float32 hidden states passed
// unchanged between stages, so only the order of nothing differs.
constexpr double kPerplexityRelTol = 1e-9;
// Stage-wise unit tables vs one process: statistics are accumulated in double
// over identical micro-batches, so fits agree to float rounding.
constexpr double kTableRelTol = 1e-6;

std::string ModelDir() { return testing::RealModelDir(); }

// Shape of the real test model (stories260k: 5 layers of 64; the default model: 4 of 128).
const model::LlamaConfig& RealConfig() {
  static const model::LlamaConfig c = *model::LlamaConfig::FromDirectory(ModelDir());
  return c;
}
using testing::RandomIds;

class PipelineEvaluatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.context = 64;
    options_.batch_size = 4;
    options_.calib_slice_tokens = 1000;
    options_.eval_slice_tokens = 1500;
    options_.calibration_samples = 6;
    options_.calibration_seq_len = 32;
    options_.calibration_seed = 5;
    options_.calibration_batch = 2;
    // Real text, so that quantization measurably hurts (on random ids it need not).
    auto tok = model::Tokenizer::FromFile(ModelDir() + "/tokenizer.json");
    ASSERT_TRUE(tok.ok()) << tok.status();
    auto text = base::ReadFile(::windquant::testing::RealModel().text_path);
    ASSERT_TRUE(text.ok()) << text.status();
    const std::vector<int32_t> ids = (*tok)->Encode(*text);
    ASSERT_GE(ids.size(), 6000u);
    calib_ids_.assign(ids.begin(), ids.begin() + 3000);
    eval_ids_.assign(ids.begin() + 3000, ids.begin() + 6000);
    auto ev = PipelineEvaluator::Create(ModelDir(), options_, calib_ids_, eval_ids_);
    ASSERT_TRUE(ev.ok()) << ev.status();
    evaluator_ = *std::move(ev);
    const int64_t L = RealConfig().num_hidden_layers;
    for (auto [a, b] : std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {2, L}}) {
      const absl::Status added = local_.Add(ModelDir(), a, b, 32);
      ASSERT_TRUE(added.ok()) << added;
    }
    auto checkpoint = model::Checkpoint::Open(ModelDir());
    ASSERT_TRUE(checkpoint.ok());
    auto weights = (*checkpoint)->LoadWeights(model::LoadRequest{});
    ASSERT_TRUE(weights.ok());
    whole_ = std::make_unique<model::LlamaModel>(*std::move(weights));
  }

  PipelineEvaluatorOptions options_;
  std::vector<int32_t> calib_ids_, eval_ids_;
  std::unique_ptr<PipelineEvaluator> evaluator_;
  testing::LocalStages local_;
  std::vector<transport::ActivationTransport*>& stages_ = local_.stages;
  std::unique_ptr<model::LlamaModel> whole_;
};

TEST_F(PipelineEvaluatorTest, TwoStagePipelineEqualsSingleProcessPerplexity) {
  auto piped = evaluator_->Perplexity(stages_, transport::PassSpec{}, eval_ids_, 0);
  ASSERT_TRUE(piped.ok()) << piped.status();
  model::PerplexityOptions po;
  po.context = options_.context;
  po.batch_size = options_.batch_size;
  auto ref = model::ComputePerplexity(*whole_, eval_ids_, po);
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(piped->tokens, ref->tokens);
  EXPECT_EQ(piped->windows, ref->windows);
  EXPECT_NEAR(piped->total_nll, ref->total_nll, kPerplexityRelTol * ref->total_nll);
  EXPECT_NEAR(piped->perplexity, ref->perplexity, kPerplexityRelTol * ref->perplexity);
  EXPECT_GT(ref->perplexity, 1.0);
}

TEST_F(PipelineEvaluatorTest, RejectsStagesThatDoNotChainToTheModel) {
  std::vector<transport::ActivationTransport*> gap = {stages_[1]};
  EXPECT_THAT(evaluator_->Perplexity(gap, transport::PassSpec{}, eval_ids_, 0),
              StatusIs(kInvalid, "stage 1 holds layers ["));
  EXPECT_THAT(evaluator_->CheckChain({stages_[0]}), StatusIs(kInvalid, "stages end at layer "));
  std::vector<transport::ActivationTransport*> swapped = {stages_[1], stages_[0]};
  EXPECT_THAT(evaluator_->CheckChain(swapped),
              StatusIs(kInvalid, "stage 1 holds layers ["));  // named, and expected to start at 0
  EXPECT_THAT(evaluator_->CheckChain(swapped), StatusIs(kInvalid, "expected to start at 0"));
  EXPECT_THAT(evaluator_->CheckChain({}), StatusIs(kInvalid, "no stages"));
}

TEST_F(PipelineEvaluatorTest, TwoStagesBuildTheSameUnitTableAsOneProcessAndPlansEvaluateAlike) {
  auto tables = evaluator_->Calibrate(stages_, "fp");
  ASSERT_TRUE(tables.ok()) << tables.status();
  auto merged = plan::UnitTable::Merge(*tables);
  ASSERT_TRUE(merged.ok()) << merged.status();

  // One process: the same windows, the same micro-batches, the whole model.
  auto windows = quant::SampleCalibrationWindows(
      calib_ids_, options_.calibration_samples, options_.calibration_seq_len,
      options_.calibration_seed, RealConfig().bos_token_id);
  ASSERT_TRUE(windows.ok());
  auto stats = quant::CalibrateModel(*whole_, *windows, options_.calibration_batch);
  ASSERT_TRUE(stats.ok());
  quant::UnitTableOptions uo;
  uo.chunk_size = 32;
  auto single = quant::BuildStageFits(whole_->weights(), *stats, uo, "fp");
  ASSERT_TRUE(single.ok()) << single.status();
  const plan::UnitTable& one = single->table();
  ASSERT_EQ(merged->units.size(), one.units.size());
  for (size_t i = 0; i < one.units.size(); ++i) {
    const plan::Unit &a = merged->units[i], &b = one.units[i];
    ASSERT_EQ(a.id, b.id);
    ASSERT_EQ(a.salient_count, b.salient_count) << "unit " << i;
    for (int k = 0; k < plan::kNumActions; ++k) {
      EXPECT_NEAR(a.bits[k], b.bits[k], kTableRelTol * b.bits[k]) << "unit " << i;
      EXPECT_NEAR(a.error[k], b.error[k], kTableRelTol * std::abs(b.error[k]) + 1e-12)
          << "unit " << i << " action " << k;
    }
    for (int f = 0; f < plan::kNumStaticFeatures; ++f) {
      EXPECT_NEAR(a.features[f], b.features[f], 1e-5) << "unit " << i << " feature " << f;
    }
  }

  // A 2-bit plan through the pipeline == the plan applied to the whole model.
  plan::Plan plan;
  plan.plan_id = "two-bit";
  plan.model_fingerprint = "fp";
  plan.actions.assign(one.units.size(), static_cast<int>(plan::Action::k2));
  auto e = evaluator_->Evaluate(stages_, plan);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_FALSE(e->cached);
  auto quantized_model =
      quant::ApplyPlan(*whole_, std::make_shared<const quant::StageFits>(*std::move(single)),
                       std::make_shared<const std::vector<int>>(plan.actions));
  ASSERT_TRUE(quantized_model.ok()) << quantized_model.status();
  const model::LlamaModel& quantized = **quantized_model;
  model::PerplexityOptions po;
  po.context = options_.context;
  po.batch_size = options_.batch_size;
  po.max_tokens = options_.eval_slice_tokens;
  auto ref = model::ComputePerplexity(quantized, eval_ids_, po);
  ASSERT_TRUE(ref.ok());
  EXPECT_NEAR(e->eval_ppl, ref->perplexity, 1e-6 * ref->perplexity);
  EXPECT_GT(e->relative_ppl_increase, 0.0);
  EXPECT_GT(e->loss_increase, 0.0);

  // The identical plan under another id is answered from the cache.
  plan.plan_id = "same-actions";
  auto again = evaluator_->Evaluate(stages_, plan);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->cached);
  EXPECT_EQ(again->eval_ppl, e->eval_ppl);

  // A plan for another model is refused by the stages.
  plan.model_fingerprint = "other";
  plan.actions[0] = 3;
  auto other = evaluator_->Evaluate(stages_, plan);
  EXPECT_THAT(other, StatusIs(kInvalid, "model_fingerprint"));
}

TEST(PipelineDriverTest, FailureOnAStageSurfacesWithItsNameAndEverythingStops) {
  const int64_t L = RealConfig().num_hidden_layers;
  PipelineEvaluatorOptions o;
  o.context = 16;
  o.batch_size = 2;
  auto ev = PipelineEvaluator::Create(ModelDir(), o, RandomIds(400, 3), RandomIds(400, 4));
  ASSERT_TRUE(ev.ok());
  transport::FakeActivationTransport s0(0, L - 2, 1.0f, 0.0f), s1(L - 2, L, 1.0f, 0.0f);
  std::vector<transport::ActivationTransport*> stages = {&s0, &s1};
  auto ok = (*ev)->Perplexity(stages, transport::PassSpec{}, RandomIds(400, 4), 0);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(s1.micro_batches(), (400 / 15 + 1) / 2);
  s1.FailAt(3, absl::UnavailableError("actor gone"));
  auto failed = (*ev)->Perplexity(stages, transport::PassSpec{}, RandomIds(400, 4), 0);
  EXPECT_THAT(failed, StatusIs(absl::StatusCode::kUnavailable,
                               absl::StrCat("fake stage [", L - 2, ", ", L, "): actor gone")));
}

}  // namespace
}  // namespace windquant::evaluator
