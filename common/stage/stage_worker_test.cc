#include "common/stage/stage_worker.h"

#include <array>
#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/model/checkpoint.h"
#include "common/model/llama_config.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_paths.h"

namespace windquant::stage {
namespace {

using ::windquant::testing::StatusIs;
constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

std::string ModelDir() { return ::windquant::testing::RealModel().dir; }

// Shape of the real test model (stories260k: 5 layers of 64; the default model: 4 of 128).
const model::LlamaConfig& RealConfig() {
  static const model::LlamaConfig c = *model::LlamaConfig::FromDirectory(ModelDir());
  return c;
}

class StageWorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StageWorkerOptions o;
    o.model_dir = ModelDir();
    o.first_layer = 1;
    o.end_layer = 3;
    o.units.chunk_size = 32;
    o.plan_cache_size = 2;
    auto w = StageWorker::Create(o);
    ASSERT_TRUE(w.ok()) << w.status();
    worker_ = *std::move(w);
    at::manual_seed(7);
    hidden_ = at::randn({2, 9, RealConfig().hidden_size});
  }
  std::unique_ptr<StageWorker> worker_;
  at::Tensor hidden_;
};

TEST_F(StageWorkerTest, LoadsOnlyItsLayersAndMatchesTheWholeModel) {
  EXPECT_EQ(worker_->first_layer(), 1);
  EXPECT_EQ(worker_->end_layer(), 3);
  auto checkpoint = model::Checkpoint::Open(ModelDir());
  ASSERT_TRUE(checkpoint.ok());
  auto weights = (*checkpoint)->LoadWeights(model::LoadRequest{});
  ASSERT_TRUE(weights.ok());
  model::LlamaModel whole(*std::move(weights));
  auto out = worker_->Forward("", nullptr, hidden_);
  ASSERT_TRUE(out.ok()) << out.status();
  const at::Tensor ref = whole.ForwardLayers(hidden_, 1, 3);
  EXPECT_TRUE(at::equal(*out, ref));
}

TEST_F(StageWorkerTest, RejectsBadHiddenStatesNamingTheField) {
  auto wrong = worker_->Forward("", nullptr, at::randn({2, 9, RealConfig().hidden_size - 1}));
  EXPECT_THAT(wrong, StatusIs(kInvalid,
                              absl::StrCat("hidden: hidden size ", RealConfig().hidden_size - 1)));
  at::Tensor nan = hidden_.clone();
  nan[0][0][0] = std::nanf("");
  auto bad = worker_->Forward("", nullptr, nan);
  EXPECT_THAT(bad, StatusIs(kInvalid, "hidden: contains NaN or Inf"));
  auto twod = worker_->Forward("", nullptr, at::randn({9, RealConfig().hidden_size}));
  EXPECT_THAT(twod, StatusIs(kInvalid, "hidden: must be [batch, seq, hidden]"));
}

// model.compute_dtype bfloat16: the stage takes and gives bf16 hidden states, equal to the
// whole model's bf16 forward, calibrates and applies plans in bf16, and refuses float32
// (as a float32 stage refuses bf16) naming both dtypes.
TEST_F(StageWorkerTest, Bfloat16StageComputesInBfloat16AndRefusesAnotherDtype) {
  StageWorkerOptions o;
  o.model_dir = ModelDir();
  o.compute.dtype = model::ComputeDtype::kBFloat16;
  o.first_layer = 1;
  o.end_layer = 3;
  o.units.chunk_size = 32;
  auto w = StageWorker::Create(o);
  ASSERT_TRUE(w.ok()) << w.status();
  StageWorker& bf16 = **w;
  const at::Tensor hidden = hidden_.to(at::kBFloat16);
  auto out = bf16.Forward("", nullptr, hidden);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->scalar_type(), at::kBFloat16);
  auto checkpoint = model::Checkpoint::Open(ModelDir());
  ASSERT_TRUE(checkpoint.ok());
  auto weights = (*checkpoint)->LoadWeights(model::LoadRequest{});
  ASSERT_TRUE(weights.ok());
  model::LlamaModel whole(*std::move(weights), o.compute);
  EXPECT_TRUE(at::equal(*out, whole.ForwardLayers(hidden, 1, 3)));

  EXPECT_THAT(bf16.Forward("", nullptr, hidden_),
              StatusIs(kInvalid,
                       "hidden: float32, but this stage computes in bfloat16 "
                       "(model.compute_dtype)"));
  EXPECT_THAT(worker_->Forward("", nullptr, hidden),
              StatusIs(kInvalid, "hidden: bfloat16, but this stage computes in float32"));

  bf16.StartCalibration();
  ASSERT_TRUE(bf16.Calibrate(hidden).ok());
  auto table = bf16.FinishCalibration("fp");
  ASSERT_TRUE(table.ok()) << table.status();
  auto actions = std::make_shared<const std::vector<int>>(10000, 3);
  auto planned = bf16.Forward("p", actions, hidden);
  ASSERT_TRUE(planned.ok()) << planned.status();
  EXPECT_EQ(planned->scalar_type(), at::kBFloat16);
  EXPECT_FALSE(at::equal(*planned, *out));
}

TEST_F(StageWorkerTest, PlansNeedFitsAndAreAppliedOncePerPlanId) {
  auto actions = std::make_shared<const std::vector<int>>(10000, 4);
  EXPECT_EQ(worker_->Forward("p", actions, hidden_).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(worker_->FinishCalibration("fp").status().code(),
            absl::StatusCode::kFailedPrecondition);
  worker_->StartCalibration();
  ASSERT_TRUE(worker_->Calibrate(hidden_).ok());
  auto table = worker_->FinishCalibration("fp");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->first_layer, 1);
  EXPECT_EQ(table->end_layer, 3);
  ASSERT_FALSE(table->units.empty());
  EXPECT_GT(table->units.front().id, 0u);  // global ids: layer 0's units come first

  auto fp16 = std::make_shared<const std::vector<int>>(10000, 0);
  auto fp = worker_->Forward("", nullptr, hidden_);
  auto keep = worker_->Forward("all16", fp16, hidden_);
  auto two = worker_->Forward("all2", actions, hidden_);
  ASSERT_TRUE(fp.ok() && keep.ok() && two.ok());
  // FP16 round trip is close to FP32; 2-bit is not.
  EXPECT_LT((*keep - *fp).abs().max().item<float>(), 1e-2);
  EXPECT_GT((*two - *fp).abs().max().item<float>(), 1e-2);
  // A known plan id needs no actions; an unknown one without actions is NOT_FOUND.
  auto again = worker_->Forward("all2", nullptr, hidden_);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(at::equal(*again, *two));
  EXPECT_EQ(worker_->Forward("other", nullptr, hidden_).status().code(),
            absl::StatusCode::kNotFound);
  // Out-of-range action.
  auto bad = std::make_shared<const std::vector<int>>(10000, 9);
  EXPECT_EQ(worker_->Forward("bad", bad, hidden_).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(StageWorkerTest, RestartedWorkerReloadsCachedFits) {
  const std::string dir = ::testing::TempDir() + "/wq-stage-cache";
  std::filesystem::remove_all(dir);
  StageWorkerOptions o;
  o.model_dir = ModelDir();
  o.first_layer = 0;
  o.end_layer = 2;
  o.units.chunk_size = 32;
  o.cache_dir = dir;
  auto a = StageWorker::Create(o);
  ASSERT_TRUE(a.ok());
  EXPECT_THAT((*a)->LoadCachedFits("fp"),
              StatusIs(absl::StatusCode::kNotFound, "unit table cache: no entry " + dir));
  (*a)->StartCalibration();
  ASSERT_TRUE((*a)->Calibrate(hidden_).ok());
  auto table = (*a)->FinishCalibration("fp");
  ASSERT_TRUE(table.ok()) << table.status();
  auto b = StageWorker::Create(o);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE((*b)->LoadCachedFits("fp").ok());
  auto reloaded = (*b)->table();
  ASSERT_TRUE(reloaded.ok());
  ASSERT_EQ(reloaded->units.size(), table->units.size());
  EXPECT_EQ(reloaded->units.back().error, table->units.back().error);
  auto actions = std::make_shared<const std::vector<int>>(10000, 3);
  auto x = (*a)->Forward("p", actions, hidden_);
  auto y = (*b)->Forward("p", actions, hidden_);
  ASSERT_TRUE(x.ok() && y.ok());
  EXPECT_TRUE(at::equal(*x, *y));
  // One entry per layer range: another stage of the same fingerprint misses it.
  StageWorkerOptions other = o;
  other.end_layer = 1;
  auto c = StageWorker::Create(other);
  ASSERT_TRUE(c.ok());
  EXPECT_THAT((*c)->LoadCachedFits("fp"), StatusIs(absl::StatusCode::kNotFound));
}

// With quant.compensation gptq the calibration pass also collects the Hessians and plans
// are applied with error compensation: on the calibration inputs themselves (what the
// compensation minimises, layer by layer) a 2-bit plan's output is closer to full
// precision than without. The Hessians are not cached, so the fit cache is not read.
TEST_F(StageWorkerTest, CompensationLowersThePlanErrorOnTheCalibrationInputs) {
  std::array<at::Tensor, 2> two;
  for (const quant::Compensation comp : {quant::Compensation::kNone, quant::Compensation::kGptq}) {
    StageWorkerOptions o;
    o.model_dir = ModelDir();
    o.first_layer = 1;
    o.end_layer = 3;
    o.units.chunk_size = 32;
    o.cache_dir = ::testing::TempDir() + "/wq-stage-comp-cache";
    o.compensation = comp;
    auto w = StageWorker::Create(o);
    ASSERT_TRUE(w.ok()) << w.status();
    (*w)->StartCalibration();
    ASSERT_TRUE((*w)->Calibrate(hidden_).ok());
    ASSERT_TRUE((*w)->FinishCalibration("comp").ok());
    const bool gptq = comp == quant::Compensation::kGptq;
    EXPECT_EQ((*w)->stage()->fits().compensation() != nullptr, gptq);
    if (gptq) {
      EXPECT_THAT((*w)->LoadCachedFits("comp"),
                  StatusIs(absl::StatusCode::kNotFound, "error compensation"));
    }
    auto actions = std::make_shared<const std::vector<int>>(10000, 4);
    auto out = (*w)->Forward("all2", actions, hidden_);
    ASSERT_TRUE(out.ok()) << out.status();
    two[gptq ? 1 : 0] = *out;
  }
  const at::Tensor fp = *worker_->Forward("", nullptr, hidden_);
  const double none_err = (two[0] - fp).pow(2).sum().item<double>();
  const double gptq_err = (two[1] - fp).pow(2).sum().item<double>();
  EXPECT_LT(gptq_err, none_err);
}

}  // namespace
}  // namespace windquant::stage
