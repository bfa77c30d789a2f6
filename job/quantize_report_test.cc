#include "job/quantize_report.h"

#include <filesystem>

#include "common/base/files.h"
#include "common/config/run_digest.h"
#include "common/plan/plan_io.h"
#include "common/testing/synthetic_table.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace windquant::job {
namespace {

namespace fs = std::filesystem;

TEST(QuantizeReportTest, ReturnedPlanOriginNamesTheLearnerSource) {
  EXPECT_EQ(ReturnedPlanOrigin("rl"), "rl");
  EXPECT_EQ(ReturnedPlanOrigin("rl-greedy"), "greedy-of-policy");
  EXPECT_EQ(ReturnedPlanOrigin("lagrange"), "lagrange");
}

// plan.json and report.json name where the returned plan came from (here the
// Lagrangian reference, which no policy plan beat), and report.json states
// the search baseline's and the RL run's counts of real plan evaluations.
TEST(QuantizeReportTest, PlanAndReportNameTheOriginAndBothEvaluationCounts) {
  const fs::path dir = fs::path(::testing::TempDir()) / "quantize_report_test";
  fs::remove_all(dir);
  const plan::UnitTable table = testing::SyntheticTable(14, 5);
  auto cfg = config::ParseRunConfig(
      "model: {dir: m}\ncalibration: {text: c.txt}\n"
      "evaluation: {selection: {text: s.txt}, heldout: {text: h.txt}}\n",
      "run.yaml", {"output.dir=" + dir.string()});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  const std::vector<int> actions(table.units.size(), 3);
  rl::RunResult tr;
  tr.best.actions = actions;
  tr.best.source = "lagrange";
  tr.best.policy_version = -1;
  tr.evaluations = 90;
  tr.cache_hits = 4;
  EvaluationSlices slices;
  slices.selection.assign(300, 1);
  slices.heldout.assign(600, 2);
  SearchResult search;
  search.actions = actions;
  search.evaluations = 86;
  search.accepted = 5;
  search.start_ppl = 30;
  search.selection_ppl = 28;

  const plan::Plan plan = ReturnedPlan(table, tr, 2.5);
  EXPECT_EQ(plan.source, "lagrange");
  ASSERT_TRUE(plan::WritePlanFiles(plan, table, dir.string()).ok());
  auto plan_json = base::ReadFile((dir / "plan.json").string());
  ASSERT_TRUE(plan_json.ok()) << plan_json.status();
  EXPECT_EQ(nlohmann::json::parse(*plan_json)["source"], "lagrange");

  QuantizeReport r;
  r.config = &*cfg;
  r.table = &table;
  r.training = &tr;
  r.slices = &slices;
  r.target_bits = 2.5;
  r.fp = {"fp", {}, 16, 10, 11, 12};
  const double bits = table.EffectiveBits(actions);
  r.plans = {{"rl", actions, bits, 28, 31, 32},
             {"lagrange", actions, bits, 28, 31, 32},
             {"search", actions, bits, 28, 31, 32}};
  r.have_heldout = true;
  r.winner = "search";
  r.origin = ReturnedPlanOrigin(tr.best.source);
  r.rl_evaluations = tr.evaluations - tr.cache_hits;
  r.search = &search;
  r.commit = "0123abc-dirty";
  ASSERT_TRUE(WriteQuantizeReport(r).ok());
  auto text = base::ReadFile((dir / "report.json").string());
  ASSERT_TRUE(text.ok()) << text.status();
  const auto j = nlohmann::json::parse(*text);
  // Which code and which variant made the numbers: the same digest for another seed.
  EXPECT_EQ(j["commit"], "0123abc-dirty");
  config::RunConfig other_seed = *cfg;
  other_seed.training.seed += 7;
  other_seed.calibration.seed += 3;
  EXPECT_EQ(j["config_digest"], config::VariantDigest(other_seed));
  other_seed.ppo.learning_rate *= 2;
  EXPECT_NE(j["config_digest"], config::VariantDigest(other_seed));
  EXPECT_EQ(j["returned_plan_origin"], "lagrange");
  EXPECT_EQ(j["rl"]["origin"], "lagrange");
  EXPECT_EQ(j["plans"][0]["origin"], "lagrange");
  EXPECT_EQ(j["rl_real_evaluations"], 86);
  EXPECT_EQ(j["search"]["evaluations"], 86);
  EXPECT_EQ(j["search"]["rl_evaluations"], 86);
  EXPECT_EQ(j["plans"][2]["name"], "search");
  bool note = false;
  for (const auto& n : j["notes"]) {
    note |= n.get<std::string>().find(
                "86 real plan evaluations on the selection slice (the RL "
                "run: 86)") != std::string::npos;
  }
  EXPECT_TRUE(note) << j["notes"].dump();
  fs::remove_all(dir);
}

// A search's plan returned: report.json names it and its origin, the RL row
// keeps the RL run's own origin, and both search rows carry their counts and
// what their evaluations cost beside RL's (tokens read, samples screened).
TEST(QuantizeReportTest, ReturnedSearchPlanAndBothSearchRows) {
  const fs::path dir = fs::path(::testing::TempDir()) / "quantize_report_search_test";
  fs::remove_all(dir);
  const plan::UnitTable table = testing::SyntheticTable(14, 5);
  auto cfg = config::ParseRunConfig(
      "model: {dir: m}\ncalibration: {text: c.txt}\n"
      "evaluation: {selection: {text: s.txt}, heldout: {text: h.txt}}\n",
      "run.yaml", {"output.dir=" + dir.string(), "training.screen_samples=31"});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  const std::vector<int> actions(table.units.size(), 3);
  rl::RunResult tr;
  tr.best.actions = actions;
  tr.best.source = "rl-greedy";
  EvaluationSlices slices;
  slices.selection.assign(300, 1);
  slices.heldout.assign(600, 2);
  slices.calibration.assign(100, 3);
  SearchResult search, screened;
  search.evaluations = screened.evaluations = 40;
  search.restarts = 2;
  screened.restarts = 1;
  screened.screen = 31;
  screened.screened = 1200;
  QuantizeReport r;
  r.config = &*cfg;
  r.table = &table;
  r.training = &tr;
  r.slices = &slices;
  r.target_bits = 2.5;
  r.fp = {"fp", {}, 16, 10, 11, 12};
  const double bits = table.EffectiveBits(actions);
  r.plans = {{"rl", actions, bits, 28, 31, 32},
             {"search", actions, bits, 27, 31, 33},
             {"screened-search", actions, bits, 26, 30, 31}};
  r.anchors = {{"uniform-2", actions, bits, 30, 31, 40},
               {"lagrange@uniform-2", actions, bits, 29, 30, 36}};
  r.have_heldout = true;
  r.winner = "screened-search";
  r.origin = r.returned = "screened-search";
  r.rl_evaluations = 40;
  r.search = &search;
  r.screened_search = &screened;
  ASSERT_TRUE(WriteQuantizeReport(r).ok());
  auto text = base::ReadFile((dir / "report.json").string());
  ASSERT_TRUE(text.ok()) << text.status();
  const auto j = nlohmann::json::parse(*text);
  EXPECT_EQ(j["returned_plan_origin"], "screened-search");
  EXPECT_EQ(j["returned"]["plan"], "screened-search");
  EXPECT_EQ(j["returned"]["selection_ppl"], 26);
  EXPECT_EQ(j["rl"]["origin"], "greedy-of-policy");
  EXPECT_EQ(j["search"]["restarts"], 2);
  EXPECT_EQ(j["screened_search"]["evaluations"], 40);
  EXPECT_EQ(j["screened_search"]["screened"], 1200);
  EXPECT_EQ(j["screened_search"]["rl_evaluations"], 40);
  EXPECT_EQ(j["screened_search"]["screen"], 31);
  EXPECT_EQ(j["rl_cost"]["tokens_per_evaluation"], 400);  // selection and calibration slices
  EXPECT_EQ(j["rl_cost"]["tokens_read"], 40 * 400);
  EXPECT_EQ(j["rl_cost"]["scored_per_evaluation"], 31.0);
  EXPECT_EQ(j["search"]["cost"]["tokens_read"], 40 * 300);
  EXPECT_EQ(j["search"]["cost"]["scored_per_evaluation"], 1.0);
  EXPECT_EQ(j["screened_search"]["cost"]["scored_per_evaluation"], 31.0);  // (40 + 1200) / 40
  ASSERT_EQ(j["uniform_anchors"].size(), 1u);
  EXPECT_EQ(j["uniform_anchors"][0]["uniform"]["name"], "uniform-2");
  EXPECT_EQ(j["uniform_anchors"][0]["lagrange"]["heldout_ppl"], 36);
  EXPECT_DOUBLE_EQ(j["uniform_anchors"][0]["lagrange_over_uniform"].get<double>(), 0.9);
  // Anchors are not rows: the winner and the returned plan come from `plans` only.
  EXPECT_EQ(j["plans"].size(), 3u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace windquant::job
