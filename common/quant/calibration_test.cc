// Calibration refuses NaN/Inf activations (a weight that overflows the
// residual stream) instead of folding them into the statistics that every
// unit table entry is fitted from.
#include "common/quant/calibration.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "common/model/llama_model.h"

#include "common/testing/status_matchers.h"

namespace windquant::quant {
namespace {

using ::windquant::testing::IsOk;
using ::windquant::testing::StatusIs;

// `overflow`: gate = up = 1 makes every MLP activation s^2 * sigmoid(s) >= 0
// (s = the sum of the normalized input), and down = 3e38 sums 24 of them past
// the float range, so the residual stream becomes Inf on every token.
model::LlamaWeights TinyWeights(bool overflow) {
  model::LlamaConfig c;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 4;
  c.vocab_size = 32;
  at::manual_seed(3);
  const std::vector<std::vector<int64_t>> shapes = {{16, 16}, {8, 16},  {8, 16}, {16, 16},
                                                    {24, 16}, {24, 16}, {16, 24}};
  model::LlamaWeights w;
  w.config = c;
  for (int l = 0; l < 2; ++l) {
    model::LayerWeights lw;
    for (int m = 0; m < model::kNumMatrices; ++m) lw.linear[m] = at::randn(shapes[m]) * 0.2;
    if (overflow) {
      lw.at(model::Matrix::kGate).fill_(1.0f);
      lw.at(model::Matrix::kUp).fill_(1.0f);
      lw.at(model::Matrix::kDown).fill_(3e38f);
    }
    lw.input_layernorm = at::ones({16});
    lw.post_attention_layernorm = at::ones({16});
    w.layers.push_back(std::move(lw));
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
