#include "common/rl/reward_model.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "common/rl/episode_reward.h"
#include "common/search/baselines.h"
#include "common/testing/synthetic_table.h"
#include "windquant/v1/types.pb.h"

namespace windquant::rl {
namespace {

constexpr int kUnits = 40;

// Plans near `base`: 1-4 units moved to a random other action.
std::vector<int> Near(const std::vector<int>& base, std::mt19937_64& rng) {
  std::vector<int> p = base;
  const int k = std::uniform_int_distribution<int>(1, 4)(rng);
  for (int m = 0; m < k; ++m) {
    const int u = std::uniform_int_distribution<int>(0, kUnits - 1)(rng);
    p[u] = std::uniform_int_distribution<int>(1, plan::kNumActions - 1)(rng);
  }
  return p;
}

// The "true" log perplexity: the table's proxy, plus a hidden additive term
// per (unit, action) that the table's errors do not show.
struct Truth {
  const plan::UnitTable& table;
  std::vector<double> hidden;
  double LogPpl(const std::vector<int>& a) const {
    double y = 1.0 + 0.5 * std::log(search::ProxyError(table, a));
    for (int u = 0; u < kUnits; ++u) y += hidden[u * plan::kNumActions + a[u]];
    return y;
  }
};

// The share of pairs of `plans` that `model` orders as the truth does.
double PairAccuracy(const RewardModel& model, const Truth& truth,
                    const std::vector<std::vector<int>>& plans) {
  int right = 0, all = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    for (size_t j = i + 1; j < plans.size(); ++j) {
      const double dt = truth.LogPpl(plans[i]) - truth.LogPpl(plans[j]);
      if (std::abs(dt) < 1e-9) continue;
      const double dm = model.Predict(truth.table, plans[i]) - model.Predict(truth.table, plans[j]);
      right += (dt > 0) == (dm > 0);
      ++all;
    }
  }
  return static_cast<double>(right) / all;
}

TEST(RewardModelFitterTest, LearnsWhatTheProxyMissesAndRanksUnseenPlans) {
  const plan::UnitTable table = testing::SyntheticTable(kUnits, 3);
  std::mt19937_64 rng(11);
  Truth truth{table, std::vector<double>(kUnits * plan::kNumActions)};
  std::normal_distribution<double> noise(0.0, 0.05);
  for (double& h : truth.hidden) h = noise(rng);
  const std::vector<int> base(kUnits, 3);
  RewardModelFitter fitter(table);
  for (int i = 0; i < 80; ++i) {
    const std::vector<int> p = Near(base, rng);
    fitter.Add(p, std::exp(truth.LogPpl(p)));
  }
  std::vector<std::vector<int>> unseen;
  for (int i = 0; i < 40; ++i) unseen.push_back(Near(base, rng));
  const RewardModel model = fitter.Fit();
  ASSERT_EQ(model.plans, 80);
  ASSERT_EQ(model.correction.size(), static_cast<size_t>(kUnits * plan::kNumActions));
  EXPECT_GT(model.scale, 0.2);  // the proxy's share is found (truth: 0.5)
  RewardModel prior_only = model;
  prior_only.correction.clear();
  const double learned = PairAccuracy(model, truth, unseen);
  const double prior = PairAccuracy(prior_only, truth, unseen);
  EXPECT_GT(learned, 0.65) << "prior alone " << prior;
  EXPECT_GT(learned, prior + 0.1) << "prior alone " << prior;
}

TEST(RewardModelFitterTest, NoModelBeforeEnoughPlansAndBadMeasurementsIgnored) {
  const plan::UnitTable table = testing::SyntheticTable(kUnits, 3);
  RewardModelFitter fitter(table);
  const std::vector<int> plan(kUnits, 2);
  fitter.Add(plan, std::nan(""));
  fitter.Add(plan, -1.0);
  fitter.Add(std::vector<int>(kUnits - 1, 2), 10.0);  // not the table's
  EXPECT_EQ(fitter.size(), 0u);
  for (size_t i = 0; i + 1 < RewardModelFitter::kMinPlans; ++i) fitter.Add(plan, 10.0 + i);
  EXPECT_TRUE(fitter.Fit().empty());
  fitter.Add(std::vector<int>(kUnits, 3), 20.0);
  EXPECT_FALSE(fitter.Fit().empty());
}

TEST(RewardModelFitterTest, FitsTheLastPlansAndRemembersEveryMeasuredOne) {
  const plan::UnitTable table = testing::SyntheticTable(kUnits, 3);
  RewardModelFitter fitter(table);
  std::mt19937_64 rng(4);
  const std::vector<int> base(kUnits, 3);
  std::vector<std::vector<int>> plans;
  for (size_t i = 0; i < RewardModelFitter::kMaxPlans + 20; ++i) {
    plans.push_back(Near(base, rng));
    fitter.Add(plans.back(), 10.0 + static_cast<double>(i % 5));
  }
  EXPECT_EQ(fitter.size(), RewardModelFitter::kMaxPlans);
  const RewardModel& m = fitter.Model();
  EXPECT_EQ(m.plans, static_cast<int32_t>(RewardModelFitter::kMaxPlans));
  EXPECT_EQ(m.measured.size(), plans.size());
  EXPECT_TRUE(std::binary_search(m.measured.begin(), m.measured.end(), PlanHash(plans.front())));
  fitter.Add(Near(base, rng), 12.0);
  EXPECT_EQ(fitter.Model().measured.size(), plans.size() + 1) << "refitted after an Add";
}

Episode EpisodeOf(std::vector<int> actions, uint64_t id) {
  Episode e;
  e.episode_id = id;
  e.plan.actions = std::move(actions);
  return e;
}

TEST(KeepBestPredictedTest, BestPredictedUnmeasuredDistinctPlansFirst) {
  const plan::UnitTable table = testing::SyntheticTable(kUnits, 3);
  RewardModel model;
  model.plans = 5;
  model.correction.assign(kUnits * plan::kNumActions, 0.0f);
  // Action 1 of unit 0 is predicted much better, action 2 a little better.
  model.correction[0 * plan::kNumActions + 1] = -2.0f;
  model.correction[0 * plan::kNumActions + 2] = -1.0f;
  std::vector<int> a(kUnits, 3), b(kUnits, 3), c(kUnits, 3), d(kUnits, 3);
  a[0] = 1;  // best, but measured
  b[0] = 2;  // second
  c[0] = 3;
  d[0] = 3;
  d[1] = 4;
  model.measured = {PlanHash(a)};
  std::vector<Episode> in = {EpisodeOf(c, 1), EpisodeOf(a, 2), EpisodeOf(b, 3), EpisodeOf(b, 4),
                             EpisodeOf(d, 5)};
  const std::vector<Episode> out = KeepBestPredicted(in, 3, model, table);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].episode_id, 3u);  // b
  // Then c and d (unmeasured, distinct) before the repeat of b and the measured a.
  EXPECT_TRUE((out[1].episode_id == 1 && out[2].episode_id == 5) ||
              (out[1].episode_id == 5 && out[2].episode_id == 1));
  EXPECT_EQ(KeepBestPredicted(in, 9, model, table).size(), in.size());
}

TEST(RewardModelTest, ProtoRoundTripAndNonFiniteRefused) {
  RewardModel m;
  m.bias = 1.5;
  m.scale = 0.25;
  m.plans = 7;
  m.correction = {0.5f, -0.25f};
  m.measured = {3, 1};
  v1::RewardModel p;
  m.ToProto(&p);
  absl::StatusOr<RewardModel> back = RewardModel::FromProto(p);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->bias, 1.5);
  EXPECT_EQ(back->scale, 0.25);
  EXPECT_EQ(back->plans, 7);
  EXPECT_EQ(back->correction, m.correction);
  EXPECT_EQ(back->measured, (std::vector<uint64_t>{1, 3}));
  p.set_correction(1, std::nanf(""));
  EXPECT_FALSE(RewardModel::FromProto(p).ok());
}

}  // namespace
}  // namespace windquant::rl
