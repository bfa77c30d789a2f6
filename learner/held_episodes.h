// HeldEpisodes: the finished episodes the learner holds until their
// evaluation arrives, and the ids of every episode accepted in this run. An
// episode id is accepted once per run: an episode re-sent after its
// evaluation (an ack lost on the way back) or recorded in plans.jsonl before
// a restart (MarkSeen) is refused, so no plan is evaluated and recorded twice.
// Holds each episode's transitions (one rl::Transition per unit, about 200
// bytes) from Hold until Take.
// With a journal directory, an accepted episode is also written to the
// journal (Journal, before the learner acknowledges it) until Release, after
// its plan was recorded or given up: a learner restarted after a crash holds
// again what it had acknowledged and not yet recorded (Reload), so an
// acknowledged episode is not lost with its learner (the chaos soak found
// them lost). The same bytes per episode on disk (a v1::TransitionBatch) in
// an append-only journal with group commit (EpisodeJournal).
// Thread-compatible (the learner calls it under its mutex), except Journal:
// thread-safe, and called without the learner's mutex (it waits for a sync).
#ifndef WINDQUANT_LEARNER_HELD_EPISODES_H_
#define WINDQUANT_LEARNER_HELD_EPISODES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/base/log.h"
#include "common/plan/unit_table.h"
#include "common/rl/episode.h"
#include "learner/episode_journal.h"

namespace windquant::learner {

class HeldEpisodes {
 public:
  // `journal_dir`: "" = no journal (memory only).
  explicit HeldEpisodes(std::string journal_dir = "", base::LogSink log = nullptr);

  // `id` was accepted before (e.g. by the learner before a restart).
  void MarkSeen(uint64_t id) { seen_.insert(id); }
  bool Seen(uint64_t id) const { return seen_.count(id) > 0; }

  // Holds `episode`; false (nothing held) when its id was accepted before in
  // this run.
  bool Hold(rl::Episode episode);
  // SubmitEpisode's two steps around Journal: Reserve marks `id` seen (false
  // when it was), HoldReserved holds the episode of a reserved id, Unreserve
  // forgets a reserved id whose episode was not journaled.
  bool Reserve(uint64_t id) { return seen_.insert(id).second; }
  void HoldReserved(rl::Episode episode);
  void Unreserve(uint64_t id) { seen_.erase(id); }
  // The held episode `id`, removed (its evaluation arrived, or it was given
  // up); nullopt when it is not held (unknown or evaluated). It stays seen.
  std::optional<rl::Episode> Take(uint64_t id);
  // The held episode `id` (still held); nullptr when it is not held.
  const rl::Episode* Find(uint64_t id) const;

  size_t size() const { return held_.size(); }

  // Writes `episode` (an episode of `table`) to the journal and returns once
  // it is durable; a no-op without one. Thread-safe; blocks for a sync
  // (shared with the episodes journaled meanwhile). Errors: UNAVAILABLE (the
  // episode must then not be acknowledged).
  absl::Status Journal(const rl::Episode& episode, const plan::UnitTable& table) const;
  // Removes episode `id` (journaled) from the journal (its plan is recorded or
  // given up); queues a tombstone, no I/O.
  void Release(uint64_t id) const;
  // Take and Release: the episode is given up; false when it is not held.
  bool GiveUp(uint64_t id);
  // Holds the journal's episodes again (a restarted learner), except those
  // seen already (recorded in plans.jsonl: MarkSeen first) and those that do
  // not decode against `table` (another run's): they leave the journal.
  // Returns the ids held again, in id order. Reads and rewrites the journal
  // (EpisodeJournal::Recover); once, before the first Journal. Errors: the
  // journal's (nothing held again; later Journal calls fail).
  absl::StatusOr<std::vector<uint64_t>> Reload(const plan::UnitTable& table);

 private:
  const std::unique_ptr<EpisodeJournal> journal_;  // nullptr: memory only
  std::map<uint64_t, rl::Episode> held_;
  std::set<uint64_t> seen_;  // every id accepted in this run, held ones included
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_HELD_EPISODES_H_
