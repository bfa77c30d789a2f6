#include "learner/learner_core.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/metrics/registry.h"
#include "common/plan/plan_io.h"
#include "common/rl/environment.h"
#include "common/rl/episode_reward.h"
#include "common/rl/greedy_plan.h"
#include "common/rl/lagrange.h"
#include "common/rl/policy.h"
#include "common/rl/rollout_worker.h"
#include "common/rl/run_policy.h"
#include "common/rl/state_features.h"
#include "common/search/baselines.h"
#include "common/testing/status_matchers.h"
#include "learner/learner_core_test_fixture.h"

namespace windquant::learner {
namespace {

using ::windquant::learner::testing::LearnerCoreTest;
using ::windquant::learner::testing::LogLines;
using ::windquant::learner::testing::RecordedRewards;
using ::windquant::learner::testing::Stages;
using ::windquant::learner::testing::TestOptions;
using ::windquant::testing::IsOk;
using ::windquant::testing::StatusIs;

TEST_F(LearnerCoreTest, MergesStagesAndRejectsInconsistentTables) {
  auto stages = Stages(whole_);
  EXPECT_THAT(core_->Table(), StatusIs(absl::StatusCode::kUnavailable, "0 of 2 stages"));
  auto r0 = core_->RegisterTable(1, 0, stages[1]);
  ASSERT_THAT(r0, IsOk());
  EXPECT_FALSE(r0->complete);
  auto other = stages[0];
  other.fingerprint = "other";
  EXPECT_THAT(core_->RegisterTable(0, 0, other),
              StatusIs(absl::StatusCode::kInvalidArgument, "table.model_fingerprint"));
  EXPECT_THAT(core_->RegisterTable(5, 0, stages[0]),
              StatusIs(absl::StatusCode::kInvalidArgument, "stage: 5"));
  auto r1 = core_->RegisterTable(0, 0, stages[0]);
  ASSERT_THAT(r1, IsOk());
  EXPECT_TRUE(r1->complete);
  EXPECT_EQ(r1->total_units, 14u);
  ASSERT_THAT(core_->Table(), IsOk());
}

TEST_F(LearnerCoreTest, HoldsEpisodesUntilEvaluatedUpdatesAndResumesFromCheckpoint) {
  for (const auto& s : Stages(whole_)) {
    auto r = core_->RegisterTable(s.first_layer, 0, s);
    ASSERT_THAT(r, IsOk());
  }
  EXPECT_EQ(core_->version(), 0);
  ASSERT_TRUE(core_->SubmitEpisode(MakeEpisode(1, 0)).value());
  ASSERT_TRUE(core_->SubmitEpisode(MakeEpisode(2, 0)).value());
  EXPECT_FALSE(core_->SubmitEpisode(MakeEpisode(2, 0)).value());  // duplicate
  EXPECT_FALSE(Report(*core_, Eval(99, 3.0)).value());            // unknown
  ASSERT_TRUE(Report(*core_, Eval(1, 3.0)).value());
  EXPECT_EQ(core_->version(), 0);  // waits for episodes_per_update evaluated episodes
  EXPECT_FALSE(Report(*core_, Eval(1, 3.0)).value());  // duplicate
  ASSERT_TRUE(Report(*core_, Eval(2, 2.5)).value());
  EXPECT_EQ(core_->version(), 1);
  // Two more versions make version-0 data stale (max_policy_lag 1).
  for (uint64_t id : {3, 4}) ASSERT_TRUE(core_->SubmitEpisode(MakeEpisode(id, 1)).value());
  for (uint64_t id : {3, 4}) ASSERT_TRUE(Report(*core_, Eval(id, 2.0)).value());
  EXPECT_EQ(core_->version(), 2);
  EXPECT_FALSE(core_->SubmitEpisode(MakeEpisode(5, 0)).value());  // stale
  EXPECT_FALSE(core_->SubmitEpisode(MakeEpisode(6, 7)).value());  // from the future
  const LearnerStatus s = core_->Status();
  EXPECT_EQ(s.updates, 2);
  EXPECT_DOUBLE_EQ(s.best_perplexity, 2.0);
  // The λ the evaluator pushed: lambda_init moved by the four d's.
  EXPECT_NEAR(s.lambda, 1.0 + 4 * 0.05 * (0.5 - 0.05), 1e-12);
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/best"));

  // A restarted learner finds table and checkpoint on disk.
  const auto snapshot = core_->WaitForPolicy(-1, absl::ZeroDuration()).snapshot;
  core_.reset();
  auto again = LearnerCore::Create(TestOptions(dir_), nullptr);
  ASSERT_THAT(again, IsOk());
  EXPECT_THAT((*again)->Table(), IsOk());
  EXPECT_EQ((*again)->version(), 2);
  EXPECT_EQ((*again)->WaitForPolicy(-1, absl::ZeroDuration()).snapshot.sha256, snapshot.sha256);
  EXPECT_EQ((*again)->Status().updates, 2);
  EXPECT_DOUBLE_EQ((*again)->Status().best_perplexity, 2.0);
}

TEST_F(LearnerCoreTest, AnEpisodeIdIsAcceptedOncePerRunAcrossRestarts) {
  for (const auto& s : Stages(whole_))
    ASSERT_THAT(core_->RegisterTable(s.first_layer, 0, s), IsOk());
  ASSERT_TRUE(core_->SubmitEpisode(MakeEpisode(1, 0)).value());
  ASSERT_TRUE(Report(*core_, Eval(1, 3.0)).value());
  // Re-sent after its evaluation (an ack lost on the way back): refused, so
  // the plan is not evaluated and recorded a second time.
  EXPECT_FALSE(core_->SubmitEpisode(MakeEpisode(1, 0)).value());
  EXPECT_FALSE(Report(*core_, Eval(1, 3.0)).value());
  core_.reset();
  // A restarted learner knows the ids recorded in plans.jsonl.
  auto again = LearnerCore::Create(TestOptions(dir_), nullptr);
  ASSERT_THAT(again, IsOk());
  EXPECT_FALSE((*again)->SubmitEpisode(MakeEpisode(1, 0)).value());
  EXPECT_TRUE((*again)->SubmitEpisode(MakeEpisode(2, 0)).value());
}

TEST_F(LearnerCoreTest, ExportsItsMetrics) {
  core_.reset();
  metrics::Registry registry;
  auto core = LearnerCore::Create(TestOptions(dir_), nullptr, &registry);
  ASSERT_THAT(core, IsOk());
  for (const auto& s : Stages(whole_))
    ASSERT_THAT((*core)->RegisterTable(s.first_layer, 0, s), IsOk());
  const size_t steps = MakeEpisode(1, 0).steps.size();
  for (uint64_t id : {1, 2}) ASSERT_TRUE((*core)->SubmitEpisode(MakeEpisode(id, 0)).value());
  ASSERT_TRUE(Report(**core, Eval(1, 3.0)).value());
  ASSERT_TRUE(Report(**core, Eval(2, 2.5)).value());
  const std::string text = registry.TextExposition();
  auto has = [&](const std::string& line) {
    return text.find("\n" + line + "\n") != std::string::npos;
  };
  EXPECT_TRUE(has("windquant_learner_episodes_total 2")) << text;
  EXPECT_TRUE(has("windquant_learner_transitions_total " + std::to_string(2 * steps))) << text;
  EXPECT_TRUE(has("windquant_learner_ppo_updates_total 1")) << text;
  EXPECT_TRUE(has("windquant_learner_policy_version 1")) << text;
  EXPECT_TRUE(has("windquant_learner_policy_lag_versions_count 2")) << text;
  EXPECT_TRUE(has("windquant_learner_best_plan_perplexity 2.5")) << text;
  EXPECT_TRUE(has("windquant_learner_best_plan_bitwidth 1.2")) << text;
  EXPECT_TRUE(has("windquant_learner_target_bitwidth 3")) << text;
  const size_t at = text.find("\nwindquant_learner_lambda ");
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_NEAR(std::strtod(text.c_str() + at + 26, nullptr), 1.0 + 2 * 0.05 * (0.5 - 0.05), 1e-9)
      << text;
  EXPECT_NE(text.find("\nwindquant_learner_mean_episode_reward "), std::string::npos) << text;
}

TEST_F(LearnerCoreTest, NoPolicyIsPublishedBeforeTheTableIsComplete) {
  EXPECT_EQ(core_->WaitForPolicy(-1, absl::ZeroDuration()).snapshot.version, -1);
  for (const auto& s : Stages(whole_))
    ASSERT_THAT(core_->RegisterTable(s.first_layer, 0, s), IsOk());
  EXPECT_EQ(core_->WaitForPolicy(-1, absl::ZeroDuration()).snapshot.version, 0);
}

TEST_F(LearnerCoreTest, CandidatePlansCompeteForTheBestPlanButNeverEnterAPpoBatch) {
  EXPECT_TRUE(TakeCandidates(*core_).empty());  // no table yet
  for (const auto& s : Stages(whole_))
    ASSERT_THAT(core_->RegisterTable(s.first_layer, 0, s), IsOk());
  // The step's reference: the Lagrangian plan at the step's target.
  std::vector<plan::Plan> out = TakeCandidates(*core_);
  ASSERT_EQ(out.size(), 1u);
  const plan::Plan ref = out[0];
  EXPECT_EQ(ref.source, "lagrange");
  EXPECT_EQ(ref.model_fingerprint, whole_.fingerprint);
  EXPECT_EQ(ref.actions, search::LagrangePlan(whole_, 3.0).value().actions);
  EXPECT_TRUE(core_->Pending(rl::PlanKind::kCandidate, ref.episode_id));
  EXPECT_EQ(core_->Status().pending_candidates, 1);
  EXPECT_TRUE(TakeCandidates(*core_).empty());  // handed out once

  ASSERT_TRUE(core_->SubmitEpisode(MakeEpisode(1, 0)).value());
  ASSERT_TRUE(core_->SubmitEpisode(MakeEpisode(2, 0)).value());
  ASSERT_TRUE(Report(*core_, Eval(1, 3.0)).value());
  EvaluationInput c = CandidateEval(ref, 1.5);
  c.plan_id = "other";
  EXPECT_FALSE(Report(*core_, c).value());  // another plan's report
  c.plan_id = ref.plan_id;
  ASSERT_TRUE(Report(*core_, c).value());
  EXPECT_FALSE(Report(*core_, c).value());  // duplicate
  LearnerStatus s = core_->Status();
  EXPECT_DOUBLE_EQ(s.best_perplexity, 1.5);  // the candidate is the best plan
  EXPECT_EQ(s.candidate_evaluations, 1);
  EXPECT_EQ(s.pending_candidates, 0);
  EXPECT_EQ(s.evaluations, 1);
  // One episode + one candidate evaluated: no update (episodes_per_update 2),
  // the candidate is no episode.
  EXPECT_EQ(s.updates, 0);
  EXPECT_EQ(core_->version(), 0);
  auto best = plan::ReadPlanFile(dir_ + "/best/plan.json", whole_);
  ASSERT_THAT(best, IsOk());
  EXPECT_EQ(best->actions, ref.actions);
  EXPECT_EQ(best->source, "lagrange");

  ASSERT_TRUE(Report(*core_, Eval(2, 2.5)).value());
  s = core_->Status();
  EXPECT_EQ(s.updates, 1);  // exactly the two episodes
  EXPECT_DOUBLE_EQ(s.best_perplexity, 1.5);
  // After the update: the greedy plan of the new policy is a candidate.
  out = TakeCandidates(*core_);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].source, "rl-greedy");
  EXPECT_EQ(out[0].policy_version, 1);
  EXPECT_NE(out[0].episode_id, ref.episode_id);
  // The evaluator refused it: the run does not wait for it.
  core_->Drop(rl::PlanKind::kCandidate, out[0].episode_id, "refused");
  EXPECT_FALSE(core_->Pending(rl::PlanKind::kCandidate, out[0].episode_id));
  EXPECT_FALSE(Report(*core_, CandidateEval(out[0], 1.0)).value());
}

TEST_F(LearnerCoreTest, FinishesOnlyOnceTheLastCandidatesAreEvaluated) {
  LearnerCore::Options c = TestOptions(dir_);
  c.curriculum.max_updates = 1;
  core_.reset();
  core_ = LearnerCore::Create(c, nullptr).value();
  for (const auto& s : Stages(whole_))
    ASSERT_THAT(core_->RegisterTable(s.first_layer, 0, s), IsOk());
  std::vector<plan::Plan> out = TakeCandidates(*core_);
  for (uint64_t id : {1, 2}) ASSERT_TRUE(core_->SubmitEpisode(MakeEpisode(id, 0)).value());
  for (uint64_t id : {1, 2}) ASSERT_TRUE(Report(*core_, Eval(id, 3.0)).value());
  EXPECT_EQ(core_->Status().updates, 1);
  EXPECT_FALSE(core_->done());  // the reference and the greedy plan are out
  EXPECT_FALSE(core_->SubmitEpisode(MakeEpisode(3, 1)).value());  // curriculum finished
  for (const plan::Plan& p : TakeCandidates(*core_)) out.push_back(p);
  ASSERT_EQ(out.size(), 2u);
  for (const plan::Plan& p : out) {
    EXPECT_FALSE(core_->done());
    ASSERT_TRUE(Report(*core_, CandidateEval(p, p.source == "rl-greedy" ? 2.0 : 2.8)).value());
  }
  EXPECT_TRUE(core_->done());
  EXPECT_DOUBLE_EQ(core_->Status().best_perplexity, 2.0);
  // The final checkpoint has the greedy plan as the best.
  core_.reset();
  auto again = LearnerCore::Create(c, nullptr);
  ASSERT_THAT(again, IsOk());
  EXPECT_TRUE((*again)->done());
  EXPECT_DOUBLE_EQ((*again)->Status().best_perplexity, 2.0);
}

// Every episode of one PPO batch is rewarded with one λ, the one in effect
// when the batch began (lambda_init, then the multiplier moved by every d of
// the earlier batches): the evaluator (λ's owner, the fixture's
// rl::EpisodeRewarder) computes the reward, the learner adds it, shows the λ
// pushed with the batch's last episode after its update and checkpoints it; a
// reward meant for another batch is refused (the episode stays held); a
// restarted learner goes on with the checkpointed λ.
TEST_F(LearnerCoreTest, EpisodesOfOneBatchAreRewardedWithOneLambda) {
  for (const auto& s : Stages(whole_))
    ASSERT_THAT(core_->RegisterTable(s.first_layer, 0, s), IsOk());
  const LearnerCore::Options c = TestOptions(dir_);
  double step_return = 0;
  for (const auto& t : MakeEpisode(1, 0).steps) step_return += t.reward;
  // Slow obvious reference: the sequence of batch λs from the formula.
  rl::LagrangeMultiplier reference(c.lagrange);
  std::map<uint64_t, double> expected;
  auto report = [&](uint64_t id, double d, double batch_lambda) {
    EvaluationInput in = Eval(id, 3.0);
    in.evaluation.relative_ppl_increase = d;
    in.evaluation.loss_increase = 0.1;
    ASSERT_TRUE(Report(*core_, in).value());
    const rl::PlanEvaluation& pe = in.evaluation;
    expected[id] = step_return + rl::EpisodeEndReward(c.policy.env, pe, batch_lambda, 3.0).total;
  };
  // Batch 1 (version 0): λ = lambda_init for both.
  for (uint64_t id : {1, 2}) ASSERT_TRUE(core_->SubmitEpisode(MakeEpisode(id, 0)).value());
  const double lambda1 = reference.lambda();
  EXPECT_DOUBLE_EQ(lambda1, c.lagrange.lambda_init);
  report(1, 2.0, lambda1);
  EXPECT_DOUBLE_EQ(core_->Status().lambda, lambda1);  // unchanged within the batch
  {  // Meant for batch 1 while the learner is at batch 0: refused, still held.
    EvaluationInput ahead = Eval(2, 3.0);
    ahead.batch = 1;
    ahead.reward = 5.0;
    EXPECT_FALSE(core_->ReportEvaluation(ahead).value());
  }
  report(2, 4.0, lambda1);
  for (double d : {2.0, 4.0}) reference.Update(d);
  ASSERT_EQ(core_->version(), 1);
  // Batch 2 (version 1): the λ after batch 1's d's, for both episodes.
  const double lambda2 = reference.lambda();
  EXPECT_GT(lambda2, lambda1 + 0.2);
  EXPECT_NEAR(core_->Status().lambda, lambda2, 1e-12);
  for (uint64_t id : {3, 4}) ASSERT_TRUE(core_->SubmitEpisode(MakeEpisode(id, 1)).value());
  report(4, 1.0, lambda2);  // evaluation order need not be submission order
  report(3, 3.0, lambda2);
  for (double d : {1.0, 3.0}) reference.Update(d);
  ASSERT_EQ(core_->version(), 2);
  const double lambda3 = reference.lambda();
  EXPECT_NEAR(evaluator_.lambda().batch_lambda(), lambda3, 1e-12);

  // A restarted learner rewards the next batch with the checkpointed λ.
  core_.reset();
  core_ = LearnerCore::Create(c, nullptr).value();
  EXPECT_NEAR(core_->Status().lambda, lambda3, 1e-12);
  EXPECT_NEAR(core_->WaitForPolicy(-1, absl::ZeroDuration()).lambda, lambda3, 1e-12);
  for (uint64_t id : {5, 6}) ASSERT_TRUE(core_->SubmitEpisode(MakeEpisode(id, 2)).value());
  report(5, 0.5, lambda3);
  report(6, 0.5, lambda3);

  const std::map<uint64_t, double> got = RecordedRewards(dir_);
  ASSERT_EQ(got.size(), expected.size());
  for (const auto& [id, want] : expected) {
    ASSERT_TRUE(got.count(id)) << id;
    // plans.jsonl keeps 6 significant digits.
    EXPECT_NEAR(got.at(id), want, 1e-4 * std::max(1.0, std::abs(want))) << "episode " << id;
  }
}

// The repair budget mode: the plan measured is the chosen actions' repair to
// the target, and the episode is charged (λ's price, the violation term: by the
// evaluator, told by v1::Plan.charged_bits; the batch's mean bits) for the bits
// it chose, not for the repaired plan's.
TEST_F(LearnerCoreTest, RepairModeChargesTheBitsTheEpisodeChose) {
  LearnerCore::Options c = TestOptions(dir_);
  c.policy.env.budget_mode = "repair";
  c.policy.env.violation_penalty_weight = 2.0;
  c.lagrange.prices = "budget";
  c.lagrange.lambda_init = 1.0;
  c.lagrange.eta = 0.5;
  c.lagrange.epsilon = 0;
  c.curriculum.max_updates = 1;
  core_.reset();
  core_ = LearnerCore::Create(c, nullptr).value();
  evaluator_ = rl::EpisodeRewarder(c.policy.env, c.lagrange);
  for (const auto& s : Stages(whole_))
    ASSERT_THAT(core_->RegisterTable(s.first_layer, 0, s), IsOk());
  auto costs = rl::UnitCosts::Create(whole_).value();
  rl::EnvOptions eo;
  eo.target_bits = 3.0;
  eo.budget_mode = rl::BudgetMode::kRepair;
  const std::vector<int> chosen(whole_.units.size(), 0);  // 16 bits everywhere
  const std::vector<int> measured = search::RepairToBudget(whole_, chosen, 3.0);
  const double chosen_bits = whole_.EffectiveBits(chosen);
  ASSERT_GT(chosen_bits, 3.0);
  ASSERT_LE(whole_.EffectiveBits(measured), 3.0 + 1e-9);
  double step_return = 0;
  std::map<uint64_t, double> expected;
  for (uint64_t id : {1, 2}) {
    rl::Episode e = MakeEpisode(id, 0);
    e.steps = rl::ReplayPlan(costs, eo, chosen).value();
    for (auto& t : e.steps) t.episode_id = static_cast<int64_t>(id);
    e.plan.actions = measured;
    step_return = 0;
    for (const auto& t : e.steps) step_return += t.reward;
    ASSERT_TRUE(core_->SubmitEpisode(std::move(e)).value());
  }
  for (uint64_t id : {1, 2}) {
    EvaluationInput in = Eval(id, 3.0);
    in.evaluation.effective_bits = whole_.EffectiveBits(measured);
    // What the actor submits: rl::ChargedEvaluation of the episode's steps.
    ASSERT_NEAR(
        rl::ChargedEvaluation(c.policy.env, whole_, rl::ReplayPlan(costs, eo, chosen).value(),
                              rl::PlanEvaluation())
            .effective_bits,
        chosen_bits, 1e-12);
    ASSERT_TRUE(Report(*core_, in, chosen_bits).value());
    rl::PlanEvaluation charged = in.evaluation;
    charged.effective_bits = chosen_bits;
    expected[id] =
        step_return + rl::EpisodeEndReward(c.policy.env, charged, 1.0, 3.0, c.lagrange).total;
  }
  // λ rose by eta x the chosen overrun per episode (the measured plans never overrun).
  EXPECT_NEAR(core_->Status().lambda, 1.0 + 2 * 0.5 * (chosen_bits - 3.0), 1e-9);
  const std::map<uint64_t, double> got = RecordedRewards(dir_);
  for (const auto& [id, want] : expected) {
    ASSERT_TRUE(got.count(id)) << id;
    EXPECT_NEAR(got.at(id), want, 1e-4 * std::max(1.0, std::abs(want))) << "episode " << id;
  }
}

// Reward-model screening: PPO learns from every sample the policy drew. The
// screened-out samples join the batch at once, rewarded from their predicted
// perplexity with the batch λ; only the measured ones count towards
// episodes_per_update, move λ and are recorded.
TEST_F(LearnerCoreTest, ScreenedOutSamplesJoinTheBatchWithPredictedRewards) {
  LogLines log;
  core_.reset();
  core_ = LearnerCore::Create(TestOptions(dir_), log.fn()).value();
  for (const auto& s : Stages(whole_))
    ASSERT_THAT(core_->RegisterTable(s.first_layer, 0, s), IsOk());
  auto screened_out = [&](uint64_t id) {
    rl::Episode e = MakeEpisode(id, 0);
    e.screened_out = true;
    e.predicted_log_ppl = std::log(2.5);
    return e;
  };
  // Nothing measured yet: no full-precision perplexity to predict d from.
  EXPECT_FALSE(core_->SubmitEpisode(screened_out(9)).value());
  for (uint64_t id : {1, 2}) ASSERT_TRUE(core_->SubmitEpisode(MakeEpisode(id, 0)).value());
  ASSERT_TRUE(Report(*core_, Eval(1, 3.0)).value());  // FP perplexity 3 / 1.5 = 2
  for (uint64_t id : {10, 11, 12}) ASSERT_TRUE(core_->SubmitEpisode(screened_out(id)).value());
  EXPECT_FALSE(core_->SubmitEpisode(screened_out(11)).value());  // an id is accepted once
  EXPECT_EQ(core_->version(), 0) << "screened-out samples do not count towards the batch";
  ASSERT_TRUE(Report(*core_, Eval(2, 2.5)).value());
  ASSERT_EQ(core_->version(), 1);
  // 2 measured + 3 predicted episodes of 14 units each.
  EXPECT_EQ(log.Count("learner: update 1 version 1 mean reward"), 1);
  bool found = false;
  for (const std::string& l : *log.lines) {
    found = found || (l.rfind("learner: update 1 ", 0) == 0 &&
                      l.find(" predicted 3 used 70 ") != std::string::npos);
  }
  EXPECT_TRUE(found) << "the update learned from all five episodes";
  const LearnerStatus s = core_->Status();
  EXPECT_NEAR(s.lambda, 1.0 + 2 * 0.05 * (0.5 - 0.05), 1e-12) << "only measured d's move λ";
  const std::map<uint64_t, double> recorded = RecordedRewards(dir_);
  EXPECT_EQ(recorded.size(), 2u) << "only measured plans are recorded";
}

// The actors of one policy version must sample different episodes: workers with the same run seed
// but other actor indexes or incarnations have other sample streams (the CPU generator keeps only a
// seed's low 32 bits; the actor index sits in the high ones).
TEST_F(LearnerCoreTest, RolloutWorkersOfDifferentActorsSampleDifferentEpisodes) {
  rl::PolicyOptions po;
  po.state_dim = rl::kStateDim;
  po.num_actions = plan::kNumActions;
  po.hidden_sizes = {16, 16};
  auto policy = rl::Policy::Create(po).value();
  auto plans = [&](int actor_index, uint32_t incarnation) {
    auto w =
        rl::RolloutWorker::Create(whole_, rl::EnvironmentOptions(), "a", actor_index, incarnation,
                                  /*envs=*/2, /*seed=*/0)
            .value();
    std::vector<std::vector<int>> out;
    const std::vector<rl::Episode> episodes = w->Run(*policy, 3.0).value();
    for (const rl::Episode& e : episodes) out.push_back(e.plan.actions);
    return out;
  };
  const auto a0 = plans(0, 1);
  EXPECT_EQ(plans(0, 1), a0);  // reproducible
  EXPECT_NE(plans(1, 1), a0);  // another actor
  EXPECT_NE(plans(0, 2), a0);  // another incarnation
  EXPECT_NE(a0[0], a0[1]);     // the envs of one worker
}

// The curriculum criterion: after min_updates the step ends once its
// best policy plan is within advance_ppl_ratio of the step's reference plan.
TEST_F(LearnerCoreTest, AStepEndsEarlyOnceAPolicyPlanBeatsItsReference) {
  auto run = [&](double reference_ppl) {
    LearnerCore::Options c = TestOptions(dir_ + "/ref" + std::to_string(reference_ppl));
    auto core = LearnerCore::Create(c, nullptr).value();
    for (const auto& s : Stages(whole_))
      EXPECT_THAT(core->RegisterTable(s.first_layer, 0, s), IsOk());
    for (const plan::Plan& p : TakeCandidates(*core)) {
      EXPECT_TRUE(Report(*core, CandidateEval(p, reference_ppl)).value());
    }
    for (uint64_t id : {1, 2}) EXPECT_TRUE(core->SubmitEpisode(MakeEpisode(id, 0)).value());
    for (uint64_t id : {1, 2}) EXPECT_TRUE(Report(*core, Eval(id, 2.0)).value());
    EXPECT_EQ(core->Status().updates, 1);
    // Finished: no more episodes accepted (the greedy candidate is still out).
    return !core->SubmitEpisode(MakeEpisode(3, 1)).value();
  };
  EXPECT_TRUE(run(3.0));   // policy plan 2.0 <= 1.0 x reference 3.0: step over
  EXPECT_FALSE(run(1.5));  // worse than the reference: up to max_updates
}

// The greedy plan of the first published policy, with and without warm start.
TEST_F(LearnerCoreTest, WarmStartClonesTheLagrangianPlanBeforeTheFirstPolicy) {
  const std::vector<int> lagrange = search::LagrangePlan(whole_, 3.0).value().actions;
  auto costs = rl::UnitCosts::Create(whole_).value();
  auto agreement = [&](const std::string& warm_start) {
    LearnerCore::Options c = TestOptions(dir_ + "/" + warm_start);
    c.warm_start = warm_start == "lagrange";
    auto core = LearnerCore::Create(c, nullptr).value();
    for (const auto& s : Stages(whole_))
      EXPECT_THAT(core->RegisterTable(s.first_layer, 0, s), IsOk());
    const PublishedPolicy p = core->WaitForPolicy(-1, absl::ZeroDuration());
    EXPECT_EQ(p.snapshot.version, 0);
    auto ppo = rl::CreatePpoLearner(c.policy.ppo, c.policy.seed).value();
    EXPECT_THAT(ppo->policy().LoadSnapshot(p.snapshot), IsOk());
    const std::vector<int> greedy =
        rl::PolicyGreedyPlan(ppo->policy(), costs, c.policy.env, 3.0).value();
    EXPECT_EQ(greedy.size(), lagrange.size());
    int same = 0;
    for (size_t i = 0; i < greedy.size() && i < lagrange.size(); ++i)
      same += greedy[i] == lagrange[i];
    return static_cast<double>(same) / lagrange.size();
  };
  const double cold = agreement("none");
  const double warm = agreement("lagrange");
  EXPECT_GE(warm, 0.85) << "cold " << cold;
  EXPECT_GT(warm, cold);
}

// training.self_imitation: after an update the policy is cloned on the best
// plan measured so far (here the episodes' all-cheapest plan), so its greedy
// plan is that plan; without it one PPO step on two episodes barely moves it.
TEST_F(LearnerCoreTest, SelfImitationClonesThePolicyOnTheBestPlan) {
  auto costs = rl::UnitCosts::Create(whole_).value();
  std::vector<int> cheapest;
  for (int64_t u = 0; u < costs->num_units(); ++u) cheapest.push_back(costs->cheapest_action(u));
  auto agreement = [&](bool self_imitation) {
    LearnerCore::Options c = TestOptions(dir_ + (self_imitation ? "/on" : "/off"));
    c.warm_start = false;
    c.self_imitation = self_imitation;
    auto core = LearnerCore::Create(c, nullptr).value();
    for (const auto& s : Stages(whole_))
      EXPECT_THAT(core->RegisterTable(s.first_layer, 0, s), IsOk());
    for (uint64_t id : {1, 2}) EXPECT_TRUE(core->SubmitEpisode(MakeEpisode(id, 0)).value());
    for (uint64_t id : {1, 2}) EXPECT_TRUE(Report(*core, Eval(id, 2.0)).value());
    const PublishedPolicy p = core->WaitForPolicy(0, absl::ZeroDuration());
    EXPECT_EQ(p.snapshot.version, 1);
    auto ppo = rl::CreatePpoLearner(c.policy.ppo, c.policy.seed).value();
    EXPECT_THAT(ppo->policy().LoadSnapshot(p.snapshot), IsOk());
    const std::vector<int> greedy =
        rl::PolicyGreedyPlan(ppo->policy(), costs, c.policy.env, 3.0).value();
    int same = 0;
    for (size_t i = 0; i < greedy.size() && i < cheapest.size(); ++i)
      same += greedy[i] == cheapest[i];
    return static_cast<double>(same) / static_cast<double>(cheapest.size());
  };
  const double off = agreement(false);
  const double on = agreement(true);
  EXPECT_GE(on, 0.85) << "off " << off;
  EXPECT_GE(on, off);
}

// One path for plans: every accepted episode's plan and every candidate goes
// out through the outbox, in order, once (again only on Resend), and waits for
// its evaluation until reported or dropped; nothing expires.
TEST_F(LearnerCoreTest, TheOutboxHandsOutEveryPlanOnceUntilEvaluatedOrDropped) {
  LearnerCore::Options c = TestOptions(dir_ + "/outbox");
  c.warm_start = false;
  c.evaluation_allowance = absl::Milliseconds(1000);
  LogLines log;
  auto core = LearnerCore::Create(c, log.fn()).value();
  for (const auto& s : Stages(whole_))
    ASSERT_THAT(core->RegisterTable(s.first_layer, 0, s), IsOk());
  for (uint64_t id : {7, 3}) ASSERT_TRUE(core->SubmitEpisode(MakeEpisode(id, 0)).value());
  std::vector<OutgoingPlan> out = core->TakeOutbox(absl::ZeroDuration());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].kind, rl::PlanKind::kCandidate);  // the step's reference, queued first
  EXPECT_EQ(out[0].plan.source, "lagrange");
  EXPECT_EQ(out[0].actor_id, "learner");
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(out[i].kind, rl::PlanKind::kEpisode);
    EXPECT_EQ(out[i].actor_id, "a");
    // 0: charged with the plan's measured bits (only env.budget_mode repair differs).
    EXPECT_EQ(out[i].charged_bits, 0.0);
  }
  EXPECT_EQ(out[1].plan.episode_id, 7u);  // in the order accepted
  EXPECT_EQ(out[2].plan.plan_id, "p3");
  EXPECT_TRUE(core->TakeOutbox(absl::ZeroDuration()).empty());  // handed out once
  // Three plans out: actors wait 4 allowances before producing more.
  EXPECT_EQ(core->EvaluationWait(), absl::Seconds(4));

  // An evaluator that lost them: sent again, the ones still pending only.
  EXPECT_TRUE(core->Resend(rl::PlanKind::kEpisode, 7));
  EXPECT_FALSE(core->Resend(rl::PlanKind::kEpisode, 8));
  EXPECT_FALSE(core->Resend(rl::PlanKind::kCandidate, 7));  // ids are per kind
  ASSERT_TRUE(Report(*core, Eval(3, 3.0)).value());
  EXPECT_FALSE(core->Resend(rl::PlanKind::kEpisode, 3));  // evaluated
  out = core->TakeOutbox(absl::ZeroDuration());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].plan.episode_id, 7u);

  // Refused for good by the evaluator: given up, never in a batch.
  core->Drop(rl::PlanKind::kEpisode, 7, "plan p7 refused by the evaluator: bad");
  EXPECT_TRUE(log.Has("learner: episode 7 given up: plan p7 refused by the evaluator: bad"));
  EXPECT_FALSE(core->Pending(rl::PlanKind::kEpisode, 7));
  EXPECT_FALSE(Report(*core, Eval(7, 3.0)).value());
  const LearnerStatus s = core->Status();
  EXPECT_EQ(s.given_up, 1);
  EXPECT_EQ(s.pending, 0);
  EXPECT_EQ(s.pending_candidates, 1);
  EXPECT_EQ(s.evaluations, 1);
  EXPECT_EQ(core->EvaluationWait(), absl::Seconds(2));           // the reference is still out
  EXPECT_FALSE(core->SubmitEpisode(MakeEpisode(7, 0)).value());  // seen: never again
}

}  // namespace
}  // namespace windquant::learner
