#include "common/rl/plan_cache.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace windquant::rl {
namespace {

PlanEvaluation WithPpl(double ppl) {
  PlanEvaluation e;
  e.eval_ppl = ppl;
  return e;
}

TEST(PlanCacheTest, AnswersIdenticalPlansOnlyAndCountsHitsAndMisses) {
  PlanCache cache;
  EXPECT_FALSE(cache.Find("m", {1, 2}).has_value());
  const PlanEvaluation stored = cache.Insert("m", {1, 2}, WithPpl(5.0));
  EXPECT_FALSE(stored.cached);
  auto hit = cache.Find("m", {1, 2});
  ASSERT_TRUE(hit.has_value());
  EXPECT_TRUE(hit->cached);
  EXPECT_EQ(hit->eval_ppl, 5.0);
  // Other actions or another model's fingerprint are other plans.
  EXPECT_FALSE(cache.Find("m", {2, 1}).has_value());
  EXPECT_FALSE(cache.Find("other", {1, 2}).has_value());
  EXPECT_FALSE(cache.Find("m", {1, 2, 0}).has_value());
  EXPECT_EQ(cache.hits(), 1);
  EXPECT_EQ(cache.misses(), 1);
  EXPECT_EQ(cache.size(), 1u);
}

TEST(PlanCacheTest, DropsTheOldestPlanPastItsCapacity) {
  PlanCache cache(2);
  cache.Insert("m", {1}, WithPpl(1));
  cache.Insert("m", {2}, WithPpl(2));
  cache.Insert("m", {2}, WithPpl(2.5));  // replaces, does not grow
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.Find("m", {2})->eval_ppl, 2.5);
  cache.Insert("m", {3}, WithPpl(3));
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_FALSE(cache.Find("m", {1}).has_value());
  EXPECT_TRUE(cache.Find("m", {2}).has_value());
  EXPECT_TRUE(cache.Find("m", {3}).has_value());
}

TEST(PlanCacheTest, ZeroCapacityRemembersNothing) {
  PlanCache cache(0);
  EXPECT_FALSE(cache.Insert("m", {1}, WithPpl(1)).cached);
  EXPECT_FALSE(cache.Find("m", {1}).has_value());
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.misses(), 1);
}

TEST(PlanCacheTest, ConcurrentInsertsAndLookupsKeepEveryPlan) {
  PlanCache cache;
  constexpr int kThreads = 4, kPlansEach = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&cache, t] {
      for (int i = 0; i < kPlansEach; ++i) {
        cache.Insert("m", {t, i}, WithPpl(t * 1000 + i));
        cache.Find("m", {t, i});
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(cache.size(), static_cast<size_t>(kThreads * kPlansEach));
  EXPECT_EQ(cache.hits(), kThreads * kPlansEach);
  EXPECT_EQ(cache.Find("m", {3, 199})->eval_ppl, 3199);
}

}  // namespace
}  // namespace windquant::rl
