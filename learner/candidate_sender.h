// CandidateSender: sends the learner's candidate plans (LearnerCore::
// TakeCandidates: the curriculum step's Lagrangian reference, the greedy plan after
// each update) to the evaluator with Evaluator.SubmitPlan; the evaluation
// comes back like an episode's, through Learner.ReportEvaluation. One thread;
// UNAVAILABLE, DEADLINE_EXCEEDED and RESOURCE_EXHAUSTED (evaluator not up
// yet, queue full) are retried with backoff while the candidate is pending;
// any other error drops it (LearnerCore::DropCandidate) so that the end of the
// run does not wait for it.
// Thread-safety: Start/Stop from one thread.
#ifndef WINDQUANT_LEARNER_CANDIDATE_SENDER_H_
#define WINDQUANT_LEARNER_CANDIDATE_SENDER_H_

#include <functional>
#include <memory>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/base/log.h"
#include "common/net/canceller.h"
#include "common/plan/plan.h"
#include "learner/learner_core.h"

namespace windquant::learner {

class CandidateSender {
 public:
  // One attempt to submit `plan` (its episode_id and plan_id set); `cancel`
  // is the sender's Canceller (register the call's context with it).
  using SubmitFn = std::function<absl::Status(const plan::Plan& plan, net::Canceller* cancel)>;
  CandidateSender(LearnerCore* core, SubmitFn submit, base::LogSink log = base::LogToStderr);
  ~CandidateSender();

  void Start();
  // Cancels the call in flight and joins the thread.
  void Stop();

 private:
  void Loop();

  LearnerCore* const core_;
  const SubmitFn submit_;
  const base::LogSink log_;
  net::Canceller cancel_;
  std::thread thread_;
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_CANDIDATE_SENDER_H_
