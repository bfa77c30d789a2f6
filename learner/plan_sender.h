// PlanSender: the one path of plans to the evaluator. It sends the learner's
// outbox (LearnerCore::TakeOutbox: every accepted episode's plan and every
// candidate plan, in order) with Evaluator.SubmitPlan; the evaluation comes
// back through Learner.ReportEvaluation. One thread, one plan at a time:
// UNAVAILABLE, DEADLINE_EXCEEDED and RESOURCE_EXHAUSTED (evaluator not up
// yet, its queue full) are retried with backoff while the plan is pending, so
// a full evaluator paces the sender (and the outbox's length the actors,
// LearnerCore::EvaluationWait); any other error drops the plan
// (LearnerCore::Drop) so that nothing waits for it.
// A plan handed over stays the evaluator's until reported: it persists its
// queue, so a restart that keeps the queue directory loses nothing. One that
// does not (a new directory) answers another evaluator_id: every `probe`
// while plans are out, the sender asks the queue's identity
// (Evaluator.GetQueueStatus) and sends the plans an earlier identity accepted
// and that are still pending again (LearnerCore::Resend).
// Thread-safety: Start/Stop from one thread.
#ifndef WINDQUANT_LEARNER_PLAN_SENDER_H_
#define WINDQUANT_LEARNER_PLAN_SENDER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/base/log.h"
#include "common/net/canceller.h"
#include "learner/learner_core.h"

namespace windquant::learner {

class PlanSender {
 public:
  // One attempt to submit `plan`; returns the evaluator_id that accepted it.
  // `cancel` is the sender's Canceller (register the call's context with it).
  using SubmitFn =
      std::function<absl::StatusOr<std::string>(const OutgoingPlan& plan, net::Canceller* cancel)>;
  // One attempt to ask the evaluator_id (Evaluator.GetQueueStatus).
  using ProbeFn = std::function<absl::StatusOr<std::string>(net::Canceller* cancel)>;
  PlanSender(LearnerCore* core, SubmitFn submit, ProbeFn probe,
             absl::Duration probe_every = absl::Seconds(5), base::LogSink log = base::LogToStderr);
  ~PlanSender();

  void Start();
  // Cancels the call in flight and joins the thread.
  void Stop();

 private:
  using Key = std::pair<rl::PlanKind, uint64_t>;
  void Loop();
  // Sends the pending plans `evaluator_id` no longer holds again.
  void Probe();

  LearnerCore* const core_;
  const SubmitFn submit_;
  const ProbeFn probe_;
  const absl::Duration probe_every_;
  const base::LogSink log_;
  net::Canceller cancel_;
  std::thread thread_;
  // Plans handed over, by the evaluator_id that accepted them (the thread's own).
  std::map<Key, std::string> accepted_;
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_PLAN_SENDER_H_
