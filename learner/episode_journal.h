// EpisodeJournal: the file behind the held-episodes journal (HeldEpisodes):
// an append-only segment of records, one per acknowledged episode, and
// tombstones for the released ones, with group commit. Appends that arrive
// while a sync runs wait for the next one and share it, so the learner's
// intake is not bound by one fsync per episode (the journal's first version
// wrote one file per episode, under LearnerCore's lock: ~190 episodes/s on
// a disk; docs/benchmarks.md section 4).
//
// A record is the header line
//   "WQJ1 <R|T> <episode id> <payload bytes> <sha256 hex>\n"
// then the payload (R: an episode's encoded v1::TransitionBatch; T: a
// tombstone, no payload); the SHA-256 covers "<R|T> <id> <bytes>\n" and the
// payload. A record cut short or altered (the tail of a segment being written
// at a kill -9 or a power loss) ends the segment: it and what follows are
// dropped on recovery, with a log line (such a record was never synced, so
// never acknowledged).
//
// Files in `dir`: segment-<n>.wqj; the highest n is the one appended to.
// Recover (a restarted learner) reads every segment in order and writes the
// live records it keeps into a new segment; a segment is rewritten the same
// way (compaction) once it is at least compact_min_bytes and over twice the
// live records' bytes. Disk bound: the segment holds at most
// max(compact_min_bytes, 2 x live bytes) plus one group's bytes, and during a
// rewrite a second file of the live bytes exists.
//
// Thread-safe. One writer thread does all the I/O after Recover: Append
// blocks its caller until its record is synced; Release only queues (no I/O,
// so a caller may hold its own locks). Tombstones are written with the next
// group and synced with the next record; one lost at a crash only means its
// episode is offered again on recovery (the learner then refuses those it
// recorded: HeldEpisodes::MarkSeen).
#ifndef WINDQUANT_LEARNER_EPISODE_JOURNAL_H_
#define WINDQUANT_LEARNER_EPISODE_JOURNAL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/base/log.h"

namespace windquant::learner {

class EpisodeJournal {
 public:
  struct Options {
    std::string dir;
    // Makes what was written to `fd` durable: 0 or -1 with errno, as
    // fdatasync(2) (the default). Tests count or block it.
    std::function<int(int fd)> sync;
    int64_t compact_min_bytes = int64_t{64} << 20;
    base::LogSink log;  // torn tails, compactions, errors; may be empty
  };
  struct Stats {
    int64_t syncs = 0;        // of appended records (not counting rewrites)
    int64_t records = 0;      // appended since construction
    int64_t tombstones = 0;   // written since construction
    int64_t compactions = 0;  // rewrites of a segment (not counting Recover)
    int64_t waiting = 0;      // appends waiting for their sync now
    int64_t segment_bytes = 0;
    int64_t live_bytes = 0;
  };
  // keep(id, payload): whether Recover keeps a live record.
  using KeepFn = std::function<bool(uint64_t id, const std::string& payload)>;

  explicit EpisodeJournal(Options options);
  // Writes the queued tombstones, then stops the writer. Appends must have returned.
  ~EpisodeJournal();
  EpisodeJournal(const EpisodeJournal&) = delete;
  EpisodeJournal& operator=(const EpisodeJournal&) = delete;

  // Reads the segments of `dir` (and the files of the journal's first version,
  // <id>.episode.pb), calls `keep` for each live record in id order, writes
  // the kept ones to a new segment, syncs it and removes the old files. Call
  // it first: the first Append otherwise recovers keeping every record; a
  // second call is FAILED_PRECONDITION. Errors: INTERNAL naming the path.
  absl::Status Recover(const KeepFn& keep);

  // Appends the record of episode `id` and returns once it is synced, with
  // the records appended meanwhile (one sync for them all). Errors:
  // UNAVAILABLE (recovery, write or sync failed: the record is not in the
  // journal and must not be acknowledged).
  absl::Status Append(uint64_t id, absl::string_view payload);
  // Queues the tombstone of `id` (appended and not released before). No I/O.
  void Release(uint64_t id);

  Stats stats() const;

 private:
  struct Location {
    int64_t offset = 0;
    int64_t bytes = 0;  // of the whole record
  };
  struct Waiter {
    absl::Status status;
    bool done = false;
  };
  struct Pending {
    uint64_t id = 0;
    std::string record;
    Waiter* waiter = nullptr;  // nullptr: a tombstone
  };

  absl::Status RecoverLocked(const KeepFn& keep) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WriterLoop();
  // Writer thread (or Recover, before it starts) only.
  absl::Status WriteGroup(const std::vector<Pending>& group, bool sync);
  absl::Status Rewrite();
  void MaybeCompact();
  absl::Status StartSegment(const std::map<uint64_t, std::string>& records,
                            const std::vector<std::string>& obsolete);
  absl::Status Sync(int fd) const;

  const Options options_;
  mutable absl::Mutex mu_;
  bool recovered_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status recover_status_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Pending> queue_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::thread writer_;
  // The writer's state (Recover sets it before the writer starts).
  int fd_ = -1;
  int64_t segment_ = 0;  // n of segment-<n>.wqj
  int64_t size_ = 0;
  int64_t live_bytes_ = 0;
  bool tail_dirty_ = false;  // a failed group may be in the segment
  std::map<uint64_t, Location> live_;
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_EPISODE_JOURNAL_H_
