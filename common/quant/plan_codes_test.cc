// LayerCodes (the device path of a plan) against the CPU kernels (StageFits::ApplyToLayer),
// in float32 on the CPU: every action, a mix, salient entries, zero scales (an all-zero
// row, and scales forced to 0 under nonzero weights), a -0.0 weight, units of two widths
// in one matrix. The decoded weights must be the kernels' bit for bit, except the one
// difference plan_codes.h allows: +0.0 where the kernels wrote -0.0 (an INT8 code has no
// -0), counted and checked to be only that.
#include "common/quant/plan_codes.h"

#include <c10/core/GradMode.h>

#include <array>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "common/model/llama_model.h"
#include "common/quant/calibration.h"
#include "common/quant/fit_kernels.h"
#include "common/quant/quantized_stage.h"
#include "common/quant/unit_table_builder.h"
#include "common/testing/tiny_weights.h"

namespace windquant::quant {
namespace {

constexpr int64_t kLayers = 2;
constexpr int64_t kZeroRow = 3;    // all-zero weights in layer 0's q and down
constexpr int64_t kZeroScale = 5;  // scales forced to 0 in every unit (weights nonzero);
                                   // row kZeroRow's too (0 / 0)

// Tiny layers with an all-zero row and a -0.0 weight, and fits of units 10 columns wide
// (16 = 10 + 6, 24 = 10 + 10 + 4: two widths per matrix) with salient entries; then every
// unit's rows kZeroRow and kZeroScale get scale 0 for every action (and offset 0 at 1 bit).
struct Stage {
  model::LlamaWeights weights;
  std::shared_ptr<const StageFits> fits;
};

Stage MakeStage() {
  Stage s;
  s.weights = testing::TinyLayerWeights(kLayers);
  s.weights.layers[0].linear[0][kZeroRow].zero_();
  s.weights.layers[0].linear[6][kZeroRow].zero_();
  s.weights.layers[1].linear[4][2][5] = -0.0f;
  const model::LlamaModel fp(s.weights);
  Calibrator calibrator(fp, 0, kLayers);
  {
    c10::NoGradGuard no_grad;
    at::manual_seed(11);
    EXPECT_TRUE(calibrator.RunStage(at::randn({2, 9, 16})).ok());
  }
  UnitTableOptions o;
  o.chunk_size = 10;
  o.salient_fraction = 0.05;
  absl::StatusOr<StageFits> fitted = BuildStageFits(s.weights, calibrator.Finish(), o, "fp");
  EXPECT_TRUE(fitted.ok()) << fitted.status();
  std::vector<StageFits::UnitParams> params;
  for (size_t i = 0; i < fitted->table().units.size(); ++i) {
    StageFits::UnitParams p = fitted->params(i);
    const int64_t rows = fitted->table().units[i].rows;
    for (int64_t r : {kZeroRow, kZeroScale}) {
      for (int a = 0; a < plan::kNumActions - 1; ++a) p.scales[a * rows + r] = 0;
      p.offsets[r] = 0;
    }
    params.push_back(std::move(p));
  }
  absl::StatusOr<StageFits> forced = StageFits::Create(fitted->table(), std::move(params));
  EXPECT_TRUE(forced.ok()) << forced.status();
  s.fits = std::make_shared<const StageFits>(*std::move(forced));
  return s;
}

// What today's CPU kernels give for layer `layer` under `actions`.
std::array<at::Tensor, model::kNumMatrices> KernelWeights(const Stage& s, int64_t layer,
                                                          const std::vector<int>& actions) {
  std::array<at::Tensor, model::kNumMatrices> w;
  for (int m = 0; m < model::kNumMatrices; ++m) {
    w[m] = s.weights.layers[layer].linear[m].to(at::kFloat).clone().contiguous();
  }
  s.fits->ApplyToLayer(layer, actions, &w);
  return w;
}

// Where plan_codes.h allows +0.0 for the kernels' -0.0 in `layer`'s matrix `m`: the
// entries of units at 8, 4, 3 or 1.58 bits in rows of nonzero scale (code -0), not salient.
at::Tensor ZeroSignAllowed(const StageFits& fits, const std::vector<int>& actions, int64_t layer,
                           int m, const at::Tensor& like) {
  at::Tensor allowed = at::zeros(like.sizes(), at::kBool);
  const std::vector<plan::Unit>& units = fits.table().units;
  for (size_t i = 0; i < units.size(); ++i) {
    const plan::Unit& u = units[i];
    const int a = actions[u.id];
    if (u.layer != layer || u.matrix != m || a == 0 || a == 4 || a == 6) continue;
    const std::vector<float> scales = fits.Scales(i, a);
    for (int64_t r = 0; r < u.rows; ++r) {
      if (scales[r] != 0) allowed[r].slice(0, u.col_begin, u.col_begin + u.cols).fill_(true);
    }
    for (int32_t f : fits.params(i).salient.index)
      allowed[f / u.cols][u.col_begin + f % u.cols] = false;
  }
  return allowed;
}

struct Differences {
  int64_t bits = 0;        // entries whose bits differ, other than those allowed below
  int64_t zero_signs = 0;  // +0.0 here where the kernels wrote -0.0, where allowed
};

Differences Compare(const at::Tensor& got, const at::Tensor& want, const at::Tensor& allowed) {
  EXPECT_EQ(got.sizes(), want.sizes());
  EXPECT_EQ(got.scalar_type(), want.scalar_type());
  const at::ScalarType bits = want.element_size() == 4 ? at::kInt : at::kShort;
  const at::Tensor differ = got.contiguous().view(bits).ne(want.contiguous().view(bits));
  const at::Tensor zero_sign = allowed.logical_and(got.eq(0))
                                   .logical_and(want.eq(0))
                                   .logical_and(want.signbit())
                                   .logical_and(got.signbit().logical_not());
  Differences d;
  d.bits = differ.logical_and(zero_sign.logical_not()).sum().item<int64_t>();
  d.zero_signs = differ.logical_and(zero_sign).sum().item<int64_t>();
  return d;
}

// The plans: every unit at one action, for each of the seven, then a mix of all seven.
std::vector<std::vector<int>> Plans(size_t units) {
  std::vector<std::vector<int>> plans;
  for (int a = 0; a < plan::kNumActions; ++a) plans.emplace_back(units, a);
  std::vector<int> mixed(units);
  for (size_t i = 0; i < units; ++i) mixed[i] = static_cast<int>((i * 5 + 2) % plan::kNumActions);
  plans.push_back(std::move(mixed));
  return plans;
}

std::string PlanName(const std::vector<int>& actions) {
  for (int a : actions) {
    if (a != actions[0]) return "mixed";
  }
  return std::string(plan::ActionName(plan::kAllActions[actions[0]]));
}

// The inputs exercise what they claim to: salient entries, zero scales, two unit widths.
TEST(PlanCodesTest, TheStageHasSalientEntriesZeroScalesAndTwoUnitWidths) {
  const Stage s = MakeStage();
  int64_t salient = 0, narrow = 0;
  for (size_t i = 0; i < s.fits->table().units.size(); ++i) {
    salient += s.fits->params(i).salient.count();
    narrow += s.fits->table().units[i].cols < 10;
    for (int a = 1; a < plan::kNumActions; ++a) EXPECT_EQ(s.fits->Scales(i, a)[kZeroScale], 0.0f);
  }
  EXPECT_GT(salient, 20);
  EXPECT_EQ(narrow, kLayers * model::kNumMatrices);
}

TEST(PlanCodesTest, FromWeightsDecodesToTheKernelsWeightsBitForBit) {
  const Stage s = MakeStage();
  int64_t zero_signs = 0;
  for (const std::vector<int>& actions : Plans(s.fits->table().units.size())) {
    for (int64_t layer = 0; layer < kLayers; ++layer) {
      const auto want = KernelWeights(s, layer, actions);
      const LayerCodes codes =
          LayerCodes::FromWeights(*s.fits, actions, layer, s.weights.layers[layer].linear);
      const auto got = codes.Decode(at::kFloat);
      for (int m = 0; m < model::kNumMatrices; ++m) {
        const Differences d =
            Compare(got[m], want[m], ZeroSignAllowed(*s.fits, actions, layer, m, want[m]));
        EXPECT_EQ(d.bits, 0) << PlanName(actions) << " layer " << layer << " matrix " << m;
        zero_signs += d.zero_signs;
      }
    }
  }
  // The allowed difference happens (small negative weights at 8/4/3/1.58 bits) and is seen.
  EXPECT_GT(zero_signs, 0);
}

TEST(PlanCodesTest, FromBFloat16WeightsDecodesToTheKernelsWeights) {
  Stage s = MakeStage();
  for (auto& l : s.weights.layers) {
    for (auto& w : l.linear) w = w.to(at::kBFloat16);
  }
  for (const std::vector<int>& actions : Plans(s.fits->table().units.size())) {
    const auto want = KernelWeights(s, 1, actions);
    const auto got =
        LayerCodes::FromWeights(*s.fits, actions, 1, s.weights.layers[1].linear).Decode(at::kFloat);
    for (int m = 0; m < model::kNumMatrices; ++m) {
      const at::Tensor allowed = ZeroSignAllowed(*s.fits, actions, 1, m, want[m]);
      EXPECT_EQ(Compare(got[m], want[m], allowed).bits, 0) << PlanName(actions) << " " << m;
    }
  }
}

// A matrix of more than 2^22 entries is coded in row blocks (plan_codes.cc): the blocks
// give the same codes. Fits made by hand (scales from each row's range, no salient set).
TEST(PlanCodesTest, ABigMatrixIsCodedInRowBlocksLikeTheKernels) {
  at::manual_seed(7);
  std::array<at::Tensor, model::kNumMatrices> weights;
  plan::UnitTable table;
  table.end_layer = table.num_layers = 1;
  table.chunk_size = 128;
  std::vector<StageFits::UnitParams> params;
  for (int m = 0; m < model::kNumMatrices; ++m) {
    const int64_t rows = m == 4 ? 4160 : 8, cols = m == 4 ? 1024 : 200;
    weights[m] = at::randn({rows, cols}) * 0.02;
    const at::Tensor range = weights[m].abs().amax(1);
    for (int64_t c = 0; c < cols; c += table.chunk_size) {
      plan::Unit u;
      u.id = static_cast<uint32_t>(table.units.size());
      u.matrix = m;
      u.rows = rows;
      u.col_begin = c;
      u.cols = std::min<int64_t>(table.chunk_size, cols - c);
      table.units.push_back(u);
      StageFits::UnitParams p;
      for (int a = 1; a < plan::kNumActions; ++a) {
        for (int64_t r = 0; r < rows; ++r) {
          p.scales.push_back(HalfBits(range[r].item<float>() / (a == 1 ? 127.0f : 2.5f)));
        }
      }
      for (int64_t r = 0; r < rows; ++r) p.offsets.push_back(HalfBits(0.001f * (r % 5 - 2)));
      params.push_back(std::move(p));
    }
  }
  absl::StatusOr<StageFits> fits = StageFits::Create(table, std::move(params));
  ASSERT_TRUE(fits.ok()) << fits.status();
  std::vector<int> actions(table.units.size());
  for (size_t i = 0; i < actions.size(); ++i) actions[i] = static_cast<int>(i % plan::kNumActions);
  std::array<at::Tensor, model::kNumMatrices> want;
  for (int m = 0; m < model::kNumMatrices; ++m) want[m] = weights[m].clone();
  fits->ApplyToLayer(0, actions, &want);
  const auto got = LayerCodes::FromWeights(*fits, actions, 0, weights).Decode(at::kFloat);
  for (int m = 0; m < model::kNumMatrices; ++m) {
    const at::Tensor allowed = ZeroSignAllowed(*fits, actions, 0, m, want[m]);
    EXPECT_EQ(Compare(got[m], want[m], allowed).bits, 0) << m;
  }
}

// The compensation path's codes: from the dequantized values themselves (here the
// uncompensated ones), every action.
TEST(PlanCodesTest, FromValuesGivesTheValuesBack) {
  const Stage s = MakeStage();
  for (const std::vector<int>& actions : Plans(s.fits->table().units.size())) {
    const auto want = KernelWeights(s, 0, actions);
    const LayerCodes codes =
        LayerCodes::FromValues(*s.fits, actions, 0, want, at::kCPU, at::kFloat);
    const auto got = codes.Decode(at::kFloat);
    for (int m = 0; m < model::kNumMatrices; ++m) {
      const at::Tensor allowed = ZeroSignAllowed(*s.fits, actions, 0, m, want[m]);
      EXPECT_EQ(Compare(got[m], want[m], allowed).bits, 0) << PlanName(actions) << " " << m;
    }
    // What plan_codes.h says it holds: 1 byte per weight, 4 per row and unit (8 in a
    // matrix with a 1-bit unit), 12 per salient entry, 2 more per weight at 16 bits.
    const std::vector<plan::Unit>& units = s.fits->table().units;
    std::array<bool, model::kNumMatrices> binary{};
    for (const plan::Unit& u : units) binary[u.matrix] |= u.layer == 0 && actions[u.id] == 6;
    int64_t bytes = 0;
    for (const plan::Unit& u : units) {
      if (u.layer != 0) continue;
      bytes += u.n() + 4 * u.rows * (binary[u.matrix] ? 2 : 1);
      if (actions[u.id] == 0) bytes += 2 * u.n();
      if (actions[u.id] != 0) bytes += 12 * u.salient_count;
    }
    EXPECT_EQ(codes.Bytes(), bytes) << PlanName(actions);
  }
}

// A value no code gives (off every grid) keeps its matrix as weights, exactly.
TEST(PlanCodesTest, FromValuesKeepsAMatrixItsCodesCannotGiveBack) {
  const Stage s = MakeStage();
  const std::vector<int> actions(s.fits->table().units.size(), 4);  // 2 bits
  auto values = KernelWeights(s, 0, actions);
  values[2][1][7] = 0.123456f;
  const auto got =
      LayerCodes::FromValues(*s.fits, actions, 0, values, at::kCPU, at::kFloat).Decode(at::kFloat);
  for (int m = 0; m < model::kNumMatrices; ++m) EXPECT_TRUE(at::equal(got[m], values[m])) << m;
}

// Through PlanLinears, as a forward sees it, on the CPU: the kernels' weights (bit for bit,
// as they dequantize there on every forward: quantized_stage.h), into the compute dtype,
// and no codes held between forwards.
TEST(PlanCodesTest, PlanLinearsOnTheCpuGiveTheKernelsWeightsOnEveryForward) {
  const Stage s = MakeStage();
  const std::vector<std::vector<int>> plans = Plans(s.fits->table().units.size());
  const auto actions = std::make_shared<const std::vector<int>>(plans.back());
  EXPECT_FALSE(PlanLinears::HoldsCodes(model::LlamaModel(s.weights), *s.fits));
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    auto linears = PlanLinears::Create(s.fits, actions, dtype);
    ASSERT_TRUE(linears.ok()) << linears.status();
    for (int pass = 0; pass < 2; ++pass) {
      for (int64_t layer = 0; layer < kLayers; ++layer) {
        const auto want = KernelWeights(s, layer, *actions);
        const auto got = (*linears)->Linears(layer, s.weights.layers[layer]);
        for (int m = 0; m < model::kNumMatrices; ++m) {
          EXPECT_TRUE(at::equal(got[m], want[m].to(dtype)))
              << "pass " << pass << " layer " << layer << " matrix " << m;
          EXPECT_EQ(got[m].scalar_type(), dtype);
        }
      }
    }
  }
}

}  // namespace
}  // namespace windquant::quant
