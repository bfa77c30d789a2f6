// RunRecords: what the learner writes down about a run besides its
// checkpoint:
// - output.dir/plans.jsonl: one JSON line per evaluated plan, episode or
//   candidate (no finished plan is lost); its episode ids are the ones a
//   restarted learner refuses (RecordedEpisodeIds);
// - the training curve: one rl::UpdateRecord per PPO update (`lambda` = the
//   batch λ that update's batch was rewarded with, `evaluations` = cache
//   misses so far in the run (real_evaluations), `best_*` = the best plan when the update
//   ran, `seconds` = time since the RunRecords of the process that ran it was
//   made);
// - the curriculum history: one rl::StageEvent per curriculum step ended
//   (the type keeps its checkpoint name);
// - this process's evaluation counts (episodes and candidates accepted,
//   cached ones included, and the cache hits among them) and wall time.
// Curve and curriculum history are in the checkpoint and restored on resume.
// Thread-compatible (the learner calls it under its mutex).
#ifndef WINDQUANT_LEARNER_RUN_RECORDS_H_
#define WINDQUANT_LEARNER_RUN_RECORDS_H_

#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "common/plan/plan.h"
#include "common/rl/episode.h"
#include "common/rl/plan_evaluation.h"
#include "common/rl/run_history.h"
#include "common/rl/run_result.h"

namespace windquant::learner {

class RunRecords {
 public:
  // `dir`: output.dir (created by the caller).
  explicit RunRecords(std::string dir);

  std::string plans_path() const { return dir_ + "/plans.jsonl"; }
  // The episode ids of plans.jsonl (none when it does not exist).
  std::set<uint64_t> RecordedEpisodeIds() const;
  // Appends the evaluated plan `plan_id` of episode `e` with its return
  // (step rewards + episode-end reward) to plans.jsonl. Best effort: a line
  // that cannot be written is lost (the run goes on).
  void RecordEpisode(const rl::Episode& e, const std::string& plan_id,
                     const rl::PlanEvaluation& evaluation, double episode_return) const;
  // One plan of plans.jsonl: its effective bits and selection-slice perplexity.
  struct RecordedPlan {
    double effective_bits = 0;
    double perplexity = 0;  // inf / NaN as written for a broken plan
  };
  // Every plan of plans.jsonl, in order (none when it does not exist); lines
  // without both numbers are skipped.
  std::vector<RecordedPlan> RecordedPlans() const;
  // Appends the evaluated candidate `plan` (actor "learner") to plans.jsonl.
  void RecordCandidate(const plan::Plan& plan, const rl::PlanEvaluation& evaluation) const;

  // One evaluation accepted by this process.
  void CountEvaluation(bool cached);
  int64_t evaluations() const { return evaluations_; }
  int64_t cache_hits() const { return cache_hits_; }
  // Real (uncached) evaluations of the whole run: this process's plus, after
  // a resume, those of the processes before it (plans.jsonl's rows measured,
  // cached = false, those after the checkpoint included), so that a resumed
  // run's search baseline is given as many as RL spent.
  int64_t real_evaluations() const { return real_before_ + evaluations_ - cache_hits_; }
  // Seconds since this object was made.
  double seconds() const;
  // Sets the records' part of `result`: curve, stages, evaluations,
  // cache_hits, real_evaluations, seconds.
  void FillResult(rl::RunResult* result) const;

  void AddUpdate(const rl::UpdateRecord& record) { curve_.push_back(record); }
  void AddStepEvent(const rl::StageEvent& event) { steps_.push_back(event); }
  // The history of a checkpoint; the real evaluations before it are read
  // from plans.jsonl (at least the curve's last count).
  void Restore(std::vector<rl::UpdateRecord> curve, std::vector<rl::StageEvent> steps);
  const std::vector<rl::UpdateRecord>& curve() const { return curve_; }
  const std::vector<rl::StageEvent>& steps() const { return steps_; }

 private:
  const std::string dir_;
  const std::chrono::steady_clock::time_point created_ = std::chrono::steady_clock::now();
  int64_t evaluations_ = 0;
  int64_t cache_hits_ = 0;
  // plans.jsonl's rows with "cached":false.
  int64_t RecordedRealEvaluations() const;

  int64_t real_before_ = 0;  // real evaluations before a resume
  std::vector<rl::UpdateRecord> curve_;
  std::vector<rl::StageEvent> steps_;
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_RUN_RECORDS_H_
