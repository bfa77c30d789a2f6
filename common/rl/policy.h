// Actor-critic policy for the WINDQuant decision process (DESIGN.md section 4).
//
// Architecture: two separate MLPs over the same state, an actor (logits over
// the actions) and a critic (one state value). They share no trunk on purpose:
// the states are tiny (15 numbers), so a shared trunk saves nothing, while the
// value loss's gradients would otherwise disturb the policy features (the usual
// PPO choice for small control problems). Hidden layers use tanh or ReLU,
// orthogonal initialisation (gain sqrt(2) hidden, 0.01 actor head so the first
// policy is nearly uniform over the allowed actions, 1.0 critic head).
//
// Action masking: disallowed actions get logit kMaskedLogit before the
// softmax, and their probabilities are then set to exactly 0; sampling and
// greedy selection can never return them, and a masked action's log-prob is
// never used (Evaluate rejects it).
//
// Snapshots: the parameters serialise to a deterministic byte string (the
// architecture first, then every parameter by name as float32 little endian)
// with its sha256 and the policy version, so the learner can publish them to
// actors and an actor can verify what it received.
//
// Thread-safety: Act/Evaluate/Snapshot are const and may run concurrently;
// LoadSnapshot, set_version and training (through Parameters()) need exclusive
// access. Tensors live on the CPU.
#ifndef WINDQUANT_COMMON_RL_POLICY_H_
#define WINDQUANT_COMMON_RL_POLICY_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace windquant::rl {

// Logit given to masked actions. Large and finite (not -inf) so that
// arithmetic on it never produces NaN; the masked probabilities are zeroed
// explicitly after the softmax.
inline constexpr float kMaskedLogit = -1e9f;

enum class Activation { kTanh, kRelu };

struct PolicyOptions {
  int64_t state_dim = 15;                        // WINDQuant's state (DESIGN.md section 4)
  int64_t num_actions = 7;                       // {16, 8, 4, 3, 2, 1.58, 1} bits
  std::vector<int64_t> hidden_sizes = {64, 64};  // per MLP (actor and critic)
  Activation activation = Activation::kTanh;
  uint64_t init_seed = 0;  // initial weights depend only on this
};

// OK or INVALID_ARGUMENT naming the field (`policy.hidden_sizes[1]: ...`).
absl::Status ValidatePolicyOptions(const PolicyOptions& options);

// A seeded CPU generator for Act (at::Generator is thread-compatible; give
// each rollout worker its own).
at::Generator MakeGenerator(uint64_t seed);

struct ActResult {
  at::Tensor actions;    // int64 [N]
  at::Tensor log_probs;  // float [N], log pi(action | state) under the mask
  at::Tensor values;     // float [N], critic estimate V(state)
};

struct EvaluateResult {  // all carry gradients to the policy's parameters
  at::Tensor log_probs;  // float [N]
  at::Tensor entropy;    // float [N], entropy of the masked distribution
  at::Tensor values;     // float [N]
};

// What the learner publishes: parameters + architecture as bytes, sha256 of
// exactly those bytes (lowercase hex), and the policy version they belong to.
struct PolicySnapshot {
  int64_t version = 0;
  std::string bytes;
  std::string sha256;
};

class Policy {
 public:
  // INVALID_ARGUMENT if the options are invalid.
  static absl::StatusOr<std::unique_ptr<Policy>> Create(const PolicyOptions& options);
  ~Policy();
  Policy(const Policy&) = delete;
  Policy& operator=(const Policy&) = delete;

  // Chooses one action per row. states: float [N, S]; masks: bool [N, A]
  // (true = allowed), every row with at least one allowed action.
  // deterministic: the most probable allowed action (ties -> lowest index);
  // otherwise a sample drawn with `generator` (Gumbel-max over the allowed
  // actions). No gradients. INVALID_ARGUMENT for wrong shapes/dtypes or a row
  // without allowed actions.
  absl::StatusOr<ActResult> Act(const at::Tensor& states, const at::Tensor& masks,
                                at::Generator& generator, bool deterministic) const;

  // Log-probs of `actions` (int64 [N]), the entropies and the values, with
  // gradients, for the PPO loss. INVALID_ARGUMENT if shapes are wrong, an
  // action is out of range, or an action is masked in its row.
  absl::StatusOr<EvaluateResult> Evaluate(const at::Tensor& states, const at::Tensor& masks,
                                          const at::Tensor& actions) const;

  // Critic values only (no gradients), float [N].
  absl::StatusOr<at::Tensor> Values(const at::Tensor& states) const;

  // Action probabilities (no gradients), float [N, A]; masked entries are 0.
  absl::StatusOr<at::Tensor> Probabilities(const at::Tensor& states, const at::Tensor& masks) const;

  // Serialises the current parameters (deterministic bytes: equal parameters
  // give equal bytes and sha256).
  PolicySnapshot Snapshot() const;

  // Replaces the parameters and version with the snapshot's.
  // DATA_LOSS if the sha256 does not match the bytes; INVALID_ARGUMENT if
  // the bytes are malformed or describe another architecture.
  absl::Status LoadSnapshot(const PolicySnapshot& snapshot);

  // Parameters for an optimiser (actor's, then critic's; stable order).
  std::vector<at::Tensor> Parameters() const;

  const PolicyOptions& options() const { return options_; }
  int64_t version() const { return version_; }
  void set_version(int64_t version) { version_ = version; }

 private:
  struct Impl;
  explicit Policy(const PolicyOptions& options);
  absl::Status CheckStates(const at::Tensor& states) const;
  absl::Status CheckMasks(const at::Tensor& masks, int64_t rows) const;
  // Masked log-softmax, float [N, A]; masked entries hold ~kMaskedLogit.
  at::Tensor MaskedLogProbs(const at::Tensor& states, const at::Tensor& masks) const;

  PolicyOptions options_;
  int64_t version_ = 0;
  std::unique_ptr<Impl> impl_;
};

// Encodes a snapshot as one self-describing byte string (for files and
// tests; a wire protocol can carry the three fields itself), and back.
// DecodePolicySnapshot: INVALID_ARGUMENT if malformed, DATA_LOSS on a
// checksum mismatch.
std::string EncodePolicySnapshot(const PolicySnapshot& snapshot);
absl::StatusOr<PolicySnapshot> DecodePolicySnapshot(const std::string& encoded);

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_POLICY_H_
