// Reproducible runs: `windquant quantize` twice with the same config and seed
// on this machine gives the same plans and numbers. The run is asynchronous
// (learner, evaluator and actor services on their own threads, in-process
// gRPC), so this checks that nothing the learner decides depends on timing:
// the order of the evaluations it learns from, the reward model the actors
// screen with (fitted at the update that made each policy version), the
// self-imitation target. Screening and self-imitation are on because they
// are where a race would show.
// On the real test model with a tiny run (3 updates of 4 episodes, small
// slices, one thread); both runs write report.json and plans.jsonl, which
// are compared: every evaluated plan's perplexity in order, the returned plan
// unit by unit, every row of the report, the counts of real evaluations.
// Needs the windquant binary and the wq_test_model fixture.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/config/run_config.h"
#include "common/testing/shell.h"
#include "common/testing/test_paths.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace windquant {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Same computation, same order, same machine: the numbers agree exactly; the
// slack only absorbs the decimal printing of plans.jsonl.
constexpr double kPrintedRelativeTolerance = 1e-5;
constexpr int kRunTimeoutS = 240;

std::string Quantize(const testing::TestModel& m, const fs::path& out, const fs::path& cache) {
  const auto cfg = config::LoadRunConfig(m.config);
  EXPECT_TRUE(cfg.ok()) << cfg.status();
  if (!cfg.ok()) return "";
  const int64_t sel = cfg->evaluation.selection.tokens[0];
  const int64_t held = cfg->evaluation.heldout.tokens[0];
  const int64_t window = cfg->evaluation.context - 1;
  std::string cmd = absl::StrCat(testing::BinaryDir(), "/cli/windquant quantize --config ",
                                 m.config, " --no-export");
  for (const std::string& s : std::vector<std::string>{
           absl::StrCat("evaluation.selection.tokens=[", sel, ",", sel + 8 * window, "]"),
           absl::StrCat("evaluation.heldout.tokens=[", held, ",", held + 2048, "]"),
           "output.dir=" + out.string(), "quant.cache_dir=" + cache.string(), "model.threads=1",
           "calibration.samples=8", "evaluation.calib_slice_tokens=1024",
           "curriculum.target_bits=[2.0]", "curriculum.min_updates=3", "curriculum.max_updates=3",
           "training.episodes_per_update=4", "training.warm_start_steps=50",
           "training.screen_samples=8", "training.self_imitation=true", "ppo.hidden=[32,32]",
           "ppo.minibatch_size=64", "training.seed=3"}) {
    absl::StrAppend(&cmd, " --set ", s);
  }
  const testing::CommandOutput r = testing::RunInDir(out.parent_path().string(), cmd, kRunTimeoutS);
  EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.err;
  return r.err;
}

json ReadJson(const fs::path& path) {
  absl::StatusOr<std::string> text = base::ReadFile(path.string());
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? json::parse(*text) : json();
}

// plans.jsonl: (source or actor, policy version, perplexity) of every evaluated plan in order.
std::vector<std::pair<std::string, double>> Evaluated(const fs::path& path) {
  std::vector<std::pair<std::string, double>> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const json j = json::parse(line);
    out.emplace_back(absl::StrCat(j.value("source", j.value("actor_id", "")), "@",
                                  j.value("policy_version", -2)),
                     j.at("perplexity").get<double>());
  }
  return out;
}

void ExpectNear(double a, double b, const std::string& what) {
  EXPECT_NEAR(a, b, kPrintedRelativeTolerance * std::max(std::abs(a), std::abs(b))) << what;
}

TEST(QuantizeReproducibleTest, SameConfigAndSeedSamePlansAndNumbers) {
  const testing::TestModel m = testing::RealModel();
  const fs::path tmp =
      fs::path(::testing::TempDir()) / ("wq_quantize_reproducible_" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  const std::string log_a = Quantize(m, tmp / "a", tmp / "cache");
  const std::string log_b = Quantize(m, tmp / "b", tmp / "cache");
  const json a = ReadJson(tmp / "a/report.json"), b = ReadJson(tmp / "b/report.json");
  ASSERT_TRUE(a.is_object() && b.is_object()) << log_a << "\n" << log_b;

  // Plans reach the evaluator two ways (the actors' episodes, the learner's candidates),
  // and which of two plans in flight at once it measures first is timing (one path is
  // issue 34's open item): each path's evaluations are compared in their own order.
  auto ea = Evaluated(tmp / "a/plans.jsonl"), eb = Evaluated(tmp / "b/plans.jsonl");
  for (auto* e : {&ea, &eb}) {
    std::stable_partition(e->begin(), e->end(),
                          [](const auto& x) { return x.first.rfind("actor-", 0) == 0; });
  }
  ASSERT_GE(ea.size(), 12u) << "3 updates of 4 episodes, the reference and greedy plans";
  ASSERT_EQ(ea.size(), eb.size());
  for (size_t i = 0; i < ea.size(); ++i) {
    EXPECT_EQ(ea[i].first, eb[i].first) << "evaluation " << i;
    ExpectNear(ea[i].second, eb[i].second, absl::StrCat("evaluation ", i, " ", ea[i].first));
  }
  const json pa = ReadJson(tmp / "a/plan.json"), pb = ReadJson(tmp / "b/plan.json");
  ASSERT_EQ(pa.at("units").size(), pb.at("units").size());
  for (size_t u = 0; u < pa.at("units").size(); ++u) {
    EXPECT_EQ(pa["units"][u].at("action"), pb["units"][u].at("action")) << "unit " << u;
  }
  EXPECT_EQ(pa.at("source"), pb.at("source"));
  EXPECT_EQ(a.at("returned_plan_origin"), b.at("returned_plan_origin"));
  EXPECT_EQ(a.at("rl_real_evaluations"), b.at("rl_real_evaluations"));
  EXPECT_GT(a.at("rl_real_evaluations").get<int64_t>(), 0);
  ASSERT_EQ(a.at("plans").size(), b.at("plans").size());
  for (size_t i = 0; i < a.at("plans").size(); ++i) {
    const json &x = a["plans"][i], &y = b["plans"][i];
    EXPECT_EQ(x.at("name"), y.at("name"));
    ExpectNear(x.at("bits"), y.at("bits"), x.at("name"));
    ExpectNear(x.at("selection_ppl"), y.at("selection_ppl"), x.at("name"));
    ExpectNear(x.at("heldout_ppl"), y.at("heldout_ppl"), x.at("name"));
  }
  for (const char* row : {"search", "screened_search"}) {
    ASSERT_TRUE(a.contains(row)) << row;
    EXPECT_EQ(a[row].at("evaluations"), a.at("rl_real_evaluations")) << row;
    EXPECT_EQ(a[row].at("evaluations"), b[row].at("evaluations")) << row;
    EXPECT_EQ(a[row].at("accepted"), b[row].at("accepted")) << row;
  }
  ASSERT_EQ(a.at("training_curve").size(), b.at("training_curve").size());
  for (size_t i = 0; i < a.at("training_curve").size(); ++i) {
    const json &x = a["training_curve"][i], &y = b["training_curve"][i];
    ExpectNear(x.at("mean_reward"), y.at("mean_reward"), absl::StrCat("update ", i));
    ExpectNear(x.at("lambda"), y.at("lambda"), absl::StrCat("update ", i));
    EXPECT_EQ(x.at("evaluations"), y.at("evaluations")) << "update " << i;
  }
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace windquant
