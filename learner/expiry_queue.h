// ExpiryQueue<T>: values held by id until they are taken or expire. The
// learner holds an episode until its evaluation arrives and a candidate plan
// until the evaluator reports it; either may never come (a lost report, an
// evaluator restart), so both expire (the learner's EvaluationClock says when).
// Besides the map by id, the queue keeps (insertion time, id) in insertion
// order, so the expired entries are a prefix and expiring costs O(expired)
// per call, not O(held); ids that left already (taken, erased) are skipped
// when they reach the front.
// Thread-compatible (the learner calls it under its mutex).
#ifndef WINDQUANT_LEARNER_EXPIRY_QUEUE_H_
#define WINDQUANT_LEARNER_EXPIRY_QUEUE_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace windquant::learner {

template <typename T>
class ExpiryQueue {
 public:
  // Holds `value` under `id` since `now`; false (nothing changes) when `id`
  // is held already. `now` must not decrease from one call to the next.
  bool Insert(uint64_t id, T value, absl::Time now) {
    if (!held_.emplace(id, Entry{std::move(value), now}).second) return false;
    order_.emplace_back(now, id);
    return true;
  }

  bool Contains(uint64_t id) const { return held_.count(id) > 0; }
  // The value held under `id`, nullptr when none.
  const T* Find(uint64_t id) const {
    auto it = held_.find(id);
    return it == held_.end() ? nullptr : &it->second.value;
  }
  // Removes and returns the value held under `id` (nullopt when none).
  std::optional<T> Take(uint64_t id) {
    auto it = held_.find(id);
    if (it == held_.end()) return std::nullopt;
    std::optional<T> value(std::move(it->second.value));
    held_.erase(it);
    return value;
  }
  // Removes the value held under `id`; false when none.
  bool Erase(uint64_t id) { return held_.erase(id) > 0; }

  // Removes and returns, in id order, the values inserted before `cutoff`.
  std::vector<std::pair<uint64_t, T>> Expire(absl::Time cutoff) {
    std::vector<std::pair<uint64_t, T>> out;
    while (!order_.empty() && order_.front().first < cutoff) {
      const auto [since, id] = order_.front();
      order_.pop_front();
      auto it = held_.find(id);
      // The same id held again later is another entry (it expires later).
      if (it == held_.end() || it->second.since != since) continue;
      out.emplace_back(id, std::move(it->second.value));
      held_.erase(it);
    }
    std::sort(out.begin(), out.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    return out;
  }

  size_t size() const { return held_.size(); }
  bool empty() const { return held_.empty(); }

 private:
  struct Entry {
    T value;
    absl::Time since;
  };
  std::map<uint64_t, Entry> held_;
  std::deque<std::pair<absl::Time, uint64_t>> order_;  // insertion order
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_EXPIRY_QUEUE_H_
