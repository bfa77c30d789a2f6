// Fit choices under last-bit perturbations, on the unit tables the distributed
// equivalence test compares (calibration 8 x 128, seed 0, chunk 64): on another CPU the
// activation statistics may differ from this one's in the last bit, and before the
// searches kept an earlier grid point within QuantizerOptions::switch_margin, the 8-bit
// fit of stories260k's layer 2 v_proj chunk 0 (unit 20) picked another scale there,
// moving its error proxy by 4.7e-4 relative. Every (unit, action) is refitted with its
// activation scales moved by up to 16 ulps (~1e-6 relative, the size of a BLAS-order
// difference in the activations).
//
// No margin makes an argmin immune to every perturbation: a row whose two best grid
// points differ by just the margin still flips. What the margin buys is that flips are
// rare and happen only between near-equal points, so the error proxy (the input of the
// state features and of the allocation) moves by far less than what separates two
// actions (a factor of ~4 per bit). That is what is asserted: every error proxy moves by
// at most kMaxRelErrorMove, and at most kMaxMovedFraction of the fits change a grid
// point (stories260k: none; the old Moby Dick test model: 3 of 3024). The worst move is
// an 8-bit fit's, whose error is the smallest: 1.13e-3 on the King James test model
// (layer 0 k_proj, 746 FP16 scales moved); 3e-3 is still three orders of magnitude
// below what separates two actions.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>

#include <ATen/ATen.h>

#include "common/quant/quantization_session.h"
#include "common/quant/quantizer.h"
#include "common/quant/reference_quantizer.h"
#include "common/testing/test_paths.h"
#include "gtest/gtest.h"

namespace windquant::quant {
namespace {

constexpr int kMaxUlps = 16;
constexpr int kTrials = 6;
constexpr double kMaxRelErrorMove = 3e-3;
constexpr double kMaxMovedFraction = 5e-3;

at::Tensor PerturbUlps(const at::Tensor& s, int max_ulps, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-max_ulps, max_ulps);
  at::Tensor out = s.clone();
  float* p = out.data_ptr<float>();
  for (int64_t j = 0; j < out.numel(); ++j) {
    const int k = d(rng);
    for (int t = 0; t < std::abs(k); ++t) p[j] = std::nextafter(p[j], k > 0 ? INFINITY : 0.0f);
  }
  return out;
}

struct Counts {
  int64_t fits = 0, moved_points = 0, moved_scales = 0;
  double worst_rel_error_move = 0;
};

// Refits every (unit, action) of the session's table under kTrials perturbations.
Counts Perturb(const QuantizationSession& s) {
  QuantizerOptions o;
  o.salient_fraction = s.options().units.salient_fraction;
  Counts n;
  for (const plan::Unit& u : s.table().units) {
    const at::Tensor W = s.model()
                             .weights()
                             .layers[u.layer]
                             .linear[u.matrix]
                             .slice(1, u.col_begin, u.col_begin + u.cols)
                             .to(at::kFloat)
                             .contiguous();
    const at::Tensor act = s.activation_stats()
                               .at(u.layer, static_cast<model::Matrix>(u.matrix))
                               .mean_abs.slice(0, u.col_begin, u.col_begin + u.cols)
                               .contiguous();
    const auto base = FitUnit(W, act, plan::kAllActions, o);
    EXPECT_TRUE(base.ok());
    for (int trial = 0; trial < kTrials; ++trial) {
      const auto moved =
          FitUnit(W, PerturbUlps(act, kMaxUlps, 7919 * u.id + trial), plan::kAllActions, o);
      EXPECT_TRUE(moved.ok());
      for (size_t a = 0; a < base->fits.size(); ++a) {
        const ActionFit& x = base->fits[a];
        const ActionFit& y = moved->fits[a];
        ++n.fits;
        n.moved_points += x.grid_point != y.grid_point;
        n.moved_scales += x.scales != y.scales || x.offsets != y.offsets;
        const double rel = std::fabs(y.error - x.error) / std::max(x.error, 1e-30);
        n.worst_rel_error_move = std::max(n.worst_rel_error_move, rel);
        EXPECT_LE(rel, kMaxRelErrorMove)
            << plan::UnitName(u) << " action " << plan::ActionName(x.action) << " trial " << trial;
      }
    }
  }
  return n;
}

// How far the first quantizer's error proxy of one (unit, action) moves under the same
// perturbations (for the log: ATen's reductions differ between CPUs, so its numbers here
// are this machine's).
double ReferenceWorstMove(const QuantizationSession& s, size_t unit, plan::Action a) {
  const plan::Unit& u = s.table().units[unit];
  const at::Tensor W = s.model()
                           .weights()
                           .layers[u.layer]
                           .linear[u.matrix]
                           .slice(1, u.col_begin, u.col_begin + u.cols)
                           .to(at::kFloat)
                           .contiguous();
  const at::Tensor act = s.activation_stats()
                             .at(u.layer, static_cast<model::Matrix>(u.matrix))
                             .mean_abs.slice(0, u.col_begin, u.col_begin + u.cols)
                             .contiguous();
  const plan::Action one[] = {a};
  const double base = reference::ReferenceFitUnit(W, act, one)->fits[0].error;
  double worst = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    const double e =
        reference::ReferenceFitUnit(W, PerturbUlps(act, kMaxUlps, 7919 * u.id + trial), one)
            ->fits[0]
            .error;
    worst = std::max(worst, std::fabs(e - base) / base);
  }
  return worst;
}

// On the real test model: stories260k (the tables of the failure) or, on a fresh clone,
// the default model, where the same properties are checked on its own units.
TEST(FitStabilityTest, LastBitsOfTheStatisticsBarelyMoveTheFits) {
  const testing::TestModel m = testing::RealModel();
  // configs/test-stories260k.yaml with the overrides of tests/distributed_test_config.sh.
  SessionOptions so;
  so.model_dir = m.dir;
  so.calibration.text = m.text_path;
  so.calibration.samples = 8;
  so.calibration.seq_len = 128;
  so.calibration.seed = 0;
  so.heldout.text = so.calibration.text;
  so.units.chunk_size = 64;
  so.units.salient_fraction = 0.005;
  so.use_cache = false;
  so.load_eval_text = false;
  auto session = QuantizationSession::Create(so);
  ASSERT_TRUE(session.ok()) << session.status();
  const std::vector<plan::Unit>& units = (*session)->table().units;
  ASSERT_GT(units.size(), 20u);
  // stories260k: unit 20 is the unit of the failure (layer 2 v_proj, chunk 0).
  if (units.size() == 45u) {
    ASSERT_EQ(plan::UnitName(units[20]), plan::UnitName(plan::Unit{20, 2, 2, 0}));
  }

  const Counts n = Perturb(**session);
  std::printf(
      "%lld (unit, action) fits x perturbations of up to %d ulps: grid points moved %lld, "
      "FP16 scales moved %lld, worst relative error move %.3g (bound %.3g); the first "
      "quantizer's unit 20 at 8 bits moves by %.3g\n",
      static_cast<long long>(n.fits), kMaxUlps, static_cast<long long>(n.moved_points),
      static_cast<long long>(n.moved_scales), n.worst_rel_error_move, kMaxRelErrorMove,
      ReferenceWorstMove(**session, 20, plan::Action::k8));
  EXPECT_LE(static_cast<double>(n.moved_points), kMaxMovedFraction * static_cast<double>(n.fits));
}

}  // namespace
}  // namespace windquant::quant
