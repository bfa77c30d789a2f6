#include "common/rl/curriculum.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace windquant::rl {

bool Curriculum::OnUpdate(double best_ppl, double reference_ppl, std::string* reason) {
  if (finished_) return false;
  ++updates_in_step_;
  std::string why;
  if (updates_in_step_ >= options_.max_updates) {
    why = absl::StrFormat("%d updates (max_updates)", updates_in_step_);
  } else if (updates_in_step_ >= options_.min_updates && std::isfinite(best_ppl) &&
             std::isfinite(reference_ppl) && reference_ppl > 0 &&
             best_ppl <= options_.advance_ppl_ratio * reference_ppl) {
    why = absl::StrFormat("best PPL %.4f <= %.3f x reference %.4f after %d updates", best_ppl,
                          options_.advance_ppl_ratio, reference_ppl, updates_in_step_);
  } else {
    return false;
  }
  if (reason != nullptr) *reason = why;
  if (is_final_step()) {
    finished_ = true;
  } else {
    ++step_;
    updates_in_step_ = 0;
  }
  return true;
}

int64_t Curriculum::MaxRemainingUpdates() const {
  if (finished_) return 0;
  int64_t n = options_.max_updates - updates_in_step_;
  n += static_cast<int64_t>(num_steps() - 1 - step_) * options_.max_updates;
  return n;
}

}  // namespace windquant::rl
