// LearnerCore across restarts: the training curve and curriculum history
// (rl::RunResult) that the checkpoint carries, and stop_after_updates.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/base/files.h"
#include "common/metrics/registry.h"
#include "common/search/baselines.h"
#include "common/testing/file_size_limit.h"
#include "common/testing/status_matchers.h"
#include "learner/learner_core.h"
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

// rl::RunResult: one curve record per PPO update, one rl::StageEvent per
// curriculum step ended, both in the checkpoint; the result of a restarted
// learner says where it resumed and goes on with the history. The run: two
// curriculum steps (4.0, then 3.0 bits), each of 1 to 2 updates.
class LearnerCoreHistoryTest : public LearnerCoreTest {
 protected:
  void SetUp() override {
    LearnerCoreTest::SetUp();
    config_ = TestOptions(dir_ + "/history");
    config_.curriculum.target_bits = {4.0, 3.0};
    config_.curriculum.min_updates = 1;
    config_.curriculum.max_updates = 2;
    config_.warm_start = false;
  }

  std::unique_ptr<LearnerCore> Start(const LogLines& log) {
    return LearnerCore::Create(config_, log.fn()).value();
  }
  std::string CheckpointLine(int update) const {
    return "learner: checkpoint: update " + std::to_string(update) + " written to " + config_.dir +
           "/checkpoint";
  }
  // Evaluates the one queued candidate, the step's reference (cached).
  void ReportReference(LearnerCore& core, double ppl) {
    std::vector<plan::Plan> out = TakeCandidates(core);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].source, "lagrange");
    EvaluationInput in = CandidateEval(out[0], ppl);
    in.evaluation.cached = true;
    ASSERT_TRUE(Report(core, in).value());
  }
  // One PPO batch: episodes `id` and `id` + 1 of `version` evaluated at these PPLs.
  void Batch(LearnerCore& core, uint64_t id, int64_t version, double ppl1, double ppl2) {
    for (uint64_t i : {id, id + 1})
      ASSERT_TRUE(core.SubmitEpisode(MakeEpisode(i, version)).value());
    ASSERT_TRUE(Report(core, Eval(id, ppl1)).value());
    ASSERT_TRUE(Report(core, Eval(id + 1, ppl2)).value());
  }
  // Step 0: its reference at 9.0, update 1 (episodes at 3.0 and 2.5 PPL),
  // update 2 (2.0, 2.0); the step ends after max_updates.
  void RunStepZero(LearnerCore& core) {
    for (const auto& s : Stages(whole_))
      ASSERT_THAT(core.RegisterTable(s.first_layer, 0, s), IsOk());
    ASSERT_NO_FATAL_FAILURE(ReportReference(core, 9.0));
    ASSERT_NO_FATAL_FAILURE(Batch(core, 1, 0, 3.0, 2.5));
    ASSERT_NO_FATAL_FAILURE(Batch(core, 3, 1, 2.0, 2.0));
  }

  LearnerCore::Options config_;
};

TEST_F(LearnerCoreHistoryTest, CurveRecordsEveryUpdate) {
  LogLines log;
  auto core = Start(log);
  for (const auto& s : Stages(whole_))
    ASSERT_THAT(core->RegisterTable(s.first_layer, 0, s), IsOk());
  rl::RunResult r = core->Result();
  EXPECT_EQ(r.resumed_from_update, -1);
  EXPECT_EQ(r.updates, 0);
  EXPECT_TRUE(r.curve.empty());
  EXPECT_FALSE(r.stopped_early);
  // Step 0 (4.0 bits): its reference is no final-step reference.
  ASSERT_NO_FATAL_FAILURE(ReportReference(*core, 9.0));
  EXPECT_TRUE(core->Result().reference.actions.empty());
  ASSERT_NO_FATAL_FAILURE(Batch(*core, 1, 0, 3.0, 2.5));
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
  EXPECT_DOUBLE_EQ(u1.lambda, config_.lagrange.lambda_init);  // the λ batch 1 was rewarded with
  EXPECT_EQ(u1.evaluations, 2);  // 3 received, the reference was cached
  EXPECT_GT(u1.entropy, 0);
  EXPECT_GT(u1.seconds, 0);
  {  // mean_reward: the mean episode return, as plans.jsonl records it.
    const std::map<uint64_t, double> rewards = RecordedRewards(config_.dir);
    ASSERT_EQ(rewards.size(), 2u);
    const double want = (rewards.at(1) + rewards.at(2)) / 2;
    EXPECT_NEAR(u1.mean_reward, want, 1e-4 * std::max(1.0, std::abs(want)));
  }
  EXPECT_EQ(r.evaluations, 3);
  EXPECT_EQ(r.cache_hits, 1);
  EXPECT_TRUE(r.stages.empty());
  EXPECT_TRUE(log.Has(CheckpointLine(1)));
}

TEST_F(LearnerCoreHistoryTest, StepHistoryRecordsEachAdvance) {
  LogLines log;
  auto core = Start(log);
  ASSERT_NO_FATAL_FAILURE(RunStepZero(*core));
  const rl::RunResult r = core->Result();
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
  EXPECT_TRUE(log.Has(CheckpointLine(2)));
}

TEST_F(LearnerCoreHistoryTest, ARestartedLearnerRestoresTheHistory) {
  auto core = Start(LogLines());
  ASSERT_NO_FATAL_FAILURE(RunStepZero(*core));
  const rl::RunResult before = core->Result();
  core.reset();
  core = Start(LogLines());
  const rl::RunResult r = core->Result();
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
}

// A full disk when update 2's checkpoint is written (RLIMIT_FSIZE below the
// checkpoint's size): the learner keeps update 1's checkpoint, says so in one
// log line and on its metrics, goes on (update 2 counted, the next step
// started), and a restart resumes from update 1.
// error-case: storage.checkpoint-write-failed
TEST_F(LearnerCoreHistoryTest, AFailedCheckpointWriteKeepsTheLastGoodOneAndTheRunGoing) {
  LogLines log;
  metrics::Registry registry;
  auto core = LearnerCore::Create(config_, log.fn(), &registry).value();
  for (const auto& s : Stages(whole_))
    ASSERT_THAT(core->RegisterTable(s.first_layer, 0, s), IsOk());
  ASSERT_NO_FATAL_FAILURE(ReportReference(*core, 9.0));
  ASSERT_NO_FATAL_FAILURE(Batch(*core, 1, 0, 3.0, 2.5));
  ASSERT_TRUE(log.Has(CheckpointLine(1)));
  const std::string ckpt_dir = config_.dir + "/checkpoint";
  const auto ckpt_bytes = static_cast<int64_t>(std::filesystem::file_size(ckpt_dir + "/run.ckpt"));
  const int64_t limit = ckpt_bytes / 2;
  // The other files the batch appends to stay below the limit: only the checkpoint fails.
  ASSERT_LT(static_cast<int64_t>(std::filesystem::file_size(config_.dir + "/plans.jsonl")) + 4096,
            limit);
  for (uint64_t i : {3, 4}) ASSERT_TRUE(core->SubmitEpisode(MakeEpisode(i, 1)).value());
  ASSERT_TRUE(Report(*core, Eval(3, 2.0)).value());
  {
    ::windquant::testing::ScopedFileSizeLimit full(limit);
    ASSERT_TRUE(full.ok());
    absl::StatusOr<bool> accepted = Report(*core, Eval(4, 2.0));
    ASSERT_THAT(accepted.status(), IsOk()) << "a failed checkpoint write is no error of the report";
    EXPECT_TRUE(*accepted);
  }
  EXPECT_EQ(core->Status().updates, 2);
  EXPECT_FALSE(log.Has(CheckpointLine(2)));
  EXPECT_EQ(log.Count("learner: checkpoint: update 2 NOT written to " + ckpt_dir + ": "), 1);
  const std::string failure = *std::find_if(log.lines->begin(), log.lines->end(), [](auto& l) {
    return l.find("NOT written") != std::string::npos;
  });
  EXPECT_THAT(failure, ::testing::HasSubstr("File too large"));
  EXPECT_THAT(failure, ::testing::EndsWith("the last good checkpoint is update 1"));
  const std::string text = registry.TextExposition();
  EXPECT_THAT(text, ::testing::HasSubstr("\nwindquant_learner_checkpoint_failures_total 1\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("\nwindquant_learner_checkpoint_last_good_update 1\n"));
  for (const auto& e : std::filesystem::directory_iterator(ckpt_dir))
    EXPECT_EQ(e.path().filename(), "run.ckpt") << "a temporary left behind";
  // The run went on: step 1's reference candidate is out.
  EXPECT_EQ(core->Status().curriculum_stage, 1);
  core.reset();
  LogLines after;
  core = Start(after);
  EXPECT_TRUE(after.Has("learner: resumed from checkpoint at update 1, policy version 1"))
      << ::testing::PrintToString(*after.lines);
  EXPECT_EQ(core->Result().resumed_from_update, 1);
  EXPECT_EQ(core->Status().curriculum_stage, 0);
}

TEST_F(LearnerCoreHistoryTest, ARestartedLearnerGoesOnWithTheHistory) {
  auto core = Start(LogLines());
  ASSERT_NO_FATAL_FAILURE(RunStepZero(*core));
  core.reset();
  LogLines log;
  core = Start(log);
  // The final step's reference (queued again by the restarted learner).
  ASSERT_NO_FATAL_FAILURE(ReportReference(*core, 5.0));
  rl::RunResult r = core->Result();
  EXPECT_EQ(r.reference.source, "lagrange");
  EXPECT_DOUBLE_EQ(r.reference.target_bits, 3.0);
  EXPECT_DOUBLE_EQ(r.reference.evaluation.eval_ppl, 5.0);
  EXPECT_EQ(r.reference.actions, search::LagrangePlan(whole_, 3.0).value().actions);
  // Update 3: step 1's best policy plan (1.8) beats its reference (5.0): finished.
  ASSERT_NO_FATAL_FAILURE(Batch(*core, 5, 2, 1.8, 2.2));
  r = core->Result();
  ASSERT_EQ(r.curve.size(), 3u);
  EXPECT_EQ(r.curve[2].update, 3);
  EXPECT_EQ(r.curve[2].stage, 1);
  EXPECT_DOUBLE_EQ(r.curve[2].target_bits, 3.0);
  EXPECT_DOUBLE_EQ(r.curve[2].mean_ppl, 2.0);
  // Misses over the whole run: those before the restart (the checkpoint's
  // curve) and the 2 of this process, so a resumed run's search gets them all.
  EXPECT_GT(r.curve[1].evaluations, 0);
  EXPECT_EQ(r.curve[2].evaluations, r.curve[1].evaluations + 2);
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
  EXPECT_EQ(r.real_evaluations, r.curve[2].evaluations);
  EXPECT_DOUBLE_EQ(r.best.evaluation.eval_ppl, 1.8);
  EXPECT_TRUE(log.Has(CheckpointLine(3)));
  core.reset();
  // And once more: the full history.
  core = Start(LogLines());
  r = core->Result();
  EXPECT_EQ(r.resumed_from_update, 3);
  ASSERT_EQ(r.curve.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(r.curve[i].update, i + 1);
  ASSERT_EQ(r.stages.size(), 2u);
  EXPECT_EQ(r.stages[1].update, 3);
}

// The saved unit_table.pb cut short or altered on disk: the learner does
// not trust it; it logs and removes it, starts without a table, and the
// actors' registrations (they register again when the learner has none)
// complete it as in a new run.
// error-case: storage.unit-table-corrupt
TEST_F(LearnerCoreTest, ASavedTableNotTrustedIsRemovedAndRegisteredAgain) {
  for (const auto& s : Stages(whole_))
    ASSERT_THAT(core_->RegisterTable(s.first_layer, 0, s), IsOk());
  core_.reset();
  const std::string path = dir_ + "/unit_table.pb";
  const std::string bytes = base::ReadFile(path).value();
  for (size_t cut : {size_t{3}, bytes.size() / 2, bytes.size() - 1}) {
    SCOPED_TRACE(cut);
    ASSERT_THAT(base::WriteFileAtomic(path, bytes.substr(0, cut)), IsOk());
    LogLines log;
    auto core = LearnerCore::Create(TestOptions(dir_), log.fn());
    ASSERT_THAT(core.status(), IsOk());
    EXPECT_FALSE((*core)->Status().table_complete);
    EXPECT_EQ(log.Count("learner: " + path + ": "), 1) << ::testing::PrintToString(*log.lines);
    EXPECT_TRUE(::testing::Value(log.lines->front(),
                                 ::testing::EndsWith("; removed, the actors register again")));
    EXPECT_FALSE(std::filesystem::exists(path));
    EXPECT_FALSE(std::filesystem::exists(path + ".sha256"));
    for (const auto& s : Stages(whole_))
      ASSERT_THAT((*core)->RegisterTable(s.first_layer, 0, s), IsOk());
    EXPECT_TRUE((*core)->Status().table_complete);
    EXPECT_EQ(base::ReadFile(path).value(), bytes) << "the same table, saved again";
  }
}

// stop_after_updates: after N updates in this process the
// checkpoint is written and the learner stops (not done).
TEST_F(LearnerCoreTest, StopAfterUpdatesCheckpointsAndStops) {
  LearnerCore::Options c = TestOptions(dir_ + "/stop");
  c.curriculum.max_updates = 10;
  c.checkpoint_every_updates = 100;  // only the stop writes one
  c.warm_start = false;
  LogLines log;
  auto core = LearnerCore::Create(c, log.fn()).value();
  core->set_stop_after_updates(2);
  for (const auto& s : Stages(whole_))
    ASSERT_THAT(core->RegisterTable(s.first_layer, 0, s), IsOk());
  for (uint64_t id : {1, 2}) ASSERT_TRUE(core->SubmitEpisode(MakeEpisode(id, 0)).value());
  for (uint64_t id : {1, 2}) ASSERT_TRUE(Report(*core, Eval(id, 3.0)).value());
  EXPECT_FALSE(core->Status().stopped);
  EXPECT_EQ(log.Count("learner: checkpoint: "), 0);
  for (uint64_t id : {3, 4, 5}) ASSERT_TRUE(core->SubmitEpisode(MakeEpisode(id, 1)).value());
  for (uint64_t id : {3, 4}) ASSERT_TRUE(Report(*core, Eval(id, 2.0)).value());
  LearnerStatus s = core->Status();
  EXPECT_TRUE(s.stopped);
  EXPECT_FALSE(s.done);
  EXPECT_FALSE(core->done());
  EXPECT_EQ(s.updates, 2);
  EXPECT_EQ(log.Count("learner: checkpoint: "), 1);
  EXPECT_TRUE(log.Has("learner: checkpoint: update 2 written to " + c.dir + "/checkpoint"));
  rl::RunResult r = core->Result();
  EXPECT_TRUE(r.stopped_early);
  EXPECT_EQ(r.updates, 2);
  EXPECT_EQ(r.curve.size(), 2u);
  // Stopped: no episodes, no evaluations, no candidates, no new policy.
  EXPECT_FALSE(core->SubmitEpisode(MakeEpisode(6, 2)).value());
  EXPECT_FALSE(Report(*core, Eval(5, 2.0)).value());  // held before the stop
  EXPECT_TRUE(core->TakeOutbox(absl::ZeroDuration()).empty());
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
  for (uint64_t id : {7, 8}) ASSERT_TRUE(Report(*core, Eval(id, 2.0)).value());
  EXPECT_FALSE(core->Status().stopped);
  core->set_stop_after_updates(1);
  EXPECT_TRUE(core->Status().stopped);
  EXPECT_EQ(core->Result().updates, 3);
  EXPECT_FALSE(core->SubmitEpisode(MakeEpisode(9, 3)).value());
}

// A learner that dies (kill -9) with acknowledged episodes not yet evaluated:
// the next one holds them again from its journal, sends their plans to the
// evaluator and records their evaluations, so no acknowledged episode is lost
// (the chaos soak lost them); an episode recorded before the crash is not
// held again, and a recorded one leaves the journal.
TEST_F(LearnerCoreTest, AcknowledgedEpisodesOutliveTheirLearner) {
  LogLines log;
  auto core = LearnerCore::Create(TestOptions(dir_), log.fn()).value();
  for (const auto& s : Stages(whole_))
    ASSERT_THAT(core->RegisterTable(s.first_layer, 0, s), IsOk());
  for (uint64_t id : {21, 22, 23}) ASSERT_TRUE(core->SubmitEpisode(MakeEpisode(id, 0)).value());
  ASSERT_TRUE(Report(*core, Eval(21, 4.0)).value());  // recorded: out of the journal
  core.reset();  // as a crash: nothing else is written (its tombstone of 21 may be lost)

  core = LearnerCore::Create(TestOptions(dir_), log.fn()).value();
  EXPECT_TRUE(log.Has("learner: 2 episodes held again"));
  EXPECT_FALSE(core->Pending(rl::PlanKind::kEpisode, 21));
  std::vector<uint64_t> sent;
  for (const OutgoingPlan& p : core->TakeOutbox(absl::ZeroDuration())) {
    if (p.kind == rl::PlanKind::kEpisode) sent.push_back(p.plan.episode_id);
  }
  EXPECT_EQ(sent, (std::vector<uint64_t>{22, 23}));
  EXPECT_FALSE(core->SubmitEpisode(MakeEpisode(22, 0)).value());  // held: once per run
  for (uint64_t id : {22, 23}) ASSERT_TRUE(Report(*core, Eval(id, 3.0)).value());
  EXPECT_EQ(RecordedRewards(dir_).size(), 3u);
  core.reset();
  // Recorded: out of the journal.
  HeldEpisodes journal(dir_ + "/held-episodes");
  absl::StatusOr<std::vector<uint64_t>> left = journal.Reload(whole_);
  ASSERT_THAT(left.status(), IsOk());
  EXPECT_TRUE(left->empty());
}

// The quality-target mode's start (options.await_start, run_start.h): once the
// table is complete the run waits (no policy, no candidate, no episode) until
// StartAt, which caps every curriculum target at the start's cap; the start is
// kept in output.dir/rl_start.json, so a restarted learner of the run starts
// there at once; a corrupt file is removed and the start awaited again.
TEST_F(LearnerCoreTest, AnAwaitedStartHoldsTheRunCapsItsTargetsAndOutlivesARestart) {
  LearnerCore::Options c = TestOptions(dir_ + "/start");
  c.curriculum.target_bits = {4.0, 3.0};
  c.await_start = true;
  LogLines log;
  auto core = LearnerCore::Create(c, log.fn()).value();
  RunStart start;
  start.cap_bits = 2.5;
  start.bits = 2.45;
  start.degradation = 0.01;
  start.within_epsilon = true;
  start.evaluations = 7;
  EXPECT_FALSE(core->AwaitingStart());  // no table yet
  EXPECT_THAT(core->StartAt(start), StatusIs(absl::StatusCode::kFailedPrecondition, "not waiting"));
  for (const auto& s : Stages(whole_))
    ASSERT_THAT(core->RegisterTable(s.first_layer, 0, s), IsOk());
  EXPECT_TRUE(core->AwaitingStart());
  EXPECT_EQ(core->WaitForPolicy(-1, absl::ZeroDuration()).snapshot.version, -1);
  EXPECT_TRUE(TakeCandidates(*core).empty());
  EXPECT_THAT(core->SubmitEpisode(MakeEpisode(1, 0)).status(),
              StatusIs(absl::StatusCode::kUnavailable, "start"));
  RunStart zero = start;
  zero.cap_bits = 0;
  EXPECT_THAT(core->StartAt(zero), StatusIs(absl::StatusCode::kInvalidArgument, "cap_bits"));

  ASSERT_THAT(core->StartAt(start), IsOk());
  EXPECT_FALSE(core->AwaitingStart());
  EXPECT_EQ(core->Status().target_bits, 2.5);  // the first target, 4, capped
  const PublishedPolicy p = core->WaitForPolicy(-1, absl::ZeroDuration());
  EXPECT_EQ(p.snapshot.version, 0);
  EXPECT_EQ(p.target_bits, 2.5);
  const std::vector<plan::Plan> refs = TakeCandidates(*core);
  ASSERT_EQ(refs.size(), 1u);  // the Lagrangian reference at the cap
  EXPECT_EQ(refs[0].target_bits, 2.5);
  EXPECT_LE(whole_.EffectiveBits(refs[0].actions), 2.5 + 1e-9);
  EXPECT_THAT(core->StartAt(start), StatusIs(absl::StatusCode::kFailedPrecondition, "not waiting"));
  core.reset();

  auto again = LearnerCore::Create(c, log.fn()).value();  // the saved table and start
  EXPECT_FALSE(again->AwaitingStart());
  ASSERT_TRUE(again->start().has_value());
  EXPECT_EQ(again->start()->cap_bits, 2.5);
  EXPECT_EQ(again->start()->evaluations, 7);
  EXPECT_EQ(again->Status().target_bits, 2.5);
  EXPECT_EQ(again->WaitForPolicy(-1, absl::ZeroDuration()).snapshot.version, 0);
  again.reset();

  const std::string path = c.dir + "/rl_start.json";
  ASSERT_THAT(base::WriteFileAtomic(path, "{\"cap_bits\": "), IsOk());  // truncated
  auto third = LearnerCore::Create(c, log.fn()).value();
  EXPECT_TRUE(third->AwaitingStart());
  EXPECT_FALSE(base::PathExists(path));
  EXPECT_EQ(log.Count("learner: " + path + ": not a run start"), 1);
  third.reset();

  // Another run's start (another run-defining text) is not this run's.
  ASSERT_THAT(WriteRunStart(path, "another run", start), IsOk());
  auto other = LearnerCore::Create(c, log.fn()).value();
  EXPECT_TRUE(other->AwaitingStart());
  EXPECT_FALSE(other->start().has_value());
}

}  // namespace
}  // namespace windquant::learner
