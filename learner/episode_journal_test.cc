#include "learner/episode_journal.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"
#include "common/testing/scoped_test_dir.h"

namespace windquant::learner {
namespace {

using Records = std::map<uint64_t, std::string>;

// Every live record, read back by a journal on the same directory (which
// rewrites it: a restarted learner).
Records Recovered(const std::string& dir, std::vector<std::string>* log = nullptr) {
  EpisodeJournal::Options o;
  o.dir = dir;
  if (log != nullptr) o.log = [log](const std::string& line) { log->push_back(line); };
  EpisodeJournal j(o);
  Records out;
  EXPECT_TRUE(j.Recover([&](uint64_t id, const std::string& payload) {
                 out[id] = payload;
                 return true;
               }).ok());
  return out;
}

std::vector<std::string> Segments(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out.push_back(e.path().filename().string());
  }
  return out;
}

TEST(EpisodeJournalTest, ReleasedRecordsAreNotRecovered) {
  ::windquant::testing::ScopedTestDir temp("wq-episode-journal");
  {
    EpisodeJournal j({temp.path(), nullptr, int64_t{1} << 20, nullptr});
    for (uint64_t id : {1, 2, 3}) ASSERT_TRUE(j.Append(id, "episode " + std::to_string(id)).ok());
    j.Release(2);  // written by the destructor at the latest
  }
  EXPECT_EQ(Recovered(temp.path()), (Records{{1, "episode 1"}, {3, "episode 3"}}));
  // Recover rewrote the journal: one segment, and what it keeps is kept again.
  EXPECT_EQ(Segments(temp.path()).size(), 1u);
  EXPECT_EQ(Recovered(temp.path()).size(), 2u);
}

// A kill -9 (or power loss) while a group was written: the record cut short
// and anything after it are dropped, with a log line; the records before it
// (synced, acknowledged) are recovered.
TEST(EpisodeJournalTest, DropsATornTail) {
  ::windquant::testing::ScopedTestDir temp("wq-episode-journal");
  {
    EpisodeJournal j({temp.path(), nullptr, int64_t{1} << 20, nullptr});
    for (uint64_t id : {1, 2, 3}) ASSERT_TRUE(j.Append(id, std::string(100, 'a' + id)).ok());
  }
  const std::string segment = temp.path() + "/" + Segments(temp.path()).at(0);
  const auto size = std::filesystem::file_size(segment);
  std::filesystem::resize_file(segment, size - 10);  // record 3 cut short
  std::vector<std::string> log;
  Records got = Recovered(temp.path(), &log);
  EXPECT_EQ(got.size(), 2u);
  EXPECT_EQ(got.count(3), 0u);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("torn tail dropped at byte"), std::string::npos) << log[0];
  EXPECT_NE(log[0].find("payload cut short"), std::string::npos) << log[0];
  // An altered byte in a payload: that record and the rest are dropped.
  const std::string rewritten = temp.path() + "/" + Segments(temp.path()).at(0);
  {
    std::fstream f(rewritten, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(rewritten) - 1));
    f.put('z');
  }
  log.clear();
  EXPECT_EQ(Recovered(temp.path(), &log).size(), 1u);  // record 1 only
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("checksum mismatch"), std::string::npos) << log[0];
}

// The first version's files (one <id>.episode.pb per episode) are recovered
// into the segment and removed.
TEST(EpisodeJournalTest, RecoversTheFirstVersionsFiles) {
  ::windquant::testing::ScopedTestDir temp("wq-episode-journal");
  std::ofstream(temp.path() + "/17.episode.pb") << "old";
  EXPECT_EQ(Recovered(temp.path()), (Records{{17, "old"}}));
  EXPECT_FALSE(std::filesystem::exists(temp.path() + "/17.episode.pb"));
  EXPECT_EQ(Recovered(temp.path()), (Records{{17, "old"}}));
}

// The segment is rewritten with its live records once it is past
// compact_min_bytes and over twice their bytes: the disk used stays bounded.
TEST(EpisodeJournalTest, CompactsWhenMostlyReleased) {
  ::windquant::testing::ScopedTestDir temp("wq-episode-journal");
  constexpr int64_t kMin = 64 << 10;
  const std::string payload(1000, 'p');
  {
    EpisodeJournal j({temp.path(), nullptr, kMin, nullptr});
    ASSERT_TRUE(j.Recover([](uint64_t, const std::string&) { return true; }).ok());
    for (uint64_t id = 0; id < 1000; ++id) {
      ASSERT_TRUE(j.Append(id, payload).ok());
      if (id % 10 != 0) j.Release(id);  // one in 10 stays held
      const EpisodeJournal::Stats s = j.stats();
      // At most one group (and a compaction not yet done) past the bound.
      EXPECT_LE(s.segment_bytes, std::max<int64_t>(kMin, 2 * s.live_bytes) + 3 * 1100);
    }
    ASSERT_TRUE(j.Append(1000, payload).ok());  // after the last tombstones
    const EpisodeJournal::Stats s = j.stats();
    EXPECT_GE(s.compactions, 5);
    EXPECT_EQ(s.records, 1001);
    EXPECT_EQ(Segments(temp.path()).size(), 1u);
  }
  const Records got = Recovered(temp.path());
  EXPECT_EQ(got.size(), 101u);
  for (const auto& [id, p] : got) EXPECT_TRUE(id % 10 == 0) << id;
}

// Group commit: appends that arrive while a sync runs share the next one;
// and no Append returns before the sync that covers its record.
TEST(EpisodeJournalTest, ConcurrentAppendsShareOneSyncAndWaitForIt) {
  ::windquant::testing::ScopedTestDir temp("wq-episode-journal");
  std::atomic<bool> armed{false};  // after Recover's own sync
  std::atomic<int> syncs{0};
  absl::Notification first_sync_entered, release_first_sync;
  EpisodeJournal::Options o;
  o.dir = temp.path();
  o.sync = [&](int fd) {
    if (armed && syncs.fetch_add(1) == 0) {
      first_sync_entered.Notify();
      release_first_sync.WaitForNotification();
    }
    return ::fdatasync(fd);
  };
  EpisodeJournal j(o);
  ASSERT_TRUE(j.Recover([](uint64_t, const std::string&) { return true; }).ok());
  armed = true;
  std::atomic<int> acked{0};
  std::thread first([&] {
    EXPECT_TRUE(j.Append(0, "first").ok());
    ++acked;
  });
  first_sync_entered.WaitForNotification();
  constexpr int kOthers = 16;
  std::vector<std::thread> others;
  for (int i = 1; i <= kOthers; ++i) {
    others.emplace_back([&, i] {
      EXPECT_TRUE(j.Append(i, "episode").ok());
      ++acked;
    });
  }
  // Every append queued behind the blocked sync (a spin, not a sleep).
  while (j.stats().waiting < kOthers + 1) std::this_thread::yield();
  // None returns while the first sync blocks: no record is durable yet.
  EXPECT_EQ(acked.load(), 0);
  release_first_sync.Notify();
  first.join();
  for (auto& t : others) t.join();
  EXPECT_EQ(acked.load(), kOthers + 1);
  // The first sync, then one for the 16 records queued while it blocked.
  EXPECT_EQ(syncs.load(), 2);
  EXPECT_EQ(j.stats().records, kOthers + 1);
  EXPECT_EQ(j.stats().syncs, syncs.load());
}

// A failed sync: the Append fails (UNAVAILABLE, not acknowledged), its record
// is not recovered, and the journal goes on.
TEST(EpisodeJournalTest, AFailedSyncFailsItsAppendsOnly) {
  ::windquant::testing::ScopedTestDir temp("wq-episode-journal");
  std::atomic<bool> fail{false};
  EpisodeJournal::Options o;
  o.dir = temp.path();
  o.sync = [&](int fd) {
    if (fail) {
      errno = EIO;
      return -1;
    }
    return ::fdatasync(fd);
  };
  {
    EpisodeJournal j(o);
    ASSERT_TRUE(j.Append(1, "one").ok());  // recovers first
    fail = true;
    const absl::Status s = j.Append(2, "two");
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
    EXPECT_NE(s.message().find("sync"), std::string::npos) << s;
    fail = false;
    EXPECT_TRUE(j.Append(3, "three").ok());
  }
  EXPECT_EQ(Recovered(temp.path()), (Records{{1, "one"}, {3, "three"}}));
}

}  // namespace
}  // namespace windquant::learner
