// RolloutLoop against a fake of its peer (LearnerClient): episodes go to the
// learner (which sends their plans to the evaluator), per policy version;
// refused (stale) episodes are not counted as sent; a learner that comes back without the unit
// table gets the actor's part again and a new subscription; the run's end stops the loop; Stop()
// returns while the learner is down.
#include "actor/rollout_loop.h"

#include <cmath>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/config/run_config.h"
#include "common/rl/policy.h"
#include "common/rl/run_policy.h"
#include "common/testing/synthetic_table.h"
#include "gtest/gtest.h"

namespace windquant::actor {
namespace {

constexpr absl::Duration kWait = absl::Seconds(60);
constexpr int kUnits = 14;

// The learner's side: a policy stream that stays open until EndStreams (then
// UNAVAILABLE "Socket closed", as the stream of a learner that died ends for
// the client; OK once the run is done) or Cancel.
class FakeLearner final : public LearnerClient {
 public:
  explicit FakeLearner(const config::RunConfig& config)
      : table_(testing::SyntheticTable(kUnits, 7)) {
    auto policy = rl::Policy::Create(rl::RunPolicyOptions(config.ppo, config.training.seed));
    EXPECT_TRUE(policy.ok()) << policy.status();
    policy_ = *std::move(policy);
    Publish(1);
  }

  absl::StatusOr<v1::RunStatus> GetRunStatus(absl::Duration) override {
    absl::MutexLock lock(&mu_);
    ++status_calls_;
    if (!up_) return absl::UnavailableError("learner down");
    v1::RunStatus s;
    s.set_done(done_);
    s.set_unit_table_complete(table_complete_);
    return s;
  }
  absl::StatusOr<plan::UnitTable> GetUnitTable(absl::Duration) override {
    absl::MutexLock lock(&mu_);
    if (!up_ || !table_complete_) return absl::UnavailableError("unit table incomplete");
    return table_;
  }
  absl::Status WatchPolicy(const std::string& actor_id, int64_t known_version,
                           const SnapshotFn& on_snapshot) override {
    EXPECT_EQ(actor_id, "actor-s0-r0");
    EXPECT_EQ(known_version, -1) << "every subscription asks for the current snapshot";
    int generation = 0;
    {
      absl::MutexLock lock(&mu_);
      ++watches_;
      generation = generation_;
    }
    int64_t sent = -1;
    while (true) {
      v1::PolicySnapshot snap;
      {
        absl::MutexLock lock(&mu_);
        auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return cancelled_ || generation_ != generation || snapshot_.version() != sent;
        };
        mu_.Await(absl::Condition(&changed));
        if (cancelled_) return absl::CancelledError("cancelled");
        if (generation_ != generation) {
          return done_ ? absl::OkStatus() : absl::UnavailableError("Socket closed");
        }
        sent = snapshot_.version();
        snap = snapshot_;
      }
      on_snapshot(snap);  // outside the lock: the loop takes its own
    }
  }
  absl::StatusOr<v1::TransitionAck> SendTransitions(const v1::TransitionBatch& batch) override {
    absl::MutexLock lock(&mu_);
    batches_.push_back(batch);
    v1::TransitionAck ack;
    ack.set_episode_id(batch.episode_id());
    ack.set_accepted(accept_);
    if (accept_) accepted_.insert(batch.episode_id());
    if (accept_ && !batch.screened_out()) ++measured_;
    return ack;
  }
  void CloseTransitions() override {
    absl::MutexLock lock(&mu_);
    ++closes_;
  }
  void Cancel() override {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
  }

  // A new policy version on the open stream.
  void Publish(int64_t version) {
    absl::MutexLock lock(&mu_);
    policy_->set_version(version);
    const rl::PolicySnapshot s = policy_->Snapshot();
    snapshot_.set_version(s.version);
    snapshot_.set_parameters(s.bytes);
    snapshot_.set_sha256(s.sha256);
    snapshot_.set_target_bits(3.0);
  }
  // The reward model the next snapshots carry.
  void SetRewardModel(const rl::RewardModel& model) {
    absl::MutexLock lock(&mu_);
    model.ToProto(snapshot_.mutable_reward_model());
  }
  // The learner process ends (its streams with it); it comes back at once,
  // without the unit table when `table` is false.
  void Restart(bool table) {
    absl::MutexLock lock(&mu_);
    table_complete_ = table;
    ++generation_;
  }
  void Finish() {
    absl::MutexLock lock(&mu_);
    done_ = true;
    ++generation_;
  }
  void set_up(bool up) {
    absl::MutexLock lock(&mu_);
    up_ = up;
  }
  void set_accept(bool accept) {
    absl::MutexLock lock(&mu_);
    accept_ = accept;
  }
  void set_table_complete(bool complete) {
    absl::MutexLock lock(&mu_);
    table_complete_ = complete;
  }
  // Waits until `n` episodes for measurement (not screened out) were accepted.
  bool WaitForMeasured(int n) {
    return WaitFor([n](FakeLearner& l) { return l.measured_ >= n; });
  }
  // Waits until pred() holds (under the lock); false after kWait.
  template <typename Pred>
  bool WaitFor(Pred pred) {
    absl::MutexLock lock(&mu_);
    auto cond = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return pred(*this); };
    return mu_.AwaitWithTimeout(absl::Condition(&cond), kWait);
  }

  absl::Mutex mu_;
  std::vector<v1::TransitionBatch> batches_ ABSL_GUARDED_BY(mu_);
  std::set<uint64_t> accepted_ ABSL_GUARDED_BY(mu_);
  int measured_ ABSL_GUARDED_BY(mu_) = 0;  // accepted, not screened out
  int watches_ ABSL_GUARDED_BY(mu_) = 0;
  int status_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int closes_ ABSL_GUARDED_BY(mu_) = 0;

 private:
  const plan::UnitTable table_;
  std::unique_ptr<rl::Policy> policy_ ABSL_GUARDED_BY(mu_);
  v1::PolicySnapshot snapshot_ ABSL_GUARDED_BY(mu_);
  bool up_ ABSL_GUARDED_BY(mu_) = true;
  bool table_complete_ ABSL_GUARDED_BY(mu_) = true;
  bool accept_ ABSL_GUARDED_BY(mu_) = true;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  int generation_ ABSL_GUARDED_BY(mu_) = 0;
};

struct Loop {
  explicit Loop(std::function<absl::Status()> register_table = nullptr, int screen_samples = 0,
                int64_t screen_batch_steps = int64_t{1} << 19) {
    config.training.seed = 11;
    config.training.screen_samples = screen_samples;
    auto l = std::make_unique<FakeLearner>(config);
    learner = l.get();
    RolloutLoopOptions o;
    o.policy = rl::RunPolicyOptions(config.ppo, config.training.seed);
    o.env = config.env;
    o.seed = config.training.seed;
    o.screen_samples = config::ScreenSamplesPerEpisode(config.training);
    o.actor_id = "actor-s0-r0";
    o.envs = 2;
    o.episodes_per_version = 2;
    o.deadline = absl::Seconds(5);
    o.register_table = std::move(register_table);
    o.screen_batch_steps = screen_batch_steps;
    loop = std::make_unique<RolloutLoop>(o, std::move(l));
  }
  config::RunConfig config;
  FakeLearner* learner;
  std::unique_ptr<RolloutLoop> loop;
};

TEST(RolloutLoopTest, EpisodesGoToTheLearnerPerVersion) {
  Loop t;
  ASSERT_TRUE(t.loop->Start().ok());
  ASSERT_TRUE(t.learner->WaitForMeasured(2));
  t.learner->Publish(2);  // the next version's share
  ASSERT_TRUE(t.learner->WaitForMeasured(4));
  t.loop->Stop();
  absl::MutexLock ll(&t.learner->mu_);
  // Two episodes per version: exactly four were produced, two at each version.
  ASSERT_EQ(t.learner->batches_.size(), 4u);
  EXPECT_EQ(t.loop->episodes_sent(), 4);
  std::set<uint64_t> ids;
  for (size_t i = 0; i < 4; ++i) {
    const v1::TransitionBatch& b = t.learner->batches_[i];
    EXPECT_EQ(b.policy_version(), i < 2 ? 1 : 2) << "episode " << i;
    EXPECT_EQ(b.actor_id(), "actor-s0-r0");
    EXPECT_EQ(b.actions_size(), kUnits) << "one action per unit";
    ids.insert(b.episode_id());
    EXPECT_EQ(b.plan().actions_size(), kUnits) << "the episode carries its plan";
  }
  EXPECT_EQ(ids.size(), 4u) << "episode ids are unique";
  EXPECT_EQ(t.learner->closes_, 1) << "the transitions stream is closed on Stop";
}

// The preferred action of unit u in the screening test's reward model.
int Preferred(int u) { return u % 2 == 0 ? 4 : 5; }

int PreferredCount(const v1::TransitionBatch& b) {
  int n = 0;
  for (int u = 0; u < b.actions_size(); ++u) n += static_cast<int>(b.actions(u)) == Preferred(u);
  return n;
}

// Sends two episodes at version 1 (no model) and two at version 2 (a model
// that prefers Preferred(u)); the mean count of preferred actions of each pair.
std::pair<double, double> PreferredBeforeAndAfterTheModel(Loop& t) {
  EXPECT_TRUE(t.loop->Start().ok());
  EXPECT_TRUE(t.learner->WaitForMeasured(2));
  rl::RewardModel model;
  model.plans = 10;
  model.correction.assign(kUnits * plan::kNumActions, 0.0f);
  for (int u = 0; u < kUnits; ++u) model.correction[u * plan::kNumActions + Preferred(u)] = -1;
  t.learner->SetRewardModel(model);
  t.learner->Publish(2);
  EXPECT_TRUE(t.learner->WaitForMeasured(4));
  t.loop->Stop();
  absl::MutexLock ll(&t.learner->mu_);
  // The learner gets every sample: at version 1 (no model) the two drawn, at
  // version 2 all 2 x screen_samples, of which the two measured ones are not
  // screened out and every other one carries its predicted log perplexity.
  const auto& all = t.learner->batches_;
  EXPECT_EQ(all.size(), 2u + 2u * static_cast<size_t>(t.config.training.screen_samples));
  std::vector<v1::TransitionBatch> b;
  std::set<uint64_t> ids;
  for (const v1::TransitionBatch& x : all) {
    ids.insert(x.episode_id());
    if (!x.screened_out()) {
      b.push_back(x);
      continue;
    }
    EXPECT_EQ(x.policy_version(), 2) << "screened out only with a model";
    EXPECT_TRUE(std::isfinite(x.predicted_log_ppl()));
    EXPECT_LE(PreferredCount(x), kUnits);
  }
  EXPECT_EQ(ids.size(), all.size()) << "every sample has an id of its own";
  EXPECT_EQ(b.size(), 4u) << "still two measured episodes per version";
  EXPECT_EQ(t.loop->episodes_sent(), 4) << "only the measured ones count as sent";
  if (b.size() < 4) return {0, 0};
  EXPECT_EQ(b[2].policy_version(), 2);
  return {(PreferredCount(b[0]) + PreferredCount(b[1])) / 2.0,
          (PreferredCount(b[2]) + PreferredCount(b[3])) / 2.0};
}

TEST(RolloutLoopTest, WithARewardModelTheBestPredictedOfTheSamplesAreSent) {
  // Of 14 units a drawn sample has ~2 preferred actions (pairs drawn at
  // version 1 with seeds 11-15: 0-5, mean 1.95; without screening the pair
  // sent at version 2 had 1.5);
  // the best 2 of 128 (64 x 2 envs) 5-6.5, in one batch and in batches of 4
  // episodes (56 steps) alike.
  for (const int64_t batch_steps : {int64_t{1} << 19, int64_t{4 * kUnits}}) {
    Loop t(nullptr, /*screen_samples=*/64, batch_steps);
    const auto [drawn, screened] = PreferredBeforeAndAfterTheModel(t);
    EXPECT_GE(screened, 4.5) << "drawn " << drawn << ", screened " << screened << " (batches of "
                             << batch_steps << " steps)";
  }
}

TEST(RolloutLoopTest, EpisodesTheLearnerRefusesAreNotCountedAsSent) {
  Loop t;
  t.learner->set_accept(false);  // stale: the learner is at a newer version
  ASSERT_TRUE(t.loop->Start().ok());
  ASSERT_TRUE(t.learner->WaitFor([](FakeLearner& l) { return l.batches_.size() >= 2; }));
  t.learner->set_accept(true);
  t.learner->Publish(2);
  ASSERT_TRUE(t.learner->WaitForMeasured(2));
  t.loop->Stop();
  absl::MutexLock ll(&t.learner->mu_);
  EXPECT_EQ(t.learner->batches_.size(), 4u) << "two refused, then two accepted";
  EXPECT_EQ(t.learner->accepted_.size(), 2u);
  EXPECT_EQ(t.loop->episodes_sent(), 2);
}

TEST(RolloutLoopTest, RegistersItsTableAgainWithALearnerThatCameBackWithoutIt) {
  absl::Mutex mu;
  int registrations = 0;
  FakeLearner* learner = nullptr;
  Loop t([&]() {
    absl::MutexLock lock(&mu);
    ++registrations;
    learner->set_table_complete(true);  // the learner has it now
    return absl::OkStatus();
  });
  learner = t.learner;
  ASSERT_TRUE(t.loop->Start().ok());
  // Subscribed to a learner that has the table: nothing to register.
  ASSERT_TRUE(t.learner->WaitForMeasured(2));
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(registrations, 0);
  }
  // The learner restarts on an empty disk: the stream ends, the new one has no table.
  t.learner->Restart(/*table=*/false);
  ASSERT_TRUE(t.learner->WaitFor([](FakeLearner& l) { return l.watches_ >= 2; }))
      << "the actor never subscribed to the restarted learner";
  // The new subscription starts a fresh share of episodes at the same version.
  ASSERT_TRUE(t.learner->WaitForMeasured(4));
  t.loop->Stop();
  absl::MutexLock lock(&mu);
  EXPECT_EQ(registrations, 1) << "registered once, before subscribing again";
}

TEST(RolloutLoopTest, TheRunsEndStopsTheLoop) {
  Loop t;
  ASSERT_TRUE(t.loop->Start().ok());
  ASSERT_TRUE(t.learner->WaitForMeasured(2));
  t.learner->Finish();
  // Both threads end by themselves: the rollout thread closes its stream.
  EXPECT_TRUE(t.learner->WaitFor([](FakeLearner& l) { return l.closes_ == 1; }));
  absl::MutexLock lock(&t.learner->mu_);
  EXPECT_EQ(t.learner->watches_, 1) << "no new subscription after the run is done";
}

TEST(RolloutLoopTest, StopReturnsWhileTheLearnerIsDown) {
  Loop t;
  t.learner->set_up(false);
  ASSERT_TRUE(t.loop->Start().ok());
  ASSERT_TRUE(t.learner->WaitFor([](FakeLearner& l) { return l.status_calls_ >= 2; }))
      << "the loop keeps asking a learner that is down";
  t.loop->Stop();  // returns: the loop's sleeps end on Stop
  absl::MutexLock lock(&t.learner->mu_);
  EXPECT_EQ(t.learner->watches_, 0);
  EXPECT_TRUE(t.learner->batches_.empty());
}

}  // namespace
}  // namespace windquant::actor
