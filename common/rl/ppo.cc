#include "common/rl/ppo.h"

#include <c10/core/GradMode.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/files.h"

namespace windquant::rl {
namespace {

constexpr char kStateMagic[8] = {'W', 'Q', 'L', 'E', 'A', 'R', 'N', '1'};
constexpr size_t kShaHexLen = 64;
// Advantages are divided by max(std, kAdvantageStdFloor): once the policy is
// (nearly) deterministic in a deterministic environment the advantages are
// critic noise, and dividing by their tiny std would amplify that noise into
// unit-sized, random policy updates.
constexpr double kAdvantageStdFloor = 1e-2;
// Advantages are normalised over the batch's fresh samples, and V(s) is
// recomputed with the current critic for GAE instead of the behaviour value
// each transition carries (fresher when data lags the learner).
constexpr bool kNormaliseAdvantages = true;
constexpr bool kRecomputeValues = true;

absl::Status TorchError(const char* what, const c10::Error& e) {
  return absl::InternalError(absl::StrCat(what, ": torch error: ", e.what_without_backtrace()));
}

at::Tensor BytesToTensor(const std::string& bytes) {
  at::Tensor t = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  if (!bytes.empty()) std::memcpy(t.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  return t;
}

std::string TensorToBytes(const at::Tensor& t) {
  at::Tensor c = t.to(at::kByte).contiguous();
  return std::string(reinterpret_cast<const char*>(c.data_ptr<uint8_t>()),
                     static_cast<size_t>(c.numel()));
}

// Why a transition cannot be trained on: INVALID_ARGUMENT naming batch[i].field.
absl::Status CheckTransition(const Transition& t, size_t i, const PolicyOptions& po,
                             int64_t version) {
  auto bad = [i](absl::string_view field, absl::string_view rule) {
    return absl::InvalidArgumentError(absl::StrFormat("batch[%d].%s: %s", i, field, rule));
  };
  if (static_cast<int64_t>(t.state.size()) != po.state_dim) {
    return bad("state", absl::StrFormat("expected %d numbers", po.state_dim));
  }
  for (float x : t.state) {
    if (!std::isfinite(x)) return bad("state", "contains NaN or Inf");
  }
  if (static_cast<int64_t>(t.mask.size()) != po.num_actions) {
    return bad("mask", absl::StrFormat("expected %d entries", po.num_actions));
  }
  if (t.action < 0 || t.action >= po.num_actions) {
    return bad("action", absl::StrFormat("must be in [0, %d)", po.num_actions));
  }
  if (t.mask[t.action] == 0) return bad("action", "is masked");
  if (!std::isfinite(t.reward)) return bad("reward", "must be finite");
  if (!std::isfinite(t.log_prob) || t.log_prob > 0.0f) return bad("log_prob", "must be <= 0");
  if (!std::isfinite(t.value)) return bad("value", "must be finite");
  if (t.policy_version < 0 || t.policy_version > version) {
    return bad("policy_version",
               absl::StrFormat("must be in [0, %d] (the learner's version)", version));
  }
  return absl::OkStatus();
}

// The batch's indices episode by episode (in order of first appearance), step
// by step, after checking every transition and that each episode holds steps
// 0..n-1 exactly once and ends (done) on its last step only.
absl::StatusOr<std::vector<size_t>> OrderBatch(const std::vector<Transition>& batch,
                                               const PolicyOptions& po, int64_t version) {
  absl::flat_hash_map<int64_t, size_t> episode_index;
  std::vector<std::vector<size_t>> episodes;  // in order of first appearance
  for (size_t i = 0; i < batch.size(); ++i) {
    if (absl::Status s = CheckTransition(batch[i], i, po, version); !s.ok()) return s;
    auto [it, inserted] = episode_index.try_emplace(batch[i].episode_id, episodes.size());
    if (inserted) episodes.emplace_back();
    episodes[it->second].push_back(i);
  }
  std::vector<size_t> order;
  order.reserve(batch.size());
  for (std::vector<size_t>& episode : episodes) {
    std::stable_sort(episode.begin(), episode.end(),
                     [&](size_t a, size_t b) { return batch[a].step < batch[b].step; });
    for (size_t k = 0; k < episode.size(); ++k) {
      const Transition& t = batch[episode[k]];
      if (t.step != static_cast<int64_t>(k)) {
        return absl::InvalidArgumentError(
            absl::StrFormat("batch[%d].step: episode %d must hold steps 0..%d exactly once",
                            episode[k], t.episode_id, episode.size() - 1));
      }
      if (t.done != (k + 1 == episode.size())) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "batch[%d].done: episode %d must end (done) on its last step %d and only there",
            episode[k], t.episode_id, episode.size() - 1));
      }
      order.push_back(episode[k]);
    }
  }
  return order;
}

// The samples of one update: tensors in episode order (all samples until
// AddTargets keeps the fresh ones), then advantages and returns.
struct Samples {
  at::Tensor states, masks, actions, old_log_probs;
  std::vector<float> rewards, values;
  std::vector<bool> dones;
  std::vector<int64_t> fresh;  // rows whose policy_version is within max_policy_lag
  at::Tensor advantages, returns;
};

// Sums over the minibatches of an update (PpoStats are their means).
struct MinibatchSums {
  double policy = 0, value = 0, entropy = 0, kl = 0, clip = 0, norm = 0;
};

Samples GatherSamples(const std::vector<Transition>& batch, const std::vector<size_t>& order,
                      const PolicyOptions& po, int64_t min_version) {
  const int64_t n = static_cast<int64_t>(order.size());
  Samples out;
  out.states = at::empty({n, po.state_dim}, at::kFloat);
  out.masks = at::empty({n, po.num_actions}, at::kBool);
  out.actions = at::empty({n}, at::kLong);
  out.old_log_probs = at::empty({n}, at::kFloat);
  out.rewards.resize(n);
  out.values.resize(n);
  out.dones.resize(n);
  float* s = out.states.data_ptr<float>();
  bool* m = out.masks.data_ptr<bool>();
  int64_t* a = out.actions.data_ptr<int64_t>();
  float* lp = out.old_log_probs.data_ptr<float>();
  for (int64_t r = 0; r < n; ++r) {
    const Transition& t = batch[order[r]];
    std::copy(t.state.begin(), t.state.end(), s + r * po.state_dim);
    for (int64_t j = 0; j < po.num_actions; ++j) m[r * po.num_actions + j] = t.mask[j] != 0;
    a[r] = t.action;
    lp[r] = t.log_prob;
    out.rewards[r] = t.reward;
    out.values[r] = t.value;
    out.dones[r] = t.done;
    if (t.policy_version >= min_version) out.fresh.push_back(r);
  }
  return out;
}

// Advantages and returns (GAE) of every sample, then only the fresh samples
// are kept; advantages normalised over them.
absl::Status AddTargets(Policy& policy, const PpoOptions& options, Samples* s) {
  // Over the whole batch (every episode is complete, so the sequence ends
  // with done and last_value = 0).
  const int64_t n = s->states.size(0);
  if (kRecomputeValues) {
    absl::StatusOr<at::Tensor> v = policy.Values(s->states);
    if (!v.ok()) return v.status();
    at::Tensor vc = v->contiguous();
    std::copy(vc.data_ptr<float>(), vc.data_ptr<float>() + n, s->values.begin());
  }
  absl::StatusOr<GaeResult> gae =
      ComputeGae(s->rewards, s->values, s->dones, 0.0f, options.gamma, options.gae_lambda);
  if (!gae.ok()) return gae.status();
  // Keep the fresh samples only.
  at::Tensor keep = at::tensor(s->fresh, at::kLong);
  s->states = s->states.index_select(0, keep);
  s->masks = s->masks.index_select(0, keep);
  s->actions = s->actions.index_select(0, keep);
  s->old_log_probs = s->old_log_probs.index_select(0, keep);
  s->advantages = at::tensor(gae->advantages, at::kFloat).index_select(0, keep);
  s->returns = at::tensor(gae->returns, at::kFloat).index_select(0, keep);
  if (kNormaliseAdvantages && keep.size(0) > 1) {
    const double std = s->advantages.std().item<double>();
    s->advantages = (s->advantages - s->advantages.mean()) / std::max(std, kAdvantageStdFloor);
  }
  return absl::OkStatus();
}

// One optimiser step on the rows `idx` of `s`; adds its losses and
// diagnostics to `sums`.
absl::Status MinibatchStep(Policy& policy, torch::optim::Adam& optimizer, const PpoOptions& options,
                           const Samples& s, const at::Tensor& idx, MinibatchSums* sums) {
  absl::StatusOr<EvaluateResult> ev = policy.Evaluate(
      s.states.index_select(0, idx), s.masks.index_select(0, idx), s.actions.index_select(0, idx));
  if (!ev.ok()) return ev.status();
  at::Tensor mb_old = s.old_log_probs.index_select(0, idx);
  at::Tensor mb_adv = s.advantages.index_select(0, idx);
  at::Tensor policy_loss = ClippedSurrogateLoss(ev->log_probs, mb_old, mb_adv, options.clip_ratio);
  at::Tensor value_loss = 0.5 * (ev->values - s.returns.index_select(0, idx)).pow(2).mean();
  at::Tensor entropy = ev->entropy.mean();
  at::Tensor loss = policy_loss + options.value_coef * value_loss - options.entropy_coef * entropy;
  optimizer.zero_grad();
  loss.backward();
  double norm = 0.0;
  if (options.max_grad_norm > 0.0) {
    norm = torch::nn::utils::clip_grad_norm_(policy.Parameters(), options.max_grad_norm);
  }
  optimizer.step();

  c10::NoGradGuard no_grad;
  at::Tensor log_ratio = ev->log_probs.detach() - mb_old;
  at::Tensor ratio = at::exp(log_ratio);
  sums->policy += policy_loss.item<double>();
  sums->value += value_loss.item<double>();
  sums->entropy += entropy.item<double>();
  sums->kl += ((ratio - 1.0) - log_ratio).mean().item<double>();
  sums->clip += ((ratio - 1.0).abs() > options.clip_ratio).to(at::kFloat).mean().item<double>();
  sums->norm += norm;
  return absl::OkStatus();
}

// options.epochs epochs of shuffled minibatches over `samples` (the shuffle
// from `rng`); the means over the minibatches go to `stats`.
absl::Status RunEpochs(Policy& policy, torch::optim::Adam& optimizer, const PpoOptions& options,
                       std::mt19937_64& rng, const Samples& samples, PpoStats* stats) {
  const int64_t used = samples.states.size(0);
  std::vector<int64_t> perm(used);
  MinibatchSums sums;
  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    for (int64_t k = 0; k < used; ++k) perm[k] = k;
    for (int64_t k = used - 1; k > 0; --k) {  // Fisher-Yates, portable across libstdc++s
      std::swap(perm[k], perm[rng() % static_cast<uint64_t>(k + 1)]);
    }
    at::Tensor perm_t = at::tensor(perm, at::kLong);
    for (int64_t start = 0; start < used; start += options.minibatch_size) {
      at::Tensor idx = perm_t.slice(0, start, std::min(used, start + options.minibatch_size));
      absl::Status s = MinibatchStep(policy, optimizer, options, samples, idx, &sums);
      if (!s.ok()) return s;
      ++stats->minibatches;
    }
  }
  const double m = static_cast<double>(stats->minibatches);
  stats->policy_loss = sums.policy / m;
  stats->value_loss = sums.value / m;
  stats->entropy = sums.entropy / m;
  stats->approx_kl = sums.kl / m;
  stats->clip_fraction = sums.clip / m;
  stats->grad_norm = sums.norm / m;
  return absl::OkStatus();
}

}  // namespace

struct PpoLearner::Impl {
  std::unique_ptr<torch::optim::Adam> optimizer;
};

absl::StatusOr<GaeResult> ComputeGae(const std::vector<float>& rewards,
                                     const std::vector<float>& values,
                                     const std::vector<bool>& dones, float last_value, double gamma,
                                     double lambda) {
  const size_t n = rewards.size();
  if (values.size() != n || dones.size() != n) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ComputeGae: rewards (%d), values (%d) and dones (%d) must have the same length", n,
        values.size(), dones.size()));
  }
  GaeResult out;
  out.advantages.resize(n);
  out.returns.resize(n);
  double next_value = last_value;
  double next_advantage = 0.0;
  for (size_t k = n; k-- > 0;) {
    const double not_done = dones[k] ? 0.0 : 1.0;
    const double delta = rewards[k] + gamma * not_done * next_value - values[k];
    const double advantage = delta + gamma * lambda * not_done * next_advantage;
    out.advantages[k] = static_cast<float>(advantage);
    out.returns[k] = static_cast<float>(advantage + values[k]);
    next_value = values[k];
    next_advantage = advantage;
  }
  return out;
}

at::Tensor ClippedSurrogateLoss(const at::Tensor& log_probs, const at::Tensor& old_log_probs,
                                const at::Tensor& advantages, double clip_ratio) {
  at::Tensor ratio = at::exp(log_probs - old_log_probs);
  at::Tensor unclipped = ratio * advantages;
  at::Tensor clipped = at::clamp(ratio, 1.0 - clip_ratio, 1.0 + clip_ratio) * advantages;
  return -at::min(unclipped, clipped).mean();
}

PpoLearner::PpoLearner(const PpoOptions& options, uint64_t shuffle_seed,
                       std::unique_ptr<Policy> policy)
    : options_(options),
      policy_(std::move(policy)),
      impl_(std::make_unique<Impl>()),
      rng_(shuffle_seed) {}
PpoLearner::~PpoLearner() = default;

absl::StatusOr<std::unique_ptr<PpoLearner>> PpoLearner::Create(const PolicyOptions& policy_options,
                                                               const PpoOptions& options,
                                                               uint64_t shuffle_seed) {
  absl::StatusOr<std::unique_ptr<Policy>> policy = Policy::Create(policy_options);
  if (!policy.ok()) return policy.status();
  std::unique_ptr<PpoLearner> learner(new PpoLearner(options, shuffle_seed, *std::move(policy)));
  try {
    learner->impl_->optimizer = std::make_unique<torch::optim::Adam>(
        learner->policy_->Parameters(),
        torch::optim::AdamOptions(options.learning_rate).eps(kAdamEps));
  } catch (const c10::Error& e) {
    return TorchError("PpoLearner::Create", e);
  }
  return learner;
}

absl::StatusOr<PpoStats> PpoLearner::Update(const std::vector<Transition>& batch) {
  const PolicyOptions& po = policy_->options();
  const int64_t version = policy_->version();
  // 1. Validate each transition and order the batch episode by episode.
  absl::StatusOr<std::vector<size_t>> order = OrderBatch(batch, po, version);
  if (!order.ok()) return order.status();
  PpoStats stats;
  stats.version = version;
  if (order->empty()) return stats;
  try {
    // 2. Tensors in episode order.
    Samples samples = GatherSamples(batch, *order, po, version - options_.max_policy_lag);
    const int64_t n = static_cast<int64_t>(order->size());
    stats.samples_dropped_stale = n - static_cast<int64_t>(samples.fresh.size());
    if (samples.fresh.empty()) return stats;
    // 3.-4. Advantages and returns; the fresh samples only.
    if (absl::Status t = AddTargets(*policy_, options_, &samples); !t.ok()) return t;
    stats.samples_used = samples.states.size(0);
    // 5. Epochs of shuffled minibatches.
    absl::Status s = RunEpochs(*policy_, *impl_->optimizer, options_, rng_, samples, &stats);
    if (!s.ok()) return s;
  } catch (const c10::Error& e) {
    return TorchError("PpoLearner::Update", e);
  }
  policy_->set_version(version + 1);
  stats.version = version + 1;
  return stats;
}

// State bytes: "WQLEARN1", sha256 hex (64 chars) of the rest, then a torch
// archive with keys policy (snapshot bytes), version, rng (text of the
// mt19937_64 state) and optimizer (Adam's own archive).
absl::StatusOr<std::string> PpoLearner::SaveState() const {
  try {
    torch::serialize::OutputArchive archive;
    archive.write("policy", BytesToTensor(policy_->Snapshot().bytes));
    archive.write("version", at::tensor(std::vector<int64_t>{policy_->version()}, at::kLong));
    std::ostringstream rng_text;
    rng_text << rng_;
    archive.write("rng", BytesToTensor(rng_text.str()));
    torch::serialize::OutputArchive optimizer_archive;
    impl_->optimizer->save(optimizer_archive);
    archive.write("optimizer", optimizer_archive);
    std::ostringstream body;
    archive.save_to(body);
    const std::string payload = body.str();
    return std::string(kStateMagic, sizeof(kStateMagic)) + base::Sha256Hex(payload) + payload;
  } catch (const c10::Error& e) {
    return TorchError("PpoLearner::SaveState", e);
  }
}

absl::Status PpoLearner::LoadState(const std::string& bytes) {
  const size_t header = sizeof(kStateMagic) + kShaHexLen;
  if (bytes.size() < header ||
      bytes.compare(0, sizeof(kStateMagic), kStateMagic, sizeof(kStateMagic)) != 0) {
    return absl::InvalidArgumentError("learner state: bad magic");
  }
  const std::string payload = bytes.substr(header);
  if (base::Sha256Hex(payload) != bytes.substr(sizeof(kStateMagic), kShaHexLen)) {
    return absl::DataLossError("learner state: sha256 does not match its bytes");
  }
  try {
    torch::serialize::InputArchive archive;
    std::istringstream body(payload);
    archive.load_from(body);
    at::Tensor policy_bytes, version, rng_bytes;
    if (!archive.try_read("policy", policy_bytes) || !archive.try_read("version", version) ||
        !archive.try_read("rng", rng_bytes)) {
      return absl::InvalidArgumentError("learner state: missing policy, version or rng");
    }
    PolicySnapshot snapshot;
    snapshot.bytes = TensorToBytes(policy_bytes);
    snapshot.sha256 = base::Sha256Hex(snapshot.bytes);
    snapshot.version = version.item<int64_t>();
    std::mt19937_64 rng;
    std::istringstream rng_text(TensorToBytes(rng_bytes));
    rng_text >> rng;
    if (rng_text.fail()) return absl::InvalidArgumentError("learner state: bad rng state");
    torch::serialize::InputArchive optimizer_archive;
    if (!archive.try_read("optimizer", optimizer_archive)) {
      return absl::InvalidArgumentError("learner state: missing optimizer");
    }
    // The policy check (architecture) comes first so a mismatched state
    // fails before anything changes.
    absl::Status loaded = policy_->LoadSnapshot(snapshot);
    if (!loaded.ok()) return loaded;
    impl_->optimizer->load(optimizer_archive);
    rng_ = rng;
  } catch (const c10::Error& e) {
    return TorchError("PpoLearner::LoadState", e);
  }
  return absl::OkStatus();
}

absl::Status PpoLearner::SaveStateToFile(const std::string& path) const {
  absl::StatusOr<std::string> bytes = SaveState();
  if (!bytes.ok()) return bytes.status();
  return base::WriteFileAtomic(path, *bytes);
}

absl::Status PpoLearner::LoadStateFromFile(const std::string& path) {
  absl::StatusOr<std::string> bytes = base::ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  absl::Status s = LoadState(*bytes);
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
  return absl::OkStatus();
}

}  // namespace windquant::rl
