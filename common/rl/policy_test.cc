#include "common/rl/policy.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include <cmath>
#include <memory>
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

class PolicyTest : public ::testing::Test {
 protected:
  void SetUp() override { at::set_num_threads(1); }

  static std::unique_ptr<Policy> Make(uint64_t seed) {
    PolicyOptions options;
    options.init_seed = seed;
    auto policy = Policy::Create(options);
    EXPECT_TRUE(policy.ok()) << policy.status();
    return std::move(policy).value();
  }

  static at::Tensor States(int64_t n, uint64_t seed) {
    at::Generator gen = MakeGenerator(seed);
    return at::randn({n, kS}, gen, at::kFloat);
  }

  // Rows alternate between "allowed {1, 4, 6}" and "all allowed".
  static at::Tensor Masks(int64_t n) {
    at::Tensor masks = at::ones({n, kA}, at::kBool);
    for (int64_t r = 0; r < n; r += 2) {
      for (int64_t a : {0, 2, 3, 5}) masks[r][a] = false;
    }
    return masks;
  }
};

TEST_F(PolicyTest, RejectsBadOptions) {
  PolicyOptions options;
  options.hidden_sizes = {64, 0};
  auto policy = Policy::Create(options);
  EXPECT_THAT(policy, StatusIs(kInvalid, "policy.hidden_sizes[1]"));
  options = PolicyOptions();
  options.num_actions = 1;
  EXPECT_THAT(Policy::Create(options),
              StatusIs(kInvalid, "policy.num_actions: must be at least 2"));
}

TEST_F(PolicyTest, ActValidatesInputs) {
  auto policy = Make(1);
  at::Generator gen = MakeGenerator(0);
  auto wrong_dim = policy->Act(at::zeros({4, kS + 1}), at::ones({4, kA}, at::kBool), gen, false);
  EXPECT_THAT(wrong_dim, StatusIs(kInvalid, "states"));
  at::Tensor masks = at::ones({4, kA}, at::kBool);
  masks[2].fill_(false);
  auto empty_row = policy->Act(at::zeros({4, kS}), masks, gen, false);
  EXPECT_THAT(empty_row, StatusIs(kInvalid, "masks[2]: no action is allowed"));
  auto int_masks = policy->Act(at::zeros({4, kS}), at::ones({4, kA}, at::kInt), gen, false);
  EXPECT_THAT(int_masks, StatusIs(kInvalid, "masks"));
  at::Tensor nan_states = at::zeros({4, kS});
  nan_states[1][3] = NAN;
  EXPECT_THAT(policy->Act(nan_states, at::ones({4, kA}, at::kBool), gen, false),
              StatusIs(kInvalid, "states: contains NaN or Inf"));
}

// The actor's head bias is pushed hard towards the masked actions, so an
// implementation that leaked probability through the mask would sample them.
TEST_F(PolicyTest, MaskedActionsHaveZeroProbabilityAndAreNeverSampled) {
  auto policy = Make(2);
  std::vector<at::Tensor> params = policy->Parameters();
  // Actor: Linear(15,64) Tanh Linear(64,64) Tanh Linear(64,7) -> params[5] is the head bias.
  ASSERT_EQ(params[5].sizes(), at::IntArrayRef({kA}));
  {
    c10::NoGradGuard no_grad;
    for (int64_t a : {0, 2, 3, 5}) params[5][a] = 30.0f;
  }
  constexpr int64_t kN = 10000;
  at::Tensor states = States(kN, 3);
  at::Tensor masks = Masks(kN);
  auto probs = policy->Probabilities(states, masks);
  ASSERT_TRUE(probs.ok()) << probs.status();
  EXPECT_TRUE(at::equal(probs->masked_select(~masks), at::zeros({kN / 2 * 4})));
  EXPECT_TRUE(at::allclose(probs->sum(1), at::ones({kN}), 0, 1e-5));

  at::Generator gen = MakeGenerator(4);
  auto act = policy->Act(states, masks, gen, /*deterministic=*/false);
  ASSERT_TRUE(act.ok()) << act.status();
  at::Tensor chosen_allowed = masks.gather(1, act->actions.unsqueeze(1));
  EXPECT_TRUE(chosen_allowed.all().item<bool>());
  // The unmasked rows favour the biased actions: sampling does follow the logits.
  at::Tensor odd = act->actions.slice(0, 1, kN, 2);
  const double biased_share =
      (odd.eq(0) | odd.eq(2) | odd.eq(3) | odd.eq(5)).to(at::kFloat).mean().item<double>();
  EXPECT_GT(biased_share, 0.99);
  EXPECT_TRUE(at::isfinite(act->log_probs).all().item<bool>());

  auto greedy = policy->Act(states, masks, gen, /*deterministic=*/true);
  ASSERT_TRUE(greedy.ok());
  EXPECT_TRUE(masks.gather(1, greedy->actions.unsqueeze(1)).all().item<bool>());
}

// Empirical frequencies of 20000 draws from one state match Probabilities.
TEST_F(PolicyTest, SamplingFollowsProbabilities) {
  auto policy = Make(5);
  std::vector<at::Tensor> params = policy->Parameters();
  {
    c10::NoGradGuard no_grad;
    params[5].copy_(at::tensor({0.0f, 1.0f, 0.0f, 0.0f, -1.0f, 0.0f, 0.5f}));
  }
  constexpr int64_t kN = 20000;
  constexpr double kFrequencyTolerance = 0.015;  // > 4 sigma for p ~ 0.5 at n = 20000
  at::Tensor states = States(1, 6).expand({kN, kS}).contiguous();
  at::Tensor masks = Masks(2).slice(0, 0, 1).expand({kN, kA}).contiguous();
  at::Generator gen = MakeGenerator(7);
  auto act = policy->Act(states, masks, gen, false);
  auto probs = policy->Probabilities(states.slice(0, 0, 1), masks.slice(0, 0, 1));
  ASSERT_TRUE(act.ok() && probs.ok());
  at::Tensor counts = at::bincount(act->actions, {}, kA).to(at::kDouble) / kN;
  for (int64_t a = 0; a < kA; ++a) {
    EXPECT_NEAR(counts[a].item<double>(), (*probs)[0][a].item<double>(), kFrequencyTolerance)
        << "action " << a;
  }
  EXPECT_EQ(counts[0].item<double>(), 0.0);
}

TEST_F(PolicyTest, SeededSamplingIsReproducible) {
  auto policy = Make(8);
  at::Tensor states = States(256, 9);
  at::Tensor masks = Masks(256);
  at::Generator g1 = MakeGenerator(10), g2 = MakeGenerator(10), g3 = MakeGenerator(11);
  auto a1 = policy->Act(states, masks, g1, false);
  auto a2 = policy->Act(states, masks, g2, false);
  auto a3 = policy->Act(states, masks, g3, false);
  ASSERT_TRUE(a1.ok() && a2.ok() && a3.ok());
  EXPECT_TRUE(at::equal(a1->actions, a2->actions));
  EXPECT_FALSE(at::equal(a1->actions, a3->actions));
}

TEST_F(PolicyTest, EvaluateAgreesWithActAndComputesMaskedEntropy) {
  auto policy = Make(12);
  at::Tensor states = States(64, 13);
  at::Tensor masks = Masks(64);
  at::Generator gen = MakeGenerator(14);
  auto act = policy->Act(states, masks, gen, false);
  ASSERT_TRUE(act.ok());
  auto ev = policy->Evaluate(states, masks, act->actions);
  ASSERT_TRUE(ev.ok()) << ev.status();
  EXPECT_TRUE(at::allclose(ev->log_probs.detach(), act->log_probs, 0, 1e-6));
  EXPECT_TRUE(at::allclose(ev->values.detach(), act->values, 0, 1e-6));
  // Reference entropy over the allowed actions only, from the probabilities.
  auto probs = policy->Probabilities(states, masks);
  ASSERT_TRUE(probs.ok());
  at::Tensor p = probs->to(at::kDouble);
  at::Tensor reference = -(p * at::log(p.clamp_min(1e-300))).sum(1);
  EXPECT_TRUE(at::allclose(ev->entropy.detach().to(at::kDouble), reference, 0, 1e-5));
  // Rows with 3 allowed actions have entropy <= log 3, and near-uniform init is close to it.
  EXPECT_LE(ev->entropy[0].item<double>(), std::log(3.0) + 1e-6);
  EXPECT_GT(ev->entropy[0].item<double>(), std::log(3.0) - 0.01);
  // Gradients reach the parameters and are finite.
  (ev->log_probs.sum() + ev->entropy.sum() + ev->values.sum()).backward();
  for (const at::Tensor& param : policy->Parameters()) {
    ASSERT_TRUE(param.grad().defined());
    EXPECT_TRUE(at::isfinite(param.grad()).all().item<bool>());
  }
}

TEST_F(PolicyTest, SingleAllowedActionHasLogProbZeroAndNoEntropy) {
  auto policy = Make(15);
  at::Tensor masks = at::zeros({3, kA}, at::kBool);
  masks.index_put_({at::indexing::Slice(), 4}, true);
  auto ev = policy->Evaluate(States(3, 16), masks, at::full({3}, 4, at::kLong));
  ASSERT_TRUE(ev.ok());
  EXPECT_TRUE(at::equal(ev->log_probs.detach(), at::zeros({3})));
  EXPECT_TRUE(at::equal(ev->entropy.detach(), at::zeros({3})));
}

TEST_F(PolicyTest, EvaluateRejectsMaskedAndOutOfRangeActions) {
  auto policy = Make(17);
  at::Tensor masks = Masks(4);  // row 0 disallows action 0
  auto masked = policy->Evaluate(States(4, 18), masks, at::tensor({0, 1, 1, 1}, at::kLong));
  EXPECT_THAT(masked, StatusIs(kInvalid, "actions[0]"));
  auto range = policy->Evaluate(States(4, 18), masks, at::tensor({1, 7, 1, 1}, at::kLong));
  EXPECT_THAT(range, StatusIs(kInvalid, "actions[1]: 7 is not in [0, 7)"));
}

TEST_F(PolicyTest, SnapshotRoundTripReproducesOutputs) {
  auto source = Make(20);
  auto target = Make(21);
  source->set_version(42);
  at::Tensor states = States(128, 22);
  at::Tensor masks = Masks(128);
  auto p_source = source->Probabilities(states, masks);
  auto p_before = target->Probabilities(states, masks);
  ASSERT_TRUE(p_source.ok() && p_before.ok());
  ASSERT_FALSE(at::equal(*p_source, *p_before));  // different seeds, different policies

  PolicySnapshot snapshot = source->Snapshot();
  EXPECT_EQ(snapshot.version, 42);
  EXPECT_EQ(snapshot.sha256.size(), 64u);
  auto decoded = DecodePolicySnapshot(EncodePolicySnapshot(snapshot));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_TRUE(target->LoadSnapshot(*decoded).ok());
  EXPECT_EQ(target->version(), 42);
  auto p_after = target->Probabilities(states, masks);
  ASSERT_TRUE(p_after.ok());
  EXPECT_TRUE(at::equal(*p_source, *p_after));
  at::Generator g1 = MakeGenerator(23), g2 = MakeGenerator(23);
  auto a1 = source->Act(states, masks, g1, false);
  auto a2 = target->Act(states, masks, g2, false);
  ASSERT_TRUE(a1.ok() && a2.ok());
  EXPECT_TRUE(at::equal(a1->actions, a2->actions));
  EXPECT_TRUE(at::equal(a1->log_probs, a2->log_probs));
  EXPECT_TRUE(at::equal(a1->values, a2->values));
  EXPECT_EQ(target->Snapshot().bytes, snapshot.bytes);
}

TEST_F(PolicyTest, SameSeedGivesSameBytes) {
  EXPECT_EQ(Make(30)->Snapshot().sha256, Make(30)->Snapshot().sha256);
  EXPECT_NE(Make(30)->Snapshot().sha256, Make(31)->Snapshot().sha256);
}

TEST_F(PolicyTest, LoadSnapshotRejectsCorruptionAndOtherArchitectures) {
  auto policy = Make(40);
  const std::string before = policy->Snapshot().bytes;
  PolicySnapshot snapshot = Make(41)->Snapshot();

  PolicySnapshot flipped = snapshot;
  flipped.bytes[flipped.bytes.size() / 2] ^= 0x01;
  EXPECT_THAT(policy->LoadSnapshot(flipped),
              StatusIs(absl::StatusCode::kDataLoss, "policy snapshot: sha256 does not match"));

  PolicySnapshot truncated = snapshot;
  truncated.bytes.resize(truncated.bytes.size() - 4);
  truncated.sha256 = base::Sha256Hex(truncated.bytes);
  EXPECT_THAT(policy->LoadSnapshot(truncated), StatusIs(kInvalid, "policy snapshot: "));

  PolicyOptions wide;
  wide.hidden_sizes = {32, 32};
  auto other = Policy::Create(wide);
  ASSERT_TRUE(other.ok());
  absl::Status mismatch = policy->LoadSnapshot((*other)->Snapshot());
  EXPECT_THAT(mismatch, StatusIs(kInvalid, "policy snapshot: architecture"));

  std::string encoded = EncodePolicySnapshot(snapshot);
  encoded.back() ^= 0x01;
  EXPECT_THAT(DecodePolicySnapshot(encoded),
              StatusIs(absl::StatusCode::kDataLoss, "policy snapshot: sha256 does not match"));
  EXPECT_THAT(DecodePolicySnapshot("junk"), StatusIs(kInvalid, "policy snapshot: bad magic"));
  EXPECT_EQ(policy->Snapshot().bytes, before);  // failed loads changed nothing
}

}  // namespace
}  // namespace windquant::rl
