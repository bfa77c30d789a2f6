// Learning tests of the code `windquant quantize` runs (the coverage the old
// rl::Trainer tests gave): the real learner::LearnerCore trained on episodes of
// the real rl::RolloutWorker, plans and candidates evaluated by the
// synthetic evaluator (common/rl/synthetic_table.h), all in one thread, no
// gRPC. The loop is the one the services run: the published policy goes to
// the actor, its episodes to the learner, their plans (and the learner's
// candidate plans) to the evaluator, the reports back to the learner.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/quant/action.h"
#include "common/quant/baselines.h"
#include "common/rl/policy.h"
#include "common/rl/rollout_worker.h"
#include "common/rl/state_features.h"
#include "common/rl/synthetic_table.h"
#include "learner/learner_core.h"

namespace windquant::learner {
namespace {

// As the old rl::Trainer tests' TinyConfig, for one stage-0 actor.
config::RunConfig LearningConfig(const std::string& dir, std::vector<double> targets) {
  config::RunConfig c;
  c.output.dir = dir;
  c.service.stages = 1;
  c.service.replicas = 1;
  c.quant.chunk_size = 256;  // the synthetic table's
  c.curriculum.target_bits = std::move(targets);
  c.curriculum.min_updates = 1000;  // no early advance: max_updates updates per stage
  c.curriculum.max_updates = 25;
  c.training.episodes_per_update = 16;
  c.training.warm_start = "none";
  c.training.seed = 7;
  c.training.checkpoint_every_updates = 100;
  c.ppo.hidden = {64, 64};
  // 3x the Trainer test's 1e-3 and no entropy bonus: with 1e-3 the learner's
  // best plan was hardly better than the best of as many untrained samples.
  c.ppo.learning_rate = 3e-3;
  c.ppo.minibatch_size = 256;
  c.ppo.entropy_coef = 0.0;
  c.lagrange.lambda_init = 1.0;
  c.lagrange.eta = 0.0;  // a fixed penalty weight keeps the synthetic objective stationary
  c.env.loss_penalty_weight = 0.0;
  c.env.ppl_penalty_weight = 20.0;
  return c;
}

std::string FreshDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/wq-learner-learning-" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

// Synthetic perplexity of a plan (what SyntheticEvaluator reports).
double SyntheticPpl(const rl::testing::SyntheticEvaluator& ev, const std::vector<int>& actions) {
  return std::exp(rl::testing::SyntheticEvaluator::kBaseNll + ev.Loss(actions));
}

// Mean synthetic perplexity of quant::RandomPlan at `target` over `seeds` seeds.
double RandomPlanPpl(const quant::UnitTable& t, const rl::testing::SyntheticEvaluator& ev,
                     double target, int seeds) {
  double sum = 0;
  for (int s = 1; s <= seeds; ++s) {
    auto plan = quant::RandomPlan(t, target, static_cast<uint64_t>(s));
    EXPECT_TRUE(plan.ok()) << plan.status();
    if (!plan.ok()) return 0;
    EXPECT_LE(t.EffectiveBits(plan->actions), target + 1e-9);
    sum += SyntheticPpl(ev, plan->actions);
  }
  return sum / seeds;
}

struct DriveOptions {
  // false: the learner's lagrange reference candidates are dropped unevaluated
  // (as rl::Trainer without a reference plan): the best plan is the policy's.
  bool evaluate_references = true;
  int max_rounds = 200;  // a guard against a run that never ends
};

// Runs `core` to done(): registers `table` (one stage), then per round hands
// the candidates out for evaluation, takes the published policy, rolls out
// episodes_per_update episodes with one RolloutWorker, submits them and
// reports their evaluations (the last one runs the PPO update).
absl::Status Drive(LearnerCore& core, const quant::UnitTable& table, const config::RunConfig& c,
                   rl::testing::SyntheticEvaluator& ev, const DriveOptions& options) {
  for (int stage = 0; stage < c.service.stages; ++stage) {
    absl::StatusOr<RegisterResult> r = core.RegisterTable(stage, 0, table);
    if (!r.ok()) return r.status();
  }
  auto worker =
      rl::RolloutWorker::Create(table, c.env, "actor-0", /*actor_index=*/0,
                                /*incarnation=*/1, c.training.episodes_per_update, c.training.seed);
  if (!worker.ok()) return worker.status();
  auto policy = rl::Policy::Create(rl::PolicyOptionsFromConfig(c));  // as actor::RolloutLoop
  if (!policy.ok()) return policy.status();

  std::set<std::vector<int>> measured;  // the evaluator's cache
  // As the evaluator's report, filled in as learner::LearnerService does.
  auto evaluate = [&](uint64_t episode_id, const std::string& plan_id,
                      const std::vector<int>& actions) -> absl::Status {
    absl::StatusOr<rl::PlanEvaluation> pe = ev.Evaluate(actions);
    if (!pe.ok()) return pe.status();
    EvaluationInput in;
    in.episode_id = episode_id;
    in.plan_id = plan_id;
    in.evaluation = *pe;
    in.evaluation.cached = !measured.insert(actions).second;
    in.lambda = c.lagrange.lambda_init;  // eta 0: the evaluator's λ stays put
    absl::StatusOr<bool> accepted = core.ReportEvaluation(in);
    if (!accepted.ok()) return accepted.status();
    if (!*accepted) return absl::InternalError(absl::StrCat("evaluation of ", plan_id, " refused"));
    return absl::OkStatus();
  };

  int64_t known = -1;
  for (int round = 0; !core.done(); ++round) {
    if (round >= options.max_rounds) {
      return absl::DeadlineExceededError(absl::StrCat("not done after ", round, " rounds"));
    }
    for (const quant::Plan& p : core.TakeCandidates(absl::ZeroDuration())) {
      if (!options.evaluate_references && p.source == "lagrange") {
        core.DropCandidate(p.episode_id);
        continue;
      }
      if (absl::Status s = evaluate(p.episode_id, p.plan_id, p.actions); !s.ok()) return s;
    }
    if (core.done()) break;
    const PublishedPolicy published = core.WaitForPolicy(known, absl::ZeroDuration());
    if (published.snapshot.version == known) {
      return absl::InternalError(
          absl::StrCat("round ", round, ": no new policy after version ", known, " and not done"));
    }
    known = published.snapshot.version;
    if (absl::Status s = (*policy)->LoadSnapshot(published.snapshot); !s.ok()) return s;
    absl::StatusOr<std::vector<rl::Episode>> episodes =
        (*worker)->Run(**policy, published.target_bits);
    if (!episodes.ok()) return episodes.status();
    std::vector<quant::Plan> plans;
    for (rl::Episode& e : *episodes) {
      plans.push_back(e.plan);
      absl::StatusOr<bool> accepted = core.SubmitEpisode(std::move(e));
      if (!accepted.ok()) return accepted.status();
      if (!*accepted) {
        return absl::InternalError(absl::StrCat("episode ", plans.back().plan_id, " refused"));
      }
    }
    for (const quant::Plan& p : plans) {
      if (absl::Status s = evaluate(p.episode_id, p.plan_id, p.actions); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// Mean PPL of the episodes of the PPO batches [from, to) of a curve.
template <typename Curve>
double BatchMeanPpl(const Curve& curve, size_t from, size_t to) {
  double sum = 0;
  for (size_t i = from; i < to; ++i) sum += curve[i].mean_ppl;
  return sum / static_cast<double>(to - from);
}

// rl::Trainer's LearnsBetterThanRandomOnSyntheticTable on the learner. No
// reference plan is evaluated (the Trainer test had none), so the best plan is
// the policy's (an episode or a greedy candidate).
TEST(LearnerLearningTest, LearnsBetterThanRandomOnSyntheticTable) {
  const auto start = std::chrono::steady_clock::now();
  const quant::UnitTable t = rl::testing::SyntheticTable(70, 5);
  rl::testing::SyntheticEvaluator ev(&t);
  constexpr double kTarget = 2.0;
  constexpr int kUpdates = 25;
  const config::RunConfig c = LearningConfig(FreshDir("learns"), {kTarget});
  ASSERT_EQ(c.curriculum.max_updates, kUpdates);
  auto core = LearnerCore::Create(c, nullptr);
  ASSERT_TRUE(core.ok()) << core.status();
  DriveOptions o;
  o.evaluate_references = false;
  const absl::Status run = Drive(**core, t, c, ev, o);
  ASSERT_TRUE(run.ok()) << run;
  ASSERT_TRUE((*core)->done());
  const auto r = (*core)->Result();

  ASSERT_FALSE(r.best.actions.empty());
  EXPECT_NE(r.best.source, "lagrange");
  EXPECT_TRUE(r.reference.actions.empty());  // dropped, never evaluated
  EXPECT_LE(r.best.evaluation.effective_bits, kTarget + 1e-9);
  EXPECT_LE(t.EffectiveBits(r.best.actions), kTarget + 1e-9);
  const double best = SyntheticPpl(ev, r.best.actions);
  EXPECT_NEAR(r.best.evaluation.eval_ppl, best, 1e-9);
  const double optimum = SyntheticPpl(ev, rl::testing::LagrangianPlan(t, kTarget));
  const double random = RandomPlanPpl(t, ev, kTarget, /*seeds=*/20);
  ASSERT_LT(optimum, random);
  const double gap = random - optimum;
  ASSERT_EQ(r.curve.size(), static_cast<size_t>(kUpdates));
  const double first = BatchMeanPpl(r.curve, 0, 3);
  const double last = BatchMeanPpl(r.curve, kUpdates - 3, kUpdates);
  const std::string numbers =
      absl::StrCat("best ", best, " (", r.best.source, "), random mean ", random, ", optimum ",
                   optimum, ", batch mean PPL first 3 ", first, ", last 3 ", last);
  // The best plan closes at least 2/3 of the gap between random plans and the
  // optimum. (The best of as many samples of the untrained policy does not:
  // with ppo.learning_rate 1e-9 it closed 47-65% over training seeds 1-7.)
  EXPECT_LT(best - optimum, gap / 3) << numbers;
  // The policy itself learned: its last batches close at least 1/3 of the gap
  // (untrained: 0-10%) and are better than its first.
  EXPECT_LT(last - optimum, 2 * gap / 3) << numbers;
  EXPECT_LT(last, first) << numbers;
  EXPECT_EQ(r.updates, kUpdates);
  // Every episode and the greedy plan of every update were evaluated.
  EXPECT_EQ(r.evaluations, kUpdates * c.training.episodes_per_update + kUpdates);
  std::cout << "learns: " << numbers << "; " << Seconds(start) << " s" << std::endl;
}

// rl::Trainer's WarmStartNeverEndsWorseThanTheReferencePlan on the learner:
// each stage's policy is behaviour-cloned on the stage's lagrange reference
// and the references are evaluated as candidates. The best plan is never worse
// than the final stage's reference and within the final budget (stage 1's
// 3.0-bit plans, better than any 2.0-bit plan, must not win).
TEST(LearnerLearningTest, WarmStartNeverEndsWorseThanTheReferencePlan) {
  const auto start = std::chrono::steady_clock::now();
  const quant::UnitTable t = rl::testing::SyntheticTable(42, 6);
  rl::testing::SyntheticEvaluator ev(&t);
  config::RunConfig c = LearningConfig(FreshDir("warm-start"), {3.0, 2.0});
  c.curriculum.min_updates = 1;
  c.curriculum.max_updates = 2;
  c.curriculum.advance_ppl_ratio = 1.0;
  c.training.warm_start = "lagrange";
  c.training.warm_start_steps = 300;
  std::vector<std::string> log;
  auto core = LearnerCore::Create(c, [&log](const std::string& line) { log.push_back(line); });
  ASSERT_TRUE(core.ok()) << core.status();
  const absl::Status run = Drive(**core, t, c, ev, DriveOptions{});
  ASSERT_TRUE(run.ok()) << run;
  ASSERT_TRUE((*core)->done());
  const auto r = (*core)->Result();

  ASSERT_FALSE(r.reference.actions.empty());
  EXPECT_EQ(r.reference.source, "lagrange");
  EXPECT_DOUBLE_EQ(r.reference.target_bits, 2.0);
  const double reference = r.reference.evaluation.eval_ppl;
  EXPECT_NEAR(reference, SyntheticPpl(ev, r.reference.actions), 1e-9);
  ASSERT_FALSE(r.best.actions.empty());
  EXPECT_LE(r.best.evaluation.eval_ppl, reference);
  EXPECT_LE(r.best.evaluation.effective_bits, 2.0 + 1e-9);
  EXPECT_LE(t.EffectiveBits(r.best.actions), 2.0 + 1e-9);
  ASSERT_EQ(r.stages.size(), 2u);  // stage 1 advanced, stage 2 finished
  EXPECT_DOUBLE_EQ(r.stages[0].target_bits, 3.0);
  EXPECT_DOUBLE_EQ(r.stages[1].target_bits, 2.0);
  int cloned = 0;
  for (const auto& line : log) cloned += line.find("behaviour-cloned") != std::string::npos;
  EXPECT_EQ(cloned, 2) << "one warm start per stage";
  // What the warm start buys: the final stage's episodes, sampled from the
  // policy cloned on its reference, stay within a quarter of the gap between
  // the reference and random plans (without warm start they are as bad as
  // random: 3.13-3.15 against 3.10, training seeds 7 and 8).
  const double random = RandomPlanPpl(t, ev, 2.0, /*seeds=*/20);
  ASSERT_LT(reference, random);
  int final_stage_batches = 0;
  double final_stage_ppl = 0;
  for (const auto& u : r.curve) {
    if (u.stage != 1) continue;
    ++final_stage_batches;
    final_stage_ppl = std::max(final_stage_ppl, u.mean_ppl);
    EXPECT_LT(u.mean_ppl - reference, (random - reference) / 4)
        << "update " << u.update << ": batch mean PPL " << u.mean_ppl << ", reference " << reference
        << ", random mean " << random;
  }
  EXPECT_GE(final_stage_batches, 1);
  std::cout << "warm start: best " << r.best.evaluation.eval_ppl << " (" << r.best.source << ", "
            << r.best.evaluation.effective_bits << " bits), reference " << reference
            << ", random mean " << random << ", worst final-stage batch mean " << final_stage_ppl
            << ", updates " << r.updates << "; " << Seconds(start) << " s" << std::endl;
}

}  // namespace
}  // namespace windquant::learner
