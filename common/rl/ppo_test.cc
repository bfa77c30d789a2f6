#include "common/rl/ppo.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "common/base/files.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace windquant::rl {
namespace {

using ::testing::HasSubstr;
using ::windquant::testing::StatusIs;
constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

constexpr int64_t kS = 15;
constexpr int64_t kA = 7;
constexpr float kHandTolerance = 1e-5f;  // float32 rounding of hand-computed decimals

// ---------------------------------------------------------------- GAE

// rewards [1, 0, 2, 1], values [0.5, 0.4, 0.3, 0.2], episode ends at t=1,
// bootstrap value 0.6 after t=3, gamma 0.9, lambda 0.8 (so gamma*lambda = 0.72):
//   t=3: delta = 1 + 0.9*0.6 - 0.2 = 1.34              A = 1.34
//   t=2: delta = 2 + 0.9*0.2 - 0.3 = 1.88              A = 1.88 + 0.72*1.34 = 2.8448
//   t=1: done, delta = 0 - 0.4 = -0.4                  A = -0.4
//   t=0: delta = 1 + 0.9*0.4 - 0.5 = 0.86              A = 0.86 + 0.72*(-0.4) = 0.572
//   returns = A + V = [1.072, 0.0, 3.1448, 1.54]
TEST(GaeTest, MatchesHandComputedValuesAcrossAnEpisodeBoundary) {
  auto gae = ComputeGae({1, 0, 2, 1}, {0.5f, 0.4f, 0.3f, 0.2f}, {false, true, false, false},
                        /*last_value=*/0.6f, /*gamma=*/0.9, /*lambda=*/0.8);
  ASSERT_TRUE(gae.ok()) << gae.status();
  const std::vector<float> advantages = {0.572f, -0.4f, 2.8448f, 1.34f};
  const std::vector<float> returns = {1.072f, 0.0f, 3.1448f, 1.54f};
  for (size_t t = 0; t < 4; ++t) {
    EXPECT_NEAR(gae->advantages[t], advantages[t], kHandTolerance) << "t=" << t;
    EXPECT_NEAR(gae->returns[t], returns[t], kHandTolerance) << "t=" << t;
  }
}

// With gamma = lambda = 1 the returns are the undiscounted reward-to-go
// within each episode (+ the bootstrap for the unfinished one):
//   R = [1 + 0, 0, 2 + 1 + 0.6, 1 + 0.6] = [1, 0, 3.6, 1.6]
TEST(GaeTest, GammaLambdaOneGivesMonteCarloReturns) {
  auto gae = ComputeGae({1, 0, 2, 1}, {0.5f, 0.4f, 0.3f, 0.2f}, {false, true, false, false}, 0.6f,
                        1.0, 1.0);
  ASSERT_TRUE(gae.ok());
  const std::vector<float> returns = {1.0f, 0.0f, 3.6f, 1.6f};
  for (size_t t = 0; t < 4; ++t) EXPECT_NEAR(gae->returns[t], returns[t], kHandTolerance);
}

// lambda = 0 gives one-step TD errors as advantages.
TEST(GaeTest, LambdaZeroGivesTdErrors) {
  auto gae = ComputeGae({1, 0, 2, 1}, {0.5f, 0.4f, 0.3f, 0.2f}, {false, true, false, false}, 0.6f,
                        0.9, 0.0);
  ASSERT_TRUE(gae.ok());
  const std::vector<float> deltas = {0.86f, -0.4f, 1.88f, 1.34f};
  for (size_t t = 0; t < 4; ++t) EXPECT_NEAR(gae->advantages[t], deltas[t], kHandTolerance);
}

TEST(GaeTest, RejectsMismatchedLengths) {
  auto gae = ComputeGae({1, 2}, {0.5f}, {false, true}, 0.0f, 0.9, 0.9);
  EXPECT_THAT(gae, StatusIs(kInvalid, "ComputeGae: rewards (2), values (1) and dones (2)"));
}

// ---------------------------------------------------------------- surrogate

// eps = 0.2; per element the objective is min(r*A, clip(r, 0.8, 1.2)*A), loss = -objective:
//   r = 1.5, A = +2: min(3.0, 2.4)   = 2.4   -> loss -2.4 (clipped: no incentive to grow r)
//   r = 1.5, A = -2: min(-3.0, -2.4) = -3.0  -> loss  3.0 (unclipped: pessimistic bound)
//   r = 0.5, A = +2: min(1.0, 1.6)   = 1.0   -> loss -1.0 (unclipped)
//   r = 0.5, A = -2: min(-1.0, -1.6) = -1.6  -> loss  1.6 (clipped)
//   r = 1.1, A = +1: inside the range         -> loss -1.1
//   mean of the five losses = (-2.4 + 3.0 - 1.0 + 1.6 - 1.1) / 5 = 0.02
struct SurrogateCase {
  float ratio, advantage, loss, grad;  // grad = d loss / d log_prob
};

TEST(ClippedSurrogateTest, MatchesHandComputedValuesAndGradients) {
  constexpr double kEps = 0.2;
  // Unclipped: d(-r*A)/d(log r) = -r*A; clipped: 0.
  const std::vector<SurrogateCase> cases = {{1.5f, 2.0f, -2.4f, 0.0f},
                                            {1.5f, -2.0f, 3.0f, 3.0f},
                                            {0.5f, 2.0f, -1.0f, -1.0f},
                                            {0.5f, -2.0f, 1.6f, 0.0f},
                                            {1.1f, 1.0f, -1.1f, -1.1f}};
  for (const SurrogateCase& c : cases) {
    at::Tensor log_probs = at::tensor({std::log(c.ratio)}).set_requires_grad(true);
    at::Tensor loss =
        ClippedSurrogateLoss(log_probs, at::zeros({1}), at::tensor({c.advantage}), kEps);
    loss.backward();
    EXPECT_NEAR(loss.item<float>(), c.loss, kHandTolerance) << "ratio " << c.ratio;
    EXPECT_NEAR(log_probs.grad().item<float>(), c.grad, kHandTolerance) << "ratio " << c.ratio;
  }
  // All five at once: the mean, with old log-probs that are not zero.
  std::vector<float> log_new, log_old, adv;
  for (const SurrogateCase& c : cases) {
    log_old.push_back(-1.3f);
    log_new.push_back(-1.3f + std::log(c.ratio));
    adv.push_back(c.advantage);
  }
  at::Tensor loss =
      ClippedSurrogateLoss(at::tensor(log_new), at::tensor(log_old), at::tensor(adv), kEps);
  EXPECT_NEAR(loss.item<float>(), 0.02f, kHandTolerance);
}

// The settings the learner tests below were written with (rl's own PPO
// defaults before the run config's ppo section became the one PpoOptions).
PpoOptions TestConfig() {
  PpoOptions c;
  c.gamma = 0.99;
  c.minibatch_size = 64;
  return c;
}

// ---------------------------------------------------------------- learner

// Random complete episodes (states, masks, actions drawn by the learner's
// current policy so the log-probs are consistent), tagged with `version`.
std::vector<Transition> RandomEpisodes(PpoLearner& learner, int episodes, int steps,
                                       int64_t version, int64_t first_id, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  at::Generator gen = MakeGenerator(seed);
  std::vector<Transition> out;
  for (int e = 0; e < episodes; ++e) {
    for (int s = 0; s < steps; ++s) {
      Transition t;
      for (int64_t k = 0; k < kS; ++k) t.state.push_back(unit(rng));
      t.mask.assign(kA, 1);
      t.mask[rng() % kA] = 0;
      at::Tensor state = at::tensor(t.state).reshape({1, kS});
      at::Tensor mask = at::ones({1, kA}, at::kBool);
      for (int64_t k = 0; k < kA; ++k) mask[0][k] = t.mask[k] != 0;
      auto act = learner.policy().Act(state, mask, gen, false);
      EXPECT_TRUE(act.ok());
      t.action = act->actions[0].item<int64_t>();
      t.log_prob = act->log_probs[0].item<float>();
      t.value = act->values[0].item<float>();
      t.reward = t.action == 3 ? 1.0f : 0.0f;
      t.done = s + 1 == steps;
      t.policy_version = version;
      t.episode_id = first_id + e;
      t.step = s;
      out.push_back(std::move(t));
    }
  }
  return out;
}

class PpoLearnerTest : public ::testing::Test {
 protected:
  void SetUp() override { at::set_num_threads(1); }
  static std::unique_ptr<PpoLearner> Make(const PpoOptions& config, uint64_t init_seed = 0,
                                          uint64_t shuffle_seed = 0) {
    PolicyOptions options;
    options.init_seed = init_seed;
    auto learner = PpoLearner::Create(options, config, shuffle_seed);
    EXPECT_TRUE(learner.ok()) << learner.status();
    return std::move(learner).value();
  }
};

TEST_F(PpoLearnerTest, UpdateReportsStatsAndIncrementsVersion) {
  PpoOptions config = TestConfig();
  config.minibatch_size = 16;
  config.epochs = 3;
  auto learner = Make(config);
  const std::string before = learner->Snapshot().sha256;
  auto stats = learner->Update(RandomEpisodes(*learner, 8, 5, 0, 0, 1));
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->samples_used, 40);
  EXPECT_EQ(stats->samples_dropped_stale, 0);
  EXPECT_EQ(stats->minibatches, 3 * 3);  // ceil(40 / 16) per epoch
  EXPECT_EQ(stats->version, 1);
  EXPECT_EQ(learner->version(), 1);
  EXPECT_EQ(learner->Snapshot().version, 1);
  EXPECT_NE(learner->Snapshot().sha256, before);
  EXPECT_GT(stats->entropy, 0.0);
  EXPECT_LE(stats->entropy, std::log(6.0) + 1e-6);  // 6 allowed actions per state
  EXPECT_GE(stats->approx_kl, 0.0);
  EXPECT_GE(stats->clip_fraction, 0.0);
  EXPECT_LE(stats->clip_fraction, 1.0);
  EXPECT_GT(stats->value_loss, 0.0);
  EXPECT_TRUE(std::isfinite(stats->policy_loss));
}

TEST_F(PpoLearnerTest, DropsTransitionsOlderThanMaxPolicyLag) {
  PpoOptions config = TestConfig();
  config.max_policy_lag = 1;
  auto learner = Make(config);
  ASSERT_TRUE(learner->Update(RandomEpisodes(*learner, 2, 3, 0, 0, 1)).ok());
  ASSERT_TRUE(learner->Update(RandomEpisodes(*learner, 2, 3, 1, 0, 2)).ok());
  ASSERT_EQ(learner->version(), 2);

  // Versions 0, 1, 2, 2 at learner version 2 with lag 1: version 0 is stale.
  std::vector<Transition> batch;
  for (int64_t v : {0, 1, 2, 2}) {
    auto episode = RandomEpisodes(*learner, 1, 3, v, 100 + static_cast<int64_t>(batch.size()),
                                  10 + batch.size());
    batch.insert(batch.end(), episode.begin(), episode.end());
  }
  auto stats = learner->Update(batch);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->samples_dropped_stale, 3);
  EXPECT_EQ(stats->samples_used, 9);
  EXPECT_EQ(learner->version(), 3);

  // Everything stale: no step, no version change, parameters untouched.
  const std::string before = learner->Snapshot().sha256;
  auto all_stale = learner->Update(RandomEpisodes(*learner, 3, 2, 1, 200, 20));
  ASSERT_TRUE(all_stale.ok());
  EXPECT_EQ(all_stale->samples_used, 0);
  EXPECT_EQ(all_stale->samples_dropped_stale, 6);
  EXPECT_EQ(all_stale->minibatches, 0);
  EXPECT_EQ(learner->version(), 3);
  EXPECT_EQ(learner->Snapshot().sha256, before);
}

TEST_F(PpoLearnerTest, RejectsMalformedBatchesWithoutChangingState) {
  auto learner = Make(TestConfig());
  const std::string before = learner->Snapshot().sha256;
  auto good = RandomEpisodes(*learner, 2, 3, 0, 0, 1);

  auto future = good;
  future[4].policy_version = 1;
  EXPECT_THAT(learner->Update(future), StatusIs(kInvalid, "batch[4].policy_version"));

  auto no_done = good;
  no_done[2].done = false;
  EXPECT_THAT(learner->Update(no_done), StatusIs(kInvalid, "batch[2].done"));

  auto early_done = good;
  early_done[3].done = true;
  EXPECT_THAT(learner->Update(early_done), StatusIs(kInvalid, "batch[3].done"));

  auto gap = good;
  gap.erase(gap.begin() + 1);
  EXPECT_THAT(learner->Update(gap), StatusIs(kInvalid, ".step: episode"));

  auto masked = good;
  masked[1].mask[masked[1].action] = 0;
  EXPECT_THAT(learner->Update(masked), StatusIs(kInvalid, "batch[1].action: is masked"));

  auto short_state = good;
  short_state[0].state.pop_back();
  EXPECT_THAT(learner->Update(short_state), StatusIs(kInvalid, "batch[0].state"));

  EXPECT_EQ(learner->version(), 0);
  EXPECT_EQ(learner->Snapshot().sha256, before);

  // Shuffled order is fine: episodes are regrouped by id and step.
  auto shuffled = good;
  std::swap(shuffled[0], shuffled[5]);
  std::swap(shuffled[1], shuffled[3]);
  EXPECT_TRUE(learner->Update(shuffled).ok());
}

TEST_F(PpoLearnerTest, SavedStateResumesBitIdentically) {
  PpoOptions config = TestConfig();
  config.minibatch_size = 8;
  constexpr uint64_t kShuffleSeed = 5;
  auto a = Make(config, /*init_seed=*/1, kShuffleSeed);
  auto b1 = RandomEpisodes(*a, 4, 5, 0, 0, 1);
  ASSERT_TRUE(a->Update(b1).ok());
  auto state = a->SaveState();
  ASSERT_TRUE(state.ok()) << state.status();

  // The shuffle RNG state must come from the saved state, not seed 99.
  auto b = Make(config, /*init_seed=*/2, /*shuffle_seed=*/99);
  ASSERT_TRUE(b->LoadState(*state).ok());
  EXPECT_EQ(b->version(), 1);
  EXPECT_EQ(b->Snapshot().bytes, a->Snapshot().bytes);

  auto b2 = RandomEpisodes(*a, 4, 5, 1, 10, 2);
  auto sa = a->Update(b2);
  auto sb = b->Update(b2);
  ASSERT_TRUE(sa.ok() && sb.ok());
  EXPECT_EQ(sa->policy_loss, sb->policy_loss);
  EXPECT_EQ(sa->value_loss, sb->value_loss);
  EXPECT_EQ(sa->approx_kl, sb->approx_kl);
  EXPECT_EQ(a->Snapshot().sha256, b->Snapshot().sha256);

  // A learner with the same parameters but fresh Adam moments and shuffle
  // state diverges, so the comparison above can fail.
  PolicySnapshot after_b1;
  {
    auto tmp = Make(config, 1, kShuffleSeed);
    ASSERT_TRUE(tmp->LoadState(*state).ok());
    after_b1 = tmp->Snapshot();
  }
  auto d = Make(config, 1, kShuffleSeed);
  ASSERT_TRUE(d->policy().LoadSnapshot(after_b1).ok());
  auto sd = d->Update(b2);
  ASSERT_TRUE(sd.ok());
  EXPECT_NE(d->Snapshot().sha256, a->Snapshot().sha256);
}

TEST_F(PpoLearnerTest, StateFileRoundTripAndCorruption) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = tmp ? tmp : ::testing::TempDir();
  const std::string path = dir + "/wq_rl_ppo_test_state.bin";
  auto a = Make(TestConfig(), 1);
  ASSERT_TRUE(a->Update(RandomEpisodes(*a, 2, 4, 0, 0, 3)).ok());
  ASSERT_TRUE(a->SaveStateToFile(path).ok());
  auto b = Make(TestConfig(), 2);
  ASSERT_TRUE(b->LoadStateFromFile(path).ok());
  EXPECT_EQ(b->Snapshot().sha256, a->Snapshot().sha256);
  EXPECT_EQ(b->version(), 1);

  auto bytes = base::ReadFile(path);
  ASSERT_TRUE(bytes.ok());
  std::string corrupt = *bytes;
  corrupt[corrupt.size() - 10] ^= 0x40;
  EXPECT_THAT(b->LoadState(corrupt),
              StatusIs(absl::StatusCode::kDataLoss, "learner state: sha256 does not match"));
  EXPECT_THAT(b->LoadState("nope"), StatusIs(kInvalid, "learner state: bad magic"));
  EXPECT_THAT(b->LoadStateFromFile(dir + "/does_not_exist.bin"),
              StatusIs(absl::StatusCode::kNotFound, "does_not_exist.bin: no such file"));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace windquant::rl
