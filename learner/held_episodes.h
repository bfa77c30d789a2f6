// HeldEpisodes: the finished episodes the learner holds until their
// evaluation arrives, and the ids of every episode accepted in this run. An
// episode id is accepted once per run: an episode re-sent after its
// evaluation (an ack lost on the way back) or recorded in plans.jsonl before
// a restart (MarkSeen) is refused, so no plan is evaluated and recorded twice.
// Holds each episode's transitions (one rl::Transition per unit, about 200
// bytes) from Hold until Take.
// With a journal directory, an accepted episode is also written there
// (Journal, before the learner acknowledges it) until Release, after its plan
// was recorded or given up: a learner restarted after a crash holds again
// what it had acknowledged and not yet recorded (Reload), so an acknowledged
// episode is not lost with its learner (the chaos soak found them lost). The
// same bytes per episode on disk (a v1::TransitionBatch).
// Thread-compatible (the learner calls it under its mutex).
#ifndef WINDQUANT_LEARNER_HELD_EPISODES_H_
#define WINDQUANT_LEARNER_HELD_EPISODES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/plan/unit_table.h"
#include "common/rl/episode.h"

namespace windquant::learner {

class HeldEpisodes {
 public:
  // `journal_dir`: "" = no journal (memory only).
  explicit HeldEpisodes(std::string journal_dir = "") : dir_(std::move(journal_dir)) {}

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

  // Writes `episode` (an episode of `table`) to the journal; a no-op without
  // one. Errors: the write's (the episode must then not be acknowledged).
  absl::Status Journal(const rl::Episode& episode, const plan::UnitTable& table) const;
  // Removes episode `id` from the journal (its plan is recorded or given up).
  void Release(uint64_t id) const;
  // Take and Release: the episode is given up; false when it is not held.
  bool GiveUp(uint64_t id);
  // Holds the journal's episodes again (a restarted learner), except those
  // seen already (recorded in plans.jsonl: MarkSeen first) and those that do
  // not decode against `table` (another run's): their files are removed.
  // Returns the ids held again, in id order.
  std::vector<uint64_t> Reload(const plan::UnitTable& table);

 private:
  std::string PathOf(uint64_t id) const;

  const std::string dir_;
  std::map<uint64_t, rl::Episode> held_;
  std::set<uint64_t> seen_;  // every id accepted in this run, held ones included
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_HELD_EPISODES_H_
