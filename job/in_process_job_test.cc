// RunInProcessJob on the real test model (stories260k, or the default model on a
// fresh clone): 2 stages x 2 replicas of actors, the evaluator and the learner in
// this process over in-process channels (what `windquant quantize` runs with
// service.stages/replicas set).
#include "job/in_process_job.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/plan/plan_io.h"
#include "common/quant/quantization_session.h"
#include "common/quant/table_fingerprint.h"
#include "common/testing/scoped_test_dir.h"
#include "common/testing/stage_test_util.h"
#include "common/testing/synthetic_table.h"
#include "common/testing/test_paths.h"
#include "gtest/gtest.h"
#include "job/node_options.h"
#include "job/unit_table_files.h"

namespace windquant::job {
namespace {

namespace fs = std::filesystem;

constexpr int kUpdates = 2;
constexpr double kTargetBits = 2.0;
constexpr double kBitsSlack = 1e-9;

absl::StatusOr<config::RunConfig> JobConfig(const std::string& dir) {
  const std::string config = ::windquant::testing::RealModel().config;
  return config::LoadRunConfig(
      config,
      {"calibration.samples=8", "calibration.seq_len=128", "evaluation.context=128",
       "evaluation.batch=8", "evaluation.calib_slice_tokens=1024",
       absl::StrCat("curriculum.target_bits=[", kTargetBits, "]"),
       absl::StrCat("curriculum.min_updates=", kUpdates),
       absl::StrCat("curriculum.max_updates=", kUpdates), "training.episodes_per_update=4",
       "training.warm_start=none", "ppo.hidden=[32,32]", "ppo.minibatch_size=64", "ppo.epochs=2",
       "service.stages=2", "service.replicas=2", "service.evaluation_timeout_ms=60000",
       "service.rpc_deadline_ms=20000", absl::StrCat("output.dir=", dir, "/run"),
       absl::StrCat("quant.cache_dir=", dir, "/cache")});
}

// The held-out text cut to its first 1,024 tokens: the tests that write the
// final rows measure each on it (a whole 65,536-token pass per row on the fresh
// clone's test model took most of their time) and check that they are measured, not what.
void CutHeldOut(config::RunConfig* c) {
  std::vector<int64_t>& heldout = c->evaluation.heldout.tokens;
  ASSERT_EQ(heldout.size(), 2u);
  heldout[1] = heldout[0] + 1024;
}

// The job's log lines. The sink is called from every node's threads at once (the
// actors' rollout loops, the evaluator's replica workers, the learner's handlers):
// an unguarded vector there is a data race that corrupts the heap in a rare run.
class LogLines {
 public:
  base::LogSink Sink() {
    return [this](const std::string& line) {
      absl::MutexLock lock(&mu_);
      lines_.push_back(line);
    };
  }
  // How many lines contain `text`.
  int Count(const std::string& text) const {
    absl::MutexLock lock(&mu_);
    int n = 0;
    for (const std::string& line : lines_) n += line.find(text) != std::string::npos;
    return n;
  }
  std::string Joined() const {
    absl::MutexLock lock(&mu_);
    std::string all;
    for (const std::string& line : lines_) absl::StrAppend(&all, line, "\n");
    return all;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

// The actors' stages hold the session's tensors (no copy), their fits merge into
// one table of every layer, which a session adopts under its own fingerprint and
// which has the layout of the session's own fits.
void ExpectSharedAndComplete(const ActorFits& fits, quant::QuantizationSession& session) {
  ASSERT_EQ(fits.stages.size(), 2u);
  for (const auto& stage : fits.stages) {
    ASSERT_NE(stage, nullptr);
    const model::LlamaWeights& w = stage->model().weights();
    const model::LlamaWeights& all = session.model().weights();
    EXPECT_EQ(w.layers[0].linear[0].data_ptr(), all.layers[w.first_layer].linear[0].data_ptr());
  }
  absl::StatusOr<std::pair<quant::StageFits, quant::ActivationStats>> merged = MergeActorFits(fits);
  ASSERT_TRUE(merged.ok()) << merged.status();
  const int64_t layers = session.model().config().num_hidden_layers;
  EXPECT_EQ(merged->first.end_layer(), layers);
  EXPECT_EQ(static_cast<int64_t>(merged->second.layers.size()), layers);
  ASSERT_TRUE(session.AdoptFits(std::move(merged->first), std::move(merged->second)).ok());
  ASSERT_TRUE(session.fitted());
  absl::Status twice = session.AdoptFits(quant::StageFits(), quant::ActivationStats());
  EXPECT_EQ(twice.code(), absl::StatusCode::kFailedPrecondition) << twice;
  quant::SessionOptions fit_here = session.options();
  fit_here.use_cache = false;  // AdoptFits wrote the adopted fits there
  fit_here.load_eval_text = true;
  fit_here.fit = true;
  fit_here.log = nullptr;
  absl::StatusOr<std::unique_ptr<quant::QuantizationSession>> own =
      quant::QuantizationSession::Create(fit_here);
  ASSERT_TRUE(own.ok()) << own.status();
  ASSERT_EQ((*own)->table().units.size(), session.table().units.size());
  // One identity for the table, whoever fitted it (plans move between them).
  EXPECT_EQ((*own)->table().fingerprint, session.table().fingerprint);
  for (size_t i = 0; i < session.table().units.size(); ++i) {
    EXPECT_EQ((*own)->table().units[i].bits, session.table().units[i].bits) << i;
  }
}

// Every evaluated plan is in plans.jsonl; the rollouts ran in several actors.
void ExpectPlansFromSeveralActors(const std::string& output_dir) {
  std::ifstream plans(output_dir + "/plans.jsonl");
  std::set<std::string> actors;
  int rows = 0;
  for (std::string line; std::getline(plans, line); ++rows) {
    const std::string key = "\"actor_id\":\"actor-s";
    const size_t at = line.find(key);
    if (at != std::string::npos)
      actors.insert(line.substr(at + key.size() - 7, 11));  // actor-sX-rY
  }
  EXPECT_GE(rows, kUpdates * 4);
  EXPECT_GE(actors.size(), 2u) << "episodes came from one actor only";
}

// The learner's best plan (its table merged from the actors' parts) is the
// plan of the run config's own session: eval --plan and export accept it.
void ExpectBestPlanFitsTheConfigsTable(const config::RunConfig& c, const rl::RunResult& r) {
  quant::SessionOptions so = SessionOptionsFrom(c);
  absl::StatusOr<std::unique_ptr<quant::QuantizationSession>> session =
      quant::QuantizationSession::Create(so);
  ASSERT_TRUE(session.ok()) << session.status();
  absl::StatusOr<plan::Plan> best =
      plan::ReadPlanFile(c.output.dir + "/best/plan.json", (*session)->table());
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_EQ(best->actions, r.best.actions);
  // Another calibration is another table: refused with the one-line error.
  so.calibration.seed += 1;
  so.use_cache = false;
  auto other = quant::QuantizationSession::Create(so);
  ASSERT_TRUE(other.ok()) << other.status();
  absl::StatusOr<plan::Plan> refused =
      plan::ReadPlanFile(c.output.dir + "/best/plan.json", (*other)->table());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("plan is for another model or quantization"),
            std::string::npos)
      << refused.status();
}

TEST(InProcessJobTest, TwoStagesTwoReplicasRunTheJobThenResumeDoneAndClear) {
  const ::windquant::testing::ScopedTestDir scoped("in_process_job_test");
  const std::string dir = scoped.path();
  absl::StatusOr<config::RunConfig> c = JobConfig(dir);
  ASSERT_TRUE(c.ok()) << c.status();
  LogLines log;
  InProcessJobOptions o;
  o.log = log.Sink();
  o.incarnation_seed = 3;
  o.stall_timeout = absl::Minutes(3);
  // The nodes use the weights of a session that fits nothing; the actors hand
  // their fits over.
  quant::SessionOptions so = SessionOptionsFrom(*c);
  so.fit = false;
  absl::StatusOr<std::unique_ptr<quant::QuantizationSession>> session =
      quant::QuantizationSession::Create(so);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_FALSE((*session)->fitted());
  o.shared_weights = &(*session)->model().weights();
  ActorFits fits;
  o.actor_fits = &fits;

  absl::StatusOr<rl::RunResult> r = RunInProcessJob(*c, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectSharedAndComplete(fits, **session);
  o.shared_weights = nullptr;
  o.actor_fits = nullptr;
  EXPECT_EQ(r->updates, kUpdates);
  EXPECT_EQ(r->resumed_from_update, -1);
  ASSERT_EQ(r->curve.size(), static_cast<size_t>(kUpdates));
  EXPECT_EQ(r->curve.back().update, kUpdates);
  ASSERT_FALSE(r->best.actions.empty());
  EXPECT_LE(r->best.evaluation.effective_bits, kTargetBits + kBitsSlack);
  EXPECT_GT(r->best.evaluation.eval_ppl, 1.0);
  ASSERT_NO_FATAL_FAILURE(ExpectPlansFromSeveralActors(c->output.dir));
  EXPECT_GE(log.Count("4 actors (2 stages x 2 replicas), in-process channels"), 1) << log.Joined();

  ASSERT_NO_FATAL_FAILURE(ExpectBestPlanFitsTheConfigsTable(*c, *r));

  // Again on the same output.dir: the learner resumes a finished run (done at
  // once); a table of another layout is refused, naming the mismatch.
  const plan::UnitTable other = testing::SyntheticTable(10, 1);
  o.expected_table = &other;
  absl::StatusOr<rl::RunResult> again = RunInProcessJob(*c, o);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition) << again.status();
  EXPECT_NE(again.status().message().find("units"), std::string::npos) << again.status();

  // A fresh start removes the run state (not the fit cache).
  ASSERT_TRUE(ClearJobState(*c).ok());
  for (const char* name : {"checkpoint", "unit_table.pb", "plans.jsonl", "status.txt"}) {
    EXPECT_FALSE(fs::exists(fs::path(c->output.dir) / name)) << name;
  }
  EXPECT_TRUE(fs::exists(dir + "/cache"));
}

// A second run in the same quant.cache_dir with another calibration: every
// actor first reloads the fits of the first run (its last-fingerprint file)
// and offers them to the learner; told the run's fingerprint, the learner
// refuses them, the evaluator's calibration pass fits the actors anew and the
// run completes on the new calibration's table (before, the learner took the
// old table and refused the new one: the run waited forever).
TEST(InProcessJobTest, FitsOfAnotherCalibrationInTheCacheAreRefusedNotMerged) {
  const ::windquant::testing::ScopedTestDir scoped("in_process_job_stale_test");
  const std::string dir = scoped.path();
  absl::StatusOr<config::RunConfig> c = JobConfig(dir);
  ASSERT_TRUE(c.ok()) << c.status();
  // Actors offer cached fits only without error compensation (with it they redo the
  // calibration pass: StageWorker::LoadCachedFits).
  c->quant.compensation = quant::Compensation::kNone;
  LogLines log;  // outlives o, whose sink points at it
  InProcessJobOptions o;
  o.incarnation_seed = 5;
  o.stall_timeout = absl::Minutes(2);
  ASSERT_TRUE(RunInProcessJob(*c, o).ok());

  config::RunConfig other = *c;
  other.calibration.seed += 1;
  other.output.dir = dir + "/run2";
  quant::SessionOptions so = SessionOptionsFrom(other);
  so.fit = false;
  absl::StatusOr<std::unique_ptr<quant::QuantizationSession>> session =
      quant::QuantizationSession::Create(so);
  ASSERT_TRUE(session.ok()) << session.status();
  o.log = log.Sink();
  o.expected_fingerprint = (*session)->table_fingerprint();
  // What the distributed learner computes from the config alone.
  EXPECT_EQ(
      quant::RunTableFingerprint(other.model.dir, other.quant, other.calibration).value_or("error"),
      o.expected_fingerprint);
  o.shared_weights = &(*session)->model().weights();
  absl::StatusOr<rl::RunResult> r = RunInProcessJob(other, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->updates, kUpdates);
  absl::StatusOr<plan::UnitTable> table = ReadUnitTableFile(other.output.dir + "/unit_table.pb");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->fingerprint, o.expected_fingerprint);
  EXPECT_GE(log.Count("is not the run's"), 1) << "no actor offered the first run's fits";
}

// training.screen_samples through the whole job: the learner's snapshots carry
// its reward model once plans were measured, the actors screen their samples
// with it, and the run completes within the budget.
TEST(InProcessJobTest, AScreenedRunSendsTheModelToTheActorsAndCompletes) {
  const ::windquant::testing::ScopedTestDir scoped("in_process_job_screen_test");
  const std::string dir = scoped.path();
  absl::StatusOr<config::RunConfig> c = JobConfig(dir);
  ASSERT_TRUE(c.ok()) << c.status();
  c->training.screen_samples = 8;
  InProcessJobOptions o;
  o.incarnation_seed = 9;
  o.stall_timeout = absl::Minutes(2);
  LogLines log;
  o.log = log.Sink();
  absl::StatusOr<rl::RunResult> r = RunInProcessJob(*c, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->updates, kUpdates);
  ASSERT_FALSE(r->best.actions.empty());
  EXPECT_LE(r->best.evaluation.effective_bits, kTargetBits + kBitsSlack);
  EXPECT_GE(log.Count("screening: the best"), 1) << "no actor screened its samples";
  const std::string err = log.Joined();
  // Once screening, PPO learns from the screened-out samples too (their rewards predicted).
  bool learned_predicted = false;
  for (absl::string_view line : absl::StrSplit(err, '\n')) {
    const size_t at = line.find(" predicted ");
    learned_predicted =
        learned_predicted || (absl::StrContains(line, "learner: update ") &&
                              at != absl::string_view::npos && line.substr(at + 11, 2) != "0 ");
  }
  EXPECT_TRUE(learned_predicted) << "no update learned from a screened-out sample\n" << err;
}

// The distributed run's own report (the learner's output.dir/final, as
// windquant-learner writes it): beside RL's plan the search with restarts and
// the screened search, each given exactly the RL run's real evaluations
// through the evaluator, every row measured on the held-out text, and the
// returned plan (the lowest selection perplexity) named in report.json and plan.json.
TEST(InProcessJobTest, TheLearnersReportHasTheSearchRowsAtTheRunsEvaluationCount) {
  const ::windquant::testing::ScopedTestDir scoped("in_process_job_report_test");
  const std::string dir = scoped.path();
  absl::StatusOr<config::RunConfig> c = JobConfig(dir);
  ASSERT_TRUE(c.ok()) << c.status();
  c->output.export_model = false;  // the in-process learner has no actors to assemble from
  ASSERT_NO_FATAL_FAILURE(CutHeldOut(&*c));
  InProcessJobOptions o;
  o.incarnation_seed = 11;
  o.stall_timeout = absl::Minutes(3);
  o.write_final = true;
  LogLines log;
  o.log = log.Sink();
  absl::StatusOr<rl::RunResult> r = RunInProcessJob(*c, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_GT(r->real_evaluations, 0);
  const std::string final_dir = c->output.dir + "/final";
  std::ifstream in(final_dir + "/report.json");
  ASSERT_TRUE(in.good()) << "no report.json\n" << log.Joined();
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("rl_real_evaluations"), r->real_evaluations);
  for (const char* key : {"search", "screened_search"}) {
    ASSERT_TRUE(j.contains(key)) << key << "\n" << j.dump(2);
    EXPECT_EQ(j[key].at("evaluations"), r->real_evaluations) << key;
    EXPECT_EQ(j[key].at("rl_evaluations"), r->real_evaluations) << key;
  }
  const std::vector<std::string> names = {"rl", "search", "screened-search"};
  ASSERT_EQ(j.at("plans").size(), names.size()) << j.dump(2);
  double lowest = 1e300;
  for (size_t i = 0; i < names.size(); ++i) {
    const nlohmann::json& row = j["plans"][i];
    EXPECT_EQ(row.at("name"), names[i]);
    ASSERT_TRUE(row.at("heldout_ppl").is_number()) << row.dump() << "\n" << j.dump(2);
    ASSERT_TRUE(row.at("selection_ppl").is_number()) << row.dump();
    EXPECT_GT(row["heldout_ppl"].get<double>(), 1.0) << row.dump();
    EXPECT_LT(row["heldout_ppl"].get<double>(), 1e6) << row.dump();
    EXPECT_LE(row.at("bits").get<double>(), kTargetBits + kBitsSlack) << row.dump();
    lowest = std::min(lowest, row["selection_ppl"].get<double>());
  }
  EXPECT_EQ(j["plans"][0].at("selection_ppl").get<double>(), r->best.evaluation.eval_ppl);
  const std::string origin = j.at("returned_plan_origin");
  const std::set<std::string> origins = {"rl", "greedy-of-policy", "lagrange", "search",
                                         "screened-search"};
  EXPECT_EQ(origins.count(origin), 1u) << origin;
  EXPECT_EQ(j.at("returned").at("origin"), origin);
  EXPECT_EQ(j["returned"].at("selection_ppl").get<double>(), lowest);
  std::ifstream plan(final_dir + "/plan.json");
  EXPECT_EQ(nlohmann::json::parse(plan).at("source"), origin);
  EXPECT_GE(log.Count("finish: screened-search: "), 1) << log.Joined();
}

// The quality-target mode's distributed learner (write_final: the learner owns
// the result, as windquant-learner does) starts where quantize's RL starts:
// once the table is complete it bisects over bits to epsilon with the
// Lagrangian plan through the evaluator and RL's cap comes down to the
// bisection's bits. Stopped after its first update and run again on the same
// output.dir, the learner starts where it did (output.dir/rl_start.json)
// without measuring again, and finishes under that cap; report.json says so
// (quality_target.rl_start), and RL's real evaluations include the start's (as
// quantize counts them), and so the searches'. The held-out text is cut to one
// window (CutHeldOut).
TEST(InProcessJobTest, TheQualityTargetLearnerStartsWhereTheBisectionToEpsilonEnds) {
  const ::windquant::testing::ScopedTestDir scoped("in_process_job_start_test");
  const std::string dir = scoped.path();
  absl::StatusOr<config::RunConfig> c = JobConfig(dir);
  ASSERT_TRUE(c.ok()) << c.status();
  constexpr double kCap = 6.0;
  c->curriculum.target_bits = {kCap};
  c->lagrange.prices = "target";
  c->lagrange.epsilon = 0.1;  // the Lagrangian plan at the cap is within it
  c->training.warm_start = "lagrange";
  c->output.export_model = false;
  c->service.replicas = 1;
  ASSERT_NO_FATAL_FAILURE(CutHeldOut(&*c));
  InProcessJobOptions o;
  o.incarnation_seed = 5;
  o.stall_timeout = absl::Minutes(3);
  o.write_final = true;
  o.stop_after_updates = 1;
  LogLines log;
  o.log = log.Sink();
  absl::StatusOr<rl::RunResult> first = RunInProcessJob(*c, o);
  ASSERT_TRUE(first.ok()) << first.status() << "\n" << log.Joined();
  ASSERT_TRUE(first->stopped_early);
  const int probes = log.Count("learner: start search: plan ");
  EXPECT_GE(probes, 2) << log.Joined();
  EXPECT_EQ(log.Count("learner: RL starts under "), 1) << log.Joined();
  EXPECT_TRUE(fs::exists(c->output.dir + "/rl_start.json"));

  o.stop_after_updates = 0;
  o.incarnation_seed = 6;  // a new process's actors: episode ids of their own
  absl::StatusOr<rl::RunResult> r = RunInProcessJob(*c, o);
  ASSERT_TRUE(r.ok()) << r.status() << "\n" << log.Joined();
  EXPECT_EQ(r->resumed_from_update, 1);
  EXPECT_EQ(log.Count("learner: start search: plan "), probes);  // none measured again
  EXPECT_EQ(log.Count("as this run did"), 1) << log.Joined();
  std::ifstream in(c->output.dir + "/final/report.json");
  ASSERT_TRUE(in.good()) << "no report.json\n" << log.Joined();
  const nlohmann::json j = nlohmann::json::parse(in);
  ASSERT_TRUE(j.contains("quality_target")) << j.dump(2);
  const nlohmann::json& start = j["quality_target"].at("rl_start");
  EXPECT_TRUE(start.at("within_epsilon").get<bool>()) << start.dump();
  EXPECT_LE(start.at("selection_degradation").get<double>(), 0.1);
  const double cap = start.at("cap_bits").get<double>();
  EXPECT_LT(cap, kCap) << start.dump();
  EXPECT_LE(start.at("bits").get<double>(), cap + kBitsSlack);
  EXPECT_EQ(start.at("evaluations").get<int64_t>(), probes);
  // The plan RL returned was made under the start's cap.
  EXPECT_LE(r->best.evaluation.effective_bits, cap + kBitsSlack);
  EXPECT_GT(r->real_evaluations, probes);  // RL's own, and its start's
  EXPECT_EQ(j.at("rl_real_evaluations"), r->real_evaluations);
  for (const char* key : {"search", "screened_search"}) {
    ASSERT_TRUE(j.contains(key)) << key;
    EXPECT_EQ(j[key].at("evaluations"), r->real_evaluations) << key;
  }
  // quantize's bisection rows: the Lagrangian one is the start's search again,
  // the screened one within RL's real evaluations; both among the plans.
  const nlohmann::json& lb = j.at("lagrange_bisect");
  EXPECT_EQ(lb.at("evaluations").get<int64_t>(), probes) << lb.dump();
  EXPECT_TRUE(lb.at("within_epsilon").get<bool>()) << lb.dump();
  EXPECT_LE(lb.at("bits").get<double>(), cap + kBitsSlack);
  EXPECT_LE(j.at("screened_bisect").at("evaluations").get<int64_t>(), r->real_evaluations);
  EXPECT_EQ(j.at("plans").size(), 5u) << j.at("plans").dump();
  EXPECT_LE(j["quality_target"]["returned"]["selection_degradation"].get<double>(), 0.1);
}

}  // namespace
}  // namespace windquant::job
