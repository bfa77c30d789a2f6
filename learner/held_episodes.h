// HeldEpisodes: the finished episodes the learner holds until their
// evaluation arrives, and the ids of every episode accepted in this run. An
// episode id is accepted once per run: an episode re-sent after its
// evaluation (an ack lost on the way back) or recorded in plans.jsonl before
// a restart (MarkSeen) is refused, so no plan is evaluated and recorded twice.
// Holds each episode's transitions (one rl::Transition per unit, about 200
// bytes) from Hold until Take.
// Thread-compatible (the learner calls it under its mutex).
#ifndef WINDQUANT_LEARNER_HELD_EPISODES_H_
#define WINDQUANT_LEARNER_HELD_EPISODES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>

#include "common/rl/episode.h"

namespace windquant::learner {

class HeldEpisodes {
 public:
  // `id` was accepted before (e.g. by the learner before a restart).
  void MarkSeen(uint64_t id) { seen_.insert(id); }
  bool Seen(uint64_t id) const { return seen_.count(id) > 0; }

  // Holds `episode`; false (nothing held) when its id was accepted before in
  // this run.
  bool Hold(rl::Episode episode);
  // The held episode `id`, removed (its evaluation arrived, or it was given
  // up); nullopt when it is not held (unknown or evaluated). It stays seen.
  std::optional<rl::Episode> Take(uint64_t id);
  // The held episode `id` (still held); nullptr when it is not held.
  const rl::Episode* Find(uint64_t id) const;

  size_t size() const { return held_.size(); }

 private:
  std::map<uint64_t, rl::Episode> held_;
  std::set<uint64_t> seen_;  // every id accepted in this run, held ones included
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_HELD_EPISODES_H_
