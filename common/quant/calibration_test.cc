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

// The device path's torch reductions (on the CPU here) give the statistics of the
// token-by-token CPU sums (float64 sums of float32 values: equal after the float32 mean
// except at a rounding midpoint), on the host, over two batches.
TEST(CalibrationTest, TorchReductionsGiveTheCpuStatistics) {
  model::LlamaModel model(TinyWeights(false));
  Calibrator cpu(model, 0, 2), torch_ops(model, 0, 2);
  torch_ops.UseTorchReductions();
  at::manual_seed(3);
  for (const at::Tensor& x : {at::randn({2, 8, 16}), at::randn({3, 5, 16})}) {
    ASSERT_THAT(cpu.RunStage(x).status(), IsOk());
    ASSERT_THAT(torch_ops.RunStage(x).status(), IsOk());
  }
  const ActivationStats a = cpu.Finish(), b = torch_ops.Finish();
  for (int64_t l = 0; l < 2; ++l) {
    for (int m = 0; m < model::kNumMatrices; ++m) {
      const LinearInputStats &x = a.at(l, static_cast<model::Matrix>(m)),
                             &y = b.at(l, static_cast<model::Matrix>(m));
      EXPECT_EQ(y.tokens, 31);
      EXPECT_EQ(x.tokens, y.tokens);
      EXPECT_TRUE(y.mean_abs.device().is_cpu());
      EXPECT_TRUE(at::allclose(x.mean_abs, y.mean_abs, 1e-6, 0)) << l << " " << m;
      EXPECT_TRUE(at::allclose(x.mean_sq, y.mean_sq, 1e-6, 0)) << l << " " << m;
    }
  }
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
