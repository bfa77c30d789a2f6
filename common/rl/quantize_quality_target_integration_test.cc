// The quality-target mode end to end: the real `windquant quantize
// --max-ppl-increase` binary on the real test model (stories260k, or the
// project's test model on a fresh clone), a cap of kCapBits and a generous
// epsilon (the Lagrangian reference at the cap is within it, so a plan within
// epsilon exists), 3 updates of 4 episodes stopped after the first and
// resumed. It checks that
//  * resuming with another epsilon is refused in one line naming
//    lagrange.epsilon and both values, and leaves the checkpoint alone;
//  * resuming with the same epsilon continues the run to its end;
//  * the returned plan is within epsilon on the selection slice and has the
//    fewest bits among the plans measured within it (plans.jsonl), under the cap;
//  * report.json carries epsilon, the returned plan's d on the selection and
//    held-out text, lambda per update (one per update, the training curve's),
//    and the search rows measured at the RL plan's bits;
//  * the bisections over bits to epsilon have their rows, each with at most
//    the RL run's count of real evaluations, and compete for the returned plan;
//    RL started from the Lagrangian one (report.json quality_target.rl_start);
//  * report.html has the degradation chart with the epsilon line.
// Needs the windquant binary (a build dependency) and the wq_test_model fixture.
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/rl/quantize_test_args.h"
#include "common/testing/test_paths.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace windquant::rl {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kUpdates = 3;
constexpr double kCapBits = 6.0;
constexpr double kEpsilon = 0.1;
// The end's measurement of a plan and the run's may differ in the last digits.
constexpr double kRelativeTolerance = 1e-3;

struct Outcome {
  int status = -1;
  std::string out, err;
};

// Runs `argv` to its end with stdout and stderr to files under `tmp`.
Outcome RunCommand(const std::vector<std::string>& argv, const fs::path& tmp,
                   const std::string& name) {
  const std::string out = (tmp / (name + ".out")).string(), err = (tmp / (name + ".err")).string();
  std::string command;
  for (const std::string& a : argv) absl::StrAppend(&command, "'", a, "' ");
  absl::StrAppend(&command, ">'", out, "' 2>'", err, "'");
  Outcome o;
  o.status = std::system(command.c_str());
  o.out = base::ReadFile(out).value_or("");
  o.err = base::ReadFile(err).value_or("");
  return o;
}

bool Exited0(const Outcome& o) { return WIFEXITED(o.status) && WEXITSTATUS(o.status) == 0; }

std::vector<std::string> QuantizeArgv(const std::string& windquant, const testing::TestModel& m,
                                      const fs::path& tmp, const std::string& epsilon) {
  std::vector<std::string> argv = {windquant,     "quantize",           "--config", m.config,
                                   "--no-export", "--max-ppl-increase", epsilon};
  AppendTinyQuantizeSets(m.config, (tmp / "out").string(), (tmp / "cache").string(), kCapBits,
                         kUpdates, &argv);
  argv.insert(argv.end(), {"--set", "lagrange.eta=2"});
  return argv;
}

// The fewest bits among the plans of plans.jsonl within epsilon (d against
// `fp_selection_ppl`, with the tolerance on the safe side); +inf when none.
double FewestBitsWithinEpsilon(const std::string& plans_jsonl, double fp_selection_ppl) {
  std::ifstream in(plans_jsonl);
  std::string line;
  double fewest = std::numeric_limits<double>::infinity();
  while (std::getline(in, line)) {
    const json row = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (row.is_discarded() || !row.contains("perplexity") || !row["perplexity"].is_number()) {
      continue;
    }
    const double d = row["perplexity"].get<double>() / fp_selection_ppl - 1.0;
    if (d <= kEpsilon * (1.0 - kRelativeTolerance)) {
      fewest = std::min(fewest, row["effective_bits"].get<double>());
    }
  }
  return fewest;
}

// The bisections over bits to epsilon (job/bisection_baseline.h): a row each
// in plans[] under the cap, an object with at most the RL run's count of real
// evaluations, and in quality_target.methods; the returned plan has no more
// bits than any method's plan within epsilon.
void ExpectTheBisectionRows(const json& report) {
  const int64_t rl_evaluations = report.at("rl_real_evaluations").get<int64_t>();
  ASSERT_GE(rl_evaluations, 1);
  for (const char* name : {"lagrange-bisect", "screened-bisect"}) {
    const std::string key = name[0] == 'l' ? "lagrange_bisect" : "screened_bisect";
    ASSERT_TRUE(report.contains(key)) << key;
    const json& b = report.at(key);
    EXPECT_GE(b.at("evaluations").get<int64_t>(), 1) << name;
    EXPECT_LE(b.at("evaluations").get<int64_t>(), rl_evaluations) << name;
    EXPECT_GE(b.at("steps").size(), 1u) << name;
    int64_t spent = 0;
    for (const json& s : b.at("steps")) spent += s.at("evaluations").get<int64_t>();
    EXPECT_EQ(spent, b.at("evaluations").get<int64_t>()) << name;
    int rows = 0;
    for (const json& p : report.at("plans")) {
      if (p.at("name") != name) continue;
      ++rows;
      EXPECT_LE(p.at("bits").get<double>(), kCapBits + 1e-9) << name;
      EXPECT_NEAR(p.at("bits").get<double>(), b.at("bits").get<double>(), 1e-9) << name;
      EXPECT_TRUE(p.at("heldout_ppl").is_number()) << name;
    }
    EXPECT_EQ(rows, 1) << name;
  }
  const json& q = report.at("quality_target");
  const double returned_bits = q.at("returned").at("bits").get<double>();
  int methods = 0;
  for (const json& m : q.at("methods")) {
    ++methods;
    EXPECT_LE(m.at("evaluations").get<int64_t>(), rl_evaluations) << m.dump();
    EXPECT_TRUE(m.at("heldout_degradation").is_number()) << m.dump();
    const json& d = m.at("selection_degradation");
    if (d.is_number() && d.get<double>() <= kEpsilon) {
      EXPECT_LE(returned_bits, m.at("bits").get<double>() + 1e-9) << m.dump();
    }
  }
  EXPECT_EQ(methods, 5);  // rl, search, screened-search and the two bisections
  // RL started where the Lagrangian bisection ended (measured before training,
  // counted in RL's evaluations): the same result, and RL's plan under its bits.
  const json& start = q.at("rl_start");
  const json& lagrange = report.at("lagrange_bisect");
  EXPECT_NEAR(start.at("bits").get<double>(), lagrange.at("bits").get<double>(), 1e-12);
  EXPECT_EQ(start.at("evaluations").get<int64_t>(), lagrange.at("evaluations").get<int64_t>());
  ASSERT_TRUE(start.at("within_epsilon").get<bool>()) << start.dump();
  const double start_cap = start.at("cap_bits").get<double>();
  EXPECT_GE(start_cap, start.at("bits").get<double>() - 1e-12);
  EXPECT_LT(start_cap, kCapBits);
  EXPECT_LE(report.at("rl").at("bits").get<double>(), start_cap + 1e-9);
}

void ExpectTheQualityTargetReport(const json& report, const fs::path& out) {
  ASSERT_TRUE(report.contains("quality_target")) << report.dump(1);
  const json& q = report.at("quality_target");
  EXPECT_DOUBLE_EQ(q.at("max_ppl_increase").get<double>(), kEpsilon);
  EXPECT_DOUBLE_EQ(q.at("cap_bits").get<double>(), kCapBits);
  EXPECT_TRUE(q.at("within_epsilon").get<bool>()) << q.dump(1);
  const json& returned = q.at("returned");
  const double selection_d = returned.at("selection_degradation").get<double>();
  EXPECT_LE(selection_d, kEpsilon);
  // The held-out degradation, from the held-out perplexities of the plan and FP.
  const json& r = report.at("returned");
  EXPECT_NEAR(
      returned.at("heldout_degradation").get<double>(),
      r.at("heldout_ppl").get<double>() / report.at("fp").at("heldout_ppl").get<double>() - 1.0,
      1e-9);
  EXPECT_LE(r.at("bits").get<double>(), kCapBits + 1e-9);
  EXPECT_DOUBLE_EQ(returned.at("bits").get<double>(), r.at("bits").get<double>());
  // Lambda per update: the training curve's, one per update.
  const json& lambdas = q.at("lambda_per_update");
  ASSERT_EQ(lambdas.size(), static_cast<size_t>(kUpdates));
  for (int i = 0; i < kUpdates; ++i) {
    EXPECT_DOUBLE_EQ(lambdas[i].get<double>(),
                     report.at("training_curve")[i].at("lambda").get<double>());
  }
  // The fewest bits within epsilon among everything measured in training.
  const double fewest = FewestBitsWithinEpsilon((out / "plans.jsonl").string(),
                                                report.at("fp").at("selection_ppl").get<double>());
  ASSERT_TRUE(std::isfinite(fewest)) << "no plan of plans.jsonl within epsilon";
  // (plans.jsonl prints 6 significant digits.)
  EXPECT_LE(report.at("rl").at("bits").get<double>(), fewest * (1.0 + 1e-5));
  EXPECT_LE(r.at("bits").get<double>(), report.at("rl").at("bits").get<double>() + 1e-9);
  // The searches spent the RL plan's bits, not the cap.
  const double compared = q.at("compared_at_bits").get<double>();
  EXPECT_NEAR(compared, report.at("rl").at("bits").get<double>(), 1e-9);
  for (const json& p : report.at("plans")) {
    if (p.at("name") == "search" || p.at("name") == "screened-search") {
      EXPECT_LE(p.at("bits").get<double>(), compared + 1e-9) << p.at("name");
    }
  }
  ExpectTheBisectionRows(report);
  // The HTML chart's data and page.
  EXPECT_DOUBLE_EQ(report.at("max_ppl_increase").get<double>(), kEpsilon);
  EXPECT_GE(report.at("measured").size(), 4u * kUpdates);
  const std::string html = base::ReadFile((out / "report.html").string()).value_or("");
  EXPECT_TRUE(absl::StrContains(html, "Degradation against effective bits")) << html.size();
  EXPECT_TRUE(absl::StrContains(html, "epsilon 0.1</text>"));
}

TEST(QuantizeQualityTargetTest, ReturnsTheFewestBitsWithinEpsilonAndResumesOnlyWithIt) {
  const testing::TestModel m = testing::RealModel();
  const std::string windquant = (fs::path(testing::BinaryDir()) / "cli/windquant").string();
  ASSERT_TRUE(fs::exists(windquant)) << windquant << " not built";
  const fs::path tmp =
      fs::path(::testing::TempDir()) / ("wq_quality_target_" + std::to_string(getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  const std::vector<std::string> argv = QuantizeArgv(windquant, m, tmp, "0.1");

  std::vector<std::string> first = argv;
  first.insert(first.end(), {"--stop-after-updates", "1"});
  const Outcome stopped = RunCommand(first, tmp, "first");
  ASSERT_TRUE(Exited0(stopped)) << stopped.err;
  const fs::path ckpt = tmp / "out/checkpoint/run.ckpt";
  ASSERT_TRUE(fs::exists(ckpt));
  const std::string ckpt_bytes = base::ReadFile(ckpt.string()).value_or("");

  // Another epsilon: refused, in one line, naming the key and both values.
  std::vector<std::string> other = QuantizeArgv(windquant, m, tmp, "0.2");
  other.push_back("--resume");
  const Outcome refused = RunCommand(other, tmp, "other");
  EXPECT_FALSE(Exited0(refused));
  EXPECT_TRUE(absl::StrContains(
      refused.err,
      "checkpoint is of a quality-target run (lagrange.epsilon 0.1), this run is a "
      "quality-target run (lagrange.epsilon 0.2)"))
      << refused.err;
  EXPECT_EQ(base::ReadFile(ckpt.string()).value_or(""), ckpt_bytes) << "the checkpoint changed";

  std::vector<std::string> resume = argv;
  resume.push_back("--resume");
  const Outcome done = RunCommand(resume, tmp, "resumed");
  ASSERT_TRUE(Exited0(done)) << done.err << "\n" << done.out;
  const json report =
      json::parse(base::ReadFile((tmp / "out/report.json").string()).value_or("{}"));
  EXPECT_EQ(report.at("resumed_from_update").get<int64_t>(), 1);
  EXPECT_EQ(report.at("updates").get<int64_t>(), kUpdates);
  ExpectTheQualityTargetReport(report, tmp / "out");
  EXPECT_TRUE(absl::StrContains(done.out, "quality target 0.1: returned ")) << done.out;
  EXPECT_TRUE(absl::StrContains(done.out, "on the selection slice (within)")) << done.out;
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace windquant::rl
