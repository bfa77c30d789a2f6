#include "job/learner_options.h"

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/config/run_digest.h"
#include "common/search/baselines.h"
#include "common/testing/scoped_test_dir.h"
#include "common/testing/synthetic_table.h"
#include "gtest/gtest.h"

namespace windquant::job {
namespace {

TEST(LearnerOptionsTest, EvaluationTokensFollowTheSelectionRange) {
  config::RunConfig c;
  c.evaluation.selection.tokens = {4096, 4608};
  c.evaluation.calib_slice_tokens = 256;
  EXPECT_EQ(EvaluationTokens(c), 512 + 256);
  c.evaluation.selection.tokens = {100, 0};  // to the end of the text
  c.evaluation.context = 128;
  c.evaluation.batch = 8;
  EXPECT_EQ(EvaluationTokens(c), 128 * 8 + 256);
}

// The held-out pass gets one evaluation's allowance per evaluation's worth of
// held-out tokens (it timed out at one allowance: 65,536 tokens, 13 selections' worth).
TEST(LearnerOptionsTest, HeldOutAllowanceGrowsWithTheHeldOutText) {
  const ::windquant::testing::ScopedTestDir scoped("learner_options_heldout_test");
  config::RunConfig c;
  c.service.evaluation_timeout_ms = 60000;
  c.evaluation.selection.tokens = {0, 4064};
  c.evaluation.calib_slice_tokens = 1024;  // 5,088 tokens per evaluation
  c.evaluation.heldout.text = scoped.path() + "/heldout.txt";
  c.evaluation.heldout.tokens = {0, 65536};
  EXPECT_EQ(HeldOutAllowance(c), absl::Seconds(60 * 13));
  c.evaluation.heldout.tokens = {0, 100};
  EXPECT_EQ(HeldOutAllowance(c), absl::Seconds(60));
  // To the end of the text: bounded by the file's bytes.
  c.evaluation.heldout.tokens = {1000, 0};
  std::ofstream(c.evaluation.heldout.text) << std::string(5088 * 3, 'a');
  EXPECT_EQ(HeldOutAllowance(c), absl::Seconds(60 * 4));
  // A file the learner cannot read: 64 evaluations' worth.
  c.evaluation.heldout.text = scoped.path() + "/missing.txt";
  EXPECT_EQ(HeldOutAllowance(c), absl::Seconds(60 * 64));
  EXPECT_EQ(LearnerNodeOptionsFrom(c, false).heldout_allowance, absl::Seconds(60 * 64));
}

TEST(LearnerOptionsTest, DefaultsAreTheDefaultConfigs) {
  const config::RunConfig c;
  const learner::LearnerCore::Options from = LearnerCoreOptionsFrom(c);
  const learner::LearnerCore::Options defaults;
  EXPECT_EQ(from.dir, defaults.dir);
  EXPECT_EQ(from.chunk_size, defaults.chunk_size);
  EXPECT_EQ(from.episodes_per_update, defaults.episodes_per_update);
  EXPECT_EQ(from.warm_start, defaults.warm_start);
  EXPECT_EQ(from.self_imitation_prob, defaults.self_imitation_prob);
  EXPECT_EQ(from.checkpoint_every_updates, defaults.checkpoint_every_updates);
  EXPECT_EQ(from.evaluation_allowance, defaults.evaluation_allowance);
  EXPECT_EQ(from.policy.warm_start_steps, defaults.policy.warm_start_steps);
  EXPECT_EQ(from.policy.screen_samples, defaults.policy.screen_samples);
}

TEST(LearnerOptionsTest, KeysMapOntoTheirFields) {
  config::RunConfig c;
  c.output.dir = "/tmp/run";
  c.output.store = "file:///tmp/store";
  c.model.dir = "/models/stories260k";
  c.service.stages = 3;
  c.service.evaluation_timeout_ms = 2500;
  c.service.rpc_deadline_ms = 700;
  c.training.warm_start = "none";
  c.training.seed = 11;
  c.training.screen_samples = 8;
  c.ppo.max_policy_lag = 5;
  c.curriculum.target_bits = {3.0, 2.5};
  const learner::LearnerCore::Options core = LearnerCoreOptionsFrom(c);
  EXPECT_EQ(core.dir, "/tmp/run");
  EXPECT_EQ(core.stages, 3);
  EXPECT_FALSE(core.warm_start);
  EXPECT_EQ(core.policy.seed, 11u);
  EXPECT_EQ(core.policy.screen_samples, 8);
  EXPECT_EQ(core.policy.ppo.max_policy_lag, 5);
  EXPECT_EQ(core.evaluation_allowance, absl::Milliseconds(2500));
  EXPECT_EQ(core.run_config_text, config::RunDefiningText(c));
  const learner::RunPublisherOptions store = RunPublisherOptionsFrom(c);
  EXPECT_EQ(store.store, "file:///tmp/store");
  EXPECT_EQ(store.config_digest, config::RunConfigDigest(c));
  EXPECT_EQ(store.target_bits, 2.5);
  const learner::LearnerNodeOptions node = LearnerNodeOptionsFrom(c, /*write_final=*/false);
  EXPECT_EQ(node.rpc_deadline, absl::Milliseconds(700));
  EXPECT_FALSE(node.write_final);
  EXPECT_TRUE(LearnerNodeOptionsFrom(c, /*write_final=*/true).write_final);
}

// The quality-target mode's start: the learner that owns the run's result
// (write_final: windquant-learner) waits for it and searches it through the
// evaluator; `windquant quantize` (no write_final) finds its own; the
// fixed-budget mode has none. The search is the Lagrangian bisection to
// epsilon on the evaluator's d: here a d that falls with the bits (the
// table's FP plan d 0), so it ends within epsilon below the cap.
TEST(LearnerOptionsTest, TheQualityTargetLearnerSearchesItsStartThroughTheEvaluator) {
  config::RunConfig c;
  c.curriculum.target_bits = {6.0};
  EXPECT_FALSE(LearnerNodeOptionsFrom(c, /*write_final=*/true).core.await_start);
  c.lagrange.prices = "target";
  c.lagrange.epsilon = 0.05;
  EXPECT_FALSE(LearnerNodeOptionsFrom(c, /*write_final=*/false).core.await_start);
  EXPECT_FALSE(LearnerNodeOptionsFrom(c, /*write_final=*/false).start_search);
  const learner::LearnerNodeOptions node = LearnerNodeOptionsFrom(c, /*write_final=*/true);
  EXPECT_TRUE(node.core.await_start);
  ASSERT_TRUE(node.start_search);

  const plan::UnitTable table = ::windquant::testing::SyntheticTable(40, 5);
  int measured = 0;
  const learner::PlanMeasurer measure =
      [&](const std::vector<int>& actions,
          learner::PlanText text) -> absl::StatusOr<learner::TextMeasurement> {
    EXPECT_EQ(text, learner::PlanText::kSelection);
    ++measured;
    const double d = std::max(0.0, 4.0 - table.EffectiveBits(actions)) * 0.1;
    learner::TextMeasurement m;
    m.perplexity = 10 * (1 + d);
    m.degradation = d;
    return m;
  };
  std::vector<std::string> lines;
  absl::StatusOr<learner::RunStart> start =
      node.start_search(table, measure, [&](const std::string& l) { lines.push_back(l); });
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_TRUE(start->within_epsilon);
  EXPECT_LE(start->degradation, 0.05);
  EXPECT_NEAR(start->degradation, std::max(0.0, 4.0 - start->bits) * 0.1, 1e-12);
  EXPECT_LE(start->bits, start->cap_bits + 1e-9);
  EXPECT_LT(start->cap_bits, 6.0);     // below the run's cap
  EXPECT_GE(start->bits, 3.5 - 1e-9);  // no plan under 3.5 bits is within epsilon
  EXPECT_EQ(start->evaluations, measured);
  EXPECT_GE(static_cast<int>(lines.size()), measured);  // a line per measured plan

  // A search whose evaluator is away fails with its error (the node retries).
  const learner::PlanMeasurer away =
      [](const std::vector<int>&, learner::PlanText) -> absl::StatusOr<learner::TextMeasurement> {
    return absl::UnavailableError("evaluator: connection refused");
  };
  EXPECT_EQ(node.start_search(table, away, nullptr).status().code(),
            absl::StatusCode::kUnavailable);
}

// The quality-target learner's final report has quantize's two bisection rows,
// measured through the evaluator: "lagrange-bisect" is the start's search (the
// same plan, the same count of plans), "screened-bisect" spends at most RL's
// real evaluations; the returned plan is the fewest bits within epsilon of all
// rows, so never more bits than the start's.
TEST(LearnerOptionsTest, TheQualityTargetReportHasTheBisectionRowsMeasuredThroughTheEvaluator) {
  const ::windquant::testing::ScopedTestDir dir("learner_options_test");
  config::RunConfig c;
  c.curriculum.target_bits = {6.0};
  c.lagrange.prices = "target";
  c.lagrange.epsilon = 0.05;
  c.output.export_model = false;
  c.output.dir = dir.path();
  const learner::LearnerNodeOptions node = LearnerNodeOptionsFrom(c, /*write_final=*/true);
  ASSERT_TRUE(node.write_final);
  const plan::UnitTable table = ::windquant::testing::SyntheticTable(40, 5);
  auto d_of = [&](const std::vector<int>& a) {
    return std::max(0.0, 4.0 - table.EffectiveBits(a)) * 0.1;
  };
  const learner::PlanMeasurer measure =
      [&](const std::vector<int>& a,
          learner::PlanText) -> absl::StatusOr<learner::TextMeasurement> {
    return learner::TextMeasurement{10 * (1 + d_of(a)), 500, d_of(a)};
  };
  absl::StatusOr<learner::RunStart> start = node.start_search(table, measure, nullptr);
  ASSERT_TRUE(start.ok()) << start.status();

  rl::RunResult run;  // RL's plan: the Lagrangian plan at 5 bits, within epsilon
  absl::StatusOr<plan::Plan> rl_plan = search::LagrangePlan(table, 5.0);
  ASSERT_TRUE(rl_plan.ok()) << rl_plan.status();
  run.best.actions = rl_plan->actions;
  run.best.evaluation.effective_bits = table.EffectiveBits(run.best.actions);
  run.best.evaluation.relative_ppl_increase = d_of(run.best.actions);
  run.best.evaluation.eval_ppl = 10 * (1 + d_of(run.best.actions));
  run.real_evaluations = 20;
  learner::FinishOptions finish;
  finish.measure = measure;
  absl::StatusOr<learner::FinalArtifacts> a =
      node.write_final(run, table, "run-1", dir.path(), finish);
  ASSERT_TRUE(a.ok()) << a.status();
  std::ifstream in(dir.path() + "/report.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  ASSERT_TRUE(j.contains("lagrange_bisect")) << j.dump();
  EXPECT_DOUBLE_EQ(j["lagrange_bisect"]["bits"].get<double>(), start->bits);
  EXPECT_EQ(j["lagrange_bisect"]["evaluations"].get<int64_t>(), start->evaluations);
  const nlohmann::json& s = j.at("screened_bisect");
  EXPECT_GE(s["evaluations"].get<int64_t>(), 1);
  EXPECT_LE(s["evaluations"].get<int64_t>(), 20);
  EXPECT_EQ(s["rl_evaluations"], 20);
  EXPECT_TRUE(s["within_epsilon"].get<bool>());
  std::vector<std::string> names;
  for (const nlohmann::json& p : j["plans"]) names.push_back(p["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"rl", "search", "screened-search", "lagrange-bisect",
                                             "screened-bisect"}));
  const nlohmann::json& returned = j["quality_target"]["returned"];
  EXPECT_LE(returned["bits"].get<double>(), start->bits + 1e-9);
  EXPECT_LE(returned["selection_degradation"].get<double>(), 0.05 + 1e-12);
  EXPECT_EQ(a->metadata.count("screened_bisect_evaluations"), 1u);
  // Which variant and binary made it (no commit given here: "unknown").
  EXPECT_EQ(j["config_digest"], config::VariantDigest(c));
  EXPECT_EQ(j["commit"], "unknown");
}

}  // namespace
}  // namespace windquant::job
