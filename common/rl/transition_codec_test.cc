#include "common/rl/transition_codec.h"

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "common/rl/state_features.h"
#include "common/search/baselines.h"
#include "common/testing/status_matchers.h"
#include "common/testing/synthetic_table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace windquant::rl {
namespace {

using ::windquant::testing::IsOk;
using ::windquant::testing::StatusIs;
constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// An episode over `table` as a rollout worker ends it: seeded states, masks that allow
// the chosen action and at least one other, and the plan made of the chosen actions.
Episode SeededEpisode(const plan::UnitTable& table, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::uniform_int_distribution<int> action(0, plan::kNumActions - 1);
  Episode e;
  e.actor_id = "actor-3";
  e.episode_id = (uint64_t{4} << 48) | 17;
  e.policy_version = 9;
  std::vector<int> actions;
  for (size_t t = 0; t < table.units.size(); ++t) {
    Transition tr;
    for (int i = 0; i < kStateDim; ++i) tr.state.push_back(u(rng));
    tr.action = action(rng);
    tr.mask.assign(plan::kNumActions, 0);
    tr.mask[tr.action] = 1;
    tr.mask[(tr.action + 3) % plan::kNumActions] = 1;
    tr.reward = u(rng);
    tr.log_prob = -std::abs(u(rng)) - 0.1f;
    tr.value = u(rng);
    actions.push_back(static_cast<int>(tr.action));
    e.steps.push_back(tr);
  }
  e.plan = plan::Plan::Make(table, actions, "rl", 3.0);
  e.plan.episode_id = e.episode_id;
  e.plan.policy_version = e.policy_version;
  return e;
}

class TransitionCodecTest : public ::testing::Test {
 protected:
  TransitionCodecTest()
      : table_(testing::SyntheticTable(9, 5)), episode_(SeededEpisode(table_, 1)) {
    EncodeEpisode(episode_, table_, &batch_);
  }
  absl::StatusOr<Episode> Decode() const { return DecodeEpisode(batch_, table_); }

  const plan::UnitTable table_;
  const Episode episode_;
  v1::TransitionBatch batch_;
};

TEST_F(TransitionCodecTest, RoundTripKeepsEveryFieldAndMarksTheLastStepDone) {
  absl::StatusOr<Episode> d = Decode();
  ASSERT_THAT(d, IsOk());
  EXPECT_EQ(d->actor_id, "actor-3");
  EXPECT_EQ(d->episode_id, episode_.episode_id);
  EXPECT_EQ(d->policy_version, 9);
  ASSERT_EQ(d->steps.size(), 9u);
  for (size_t t = 0; t < d->steps.size(); ++t) {
    const Transition& got = d->steps[t];
    const Transition& want = episode_.steps[t];
    EXPECT_EQ(got.state, want.state) << "step " << t;  // floats travel bit-exact
    EXPECT_EQ(got.mask, want.mask) << "step " << t;
    EXPECT_EQ(got.action, want.action) << "step " << t;
    EXPECT_EQ(got.reward, want.reward) << "step " << t;
    EXPECT_EQ(got.log_prob, want.log_prob) << "step " << t;
    EXPECT_EQ(got.value, want.value) << "step " << t;
    EXPECT_EQ(got.done, t == 8) << "step " << t;
    EXPECT_EQ(got.policy_version, 9);
    EXPECT_EQ(got.episode_id, static_cast<int64_t>(episode_.episode_id));
    EXPECT_EQ(got.step, static_cast<int64_t>(t));
  }
  EXPECT_EQ(d->plan.actions, episode_.plan.actions);
  EXPECT_EQ(d->plan.plan_id, episode_.plan.plan_id);
  EXPECT_EQ(d->plan.model_fingerprint, table_.fingerprint);
  EXPECT_EQ(d->plan.source, "rl");
  EXPECT_FALSE(d->screened_out);
}

TEST_F(TransitionCodecTest, AScreenedOutSampleTravelsWithItsPredictedLogPerplexity) {
  Episode e = episode_;
  e.screened_out = true;
  e.predicted_log_ppl = 4.75;
  v1::TransitionBatch b;
  EncodeEpisode(e, table_, &b);
  absl::StatusOr<Episode> d = DecodeEpisode(b, table_);
  ASSERT_THAT(d, IsOk());
  EXPECT_TRUE(d->screened_out);
  EXPECT_EQ(d->predicted_log_ppl, 4.75);
  b.set_predicted_log_ppl(std::numeric_limits<double>::quiet_NaN());
  EXPECT_THAT(DecodeEpisode(b, table_), StatusIs(kInvalid, "predicted_log_ppl: not finite"));
}

TEST_F(TransitionCodecTest, MasksTravelAsZeroOrOneBytes) {
  Episode e = episode_;
  for (Transition& t : e.steps) t.mask[t.action] = 7;  // any nonzero byte means allowed
  v1::TransitionBatch b;
  EncodeEpisode(e, table_, &b);
  ASSERT_EQ(b.masks().size(), 9u * plan::kNumActions);
  for (char m : b.masks()) EXPECT_TRUE(m == 0 || m == 1) << static_cast<int>(m);
  absl::StatusOr<Episode> d = DecodeEpisode(b, table_);
  ASSERT_THAT(d, IsOk());
  EXPECT_EQ(d->steps[0].mask, episode_.steps[0].mask);
}

TEST_F(TransitionCodecTest, RefusesAShapeOfAnotherBuild) {
  batch_.set_state_dim(kStateDim + 1);
  EXPECT_THAT(Decode(), StatusIs(kInvalid, "state_dim: 16, the state has 15 features"));
  batch_.set_state_dim(kStateDim);
  batch_.set_num_actions(plan::kNumActions - 1);
  EXPECT_THAT(Decode(), StatusIs(kInvalid, "num_actions: 6, expected 7"));
}

TEST_F(TransitionCodecTest, RefusesArraysOfTheWrongLength) {
  v1::TransitionBatch b = batch_;
  b.add_actions(0);
  EXPECT_THAT(DecodeEpisode(b, table_),
              StatusIs(kInvalid, "actions: 10 steps, the unit table has 9 units"));
  b = batch_;
  b.mutable_states()->RemoveLast();
  EXPECT_THAT(DecodeEpisode(b, table_), StatusIs(kInvalid, "states: 134 numbers, expected"));
  b = batch_;
  b.mutable_masks()->push_back(1);
  EXPECT_THAT(DecodeEpisode(b, table_), StatusIs(kInvalid, "masks: 64 bytes, expected 63"));
  b = batch_;
  b.add_rewards(0.0f);
  EXPECT_THAT(DecodeEpisode(b, table_), StatusIs(kInvalid, "rewards: 10 entries, expected 9"));
  b = batch_;
  b.mutable_log_probs()->RemoveLast();
  EXPECT_THAT(DecodeEpisode(b, table_), StatusIs(kInvalid, "log_probs: 8 entries, expected 9"));
  b = batch_;
  b.clear_values();
  EXPECT_THAT(DecodeEpisode(b, table_), StatusIs(kInvalid, "values: 0 entries, expected 9"));
}

TEST_F(TransitionCodecTest, RefusesAPlanOfAnotherModelOrLength) {
  v1::TransitionBatch b = batch_;
  b.mutable_plan()->set_model_fingerprint("other-model");
  EXPECT_THAT(DecodeEpisode(b, table_), StatusIs(kInvalid, "plan.model_fingerprint: other-model"));
  b = batch_;
  b.mutable_plan()->add_actions(0);
  EXPECT_THAT(DecodeEpisode(b, table_), StatusIs(kInvalid, "plan.actions: 10 entries"));
  b = batch_;
  b.mutable_plan()->set_actions(2, plan::kNumActions);
  EXPECT_THAT(DecodeEpisode(b, table_), StatusIs(kInvalid, "plan.actions[2]: 7 is not"));
}

TEST_F(TransitionCodecTest, RefusesANonFiniteNumberNamingItsIndex) {
  v1::TransitionBatch b = batch_;
  b.set_states(2 * kStateDim + 4, kNaN);
  EXPECT_THAT(DecodeEpisode(b, table_), StatusIs(kInvalid, "states[34]: not finite"));
  b = batch_;
  b.set_rewards(5, std::numeric_limits<float>::infinity());
  EXPECT_THAT(DecodeEpisode(b, table_), StatusIs(kInvalid, "rewards[5]: not finite"));
  b = batch_;
  b.set_log_probs(3, kNaN);
  EXPECT_THAT(DecodeEpisode(b, table_), StatusIs(kInvalid, "log_probs[3]: not finite"));
  b = batch_;
  b.set_values(8, -std::numeric_limits<float>::infinity());
  EXPECT_THAT(DecodeEpisode(b, table_), StatusIs(kInvalid, "values[8]: not finite"));
}

TEST_F(TransitionCodecTest, RefusesAnActionOutOfRangeMaskedOrDisagreeingWithThePlan) {
  v1::TransitionBatch b = batch_;
  b.set_actions(4, plan::kNumActions);
  EXPECT_THAT(DecodeEpisode(b, table_), StatusIs(kInvalid, "actions[4]: 7 is not an action index"));

  // Step 6's action is allowed; forbid it.
  b = batch_;
  const int a6 = static_cast<int>(episode_.steps[6].action);
  (*b.mutable_masks())[6 * plan::kNumActions + a6] = 0;
  EXPECT_THAT(DecodeEpisode(b, table_),
              StatusIs(kInvalid, "actions[6]: action " + std::to_string(a6) + " is masked"));

  // Step 1 takes the other allowed action, the plan still says the first one.
  b = batch_;
  const int other = (static_cast<int>(episode_.steps[1].action) + 3) % plan::kNumActions;
  b.set_actions(1, other);
  EXPECT_THAT(DecodeEpisode(b, table_),
              StatusIs(kInvalid,
                       "plan.actions[1]: differs from the transitions' action, and the plan is "
                       "not their repair to its target"));
}

// The repair budget mode: the plan measured is the chosen actions' repair to the
// target, the transitions keep what the policy chose.
TEST_F(TransitionCodecTest, APlanRepairedToItsTargetDecodesWithTheChosenActions) {
  const std::vector<int> chosen = episode_.plan.actions;
  ASSERT_GT(table_.EffectiveBits(chosen), 3.0);  // the seeded actions overrun the target
  Episode repaired = episode_;
  repaired.plan = plan::Plan::Make(table_, search::RepairToBudget(table_, chosen, 3.0), "rl", 3.0);
  ASSERT_NE(repaired.plan.actions, chosen);
  v1::TransitionBatch b;
  EncodeEpisode(repaired, table_, &b);
  absl::StatusOr<Episode> d = DecodeEpisode(b, table_);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->plan.actions, repaired.plan.actions);
  for (size_t t = 0; t < chosen.size(); ++t) EXPECT_EQ(d->steps[t].action, chosen[t]);
  // The walk order's repair (env.repair_order: walk) decodes as well.
  Episode walked = episode_;
  walked.plan = plan::Plan::Make(
      table_, search::RepairToBudget(table_, chosen, 3.0, search::RepairOrder::kWalk), "rl", 3.0);
  ASSERT_NE(walked.plan.actions, repaired.plan.actions);
  v1::TransitionBatch wb;
  EncodeEpisode(walked, table_, &wb);
  d = DecodeEpisode(wb, table_);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->plan.actions, walked.plan.actions);
  // The same plan claimed for a higher target is not the chosen actions' repair to it.
  repaired.plan.target_bits = 3.5;
  v1::TransitionBatch higher;
  EncodeEpisode(repaired, table_, &higher);
  EXPECT_THAT(DecodeEpisode(higher, table_).status().message(),
              ::testing::HasSubstr("is not their repair to its target"));
}

}  // namespace
}  // namespace windquant::rl
