// The rows of the distributed report beside RL's plan: which plan is
// returned, what a failed measurement leaves, the names report.json and the
// store manifest give them (those of `windquant quantize`).
#include "learner/final_rows.h"

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/testing/scoped_test_dir.h"
#include "common/testing/synthetic_table.h"
#include "gtest/gtest.h"
#include "learner/run_finisher.h"

namespace windquant::learner {
namespace {

constexpr int kUnits = 14;

std::vector<int> All(int action) { return std::vector<int>(kUnits, action); }

// A fake evaluator: each plan (all units at one action) has fixed perplexities;
// counts its calls per text.
struct FakeEvaluator {
  std::map<int, double> selection, heldout;  // by the plan's action
  bool heldout_fails = false;
  int selection_calls = 0, heldout_calls = 0;
  PlanMeasurer Measurer() {
    return [this](const std::vector<int>& a, PlanText text) -> absl::StatusOr<TextMeasurement> {
      if (text == PlanText::kSelection) {
        ++selection_calls;
        return TextMeasurement{selection.at(a[0]), 500};
      }
      ++heldout_calls;
      if (heldout_fails) return absl::FailedPreconditionError("evaluation.heldout: none");
      return TextMeasurement{heldout.at(a[0]), 900};
    };
  }
};

rl::RunResult RlRun(int action, double selection_ppl, const std::string& source) {
  rl::RunResult r;
  r.best.actions = All(action);
  r.best.source = source;
  r.best.evaluation.eval_ppl = selection_ppl;
  r.best.evaluation.effective_bits = 2;
  r.real_evaluations = 37;
  return r;
}

// A bisection's result: its plan, d as it measured it, two probes.
FinalBisection Bisection(const std::string& name, int action, double degradation,
                         int64_t evaluations) {
  FinalBisection b;
  b.name = name;
  b.result.actions = All(action);
  b.result.degradation = degradation;
  b.result.within_epsilon = true;
  b.result.evaluations = evaluations;
  b.result.per_probe = evaluations / 2;
  b.result.screened = 5 * evaluations;
  b.result.steps = {{3.0, 2.9, 0.5, evaluations / 2}, {2.0, 1.9, degradation, evaluations / 2}};
  return b;
}

FinalSearch Search(const std::string& name, int action, int64_t evaluations) {
  FinalSearch s;
  s.name = name;
  s.result.actions = All(action);
  s.result.selection_ppl = 99;  // the evaluator's number wins
  s.result.evaluations = evaluations;
  return s;
}

class FinalRowsTest : public ::testing::Test {
 protected:
  const plan::UnitTable table_ = windquant::testing::SyntheticTable(kUnits, 1);
  // Action 3 within the target, action 2 above it (more bits), action 4 below.
  const double target_ = table_.EffectiveBits(All(3));
};

TEST_F(FinalRowsTest, TheLowestSelectionPerplexityWithinTheTargetIsReturned) {
  ASSERT_GT(table_.EffectiveBits(All(2)), target_);
  FakeEvaluator ev{{{3, 12.0}, {4, 11.0}, {2, 5.0}}, {{3, 14.0}, {4, 13.5}, {2, 6.0}}};
  absl::StatusOr<FinalRows> f = MeasureFinalRows(
      RlRun(3, 12.0, "rl"), table_, target_,
      {Search("search", 4, 37), Search("screened-search", 2, 37)}, {}, "", ev.Measurer());
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(f->rows.size(), 3u);
  EXPECT_EQ(f->returned, 1u);  // screened-search measured lower, but over the target
  EXPECT_EQ(f->origin, "search");
  EXPECT_EQ(f->rows[1].selection_ppl, 11.0);
  EXPECT_EQ(f->rows[2].heldout_ppl, 6.0);
  EXPECT_EQ(f->rows[0].heldout_tokens, 900);
  EXPECT_TRUE(f->heldout_note.empty());
  EXPECT_EQ(ev.selection_calls, 3);
  EXPECT_EQ(ev.heldout_calls, 3);

  nlohmann::json j;
  f->searches[1].result.screen = 128;
  f->searches[1].result.screened = 37 * 127;
  AddFinalRowsJson(*f, "rl", {/*rl_tokens=*/3000, /*search_tokens=*/1000, /*rl_screen=*/128}, &j);
  EXPECT_EQ(j["returned_plan_origin"], "search");
  EXPECT_EQ(j["returned"]["plan"], "search");
  EXPECT_EQ(j["returned"]["heldout_ppl"], 13.5);
  EXPECT_EQ(j["plans"][0]["origin"], "rl");
  EXPECT_EQ(j["plans"][2]["name"], "screened-search");
  EXPECT_EQ(j["search"]["evaluations"], 37);
  EXPECT_EQ(j["screened_search"]["rl_evaluations"], 37);
  EXPECT_EQ(j["rl_real_evaluations"], 37);
  // What each row's evaluations cost: RL reads both slices, the searches the selection slice;
  // the screened search scored as many proposals per real evaluation as RL's actors.
  EXPECT_EQ(j["rl_cost"]["tokens_read"], 37 * 3000);
  EXPECT_EQ(j["rl_cost"]["scored_per_evaluation"], 128.0);
  EXPECT_EQ(j["search"]["cost"]["tokens_per_evaluation"], 1000);
  EXPECT_EQ(j["search"]["cost"]["scored_per_evaluation"], 1.0);
  EXPECT_EQ(j["screened_search"]["screen"], 128);
  EXPECT_EQ(j["screened_search"]["cost"]["scored_per_evaluation"], 128.0);
  EXPECT_FALSE(j.contains("heldout_note"));
}

TEST_F(FinalRowsTest, ATieGoesToRlUnderItsOriginAndAFailedHeldOutLeavesNoneWithTheReason) {
  FakeEvaluator ev{{{3, 12.0}, {4, 12.0}}, {}};
  ev.heldout_fails = true;
  absl::StatusOr<FinalRows> f = MeasureFinalRows(RlRun(3, 12.0, "rl-greedy"), table_, target_,
                                                 {Search("search", 4, 37)}, {}, "", ev.Measurer());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->returned, 0u);
  EXPECT_EQ(f->origin, "greedy-of-policy");
  EXPECT_NE(f->heldout_note.find("evaluation.heldout: none"), std::string::npos) << f->heldout_note;
  nlohmann::json j;
  AddFinalRowsJson(*f, "rl-greedy", {}, &j);
  EXPECT_TRUE(j["plans"][0]["heldout_ppl"].is_null());
  EXPECT_TRUE(j["plans"][1]["heldout_ppl"].is_null());
  EXPECT_EQ(j["plans"][0]["origin"], "greedy-of-policy");
  EXPECT_TRUE(j.contains("heldout_note"));
}

TEST_F(FinalRowsTest, AnEvaluatorGoneKeepsTheRunsNumbersAndSaysWhyAndNoPlanIsRefused) {
  int calls = 0;
  const PlanMeasurer down = [&calls](const std::vector<int>& a,
                                     PlanText) -> absl::StatusOr<TextMeasurement> {
    if (++calls > 1) return absl::UnavailableError("evaluator down");
    return TextMeasurement{a[0] == 3 ? 50.0 : 1.0, 500};
  };
  absl::StatusOr<FinalRows> f = MeasureFinalRows(RlRun(3, 12.0, "rl"), table_, target_,
                                                 {Search("search", 4, 37)}, {}, "", down);
  ASSERT_TRUE(f.ok()) << f.status();
  // RL's re-measurement (50) is dropped with the search's failure: both as first measured.
  EXPECT_EQ(f->rows[0].selection_ppl, 12.0);
  EXPECT_EQ(f->rows[1].selection_ppl, 99.0);
  EXPECT_EQ(f->returned, 0u);
  EXPECT_EQ(f->rows[0].heldout_tokens, 0);
  EXPECT_NE(f->heldout_note.find("the search plan on the selection slice: evaluator down"),
            std::string::npos)
      << f->heldout_note;
  EXPECT_EQ(calls, 2);
  rl::RunResult none;
  EXPECT_EQ(MeasureFinalRows(none, table_, target_, {}, {}, "", down).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(FinalRowsTest, WithoutAnEvaluatorRlsRowIsItsEvaluationAndTheNotesSayWhy) {
  absl::StatusOr<FinalRows> f = MeasureFinalRows(RlRun(3, 12.5, "rl"), table_, target_, {}, {},
                                                 "searches not run: x", nullptr);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(f->rows.size(), 1u);
  EXPECT_EQ(f->rows[0].selection_ppl, 12.5);
  EXPECT_EQ(f->rows[0].heldout_tokens, 0);
  EXPECT_FALSE(f->heldout_note.empty());
  nlohmann::json j;
  AddFinalRowsJson(*f, "rl", {}, &j);
  EXPECT_EQ(j["searches_note"], "searches not run: x");
  EXPECT_FALSE(j.contains("search"));
}

// The files: plan.json is the returned plan under its origin; the store
// manifest names the origin and the evaluation counts.
TEST_F(FinalRowsTest, TheFinalArtifactsCarryTheReturnedPlanAndItsOriginIntoTheManifest) {
  const ::windquant::testing::ScopedTestDir dir("final_rows_test");
  FakeEvaluator ev{{{3, 12.0}, {4, 11.0}, {5, 11.5}}, {{3, 14.0}, {4, 13.5}, {5, 13.0}}};
  FinishOptions o;
  o.model_dir = "/models/tiny";
  o.target_bits = target_;
  o.export_model = false;
  o.measure = ev.Measurer();
  o.searches = {Search("search", 4, 37), Search("screened-search", 5, 37)};
  absl::StatusOr<FinalArtifacts> a =
      WriteFinalArtifacts(RlRun(3, 12.0, "rl"), table_, "run-1", dir.path(), o);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->metadata.at("source"), "search");
  EXPECT_EQ(a->metadata.at("returned_plan_origin"), "search");
  EXPECT_EQ(a->metadata.at("search_evaluations"), "37");
  EXPECT_EQ(a->metadata.at("screened_search_evaluations"), "37");
  EXPECT_EQ(a->metadata.at("rl_real_evaluations"), "37");
  EXPECT_EQ(a->metadata.at("perplexity_on"), "held-out text");
  EXPECT_EQ(a->metadata.at("perplexity"), "13.500000");
  std::ifstream plan(dir.path() + "/plan.json");
  EXPECT_EQ(nlohmann::json::parse(plan).at("source"), "search");
  std::ifstream report(dir.path() + "/report.json");
  const nlohmann::json j = nlohmann::json::parse(report);
  EXPECT_EQ(j.at("returned_plan_origin"), "search");
  EXPECT_EQ(j.at("plans").size(), 3u);
}

// The uniform anchors (pairs: uniform, the Lagrangian plan at its bits) are measured on
// both texts and written as quantize writes them, with the held-out ratio; they are never
// returned (anchor "uniform-5" measures lower than every row, and is within the target).
// An evaluator without held-out text leaves a note instead, the report written still.
TEST_F(FinalRowsTest, TheUniformAnchorsAreMeasuredOnBothTextsAndNeverReturned) {
  const ::windquant::testing::ScopedTestDir dir("final_rows_test");
  FakeEvaluator ev{{{3, 12.0}, {4, 11.0}, {5, 1.0}, {1, 20.0}},
                   {{3, 14.0}, {4, 13.5}, {5, 2.0}, {1, 30.0}}};
  FinishOptions o;
  o.model_dir = "/models/tiny";
  o.target_bits = target_;
  o.export_model = false;
  o.measure = ev.Measurer();
  o.anchors = {{"uniform-5", All(5)}, {"lagrange@uniform-5", All(1)}};
  absl::StatusOr<FinalArtifacts> a =
      WriteFinalArtifacts(RlRun(3, 12.0, "rl"), table_, "run-1", dir.path(), o);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->metadata.at("source"), "rl");
  EXPECT_EQ(ev.heldout_calls, 3);  // RL's row and both anchors
  std::ifstream report(dir.path() + "/report.json");
  const nlohmann::json j = nlohmann::json::parse(report);
  ASSERT_EQ(j.at("uniform_anchors").size(), 1u);
  const nlohmann::json& pair = j.at("uniform_anchors")[0];
  EXPECT_EQ(pair.at("uniform").at("name"), "uniform-5");
  EXPECT_EQ(pair.at("lagrange").at("name"), "lagrange@uniform-5");
  EXPECT_DOUBLE_EQ(pair.at("uniform").at("selection_ppl").get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(pair.at("lagrange").at("heldout_ppl").get<double>(), 30.0);
  EXPECT_DOUBLE_EQ(pair.at("uniform").at("bits").get<double>(), table_.EffectiveBits(All(5)));
  EXPECT_DOUBLE_EQ(pair.at("lagrange_over_uniform").get<double>(), 15.0);
  EXPECT_EQ(j.at("uniform_anchors_note"), kAnchorsNote);
  EXPECT_EQ(j.at("plans").size(), 1u);

  ev.heldout_fails = true;
  const ::windquant::testing::ScopedTestDir none("final_rows_test");
  a = WriteFinalArtifacts(RlRun(3, 12.0, "rl"), table_, "run-1", none.path(), o);
  ASSERT_TRUE(a.ok()) << a.status();
  std::ifstream none_report(none.path() + "/report.json");
  const nlohmann::json n = nlohmann::json::parse(none_report);
  EXPECT_FALSE(n.contains("uniform_anchors"));
  EXPECT_NE(n.at("uniform_anchors_note").get<std::string>().find("evaluation.heldout: none"),
            std::string::npos);
}

// The quality-target mode (epsilon 0.2; FP selection PPL 10, from RL's
// evaluation): the returned row is the fewest bits within epsilon (the search,
// though RL measured lower), and report.json carries the mode's keys.
TEST_F(FinalRowsTest, QualityTargetReturnsTheFewestBitsWithinEpsilonAndReportsIt) {
  const ::windquant::testing::ScopedTestDir dir("final_rows_test");
  {
    std::ofstream plans(dir.path() + "/plans.jsonl");
    plans << "{\"episode_id\":1,\"effective_bits\":1.5,\"perplexity\":11,\"cached\":false}\n"
          << "{\"episode_id\":2,\"effective_bits\":1.25,\"perplexity\":inf,\"cached\":false}\n";
  }
  FakeEvaluator ev{{{3, 11.0}, {4, 11.9}, {5, 12.5}}, {{3, 14.0}, {4, 13.5}, {5, 13.0}}};
  rl::RunResult run = RlRun(3, 11.0, "rl");
  run.best.evaluation.relative_ppl_increase = 0.1;  // FP: 11 / 1.1 = 10
  run.curve = {rl::UpdateRecord(), rl::UpdateRecord()};
  run.curve[0].lambda = 1.0;
  run.curve[1].lambda = 1.5;
  FinishOptions o;
  o.model_dir = "/models/tiny";
  o.target_bits = target_;
  o.export_model = false;
  o.measure = ev.Measurer();
  o.searches = {Search("search", 4, 37), Search("screened-search", 5, 37)};
  o.max_ppl_increase = 0.2;
  o.records_dir = dir.path();
  absl::StatusOr<FinalArtifacts> a = WriteFinalArtifacts(run, table_, "run-1", dir.path(), o);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->metadata.at("source"), "search");  // 11.9 / 10 - 1 = 0.19, fewer bits than RL
  std::ifstream report(dir.path() + "/report.json");
  const nlohmann::json j = nlohmann::json::parse(report);
  const nlohmann::json& q = j.at("quality_target");
  EXPECT_DOUBLE_EQ(q.at("max_ppl_increase").get<double>(), 0.2);
  EXPECT_TRUE(q.at("within_epsilon").get<bool>());
  EXPECT_EQ(q.at("returned").at("plan"), "search");
  EXPECT_NEAR(q.at("returned").at("selection_degradation").get<double>(), 0.19, 1e-12);
  EXPECT_TRUE(q.at("returned").at("heldout_degradation").is_null());
  EXPECT_EQ(q.at("lambda_per_update"), nlohmann::json::array({1.0, 1.5}));
  EXPECT_DOUBLE_EQ(j.at("max_ppl_increase").get<double>(), 0.2);
  ASSERT_EQ(j.at("measured").size(), 5u);  // 2 of plans.jsonl, 3 final rows
  EXPECT_NEAR(j.at("measured")[0].at("degradation").get<double>(), 0.1, 1e-12);
  EXPECT_TRUE(j.at("measured")[1].at("degradation").is_null());
  EXPECT_EQ(j.at("measured")[3].at("label"), "search (returned)");

  o.max_ppl_increase = 0.05;  // none within: the least degraded (RL's d 0.1), said so
  const ::windquant::testing::ScopedTestDir none("final_rows_test");
  a = WriteFinalArtifacts(run, table_, "run-1", none.path(), o);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->metadata.at("source"), "rl");
  std::ifstream none_report(none.path() + "/report.json");
  const nlohmann::json n = nlohmann::json::parse(none_report);
  EXPECT_FALSE(n.at("quality_target").at("within_epsilon").get<bool>());
  EXPECT_TRUE(n.at("quality_target").contains("note"));
  EXPECT_NE(n.at("notes").dump().find("NO measured plan was within epsilon"), std::string::npos);

  o.max_ppl_increase = 0;  // the fixed-budget rule on the same rows: RL's lower perplexity
  const ::windquant::testing::ScopedTestDir fixed("final_rows_test");
  a = WriteFinalArtifacts(run, table_, "run-1", fixed.path(), o);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->metadata.at("source"), "rl");
  std::ifstream fixed_report(fixed.path() + "/report.json");
  EXPECT_FALSE(nlohmann::json::parse(fixed_report).contains("quality_target"));
}

// The quality-target mode's bisection rows (epsilon 0.2, FP 10): measured as
// every row, candidates for the returned plan (the screened bisection's plan is
// the fewest bits within epsilon), their objects and notes in report.json as
// quantize writes them; an evaluator gone keeps each bisection's own d.
TEST_F(FinalRowsTest, TheBisectionRowsAreMeasuredReturnableAndReportedAsQuantizeReportsThem) {
  ASSERT_LT(table_.EffectiveBits(All(6)), table_.EffectiveBits(All(5)));
  const ::windquant::testing::ScopedTestDir dir("final_rows_test");
  FakeEvaluator ev{{{3, 11.0}, {4, 11.9}, {5, 12.5}, {6, 11.8}},
                   {{3, 14.0}, {4, 13.5}, {5, 13.0}, {6, 15.0}}};
  rl::RunResult run = RlRun(3, 11.0, "rl");
  run.best.evaluation.relative_ppl_increase = 0.1;  // FP: 10
  FinishOptions o;
  o.model_dir = "/models/tiny";
  o.target_bits = target_;
  o.export_model = false;
  o.measure = ev.Measurer();
  o.searches = {Search("search", 4, 37)};
  o.bisections = {Bisection("lagrange-bisect", 5, 0.25, 8),
                  Bisection("screened-bisect", 6, 0.18, 36)};
  o.max_ppl_increase = 0.2;
  o.records_dir = dir.path();
  absl::StatusOr<FinalArtifacts> a = WriteFinalArtifacts(run, table_, "run-1", dir.path(), o);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(ev.selection_calls, 4);
  EXPECT_EQ(ev.heldout_calls, 4);
  EXPECT_EQ(a->metadata.at("source"), "screened-bisect");
  EXPECT_EQ(a->metadata.at("lagrange_bisect_evaluations"), "8");
  EXPECT_EQ(a->metadata.at("screened_bisect_evaluations"), "36");
  std::ifstream report(dir.path() + "/report.json");
  const nlohmann::json j = nlohmann::json::parse(report);
  ASSERT_EQ(j.at("plans").size(), 4u);
  EXPECT_EQ(j.at("plans")[2].at("name"), "lagrange-bisect");
  EXPECT_DOUBLE_EQ(j.at("plans")[3].at("heldout_ppl").get<double>(), 15.0);
  EXPECT_EQ(j.at("quality_target").at("returned").at("plan"), "screened-bisect");
  const nlohmann::json& methods = j.at("quality_target").at("methods");
  ASSERT_EQ(methods.size(), 4u);
  EXPECT_EQ(methods[0].at("evaluations"), 37);  // RL's
  EXPECT_EQ(methods[2].at("plan"), "lagrange-bisect");
  EXPECT_EQ(methods[2].at("evaluations"), 8);
  EXPECT_NEAR(methods[3].at("selection_degradation").get<double>(), 0.18, 1e-12);
  EXPECT_NEAR(j.at("quality_target").at("returned").at("selection_degradation").get<double>(), 0.18,
              1e-12);
  const nlohmann::json& s = j.at("screened_bisect");
  EXPECT_EQ(s.at("evaluations"), 36);
  EXPECT_EQ(s.at("rl_evaluations"), 37);
  EXPECT_EQ(s.at("evaluations_per_probe"), 18);
  EXPECT_EQ(s.at("steps").size(), 2u);
  EXPECT_DOUBLE_EQ(s.at("cost").at("scored_per_evaluation").get<double>(), 6.0);
  EXPECT_FALSE(j.at("lagrange_bisect").at("within_epsilon").is_null());
  const std::string notes = j.at("notes").dump();
  EXPECT_NE(notes.find("lagrange-bisect: bisection of the bits"), std::string::npos) << notes;
  EXPECT_NE(notes.find("a screened search of 18 evaluations"), std::string::npos) << notes;

  int calls = 0;  // the evaluator gone after RL's row: the bisections keep their own d
  const PlanMeasurer down = [&calls](const std::vector<int>&,
                                     PlanText) -> absl::StatusOr<TextMeasurement> {
    if (++calls > 1) return absl::UnavailableError("evaluator down");
    return TextMeasurement{11.0, 500};
  };
  absl::StatusOr<FinalRows> f = MeasureFinalRows(
      run, table_, target_, {}, {Bisection("screened-bisect", 6, 0.18, 36)}, "", down, 0.2);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_NEAR(f->rows[1].selection_ppl, 11.8, 1e-12);
  EXPECT_EQ(f->returned, 1u);
}

}  // namespace
}  // namespace windquant::learner
