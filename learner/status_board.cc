#include "learner/status_board.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace windquant::learner {

std::string StatusFileText(const LearnerStatus& s) {
  return absl::StrCat("done=", s.done ? "true" : "false",
                      "\nunit_table_complete=", s.table_complete ? "true" : "false",
                      "\ncurriculum_stage=", s.curriculum_stage, "/", s.curriculum_stages,
                      "\ntarget_bits=", s.target_bits, "\nupdates=", s.updates,
                      "\nepisodes=", s.episodes, "\nevaluations=", s.evaluations,
                      "\npolicy_version=", s.policy_version, "\nlambda=", s.lambda,
                      "\nbest_plan_id=", s.best_plan_id, "\nbest_plan_effective_bits=", s.best_bits,
                      "\nbest_plan_perplexity=", s.best_perplexity, "\n");
}

void StatusBoard::Publish(LearnerStatus status) {
  absl::MutexLock lock(&mu_);
  status_ = std::move(status);
}

LearnerStatus StatusBoard::Get() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

}  // namespace windquant::learner
