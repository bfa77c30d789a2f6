#include "learner/episode_journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/base/files.h"
#include "common/base/sha256.h"

namespace windquant::learner {
namespace {

constexpr absl::string_view kMagic = "WQJ1";
constexpr absl::string_view kSegmentPrefix = "segment-";
constexpr absl::string_view kSegmentSuffix = ".wqj";
constexpr absl::string_view kLegacySuffix = ".episode.pb";  // the first version's files
constexpr char kRecord = 'R';
constexpr char kTombstone = 'T';

std::string Checksum(char kind, uint64_t id, absl::string_view payload) {
  base::Sha256Hasher h;
  h.Update(absl::StrCat(std::string(1, kind), " ", id, " ", payload.size(), "\n"));
  h.Update(payload);
  return h.FinishHex();
}

std::string EncodeRecord(char kind, uint64_t id, absl::string_view payload) {
  std::string out = absl::StrCat(kMagic, " ", std::string(1, kind), " ", id, " ", payload.size(),
                                 " ", Checksum(kind, id, payload), "\n");
  out.append(payload.data(), payload.size());
  return out;
}

struct Parsed {
  char kind = 0;
  uint64_t id = 0;
  absl::string_view payload;
  size_t end = 0;  // offset after the record
};

// The record at `pos` of `data`; DATA_LOSS saying what is wrong.
absl::StatusOr<Parsed> ParseRecord(absl::string_view data, size_t pos) {
  const size_t eol = data.find('\n', pos);
  if (eol == absl::string_view::npos) return absl::DataLossError("header cut short");
  const std::vector<absl::string_view> f = absl::StrSplit(data.substr(pos, eol - pos), ' ');
  Parsed p;
  uint64_t bytes = 0;
  if (f.size() != 5 || f[0] != kMagic || f[1].size() != 1 ||
      (f[1][0] != kRecord && f[1][0] != kTombstone) || !absl::SimpleAtoi(f[2], &p.id) ||
      !absl::SimpleAtoi(f[3], &bytes) || f[4].size() != 64) {
    return absl::DataLossError("not a record header");
  }
  p.kind = f[1][0];
  if (data.size() - (eol + 1) < bytes) return absl::DataLossError("payload cut short");
  p.payload = data.substr(eol + 1, bytes);
  if (Checksum(p.kind, p.id, p.payload) != f[4]) return absl::DataLossError("checksum mismatch");
  p.end = eol + 1 + bytes;
  return p;
}

// Applies the records of segment `path` to `live`; a torn tail is dropped with a log line.
absl::Status ReplaySegment(const std::string& path, std::map<uint64_t, std::string>* live,
                           const base::LogSink& log) {
  absl::StatusOr<std::string> data = base::ReadFile(path);
  if (!data.ok()) return absl::InternalError(data.status().message());
  size_t pos = 0;
  while (pos < data->size()) {
    absl::StatusOr<Parsed> r = ParseRecord(*data, pos);
    if (!r.ok()) {
      if (log) {
        log(absl::StrCat("held episodes journal: ", path, ": torn tail dropped at byte ", pos,
                         " of ", data->size(), " (", r.status().message(), ")"));
      }
      break;
    }
    if (r->kind == kRecord) {
      (*live)[r->id] = std::string(r->payload);
    } else {
      live->erase(r->id);
    }
    pos = r->end;
  }
  return absl::OkStatus();
}

absl::Status WriteAll(int fd, absl::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InternalError(absl::StrCat(path, ": write: ", std::strerror(errno)));
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

// The directory entry of a new file is durable only once its directory is synced.
absl::Status SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat(dir, ": open: ", std::strerror(errno)));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return absl::InternalError(absl::StrCat(dir, ": fsync: ", std::strerror(err)));
  return absl::OkStatus();
}

struct DirFiles {
  std::vector<std::pair<int64_t, std::string>> segments;  // (n, path), n ascending
  std::vector<std::pair<uint64_t, std::string>> legacy;   // (episode id, path)
};

DirFiles ListDir(const std::string& dir) {
  DirFiles out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string file = entry.path().filename().string();
    absl::string_view name = file;
    uint64_t n = 0;
    if (absl::ConsumePrefix(&name, kSegmentPrefix) && absl::ConsumeSuffix(&name, kSegmentSuffix) &&
        absl::SimpleAtoi(name, &n)) {
      out.segments.emplace_back(static_cast<int64_t>(n), entry.path().string());
    } else if (absl::ConsumeSuffix(&name, kLegacySuffix) && absl::SimpleAtoi(name, &n)) {
      out.legacy.emplace_back(n, entry.path().string());
    }
  }
  std::sort(out.segments.begin(), out.segments.end());
  return out;
}

std::string SegmentPath(const std::string& dir, int64_t n) {
  return absl::StrCat(dir, "/", kSegmentPrefix, n, kSegmentSuffix);
}

}  // namespace

EpisodeJournal::EpisodeJournal(Options options) : options_(std::move(options)) {}

EpisodeJournal::~EpisodeJournal() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (writer_.joinable()) writer_.join();
  if (fd_ >= 0) ::close(fd_);
}

absl::Status EpisodeJournal::Sync(int fd) const {
  const int rc = options_.sync ? options_.sync(fd) : ::fdatasync(fd);
  if (rc == 0) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(SegmentPath(options_.dir, segment_), ": sync: ", std::strerror(errno)));
}

absl::Status EpisodeJournal::Recover(const KeepFn& keep) {
  absl::MutexLock lock(&mu_);
  if (recovered_) return absl::FailedPreconditionError("held episodes journal: recovered already");
  return RecoverLocked(keep);
}

absl::Status EpisodeJournal::RecoverLocked(const KeepFn& keep) {
  recovered_ = true;
  std::error_code ec;
  std::filesystem::create_directories(options_.dir, ec);
  const DirFiles files = ListDir(options_.dir);
  std::map<uint64_t, std::string> live;
  std::vector<std::string> obsolete;
  for (const auto& [id, path] : files.legacy) {
    absl::StatusOr<std::string> bytes = base::ReadFile(path);
    if (bytes.ok()) live[id] = *std::move(bytes);
    obsolete.push_back(path);
  }
  for (const auto& [n, path] : files.segments) {
    recover_status_ = ReplaySegment(path, &live, options_.log);
    if (!recover_status_.ok()) return recover_status_;
    obsolete.push_back(path);
    segment_ = n;
  }
  std::map<uint64_t, std::string> kept;
  for (const auto& [id, payload] : live) {
    if (keep(id, payload)) kept.emplace(id, EncodeRecord(kRecord, id, payload));
  }
  recover_status_ = StartSegment(kept, obsolete);
  if (!recover_status_.ok()) return recover_status_;
  stats_.segment_bytes = size_;
  stats_.live_bytes = live_bytes_;
  writer_ = std::thread([this] { WriterLoop(); });
  return absl::OkStatus();
}

// A new segment with `records` (whole encoded records by id), synced and
// named durably before the `obsolete` files are removed (oldest first: a
// crash between two removals leaves no tombstone without its record's file).
absl::Status EpisodeJournal::StartSegment(const std::map<uint64_t, std::string>& records,
                                          const std::vector<std::string>& obsolete) {
  const std::string path = SegmentPath(options_.dir, segment_ + 1);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat(path, ": open: ", std::strerror(errno)));
  std::string data;
  std::map<uint64_t, Location> index;
  for (const auto& [id, record] : records) {
    index[id] = {static_cast<int64_t>(data.size()), static_cast<int64_t>(record.size())};
    data += record;
  }
  absl::Status s = WriteAll(fd, data, path);
  if (s.ok()) s = Sync(fd);
  if (s.ok()) s = SyncDir(options_.dir);
  if (!s.ok()) {
    ::close(fd);
    std::error_code ec;
    std::filesystem::remove(path, ec);
    return s;
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  ++segment_;
  size_ = static_cast<int64_t>(data.size());
  live_bytes_ = size_;
  live_ = std::move(index);
  for (const std::string& old : obsolete) {
    std::error_code ec;
    std::filesystem::remove(old, ec);
  }
  return absl::OkStatus();
}

absl::Status EpisodeJournal::Append(uint64_t id, absl::string_view payload) {
  Pending p{id, EncodeRecord(kRecord, id, payload), nullptr};  // checksummed outside the lock
  Waiter w;
  p.waiter = &w;
  absl::MutexLock lock(&mu_);
  if (!recovered_)
    recover_status_ = RecoverLocked([](uint64_t, const std::string&) { return true; });
  if (!recover_status_.ok()) {
    return absl::UnavailableError(
        absl::StrCat("held episodes journal: ", recover_status_.message()));
  }
  queue_.push_back(std::move(p));
  ++stats_.waiting;
  mu_.Await(absl::Condition(&w.done));
  return w.status;
}

void EpisodeJournal::Release(uint64_t id) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(Pending{id, EncodeRecord(kTombstone, id, ""), nullptr});
}

EpisodeJournal::Stats EpisodeJournal::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void EpisodeJournal::WriterLoop() {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || stopping_; };
  for (;;) {
    mu_.Await(absl::Condition(&ready));
    if (queue_.empty()) return;  // stopping, everything written
    std::vector<Pending> group;
    group.swap(queue_);
    const bool sync = std::any_of(group.begin(), group.end(),
                                  [](const Pending& p) { return p.waiter != nullptr; });
    mu_.Unlock();
    const absl::Status s = WriteGroup(group, sync);
    mu_.Lock();
    for (Pending& p : group) {
      if (p.waiter == nullptr) {
        stats_.tombstones += s.ok();
        continue;
      }
      p.waiter->status = s;
      p.waiter->done = true;  // the waiter may return (and free it) once mu_ is released
      stats_.records += s.ok();
      --stats_.waiting;
    }
    stats_.syncs += sync && s.ok();
    stats_.segment_bytes = size_;
    stats_.live_bytes = live_bytes_;
    if (!s.ok() && options_.log) options_.log(std::string(s.message()));
    mu_.Unlock();
    if (s.ok()) MaybeCompact();  // after the waiters are released
    mu_.Lock();
    stats_.segment_bytes = size_;
    stats_.live_bytes = live_bytes_;
  }
}

// Appends `group` in one write and syncs it when `sync` (it holds a record).
// On an error the segment is cut back to where it was (the group is not in
// it); when that fails too, the next group first rewrites the live records
// to a new segment, so that no record is ever appended after a torn one.
absl::Status EpisodeJournal::WriteGroup(const std::vector<Pending>& group, bool sync) {
  absl::Status s = tail_dirty_ ? Rewrite() : absl::OkStatus();
  if (s.ok()) {
    tail_dirty_ = false;
    std::string data;
    for (const Pending& p : group) data += p.record;
    s = WriteAll(fd_, data, SegmentPath(options_.dir, segment_));
    if (s.ok() && sync) s = Sync(fd_);
  }
  int64_t offset = size_;
  for (const Pending& p : group) {
    const auto bytes = static_cast<int64_t>(p.record.size());
    if (p.waiter == nullptr) {
      // Released even when its tombstone failed: a later rewrite leaves it out.
      if (auto it = live_.find(p.id); it != live_.end()) {
        live_bytes_ -= it->second.bytes;
        live_.erase(it);
      }
    } else if (s.ok()) {
      live_[p.id] = {offset, bytes};
      live_bytes_ += bytes;
    }
    offset += bytes;
  }
  if (s.ok()) {
    size_ = offset;
    return absl::OkStatus();
  }
  if (!tail_dirty_ && ::ftruncate(fd_, size_) != 0) tail_dirty_ = true;
  return absl::UnavailableError(absl::StrCat("held episodes journal: ", s.message()));
}

// Writes the live records to a new segment and removes the current one.
absl::Status EpisodeJournal::Rewrite() {
  const std::string path = SegmentPath(options_.dir, segment_);
  std::map<uint64_t, std::string> records;
  for (const auto& [id, loc] : live_) {
    std::string bytes(static_cast<size_t>(loc.bytes), '\0');
    if (::pread(fd_, bytes.data(), bytes.size(), loc.offset) != loc.bytes) {
      return absl::InternalError(absl::StrCat(path, ": read: ", std::strerror(errno)));
    }
    records.emplace(id, std::move(bytes));
  }
  return StartSegment(records, {path});
}

// Compaction: the segment is rewritten once it is large and mostly released
// (see the class comment for the bound). A failure keeps the segment.
void EpisodeJournal::MaybeCompact() {
  if (size_ < options_.compact_min_bytes || size_ <= 2 * live_bytes_) return;
  if (absl::Status s = Rewrite(); !s.ok()) {
    if (options_.log)
      options_.log(absl::StrCat("held episodes journal: compaction: ", s.message()));
    return;
  }
  absl::MutexLock lock(&mu_);
  ++stats_.compactions;
}

}  // namespace windquant::learner
