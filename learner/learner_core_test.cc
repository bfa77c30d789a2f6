#include "learner/learner_core.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>

#include "common/metrics/registry.h"
#include "common/quant/baselines.h"
#include "common/quant/plan_io.h"
#include "common/rl/environment.h"
#include "common/rl/episode_evaluator.h"
#include "common/rl/lagrange.h"
#include "common/rl/policy.h"
#include "common/rl/rollout_worker.h"
#include "common/rl/state_features.h"
#include "common/rl/synthetic_table.h"
#include "common/rl/training.h"

namespace windquant::learner {
namespace {

config::RunConfig TestConfig(const std::string& dir) {
  config::RunConfig c;
  c.output.dir = dir;
  c.service.stages = 2;
  c.service.replicas = 1;
  c.quant.chunk_size = 16;
  c.curriculum.target_bits = {3.0};
  c.curriculum.min_updates = 1;
  c.curriculum.max_updates = 3;
  c.training.episodes_per_update = 2;
  c.training.checkpoint_every_updates = 1;
  c.ppo.hidden = {16, 16};
  c.ppo.minibatch_size = 8;
  c.ppo.epochs = 1;
  c.ppo.max_policy_lag = 1;
  return c;
}

// The synthetic table split into two stages: layer 0 and layer 1.
std::vector<quant::UnitTable> Stages(const quant::UnitTable& whole) {
  std::vector<quant::UnitTable> out(2, whole);
  for (int s = 0; s < 2; ++s) {
    out[s].first_layer = s;
    out[s].end_layer = s + 1;
    out[s].units.clear();
    for (const auto& u : whole.units) {
      if (u.layer == s) out[s].units.push_back(u);
    }
  }
  return out;
}

class LearnerCoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/wq-learner-core";
    std::filesystem::remove_all(dir_);
    whole_ = rl::testing::SyntheticTable(14, 3);
    whole_.num_layers = 2;
    whole_.chunk_size = 16;  // the run config's quant.chunk_size
    auto core = LearnerCore::Create(TestConfig(dir_), nullptr);
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = *std::move(core);
  }

  // One episode of `version` from a policy-free walk (cheapest actions).
  rl::Episode MakeEpisode(uint64_t id, int64_t version) {
    auto costs = rl::UnitCosts::Create(whole_).value();
    rl::EnvOptions eo;
    eo.target_bits = 3.0;
    std::vector<int> plan;
    for (int64_t u = 0; u < costs->num_units(); ++u) plan.push_back(costs->cheapest_action(u));
    rl::Episode e;
    e.actor_id = "a";
    e.episode_id = id;
    e.policy_version = version;
    e.steps = rl::ReplayPlan(costs, eo, plan).value();
    for (auto& t : e.steps) {
      t.policy_version = version;
      t.episode_id = static_cast<int64_t>(id);
    }
    e.plan.plan_id = "p" + std::to_string(id);
    e.plan.model_fingerprint = whole_.fingerprint;
    e.plan.actions = plan;
    e.plan.target_bits = 3.0;
    e.plan.episode_id = id;
    return e;
  }
  EvaluationInput Eval(uint64_t id, double ppl) {
    EvaluationInput in;
    in.episode_id = id;
    in.plan_id = "p" + std::to_string(id);
    in.evaluation.eval_ppl = ppl;
    in.evaluation.effective_bits = 1.2;
    in.evaluation.relative_ppl_increase = 0.5;
    in.lambda = 0.7;
    return in;
  }

  std::string dir_;
  quant::UnitTable whole_;
  std::unique_ptr<LearnerCore> core_;
};

TEST_F(LearnerCoreTest, MergesStagesAndRejectsInconsistentTables) {
  auto stages = Stages(whole_);
  EXPECT_EQ(core_->Table().status().code(), absl::StatusCode::kUnavailable);
  auto r0 = core_->RegisterTable(1, 0, stages[1]);
  ASSERT_TRUE(r0.ok()) << r0.status();
  EXPECT_FALSE(r0->complete);
  auto other = stages[0];
  other.fingerprint = "other";
  auto bad = core_->RegisterTable(0, 0, other);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("fingerprint"), std::string::npos);
  EXPECT_EQ(core_->RegisterTable(5, 0, stages[0]).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto r1 = core_->RegisterTable(0, 0, stages[0]);
  ASSERT_TRUE(r1.ok()) << r1.status();
  EXPECT_TRUE(r1->complete);
  EXPECT_EQ(r1->total_units, 14u);
  ASSERT_TRUE(core_->Table().ok());
}

TEST_F(LearnerCoreTest, HoldsEpisodesUntilEvaluatedUpdatesAndResumesFromCheckpoint) {
  for (const auto& s : Stages(whole_)) {
    auto r = core_->RegisterTable(s.first_layer, 0, s);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  EXPECT_EQ(core_->version(), 0);
  ASSERT_TRUE(core_->SubmitEpisode(MakeEpisode(1, 0)).value());
  ASSERT_TRUE(core_->SubmitEpisode(MakeEpisode(2, 0)).value());
  EXPECT_FALSE(core_->SubmitEpisode(MakeEpisode(2, 0)).value());  // duplicate
  EXPECT_FALSE(core_->ReportEvaluation(Eval(99, 3.0)).value());   // unknown
  ASSERT_TRUE(core_->ReportEvaluation(Eval(1, 3.0)).value());
  EXPECT_EQ(core_->version(), 0);  // waits for episodes_per_update evaluated episodes
  EXPECT_FALSE(core_->ReportEvaluation(Eval(1, 3.0)).value());  // duplicate
  ASSERT_TRUE(core_->ReportEvaluation(Eval(2, 2.5)).value());
  EXPECT_EQ(core_->version(), 1);
  // Two more versions make version-0 data stale (max_policy_lag 1).
  for (uint64_t id : {3, 4}) ASSERT_TRUE(core_->SubmitEpisode(MakeEpisode(id, 1)).value());
  for (uint64_t id : {3, 4}) ASSERT_TRUE(core_->ReportEvaluation(Eval(id, 2.0)).value());
  EXPECT_EQ(core_->version(), 2);
  EXPECT_FALSE(core_->SubmitEpisode(MakeEpisode(5, 0)).value());  // stale
  EXPECT_FALSE(core_->SubmitEpisode(MakeEpisode(6, 7)).value());  // from the future
  const LearnerStatus s = core_->Status();
  EXPECT_EQ(s.updates, 2);
  EXPECT_DOUBLE_EQ(s.best_perplexity, 2.0);
  // The learner's λ, not the evaluator's 0.7: lambda_init moved by the four d's.
  EXPECT_NEAR(s.lambda, 1.0 + 4 * 0.05 * (0.5 - 0.05), 1e-12);
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/best"));

  // A restarted learner finds table and checkpoint on disk.
  const auto snapshot = core_->WaitForPolicy(-1, absl::ZeroDuration()).snapshot;
  core_.reset();
  auto again = LearnerCore::Create(TestConfig(dir_), nullptr);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE((*again)->Table().ok());
  EXPECT_EQ((*again)->version(), 2);
  EXPECT_EQ((*again)->WaitForPolicy(-1, absl::ZeroDuration()).snapshot.sha256, snapshot.sha256);
  EXPECT_EQ((*again)->Status().updates, 2);
  EXPECT_DOUBLE_EQ((*again)->Status().best_perplexity, 2.0);
}

TEST_F(LearnerCoreTest, AnEpisodeIdIsAcceptedOncePerRunAcrossRestarts) {
  for (const auto& s : Stages(whole_)) ASSERT_TRUE(core_->RegisterTable(s.first_layer, 0, s).ok());
  ASSERT_TRUE(core_->SubmitEpisode(MakeEpisode(1, 0)).value());
  ASSERT_TRUE(core_->ReportEvaluation(Eval(1, 3.0)).value());
  // Re-sent after its evaluation (an ack lost on the way back): refused, so
  // the plan is not evaluated and recorded a second time.
  EXPECT_FALSE(core_->SubmitEpisode(MakeEpisode(1, 0)).value());
  EXPECT_FALSE(core_->ReportEvaluation(Eval(1, 3.0)).value());
  core_.reset();
  // A restarted learner knows the ids recorded in plans.jsonl.
  auto again = LearnerCore::Create(TestConfig(dir_), nullptr);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE((*again)->SubmitEpisode(MakeEpisode(1, 0)).value());
  EXPECT_TRUE((*again)->SubmitEpisode(MakeEpisode(2, 0)).value());
}

TEST_F(LearnerCoreTest, ExportsItsMetrics) {
  core_.reset();
  metrics::Registry registry;
  auto core = LearnerCore::Create(TestConfig(dir_), nullptr, &registry);
  ASSERT_TRUE(core.ok()) << core.status();
  for (const auto& s : Stages(whole_))
    ASSERT_TRUE((*core)->RegisterTable(s.first_layer, 0, s).ok());
  const size_t steps = MakeEpisode(1, 0).steps.size();
  for (uint64_t id : {1, 2}) ASSERT_TRUE((*core)->SubmitEpisode(MakeEpisode(id, 0)).value());
  ASSERT_TRUE((*core)->ReportEvaluation(Eval(1, 3.0)).value());
  ASSERT_TRUE((*core)->ReportEvaluation(Eval(2, 2.5)).value());
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
  for (const auto& s : Stages(whole_)) ASSERT_TRUE(core_->RegisterTable(s.first_layer, 0, s).ok());
  EXPECT_EQ(core_->WaitForPolicy(-1, absl::ZeroDuration()).snapshot.version, 0);
}

TEST_F(LearnerCoreTest, CandidatePlansCompeteForTheBestPlanButNeverEnterAPpoBatch) {
  EXPECT_TRUE(core_->TakeCandidates(absl::ZeroDuration()).empty());  // no table yet
  for (const auto& s : Stages(whole_)) ASSERT_TRUE(core_->RegisterTable(s.first_layer, 0, s).ok());
  // The stage's reference: the Lagrangian plan at the stage's target.
  std::vector<quant::Plan> out = core_->TakeCandidates(absl::ZeroDuration());
  ASSERT_EQ(out.size(), 1u);
  const quant::Plan ref = out[0];
  EXPECT_TRUE(rl::IsCandidateEpisode(ref.episode_id));
  EXPECT_EQ(ref.source, "lagrange");
  EXPECT_EQ(ref.model_fingerprint, whole_.fingerprint);
  EXPECT_EQ(ref.actions, quant::LagrangePlan(whole_, 3.0).value().actions);
  EXPECT_TRUE(core_->CandidatePending(ref.episode_id));
  EXPECT_EQ(core_->Status().pending_candidates, 1);
  EXPECT_TRUE(core_->TakeCandidates(absl::ZeroDuration()).empty());  // handed out once

  ASSERT_TRUE(core_->SubmitEpisode(MakeEpisode(1, 0)).value());
  ASSERT_TRUE(core_->SubmitEpisode(MakeEpisode(2, 0)).value());
  ASSERT_TRUE(core_->ReportEvaluation(Eval(1, 3.0)).value());
  EvaluationInput c = Eval(ref.episode_id, 1.5);
  c.plan_id = "other";
  EXPECT_FALSE(core_->ReportEvaluation(c).value());  // another plan's report
  c.plan_id = ref.plan_id;
  ASSERT_TRUE(core_->ReportEvaluation(c).value());
  EXPECT_FALSE(core_->ReportEvaluation(c).value());  // duplicate
  LearnerStatus s = core_->Status();
  EXPECT_DOUBLE_EQ(s.best_perplexity, 1.5);  // the candidate is the best plan
  EXPECT_EQ(s.candidate_evaluations, 1);
  EXPECT_EQ(s.pending_candidates, 0);
  EXPECT_EQ(s.evaluations, 1);
  // One episode + one candidate evaluated: no update (episodes_per_update 2),
  // the candidate is no episode.
  EXPECT_EQ(s.updates, 0);
  EXPECT_EQ(core_->version(), 0);
  auto best = quant::ReadPlanFile(dir_ + "/best/plan.json", whole_);
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_EQ(best->actions, ref.actions);
  EXPECT_EQ(best->source, "lagrange");

  ASSERT_TRUE(core_->ReportEvaluation(Eval(2, 2.5)).value());
  s = core_->Status();
  EXPECT_EQ(s.updates, 1);  // exactly the two episodes
  EXPECT_DOUBLE_EQ(s.best_perplexity, 1.5);
  // After the update: the greedy plan of the new policy is a candidate.
  out = core_->TakeCandidates(absl::ZeroDuration());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].source, "rl-greedy");
  EXPECT_EQ(out[0].policy_version, 1);
  EXPECT_NE(out[0].episode_id, ref.episode_id);
  // The evaluator refused it: the run does not wait for it.
  core_->DropCandidate(out[0].episode_id);
  EXPECT_FALSE(core_->CandidatePending(out[0].episode_id));
  EXPECT_FALSE(core_->ReportEvaluation(Eval(out[0].episode_id, 1.0)).value());
}

TEST_F(LearnerCoreTest, FinishesOnlyOnceTheLastCandidatesAreEvaluated) {
  config::RunConfig c = TestConfig(dir_);
  c.curriculum.max_updates = 1;
  core_.reset();
  core_ = LearnerCore::Create(c, nullptr).value();
  for (const auto& s : Stages(whole_)) ASSERT_TRUE(core_->RegisterTable(s.first_layer, 0, s).ok());
  std::vector<quant::Plan> out = core_->TakeCandidates(absl::ZeroDuration());
  for (uint64_t id : {1, 2}) ASSERT_TRUE(core_->SubmitEpisode(MakeEpisode(id, 0)).value());
  for (uint64_t id : {1, 2}) ASSERT_TRUE(core_->ReportEvaluation(Eval(id, 3.0)).value());
  EXPECT_EQ(core_->Status().updates, 1);
  EXPECT_FALSE(core_->done());  // the reference and the greedy plan are out
  EXPECT_FALSE(core_->SubmitEpisode(MakeEpisode(3, 1)).value());  // curriculum finished
  for (const quant::Plan& p : core_->TakeCandidates(absl::ZeroDuration())) out.push_back(p);
  ASSERT_EQ(out.size(), 2u);
  for (const quant::Plan& p : out) {
    EXPECT_FALSE(core_->done());
    EvaluationInput in = Eval(p.episode_id, p.source == "rl-greedy" ? 2.0 : 2.8);
    in.plan_id = p.plan_id;
    ASSERT_TRUE(core_->ReportEvaluation(in).value());
  }
  EXPECT_TRUE(core_->done());
  EXPECT_DOUBLE_EQ(core_->Status().best_perplexity, 2.0);
  // The final checkpoint has the greedy plan as the best.
  core_.reset();
  auto again = LearnerCore::Create(c, nullptr);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE((*again)->done());
  EXPECT_DOUBLE_EQ((*again)->Status().best_perplexity, 2.0);
}

// plans.jsonl's reward (episode return incl. the episode-end reward) by episode id.
std::map<uint64_t, double> RecordedRewards(const std::string& dir) {
  std::map<uint64_t, double> out;
  std::ifstream in(dir + "/plans.jsonl");
  std::string line;
  const std::string id_key = "{\"episode_id\":", reward_key = "\"reward\":";
  while (std::getline(in, line)) {
    const size_t r = line.find(reward_key);
    if (line.rfind(id_key, 0) != 0 || r == std::string::npos) continue;
    out[std::strtoull(line.c_str() + id_key.size(), nullptr, 10)] =
        std::strtod(line.c_str() + r + reward_key.size(), nullptr);
  }
  return out;
}

// Every episode of one PPO batch is rewarded with one λ, the
// one in effect when the batch began (lambda_init, then the multiplier moved by
// every d of the earlier batches), never with the λ the evaluator reports
// (already moved by that very plan); a restarted learner goes on with the
// checkpointed λ.
TEST_F(LearnerCoreTest, EpisodesOfOneBatchAreRewardedWithOneLambda) {
  for (const auto& s : Stages(whole_)) ASSERT_TRUE(core_->RegisterTable(s.first_layer, 0, s).ok());
  const config::RunConfig c = TestConfig(dir_);
  double step_return = 0;
  for (const auto& t : MakeEpisode(1, 0).steps) step_return += t.reward;
  // Slow obvious reference: the sequence of batch λs from the formula.
  rl::LagrangeMultiplier reference(c.lagrange);
  std::map<uint64_t, double> expected, with_reported;
  auto report = [&](uint64_t id, double d, double reported_lambda, double batch_lambda) {
    EvaluationInput in = Eval(id, 3.0);
    in.evaluation.relative_ppl_increase = d;
    in.evaluation.loss_increase = 0.1;
    in.lambda = reported_lambda;
    ASSERT_TRUE(core_->ReportEvaluation(in).value());
    const rl::PlanEvaluation& pe = in.evaluation;
    expected[id] = step_return + rl::EpisodeEndReward(c.env, pe, batch_lambda, 3.0).total;
    with_reported[id] = step_return + rl::EpisodeEndReward(c.env, pe, reported_lambda, 3.0).total;
  };
  // Batch 1 (version 0): λ = lambda_init for both, whatever the evaluator says.
  for (uint64_t id : {1, 2}) ASSERT_TRUE(core_->SubmitEpisode(MakeEpisode(id, 0)).value());
  const double lambda1 = reference.lambda();
  EXPECT_DOUBLE_EQ(lambda1, c.lagrange.lambda_init);
  report(1, 2.0, 1.5, lambda1);
  EXPECT_DOUBLE_EQ(core_->Status().lambda, lambda1);  // unchanged within the batch
  report(2, 4.0, 3.0, lambda1);
  for (double d : {2.0, 4.0}) reference.Update(d);
  ASSERT_EQ(core_->version(), 1);
  // Batch 2 (version 1): the λ after batch 1's d's, for both episodes.
  const double lambda2 = reference.lambda();
  EXPECT_GT(lambda2, lambda1 + 0.2);
  EXPECT_NEAR(core_->Status().lambda, lambda2, 1e-12);
  for (uint64_t id : {3, 4}) ASSERT_TRUE(core_->SubmitEpisode(MakeEpisode(id, 1)).value());
  report(4, 1.0, 20.0, lambda2);  // evaluation order need not be submission order
  report(3, 3.0, 0.0, lambda2);
  for (double d : {1.0, 3.0}) reference.Update(d);
  ASSERT_EQ(core_->version(), 2);
  const double lambda3 = reference.lambda();

  // The same through rl::BatchLambda on its own.
  rl::BatchLambda trainer(c.lagrange);
  EXPECT_DOUBLE_EQ(trainer.batch_lambda(), lambda1);
  for (double d : {2.0, 4.0}) trainer.Observe(d);
  EXPECT_DOUBLE_EQ(trainer.batch_lambda(), lambda1);
  EXPECT_DOUBLE_EQ(trainer.EndBatch(), lambda2);
  for (double d : {1.0, 3.0}) trainer.Observe(d);
  EXPECT_DOUBLE_EQ(trainer.EndBatch(), lambda3);

  // A restarted learner rewards the next batch with the checkpointed λ.
  core_.reset();
  core_ = LearnerCore::Create(c, nullptr).value();
  EXPECT_NEAR(core_->Status().lambda, lambda3, 1e-12);
  EXPECT_NEAR(core_->WaitForPolicy(-1, absl::ZeroDuration()).lambda, lambda3, 1e-12);
  for (uint64_t id : {5, 6}) ASSERT_TRUE(core_->SubmitEpisode(MakeEpisode(id, 2)).value());
  report(5, 0.5, 9.0, lambda3);
  report(6, 0.5, 9.0, lambda3);

  const std::map<uint64_t, double> got = RecordedRewards(dir_);
  ASSERT_EQ(got.size(), expected.size());
  for (const auto& [id, want] : expected) {
    ASSERT_TRUE(got.count(id)) << id;
    // plans.jsonl keeps 6 significant digits.
    EXPECT_NEAR(got.at(id), want, 1e-4 * std::max(1.0, std::abs(want))) << "episode " << id;
    // The reported λ would have given a clearly different reward.
    EXPECT_GT(std::abs(with_reported.at(id) - want), 0.1) << "episode " << id;
  }
}

// The actors of one policy version must sample different episodes: workers with the same run seed
// but other actor indexes or incarnations have other sample streams (the CPU generator keeps only a
// seed's low 32 bits; the actor index sits in the high ones).
TEST_F(LearnerCoreTest, RolloutWorkersOfDifferentActorsSampleDifferentEpisodes) {
  rl::PolicyOptions po;
  po.state_dim = rl::kStateDim;
  po.num_actions = quant::kNumActions;
  po.hidden_sizes = {16, 16};
  auto policy = rl::Policy::Create(po).value();
  auto plans = [&](int actor_index, uint32_t incarnation) {
    auto w = rl::RolloutWorker::Create(whole_, config::EnvConfig(), "a", actor_index, incarnation,
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

// The curriculum criterion: after min_updates the stage ends once its
// best policy plan is within advance_ppl_ratio of the stage's reference plan.
TEST_F(LearnerCoreTest, AStageEndsEarlyOnceAPolicyPlanBeatsItsReference) {
  auto run = [&](double reference_ppl) {
    config::RunConfig c = TestConfig(dir_ + "/ref" + std::to_string(reference_ppl));
    auto core = LearnerCore::Create(c, nullptr).value();
    for (const auto& s : Stages(whole_)) EXPECT_TRUE(core->RegisterTable(s.first_layer, 0, s).ok());
    for (const quant::Plan& p : core->TakeCandidates(absl::ZeroDuration())) {
      EvaluationInput in = Eval(p.episode_id, reference_ppl);
      in.plan_id = p.plan_id;
      EXPECT_TRUE(core->ReportEvaluation(in).value());
    }
    for (uint64_t id : {1, 2}) EXPECT_TRUE(core->SubmitEpisode(MakeEpisode(id, 0)).value());
    for (uint64_t id : {1, 2}) EXPECT_TRUE(core->ReportEvaluation(Eval(id, 2.0)).value());
    EXPECT_EQ(core->Status().updates, 1);
    // Finished: no more episodes accepted (the greedy candidate is still out).
    return !core->SubmitEpisode(MakeEpisode(3, 1)).value();
  };
  EXPECT_TRUE(run(3.0));   // policy plan 2.0 <= 1.0 x reference 3.0: stage over
  EXPECT_FALSE(run(1.5));  // worse than the reference: up to max_updates
}

// The greedy plan of the first published policy, with and without warm start.
TEST_F(LearnerCoreTest, WarmStartClonesTheLagrangianPlanBeforeTheFirstPolicy) {
  const std::vector<int> lagrange = quant::LagrangePlan(whole_, 3.0).value().actions;
  auto costs = rl::UnitCosts::Create(whole_).value();
  auto agreement = [&](const std::string& warm_start) {
    config::RunConfig c = TestConfig(dir_ + "/" + warm_start);
    c.training.warm_start = warm_start;
    auto core = LearnerCore::Create(c, nullptr).value();
    for (const auto& s : Stages(whole_)) EXPECT_TRUE(core->RegisterTable(s.first_layer, 0, s).ok());
    const PublishedPolicy p = core->WaitForPolicy(-1, absl::ZeroDuration());
    EXPECT_EQ(p.snapshot.version, 0);
    auto ppo = rl::CreatePpoLearner(c).value();
    EXPECT_TRUE(ppo->policy().LoadSnapshot(p.snapshot).ok());
    const std::vector<int> greedy = rl::PolicyGreedyPlan(ppo->policy(), costs, c, 3.0).value();
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

// Log lines of a LearnerCore (its log callback), for the tests below.
struct LogLines {
  std::shared_ptr<std::vector<std::string>> lines = std::make_shared<std::vector<std::string>>();
  std::function<void(const std::string&)> fn() {
    auto l = lines;
    return [l](const std::string& line) { l->push_back(line); };
  }
  bool Has(const std::string& line) const {
    return std::find(lines->begin(), lines->end(), line) != lines->end();
  }
  int Count(const std::string& prefix) const {
    int n = 0;
    for (const auto& l : *lines) n += l.rfind(prefix, 0) == 0;
    return n;
  }
};

// rl::RunResult: one curve record per PPO update, one stage
// event per curriculum advance, both in the checkpoint; the result of a
// restarted learner says where it resumed and goes on with the history.
TEST_F(LearnerCoreTest, CurveAndStageHistorySurviveARestart) {
  config::RunConfig c = TestConfig(dir_ + "/history");
  c.curriculum.target_bits = {4.0, 3.0};
  c.curriculum.min_updates = 1;
  c.curriculum.max_updates = 2;
  c.training.warm_start = "none";
  LogLines log;
  auto core = LearnerCore::Create(c, log.fn()).value();
  for (const auto& s : Stages(whole_)) ASSERT_TRUE(core->RegisterTable(s.first_layer, 0, s).ok());
  rl::RunResult r = core->Result();
  EXPECT_EQ(r.resumed_from_update, -1);
  EXPECT_EQ(r.updates, 0);
  EXPECT_TRUE(r.curve.empty());
  EXPECT_FALSE(r.stopped_early);
  // Stage 0 (4.0 bits): its reference is no final-stage reference.
  std::vector<quant::Plan> out = core->TakeCandidates(absl::ZeroDuration());
  ASSERT_EQ(out.size(), 1u);
  {
    EvaluationInput in = Eval(out[0].episode_id, 9.0);
    in.plan_id = out[0].plan_id;
    in.evaluation.cached = true;
    ASSERT_TRUE(core->ReportEvaluation(in).value());
  }
  EXPECT_TRUE(core->Result().reference.actions.empty());
  // Update 1 (episodes at 3.0 and 2.5 PPL), update 2 (2.0, 2.0): stage 0 ends
  // after max_updates.
  auto batch = [&](LearnerCore& core, uint64_t id, int64_t version, double ppl1, double ppl2) {
    for (uint64_t i : {id, id + 1})
      ASSERT_TRUE(core.SubmitEpisode(MakeEpisode(i, version)).value());
    ASSERT_TRUE(core.ReportEvaluation(Eval(id, ppl1)).value());
    ASSERT_TRUE(core.ReportEvaluation(Eval(id + 1, ppl2)).value());
  };
  batch(*core, 1, 0, 3.0, 2.5);
  r = core->Result();
  ASSERT_EQ(r.curve.size(), 1u);
  const rl::UpdateRecord& u1 = r.curve[0];
  EXPECT_EQ(u1.update, 1);
  EXPECT_EQ(u1.stage, 0);
  EXPECT_DOUBLE_EQ(u1.target_bits, 4.0);
  EXPECT_DOUBLE_EQ(u1.mean_ppl, 2.75);
  EXPECT_DOUBLE_EQ(u1.mean_bits, 1.2);
  EXPECT_DOUBLE_EQ(u1.best_ppl, 2.5);  // 1.2 bits: feasible at the final 3.0
  EXPECT_DOUBLE_EQ(u1.best_bits, 1.2);
  EXPECT_DOUBLE_EQ(u1.lambda, c.lagrange.lambda_init);  // the λ batch 1 was rewarded with
  EXPECT_EQ(u1.evaluations, 2);                         // 3 received, the reference was cached
  EXPECT_GT(u1.entropy, 0);
  EXPECT_GT(u1.seconds, 0);
  {  // mean_reward: the mean episode return, as plans.jsonl records it.
    const std::map<uint64_t, double> rewards = RecordedRewards(c.output.dir);
    ASSERT_EQ(rewards.size(), 2u);
    const double want = (rewards.at(1) + rewards.at(2)) / 2;
    EXPECT_NEAR(u1.mean_reward, want, 1e-4 * std::max(1.0, std::abs(want)));
  }
  EXPECT_EQ(r.evaluations, 3);
  EXPECT_EQ(r.cache_hits, 1);
  EXPECT_TRUE(r.stages.empty());
  EXPECT_TRUE(log.Has("learner: checkpoint: update 1 written to " + c.output.dir + "/checkpoint"));

  batch(*core, 3, 1, 2.0, 2.0);
  r = core->Result();
  ASSERT_EQ(r.curve.size(), 2u);
  EXPECT_EQ(r.curve[1].update, 2);
  EXPECT_EQ(r.curve[1].stage, 0);
  EXPECT_DOUBLE_EQ(r.curve[1].best_ppl, 2.0);
  EXPECT_NEAR(r.curve[1].lambda, 1.0 + 2 * 0.05 * (0.5 - 0.05), 1e-12);  // batch 2's λ
  ASSERT_EQ(r.stages.size(), 1u);
  EXPECT_EQ(r.stages[0].stage, 0);
  EXPECT_DOUBLE_EQ(r.stages[0].target_bits, 4.0);
  EXPECT_EQ(r.stages[0].update, 2);
  EXPECT_NE(r.stages[0].reason.find("max_updates"), std::string::npos) << r.stages[0].reason;
  EXPECT_EQ(r.updates, 2);
  EXPECT_NEAR(r.lambda, core->Status().lambda, 1e-15);
  EXPECT_DOUBLE_EQ(r.best.evaluation.eval_ppl, 2.0);
  EXPECT_GE(r.seconds, r.curve[1].seconds);
  EXPECT_TRUE(log.Has("learner: checkpoint: update 2 written to " + c.output.dir + "/checkpoint"));
  const rl::RunResult before = r;

  // Restart: the history comes back from the checkpoint.
  core.reset();
  LogLines log2;
  core = LearnerCore::Create(c, log2.fn()).value();
  r = core->Result();
  EXPECT_EQ(r.resumed_from_update, 2);
  EXPECT_EQ(r.updates, 2);
  EXPECT_EQ(r.evaluations, 0);  // in this process
  EXPECT_EQ(r.cache_hits, 0);
  ASSERT_EQ(r.curve.size(), before.curve.size());
  for (size_t i = 0; i < r.curve.size(); ++i) {
    EXPECT_EQ(r.curve[i].update, before.curve[i].update);
    EXPECT_EQ(r.curve[i].stage, before.curve[i].stage);
    EXPECT_DOUBLE_EQ(r.curve[i].target_bits, before.curve[i].target_bits);
    EXPECT_NEAR(r.curve[i].mean_reward, before.curve[i].mean_reward, 1e-9);
    EXPECT_NEAR(r.curve[i].mean_ppl, before.curve[i].mean_ppl, 1e-9);
    EXPECT_NEAR(r.curve[i].lambda, before.curve[i].lambda, 1e-9);
    EXPECT_NEAR(r.curve[i].policy_loss, before.curve[i].policy_loss, 1e-9);
    EXPECT_EQ(r.curve[i].evaluations, before.curve[i].evaluations);
  }
  ASSERT_EQ(r.stages.size(), 1u);
  EXPECT_EQ(r.stages[0].update, 2);
  EXPECT_EQ(r.stages[0].reason, before.stages[0].reason);
  // The final stage's reference (queued again by the restarted learner).
  out = core->TakeCandidates(absl::ZeroDuration());
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].source, "lagrange");
  {
    EvaluationInput in = Eval(out[0].episode_id, 5.0);
    in.plan_id = out[0].plan_id;
    in.evaluation.cached = true;
    ASSERT_TRUE(core->ReportEvaluation(in).value());
  }
  r = core->Result();
  EXPECT_EQ(r.reference.source, "lagrange");
  EXPECT_DOUBLE_EQ(r.reference.target_bits, 3.0);
  EXPECT_DOUBLE_EQ(r.reference.evaluation.eval_ppl, 5.0);
  EXPECT_EQ(r.reference.actions, quant::LagrangePlan(whole_, 3.0).value().actions);
  // Update 3: stage 1's best policy plan (1.8) beats its reference (5.0): finished.
  batch(*core, 5, 2, 1.8, 2.2);
  r = core->Result();
  ASSERT_EQ(r.curve.size(), 3u);
  EXPECT_EQ(r.curve[2].update, 3);
  EXPECT_EQ(r.curve[2].stage, 1);
  EXPECT_DOUBLE_EQ(r.curve[2].target_bits, 3.0);
  EXPECT_DOUBLE_EQ(r.curve[2].mean_ppl, 2.0);
  EXPECT_EQ(r.curve[2].evaluations, 2);  // misses in this process
  EXPECT_GT(r.curve[2].seconds, 0);
  ASSERT_EQ(r.stages.size(), 2u);
  EXPECT_EQ(r.stages[1].stage, 1);
  EXPECT_DOUBLE_EQ(r.stages[1].target_bits, 3.0);
  EXPECT_EQ(r.stages[1].update, 3);
  EXPECT_NE(r.stages[1].reason.find("reference"), std::string::npos) << r.stages[1].reason;
  EXPECT_EQ(r.updates, 3);
  EXPECT_EQ(r.resumed_from_update, 2);
  EXPECT_EQ(r.evaluations, 3);
  EXPECT_EQ(r.cache_hits, 1);
  EXPECT_DOUBLE_EQ(r.best.evaluation.eval_ppl, 1.8);
  EXPECT_TRUE(log2.Has("learner: checkpoint: update 3 written to " + c.output.dir + "/checkpoint"));
  core.reset();
  // And once more: the full history.
  core = LearnerCore::Create(c, nullptr).value();
  r = core->Result();
  EXPECT_EQ(r.resumed_from_update, 3);
  ASSERT_EQ(r.curve.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(r.curve[i].update, i + 1);
  ASSERT_EQ(r.stages.size(), 2u);
  EXPECT_EQ(r.stages[1].update, 3);
}

// stop_after_updates: after N updates in this process the
// checkpoint is written and the learner stops (not done).
TEST_F(LearnerCoreTest, StopAfterUpdatesCheckpointsAndStops) {
  config::RunConfig c = TestConfig(dir_ + "/stop");
  c.curriculum.max_updates = 10;
  c.training.checkpoint_every_updates = 100;  // only the stop writes one
  c.training.warm_start = "none";
  LogLines log;
  auto core = LearnerCore::Create(c, log.fn()).value();
  core->set_stop_after_updates(2);
  for (const auto& s : Stages(whole_)) ASSERT_TRUE(core->RegisterTable(s.first_layer, 0, s).ok());
  for (uint64_t id : {1, 2}) ASSERT_TRUE(core->SubmitEpisode(MakeEpisode(id, 0)).value());
  for (uint64_t id : {1, 2}) ASSERT_TRUE(core->ReportEvaluation(Eval(id, 3.0)).value());
  EXPECT_FALSE(core->Status().stopped);
  EXPECT_EQ(log.Count("learner: checkpoint: "), 0);
  for (uint64_t id : {3, 4, 5}) ASSERT_TRUE(core->SubmitEpisode(MakeEpisode(id, 1)).value());
  for (uint64_t id : {3, 4}) ASSERT_TRUE(core->ReportEvaluation(Eval(id, 2.0)).value());
  LearnerStatus s = core->Status();
  EXPECT_TRUE(s.stopped);
  EXPECT_FALSE(s.done);
  EXPECT_FALSE(core->done());
  EXPECT_EQ(s.updates, 2);
  EXPECT_EQ(log.Count("learner: checkpoint: "), 1);
  EXPECT_TRUE(log.Has("learner: checkpoint: update 2 written to " + c.output.dir + "/checkpoint"));
  rl::RunResult r = core->Result();
  EXPECT_TRUE(r.stopped_early);
  EXPECT_EQ(r.updates, 2);
  EXPECT_EQ(r.curve.size(), 2u);
  // Stopped: no episodes, no evaluations, no candidates, no new policy.
  EXPECT_FALSE(core->SubmitEpisode(MakeEpisode(6, 2)).value());
  EXPECT_FALSE(core->ReportEvaluation(Eval(5, 2.0)).value());  // held before the stop
  EXPECT_TRUE(core->TakeCandidates(absl::ZeroDuration()).empty());
  const absl::Time t0 = absl::Now();
  const PublishedPolicy p = core->WaitForPolicy(1, absl::Seconds(60));
  EXPECT_LT(absl::Now() - t0, absl::Seconds(30));  // at once, as when done
  EXPECT_EQ(p.snapshot.version, 1);                // nothing new
  EXPECT_TRUE(p.snapshot.bytes.empty());
  s = core->Status();
  EXPECT_EQ(s.updates, 2);
  EXPECT_EQ(s.episodes, 5);
  EXPECT_EQ(s.evaluations, 4);
  EXPECT_TRUE(s.stopped);
  EXPECT_FALSE(s.done);
  // The checkpoint holds update 2: a restarted learner goes on from there.
  core.reset();
  core = LearnerCore::Create(c, nullptr).value();
  EXPECT_EQ(core->Result().resumed_from_update, 2);
  EXPECT_FALSE(core->Status().stopped);
  EXPECT_EQ(core->version(), 2);
  EXPECT_EQ(core->Result().curve.size(), 2u);
  EXPECT_TRUE(core->SubmitEpisode(MakeEpisode(7, 2)).value());
  // Set once the count is reached already: stops at once (a checkpoint first).
  ASSERT_TRUE(core->SubmitEpisode(MakeEpisode(8, 2)).value());
  for (uint64_t id : {7, 8}) ASSERT_TRUE(core->ReportEvaluation(Eval(id, 2.0)).value());
  EXPECT_FALSE(core->Status().stopped);
  core->set_stop_after_updates(1);
  EXPECT_TRUE(core->Status().stopped);
  EXPECT_EQ(core->Result().updates, 3);
  EXPECT_FALSE(core->SubmitEpisode(MakeEpisode(9, 3)).value());
}

// Held episodes and candidates expire after service.evaluation_timeout_ms. A
// negative timeout (never in a real config) expires, at each call, all that
// was held before it: the rule without sleeping.
TEST_F(LearnerCoreTest, HeldEpisodesAndCandidatesExpire) {
  config::RunConfig c = TestConfig(dir_ + "/expire");
  c.service.evaluation_timeout_ms = -60000;
  c.training.warm_start = "none";
  LogLines log;
  auto core = LearnerCore::Create(c, log.fn()).value();
  for (const auto& s : Stages(whole_)) ASSERT_TRUE(core->RegisterTable(s.first_layer, 0, s).ok());
  const std::vector<quant::Plan> ref = core->TakeCandidates(absl::ZeroDuration());
  ASSERT_EQ(ref.size(), 1u);  // handed out, and expired by that very call
  EXPECT_FALSE(core->CandidatePending(ref[0].episode_id));
  EXPECT_TRUE(log.Has("learner: candidate " + ref[0].plan_id + " expired without evaluation"));
  ASSERT_TRUE(core->SubmitEpisode(MakeEpisode(1, 0)).value());
  ASSERT_TRUE(core->ReportEvaluation(Eval(1, 3.0)).value());    // evaluated in time
  ASSERT_TRUE(core->SubmitEpisode(MakeEpisode(2, 0)).value());  // (1 is gone: not expired)
  EXPECT_EQ(core->Status().expired, 0);
  EXPECT_EQ(core->Status().pending, 1);
  ASSERT_TRUE(core->SubmitEpisode(MakeEpisode(3, 0)).value());  // expires 2
  EXPECT_EQ(core->Status().expired, 1);
  EXPECT_FALSE(core->ReportEvaluation(Eval(2, 3.0)).value());
  core->ExpirePending();  // expires 3
  const LearnerStatus s = core->Status();
  EXPECT_EQ(s.expired, 2);
  EXPECT_EQ(s.pending, 0);
  EXPECT_TRUE(log.Has("learner: episode 2 expired without evaluation"));
  EXPECT_TRUE(log.Has("learner: episode 3 expired without evaluation"));
  EXPECT_EQ(log.Count("learner: episode "), 2);
  EXPECT_FALSE(core->ReportEvaluation(Eval(3, 3.0)).value());

  // A long timeout: nothing expires.
  config::RunConfig k = TestConfig(dir_ + "/keep");
  k.training.warm_start = "none";
  auto keep = LearnerCore::Create(k, nullptr).value();
  for (const auto& st : Stages(whole_))
    ASSERT_TRUE(keep->RegisterTable(st.first_layer, 0, st).ok());
  for (uint64_t id : {5, 1, 3}) ASSERT_TRUE(keep->SubmitEpisode(MakeEpisode(id, 0)).value());
  keep->ExpirePending();
  EXPECT_EQ(keep->Status().expired, 0);
  EXPECT_EQ(keep->Status().pending, 3);
  EXPECT_TRUE(keep->ReportEvaluation(Eval(3, 3.0)).value());
}

}  // namespace
}  // namespace windquant::learner
