#include "learner/plan_sender.h"

#include <algorithm>
#include <deque>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace windquant::learner {

PlanSender::PlanSender(LearnerCore* core, SubmitFn submit, ProbeFn probe,
                       absl::Duration probe_every, base::LogSink log)
    : core_(core),
      submit_(std::move(submit)),
      probe_(std::move(probe)),
      probe_every_(probe_every),
      log_(std::move(log)) {}

PlanSender::~PlanSender() { Stop(); }

void PlanSender::Start() {
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
}

void PlanSender::Stop() {
  cancel_.Cancel();
  if (thread_.joinable()) thread_.join();
}

void PlanSender::Probe() {
  for (auto it = accepted_.begin(); it != accepted_.end();) {
    it = core_->Pending(it->first.first, it->first.second) ? std::next(it) : accepted_.erase(it);
  }
  if (accepted_.empty()) return;
  absl::StatusOr<std::string> now = probe_(&cancel_);
  if (!now.ok()) return;  // unreachable now: asked again at the next probe
  int resent = 0;
  for (auto it = accepted_.begin(); it != accepted_.end();) {
    if (it->second == *now) {
      ++it;
      continue;
    }
    resent += core_->Resend(it->first.first, it->first.second);
    it = accepted_.erase(it);
  }
  if (resent > 0) {
    log_(absl::StrCat("learner: the evaluator's queue is new (evaluator ", *now, "): ", resent,
                      " plans it had accepted are sent again"));
  }
}

void PlanSender::Loop() {
  std::deque<OutgoingPlan> todo;
  absl::Duration backoff = absl::Milliseconds(100);
  absl::Time next_probe = absl::Now() + probe_every_;
  while (!cancel_.cancelled()) {
    if (absl::Now() >= next_probe) {
      Probe();
      next_probe = absl::Now() + probe_every_;
    }
    const absl::Duration wait = todo.empty() ? absl::Milliseconds(500) : absl::ZeroDuration();
    for (OutgoingPlan& p : core_->TakeOutbox(wait)) todo.push_back(std::move(p));
    if (todo.empty()) continue;
    const OutgoingPlan& plan = todo.front();
    const Key key(plan.kind, plan.plan.episode_id);
    if (!core_->Pending(key.first, key.second)) {  // evaluated or dropped meanwhile
      todo.pop_front();
      continue;
    }
    const absl::StatusOr<std::string> s = submit_(plan, &cancel_);
    if (s.ok()) {
      accepted_[key] = *s;
      todo.pop_front();
      backoff = absl::Milliseconds(100);
      continue;
    }
    const absl::Status& st = s.status();
    if (absl::IsCancelled(st) && cancel_.cancelled()) return;
    const bool transient = absl::IsUnavailable(st) || absl::IsDeadlineExceeded(st) ||
                           absl::IsResourceExhausted(st) || absl::IsCancelled(st);
    if (!transient) {
      core_->Drop(
          key.first, key.second,
          absl::StrCat("plan ", plan.plan.plan_id, " refused by the evaluator: ", st.message()));
      todo.pop_front();
      continue;
    }
    if (!cancel_.SleepFor(backoff)) return;
    backoff = std::min(backoff * 2, absl::Seconds(5));
  }
}

}  // namespace windquant::learner
