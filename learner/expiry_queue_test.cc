#include "learner/expiry_queue.h"

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace windquant::learner {
namespace {

std::vector<uint64_t> Ids(const std::vector<std::pair<uint64_t, std::string>>& expired) {
  std::vector<uint64_t> ids;
  for (const auto& [id, value] : expired) ids.push_back(id);
  return ids;
}

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST(ExpiryQueueTest, HoldsEachIdOnceUntilTaken) {
  ExpiryQueue<std::string> q;
  EXPECT_TRUE(q.Insert(7, "a", kT0));
  EXPECT_FALSE(q.Insert(7, "b", kT0));  // held already: unchanged
  EXPECT_EQ(*q.Find(7), "a");
  EXPECT_EQ(q.Find(8), nullptr);
  EXPECT_TRUE(q.Contains(7));
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(q.Take(7), std::optional<std::string>("a"));
  EXPECT_EQ(q.Take(7), std::nullopt);
  EXPECT_TRUE(q.empty());
  EXPECT_TRUE(q.Insert(7, "c", kT0));  // gone: may be held again
  EXPECT_TRUE(q.Erase(7));
  EXPECT_FALSE(q.Erase(7));
}

// Expiry goes by insertion time, whatever the ids; the result is in id order.
TEST(ExpiryQueueTest, ExpiresWhatWasInsertedBeforeTheCutoffInIdOrder) {
  ExpiryQueue<std::string> q;
  q.Insert(30, "x", kT0);
  q.Insert(10, "y", kT0 + absl::Seconds(1));
  q.Insert(20, "z", kT0 + absl::Seconds(2));
  EXPECT_TRUE(q.Expire(kT0).empty());  // strictly before the cutoff
  const auto expired = q.Expire(kT0 + absl::Seconds(2));
  EXPECT_EQ(Ids(expired), (std::vector<uint64_t>{10, 30}));
  EXPECT_EQ(expired[0].second, "y");
  EXPECT_EQ(expired[1].second, "x");
  EXPECT_EQ(q.size(), 1u);
  EXPECT_TRUE(q.Contains(20));
  EXPECT_TRUE(q.Expire(kT0 + absl::Seconds(2)).empty());  // each expires once
  EXPECT_EQ(Ids(q.Expire(kT0 + absl::Hours(1))), (std::vector<uint64_t>{20}));
  EXPECT_TRUE(q.empty());
}

TEST(ExpiryQueueTest, EntriesThatLeftDoNotExpire) {
  ExpiryQueue<std::string> q;
  q.Insert(1, "a", kT0);
  q.Insert(2, "b", kT0);
  q.Insert(3, "c", kT0);
  ASSERT_TRUE(q.Take(1).has_value());
  ASSERT_TRUE(q.Erase(3));
  EXPECT_EQ(Ids(q.Expire(kT0 + absl::Seconds(1))), (std::vector<uint64_t>{2}));
}

// An id taken and held again is a new entry: it expires at its own time.
TEST(ExpiryQueueTest, AnIdHeldAgainExpiresByItsNewInsertionTime) {
  ExpiryQueue<std::string> q;
  q.Insert(5, "old", kT0);
  ASSERT_TRUE(q.Take(5).has_value());
  q.Insert(5, "new", kT0 + absl::Seconds(10));
  EXPECT_TRUE(q.Expire(kT0 + absl::Seconds(5)).empty());
  EXPECT_EQ(*q.Find(5), "new");
  const auto expired = q.Expire(kT0 + absl::Seconds(11));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].second, "new");
}

}  // namespace
}  // namespace windquant::learner
