// PlanCache: the evaluations of plans already measured, so that an identical
// plan (same model fingerprint, same actions) is measured once. The one cache
// of plan evaluations: PlanEvaluationCore (every backend) and
// CachingPlanEvaluator (any PlanEvaluator) keep theirs here.
// Bounded: past `capacity` plans the oldest entry goes first.
// Memory: one PlanEvaluation plus the plan's actions per entry, no tensor.
// Thread-safety: all methods are thread-safe.
#ifndef WINDQUANT_COMMON_RL_PLAN_CACHE_H_
#define WINDQUANT_COMMON_RL_PLAN_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/rl/plan_evaluation.h"

namespace windquant::rl {

class PlanCache {
 public:
  static constexpr size_t kUnbounded = std::numeric_limits<size_t>::max();
  // `capacity` plans remembered (0: none, every lookup misses).
  explicit PlanCache(size_t capacity = kUnbounded) : capacity_(capacity) {}

  // The evaluation of a plan measured before, with cached = true (counted as
  // a hit); nullopt when there is none.
  std::optional<PlanEvaluation> Find(const std::string& model_fingerprint,
                                     const std::vector<int>& actions);
  // Remembers the evaluation of a plan just measured (counted as a miss) and
  // returns it with cached = false.
  PlanEvaluation Insert(const std::string& model_fingerprint, const std::vector<int>& actions,
                        PlanEvaluation evaluation);

  size_t size() const;
  int64_t hits() const;
  int64_t misses() const;

 private:
  using Key = std::pair<std::string, std::vector<int>>;
  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::map<Key, PlanEvaluation> entries_ ABSL_GUARDED_BY(mu_);
  std::deque<std::map<Key, PlanEvaluation>::iterator> order_ ABSL_GUARDED_BY(mu_);  // oldest first
  int64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_PLAN_CACHE_H_
