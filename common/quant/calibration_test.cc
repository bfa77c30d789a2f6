// Calibration refuses NaN/Inf activations (a weight that overflows the
// residual stream) instead of folding them into the statistics that every
// unit table entry is fitted from.
#include "common/quant/calibration.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "common/model/llama_model.h"

#include "common/testing/status_matchers.h"
#include "common/testing/tiny_weights.h"

namespace windquant::quant {
namespace {

using ::windquant::testing::IsOk;
using ::windquant::testing::StatusIs;

// `overflow`: gate = up = 1 makes every MLP activation s^2 * sigmoid(s) >= 0
// (s = the sum of the normalized input), and down = 3e38 sums 24 of them past
// the float range, so the residual stream becomes Inf on every token.
model::LlamaWeights TinyWeights(bool overflow) {
  model::LlamaWeights w = testing::TinyLayerWeights(2);
  if (overflow) {
    for (model::LayerWeights& lw : w.layers) {
      lw.at(model::Matrix::kGate).fill_(1.0f);
      lw.at(model::Matrix::kUp).fill_(1.0f);
      lw.at(model::Matrix::kDown).fill_(3e38f);
    }
  }
  return w;
}

TEST(CalibrationTest, FiniteActivationsPass) {
  model::LlamaModel model(TinyWeights(false));
  Calibrator calibrator(model, 0, 2);
  EXPECT_THAT(calibrator.RunStage(at::randn({2, 8, 16})).status(), IsOk());
}

// error-case: model.calibration-non-finite
TEST(CalibrationTest, NonFiniteActivationsAreRefused) {
  model::LlamaModel model(TinyWeights(true));
  Calibrator calibrator(model, 0, 2);
  EXPECT_THAT(calibrator.RunStage(at::randn({2, 8, 16})).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "calibration: layers [0, 2) produce NaN or Inf activations"));
}

// The windows go through in order, `batch` at a time (the last batch short), as the
// embeddings of their ids; the first error of a stage stops the pass.
TEST(CalibrationTest, RunCalibrationWindowsEmbedsEachBatchInOrder) {
  model::LlamaWeights w = TinyWeights(false);
  w.embed_tokens = at::randn({32, 16});
  model::LlamaModel model(std::move(w));
  const at::Tensor windows = at::arange(5 * 3, at::kLong).remainder(32).reshape({5, 3});
  std::vector<at::Tensor> seen;
  EXPECT_THAT(RunCalibrationWindows(model, windows, 2, "calibration",
                                    [&](const at::Tensor& hidden) {
                                      seen.push_back(hidden);
                                      return absl::OkStatus();
                                    }),
              IsOk());
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].size(0), 2);
  EXPECT_EQ(seen[2].size(0), 1);
  EXPECT_TRUE(at::equal(seen[1], model.Embed(windows.slice(0, 2, 4))));
  int calls = 0;
  EXPECT_THAT(RunCalibrationWindows(model, windows, 2, "calibration",
                                    [&](const at::Tensor&) {
                                      ++calls;
                                      return absl::InternalError("stage: failed");
                                    }),
              StatusIs(absl::StatusCode::kInternal, "stage: failed"));
  EXPECT_EQ(calls, 1);
}

TEST(CalibrationTest, RunCalibrationWindowsNamesItsCallerOnATorchError) {
  model::LlamaWeights w = TinyWeights(false);
  w.embed_tokens = at::randn({32, 16});
  model::LlamaModel model(std::move(w));
  const at::Tensor past_the_vocabulary = at::full({2, 3}, 1000, at::kLong);
  EXPECT_THAT(RunCalibrationWindows(model, past_the_vocabulary, 2, "hessians",
                                    [](const at::Tensor&) { return absl::OkStatus(); }),
              StatusIs(absl::StatusCode::kInternal, "hessians: "));
}

}  // namespace
}  // namespace windquant::quant
