// Proximal Policy Optimization for the WINDQuant policy (DESIGN.md section 4):
// GAE, the clipped surrogate, value loss, entropy bonus, Adam, minibatch
// epochs with a seeded shuffle, gradient-norm clipping, and a policy-lag
// filter for data produced by old policy snapshots.
//
// Loss minimised per minibatch (one formula, here):
//   ratio_i   = exp(log pi(a_i|s_i) - log_prob_behaviour_i)
//   L_policy  = -mean_i min(ratio_i * A_i, clip(ratio_i, 1 - eps, 1 + eps) * A_i)
//   L_value   = 0.5 * mean_i (V(s_i) - R_i)^2
//   L         = L_policy + value_coef * L_value - entropy_coef * mean_i H(pi(.|s_i))
// with A normalised over the batch ((A - mean) / max(std, 1e-2): the floor
// stops critic noise being blown up once advantages vanish) and R = A + V from
// ComputeGae over V(s) recomputed with the current critic (fresher than the
// behaviour values when data lags the learner).
// Settings: PpoOptions (ppo_options.h), the run config's ppo section as it is
// (its keys validated there); Adam's epsilon is kAdamEps.
#ifndef WINDQUANT_COMMON_RL_PPO_H_
#define WINDQUANT_COMMON_RL_PPO_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/rl/policy.h"
#include "common/rl/ppo_options.h"

namespace windquant::rl {

// Adam's epsilon (not a run-config key).
inline constexpr double kAdamEps = 1e-5;

// One step of one episode, as an actor produced it.
struct Transition {
  std::vector<float> state;    // state_dim numbers
  std::vector<uint8_t> mask;   // num_actions entries, nonzero = allowed
  int64_t action = 0;          // index into the action set; allowed by `mask`
  float reward = 0.0f;         // step reward (+ episode-end reward on the last step)
  bool done = false;           // true exactly on the episode's last step
  float log_prob = 0.0f;       // log pi_behaviour(action | state)
  float value = 0.0f;          // behaviour critic's V(state)
  int64_t policy_version = 0;  // version of the policy that chose `action`
  int64_t episode_id = 0;      // unique per episode within a batch
  int64_t step = 0;            // 0-based position within the episode
};

struct GaeResult {
  std::vector<float> advantages;
  std::vector<float> returns;  // advantages + values: targets for the critic
};

// Generalised advantage estimation over a sequence of steps that may span
// several episodes (done[t] ends one; the next step starts another):
//   delta_t = r_t + gamma * (1 - done_t) * V_{t+1} - V_t,  V_T = last_value
//   A_t     = delta_t + gamma * lambda * (1 - done_t) * A_{t+1}
//   R_t     = A_t + V_t
// Computed in double, returned as float. INVALID_ARGUMENT on size mismatch.
absl::StatusOr<GaeResult> ComputeGae(const std::vector<float>& rewards,
                                     const std::vector<float>& values,
                                     const std::vector<bool>& dones, float last_value, double gamma,
                                     double lambda);

// The clipped surrogate loss L_policy above (a scalar to minimise), over
// float [N] tensors; differentiable in `log_probs`.
at::Tensor ClippedSurrogateLoss(const at::Tensor& log_probs, const at::Tensor& old_log_probs,
                                const at::Tensor& advantages, double clip_ratio);

struct PpoStats {
  // Losses and diagnostics are means over all minibatches of all epochs.
  double policy_loss = 0.0;
  double value_loss = 0.0;
  double entropy = 0.0;
  double approx_kl = 0.0;      // mean of (ratio - 1) - log ratio (k3 estimator)
  double clip_fraction = 0.0;  // share of samples with |ratio - 1| > eps
  double grad_norm = 0.0;      // mean global norm before clipping
  int64_t samples_used = 0;
  int64_t samples_dropped_stale = 0;
  int64_t minibatches = 0;  // optimiser steps taken
  int64_t version = 0;      // learner version after this update
};

// Owns the policy and its Adam optimiser; applies PPO updates to batches of
// complete episodes. Not thread-safe: one caller at a time (the learner's
// update loop); publish Snapshot()s to readers.
class PpoLearner {
 public:
  // `shuffle_seed` seeds the minibatch shuffle. `options` must hold what the
  // run config's validation of the ppo keys allows (common/config); a run
  // config's are. INVALID_ARGUMENT naming the policy option when one is invalid.
  static absl::StatusOr<std::unique_ptr<PpoLearner>> Create(const PolicyOptions& policy_options,
                                                            const PpoOptions& options,
                                                            uint64_t shuffle_seed);
  ~PpoLearner();

  // One PPO update on `batch`: complete episodes, in any order (grouped by
  // episode_id, ordered by step). Transitions with policy_version <
  // version() - max_policy_lag are dropped from the loss (counted in
  // samples_dropped_stale) but still give their rewards to the returns of
  // their episodes' earlier steps. If nothing remains, no step is taken and
  // the version stays; otherwise version() increases by one.
  // INVALID_ARGUMENT naming `batch[i].field` for a malformed transition, an
  // incomplete episode (steps not 0..n-1, done not exactly on the last step)
  // or a version from the future; the learner is unchanged then.
  absl::StatusOr<PpoStats> Update(const std::vector<Transition>& batch);

  Policy& policy() { return *policy_; }
  const Policy& policy() const { return *policy_; }
  const PpoOptions& options() const { return options_; }
  int64_t version() const { return policy_->version(); }
  PolicySnapshot Snapshot() const { return policy_->Snapshot(); }

  // Learner state (policy, optimiser moments, version, shuffle RNG) as bytes;
  // Load restores it into a learner created with the same options.
  absl::StatusOr<std::string> SaveState() const;
  absl::Status LoadState(const std::string& bytes);
  // The same through a file (written atomically). Errors name the path.
  absl::Status SaveStateToFile(const std::string& path) const;
  absl::Status LoadStateFromFile(const std::string& path);

 private:
  struct Impl;
  PpoLearner(const PpoOptions& options, uint64_t shuffle_seed, std::unique_ptr<Policy> policy);

  PpoOptions options_;
  std::unique_ptr<Policy> policy_;
  std::unique_ptr<Impl> impl_;  // optimiser
  std::mt19937_64 rng_;
};

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_PPO_H_
