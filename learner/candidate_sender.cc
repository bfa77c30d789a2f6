#include "learner/candidate_sender.h"

#include <deque>
#include <utility>

#include "absl/strings/str_cat.h"

namespace windquant::learner {

CandidateSender::CandidateSender(LearnerCore* core, SubmitFn submit, base::LogSink log)
    : core_(core), submit_(std::move(submit)), log_(std::move(log)) {}

CandidateSender::~CandidateSender() { Stop(); }

void CandidateSender::Start() {
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
}

void CandidateSender::Stop() {
  cancel_.Cancel();
  if (thread_.joinable()) thread_.join();
}

void CandidateSender::Loop() {
  std::deque<plan::Plan> todo;
  absl::Duration backoff = absl::Milliseconds(100);
  while (!cancel_.cancelled()) {
    for (plan::Plan& p :
         core_->TakeCandidates(todo.empty() ? absl::Milliseconds(500) : absl::ZeroDuration())) {
      todo.push_back(std::move(p));
    }
    if (todo.empty()) continue;
    const plan::Plan& plan = todo.front();
    if (!core_->CandidatePending(plan.episode_id)) {  // expired meanwhile
      todo.pop_front();
      continue;
    }
    const absl::Status s = submit_(plan, &cancel_);
    if (s.ok()) {
      todo.pop_front();
      backoff = absl::Milliseconds(100);
      continue;
    }
    if (absl::IsCancelled(s) && cancel_.cancelled()) return;
    const bool transient = absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) ||
                           absl::IsResourceExhausted(s) || absl::IsCancelled(s);
    if (!transient) {
      log_(absl::StrCat("learner: candidate ", plan.plan_id,
                        " refused by the evaluator: ", s.message(), " (dropped)"));
      core_->DropCandidate(plan.episode_id);
      todo.pop_front();
      continue;
    }
    if (!cancel_.SleepFor(backoff)) return;
    backoff = std::min(backoff * 2, absl::Seconds(5));
  }
}

}  // namespace windquant::learner
