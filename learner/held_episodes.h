// HeldEpisodes: the finished episodes the learner holds until their
// evaluation arrives (or they expire, ExpiryQueue), and the ids of every
// episode accepted in this run. An episode id is accepted once per run: an
// episode re-sent after its evaluation (an ack lost on the way back) or
// recorded in plans.jsonl before a restart (MarkSeen) is refused, so no plan
// is evaluated and recorded twice.
// Holds each episode's transitions (one rl::Transition per unit, about 200
// bytes) from Hold until Take or Expire.
// Thread-compatible (the learner calls it under its mutex).
#ifndef WINDQUANT_LEARNER_HELD_EPISODES_H_
#define WINDQUANT_LEARNER_HELD_EPISODES_H_

#include <cstdint>
#include <optional>
#include <set>
#include <vector>

#include "absl/time/time.h"
#include "common/rl/episode.h"
#include "learner/expiry_queue.h"

namespace windquant::learner {

class HeldEpisodes {
 public:
  // `id` was accepted before (e.g. by the learner before a restart).
  void MarkSeen(uint64_t id) { seen_.insert(id); }
  bool Seen(uint64_t id) const { return seen_.count(id) > 0; }

  // Holds `episode` from `now` on; false (nothing held) when its id was
  // accepted before in this run.
  bool Hold(rl::Episode episode, absl::Time now);
  // The held episode `id`, removed (its evaluation arrived); nullopt when it
  // is not held (unknown, evaluated or expired).
  std::optional<rl::Episode> Take(uint64_t id) { return held_.Take(id); }
  // The held episode `id` (still held); nullptr when it is not held.
  const rl::Episode* Find(uint64_t id) const { return held_.Find(id); }
  // Drops the episodes held since before `cutoff`; returns their ids in
  // order. They stay seen.
  std::vector<uint64_t> Expire(absl::Time cutoff);

  size_t size() const { return held_.size(); }

 private:
  ExpiryQueue<rl::Episode> held_;
  std::set<uint64_t> seen_;  // every id accepted in this run, held ones included
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_HELD_EPISODES_H_
