#include "common/rl/plan_cache.h"

namespace windquant::rl {

std::optional<PlanEvaluation> PlanCache::Find(const std::string& model_fingerprint,
                                              const std::vector<int>& actions) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(Key(model_fingerprint, actions));
  if (it == entries_.end()) return std::nullopt;
  ++hits_;
  PlanEvaluation hit = it->second;
  hit.cached = true;
  return hit;
}

PlanEvaluation PlanCache::Insert(const std::string& model_fingerprint,
                                 const std::vector<int>& actions, PlanEvaluation evaluation) {
  evaluation.cached = false;
  absl::MutexLock lock(&mu_);
  ++misses_;
  if (capacity_ == 0) return evaluation;
  // Two callers may measure the same plan at once: the later result replaces
  // the earlier (a backend measures a plan the same way each time).
  auto [it, inserted] = entries_.insert_or_assign(Key(model_fingerprint, actions), evaluation);
  if (!inserted) return evaluation;
  order_.push_back(it);
  if (entries_.size() > capacity_) {
    entries_.erase(order_.front());
    order_.pop_front();
  }
  return evaluation;
}

size_t PlanCache::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

int64_t PlanCache::hits() const {
  absl::MutexLock lock(&mu_);
  return hits_;
}

int64_t PlanCache::misses() const {
  absl::MutexLock lock(&mu_);
  return misses_;
}

}  // namespace windquant::rl
