#include "common/rl/policy.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/files.h"

namespace windquant::rl {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "policy snapshots are written in host order, which must be little endian");

constexpr char kParamsMagic[8] = {'W', 'Q', 'P', 'O', 'L', 'I', 'C', 'Y'};
constexpr char kSnapshotMagic[8] = {'W', 'Q', 'S', 'N', 'A', 'P', '0', '1'};
constexpr uint32_t kParamsFormat = 1;
// Sampling uses u in [kMinUniform, 1 - kMinUniform] so every Gumbel noise is finite.
constexpr double kMinUniform = 1e-12;

// Appends the raw bytes of a trivially copyable value.
template <typename T>
void Put(std::string& out, T value) {
  char buf[sizeof(T)];
  std::memcpy(buf, &value, sizeof(T));
  out.append(buf, sizeof(T));
}

// Bounds-checked reader over a byte string.
class Reader {
 public:
  explicit Reader(const std::string& data) : data_(data) {}
  template <typename T>
  bool Get(T& value) {
    if (data_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(&value, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool GetBytes(size_t n, std::string& out) {
    if (data_.size() - pos_ < n) return false;
    out.assign(data_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool GetRaw(size_t n, void* dst) {
    if (data_.size() - pos_ < n) return false;
    std::memcpy(dst, data_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool AtEnd() const { return pos_ == data_.size(); }

 private:
  const std::string& data_;
  size_t pos_ = 0;
};

// Orthogonal initialisation (Saxe et al.) drawn from `gen`, so a policy's
// initial weights depend only on its init_seed, not on torch's global RNG.
void OrthogonalInit(at::Tensor weight, double gain, at::Generator& gen) {
  const int64_t rows = weight.size(0), cols = weight.size(1);
  at::Tensor flat = at::normal(0.0, 1.0, {rows, cols}, gen, at::kFloat);
  if (rows < cols) flat = flat.t();
  auto [q, r] = at::linalg_qr(flat);
  q = q * at::sign(at::diagonal(r)).unsqueeze(0);  // unique, uniformly distributed
  if (rows < cols) q = q.t();
  weight.copy_(q * gain);
}

torch::nn::Sequential MakeMlp(int64_t in, const std::vector<int64_t>& hidden, int64_t out,
                              Activation activation, double head_gain, at::Generator& gen) {
  torch::nn::Sequential mlp;
  int64_t width = in;
  for (int64_t h : hidden) {
    torch::nn::Linear linear(width, h);
    OrthogonalInit(linear->weight, std::sqrt(2.0), gen);
    linear->bias.zero_();
    mlp->push_back(linear);
    if (activation == Activation::kTanh) {
      mlp->push_back(torch::nn::Tanh());
    } else {
      mlp->push_back(torch::nn::ReLU());
    }
    width = h;
  }
  torch::nn::Linear head(width, out);
  OrthogonalInit(head->weight, head_gain, gen);
  head->bias.zero_();
  mlp->push_back(head);
  return mlp;
}

absl::Status TorchError(const char* what, const c10::Error& e) {
  return absl::InternalError(absl::StrCat(what, ": torch error: ", e.what_without_backtrace()));
}

}  // namespace

struct Policy::Impl {
  torch::nn::Sequential actor{nullptr};
  torch::nn::Sequential critic{nullptr};

  // (name, tensor) in a stable order: actor's, then critic's.
  std::vector<std::pair<std::string, at::Tensor>> NamedParameters() const {
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (const auto& p : actor->named_parameters()) out.emplace_back("actor." + p.key(), p.value());
    for (const auto& p : critic->named_parameters()) {
      out.emplace_back("critic." + p.key(), p.value());
    }
    return out;
  }
};

absl::Status ValidatePolicyOptions(const PolicyOptions& options) {
  if (options.state_dim <= 0) {
    return absl::InvalidArgumentError("policy.state_dim: must be positive");
  }
  if (options.num_actions < 2) {
    return absl::InvalidArgumentError("policy.num_actions: must be at least 2");
  }
  if (options.hidden_sizes.empty()) {
    return absl::InvalidArgumentError("policy.hidden_sizes: must name at least one layer");
  }
  for (size_t i = 0; i < options.hidden_sizes.size(); ++i) {
    if (options.hidden_sizes[i] <= 0 || options.hidden_sizes[i] > 65536) {
      return absl::InvalidArgumentError(
          absl::StrFormat("policy.hidden_sizes[%d]: must be in [1, 65536]", i));
    }
  }
  return absl::OkStatus();
}

at::Generator MakeGenerator(uint64_t seed) {
  return at::make_generator<at::CPUGeneratorImpl>(seed);
}

Policy::Policy(const PolicyOptions& options) : options_(options), impl_(std::make_unique<Impl>()) {}
Policy::~Policy() = default;

absl::StatusOr<std::unique_ptr<Policy>> Policy::Create(const PolicyOptions& options) {
  absl::Status valid = ValidatePolicyOptions(options);
  if (!valid.ok()) return valid;
  std::unique_ptr<Policy> policy(new Policy(options));
  try {
    c10::NoGradGuard no_grad;
    at::Generator gen = MakeGenerator(options.init_seed);
    policy->impl_->actor = MakeMlp(options.state_dim, options.hidden_sizes, options.num_actions,
                                   options.activation, /*head_gain=*/0.01, gen);
    policy->impl_->critic = MakeMlp(options.state_dim, options.hidden_sizes, 1, options.activation,
                                    /*head_gain=*/1.0, gen);
  } catch (const c10::Error& e) {
    return TorchError("Policy::Create", e);
  }
  return policy;
}

absl::Status Policy::CheckStates(const at::Tensor& states) const {
  if (!states.defined() || states.dim() != 2 || states.size(1) != options_.state_dim) {
    return absl::InvalidArgumentError(
        absl::StrFormat("states: expected float [N, %d]", options_.state_dim));
  }
  if (states.scalar_type() != at::kFloat) {
    return absl::InvalidArgumentError("states: expected dtype float32");
  }
  if (!at::isfinite(states).all().item<bool>()) {
    return absl::InvalidArgumentError("states: contains NaN or Inf");
  }
  return absl::OkStatus();
}

absl::Status Policy::CheckMasks(const at::Tensor& masks, int64_t rows) const {
  if (!masks.defined() || masks.dim() != 2 || masks.size(0) != rows ||
      masks.size(1) != options_.num_actions || masks.scalar_type() != at::kBool) {
    return absl::InvalidArgumentError(
        absl::StrFormat("masks: expected bool [%d, %d]", rows, options_.num_actions));
  }
  if (rows > 0 && !masks.any(1).all().item<bool>()) {
    const int64_t row = (~masks.any(1)).nonzero().index({0, 0}).item<int64_t>();
    return absl::InvalidArgumentError(absl::StrFormat("masks[%d]: no action is allowed", row));
  }
  return absl::OkStatus();
}

at::Tensor Policy::MaskedLogProbs(const at::Tensor& states, const at::Tensor& masks) const {
  at::Tensor logits = impl_->actor->forward(states);
  return at::log_softmax(logits.masked_fill(~masks, kMaskedLogit), /*dim=*/1);
}

absl::StatusOr<ActResult> Policy::Act(const at::Tensor& states, const at::Tensor& masks,
                                      at::Generator& generator, bool deterministic) const {
  try {
    absl::Status s = CheckStates(states);
    if (s.ok()) s = CheckMasks(masks, states.size(0));
    if (!s.ok()) return s;
    c10::NoGradGuard no_grad;
    at::Tensor log_probs = MaskedLogProbs(states, masks);
    const float neg_inf = -std::numeric_limits<float>::infinity();
    at::Tensor scores;
    if (deterministic) {
      scores = log_probs;
    } else {
      // Gumbel-max: argmax(log p + g) with g ~ Gumbel(0, 1) is a sample of p.
      at::Tensor u =
          at::rand(log_probs.sizes(), generator, at::kFloat).clamp_(kMinUniform, 1.0 - kMinUniform);
      scores = log_probs - at::log(-at::log(u));
    }
    at::Tensor actions = scores.masked_fill(~masks, neg_inf).argmax(/*dim=*/1);
    ActResult result;
    result.log_probs = log_probs.gather(1, actions.unsqueeze(1)).squeeze(1);
    result.actions = std::move(actions);
    result.values = impl_->critic->forward(states).squeeze(1);
    return result;
  } catch (const c10::Error& e) {
    return TorchError("Policy::Act", e);
  }
}

absl::StatusOr<EvaluateResult> Policy::Evaluate(const at::Tensor& states, const at::Tensor& masks,
                                                const at::Tensor& actions) const {
  try {
    absl::Status s = CheckStates(states);
    if (s.ok()) s = CheckMasks(masks, states.size(0));
    if (!s.ok()) return s;
    const int64_t n = states.size(0);
    if (!actions.defined() || actions.dim() != 1 || actions.size(0) != n ||
        actions.scalar_type() != at::kLong) {
      return absl::InvalidArgumentError(absl::StrFormat("actions: expected int64 [%d]", n));
    }
    const at::Tensor outside = (actions < 0) | (actions >= options_.num_actions);
    if (n > 0 && outside.any().item<bool>()) {
      const int64_t row = outside.nonzero().index({0, 0}).item<int64_t>();
      return absl::InvalidArgumentError(absl::StrFormat("actions[%d]: %d is not in [0, %d)", row,
                                                        actions[row].item<int64_t>(),
                                                        options_.num_actions));
    }
    at::Tensor allowed = masks.gather(1, actions.unsqueeze(1)).squeeze(1);
    if (n > 0 && !allowed.all().item<bool>()) {
      const int64_t row = (~allowed).nonzero().index({0, 0}).item<int64_t>();
      return absl::InvalidArgumentError(
          absl::StrFormat("actions[%d]: action is masked in its row", row));
    }
    at::Tensor log_probs = MaskedLogProbs(states, masks);
    // Masked entries contribute exactly 0 (p = 0, and their log p is replaced
    // by 0 so that no 0 * -1e9 term or its gradient appears).
    at::Tensor probs = at::exp(log_probs).masked_fill(~masks, 0.0);
    EvaluateResult result;
    result.entropy = -(probs * log_probs.masked_fill(~masks, 0.0)).sum(1);
    result.log_probs = log_probs.gather(1, actions.unsqueeze(1)).squeeze(1);
    result.values = impl_->critic->forward(states).squeeze(1);
    return result;
  } catch (const c10::Error& e) {
    return TorchError("Policy::Evaluate", e);
  }
}

absl::StatusOr<at::Tensor> Policy::Values(const at::Tensor& states) const {
  try {
    absl::Status s = CheckStates(states);
    if (!s.ok()) return s;
    c10::NoGradGuard no_grad;
    return impl_->critic->forward(states).squeeze(1);
  } catch (const c10::Error& e) {
    return TorchError("Policy::Values", e);
  }
}

absl::StatusOr<at::Tensor> Policy::Probabilities(const at::Tensor& states,
                                                 const at::Tensor& masks) const {
  try {
    absl::Status s = CheckStates(states);
    if (s.ok()) s = CheckMasks(masks, states.size(0));
    if (!s.ok()) return s;
    c10::NoGradGuard no_grad;
    return at::exp(MaskedLogProbs(states, masks)).masked_fill(~masks, 0.0);
  } catch (const c10::Error& e) {
    return TorchError("Policy::Probabilities", e);
  }
}

std::vector<at::Tensor> Policy::Parameters() const {
  std::vector<at::Tensor> out;
  for (auto& [name, tensor] : impl_->NamedParameters()) out.push_back(tensor);
  return out;
}

// Parameter bytes, all integers little endian:
//   "WQPOLICY" u32 format=1
//   i64 state_dim, i64 num_actions, u32 activation, u32 H, i64 hidden[H]
//   u32 T, then T times: u32 name_len, name, u32 ndim, i64 dims[ndim], f32 data[numel]
PolicySnapshot Policy::Snapshot() const {
  std::string out;
  out.append(kParamsMagic, sizeof(kParamsMagic));
  Put<uint32_t>(out, kParamsFormat);
  Put<int64_t>(out, options_.state_dim);
  Put<int64_t>(out, options_.num_actions);
  Put<uint32_t>(out, static_cast<uint32_t>(options_.activation));
  Put<uint32_t>(out, static_cast<uint32_t>(options_.hidden_sizes.size()));
  for (int64_t h : options_.hidden_sizes) Put<int64_t>(out, h);
  const auto named = impl_->NamedParameters();
  Put<uint32_t>(out, static_cast<uint32_t>(named.size()));
  for (const auto& [name, tensor] : named) {
    Put<uint32_t>(out, static_cast<uint32_t>(name.size()));
    out.append(name);
    Put<uint32_t>(out, static_cast<uint32_t>(tensor.dim()));
    for (int64_t d : tensor.sizes()) Put<int64_t>(out, d);
    at::Tensor data = tensor.detach().to(at::kFloat).contiguous();
    out.append(reinterpret_cast<const char*>(data.data_ptr<float>()),
               static_cast<size_t>(data.numel()) * sizeof(float));
  }
  PolicySnapshot snapshot;
  snapshot.version = version_;
  snapshot.sha256 = base::Sha256Hex(out);
  snapshot.bytes = std::move(out);
  return snapshot;
}

absl::Status Policy::LoadSnapshot(const PolicySnapshot& snapshot) {
  if (base::Sha256Hex(snapshot.bytes) != snapshot.sha256) {
    return absl::DataLossError("policy snapshot: sha256 does not match its bytes");
  }
  Reader reader(snapshot.bytes);
  auto malformed = [](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("policy snapshot: ", what));
  };
  std::string magic;
  uint32_t format = 0, activation = 0, num_hidden = 0, num_tensors = 0;
  int64_t state_dim = 0, num_actions = 0;
  if (!reader.GetBytes(sizeof(kParamsMagic), magic) ||
      magic != std::string(kParamsMagic, sizeof(kParamsMagic))) {
    return malformed("bad magic");
  }
  if (!reader.Get(format) || format != kParamsFormat) return malformed("unknown format");
  if (!reader.Get(state_dim) || !reader.Get(num_actions) || !reader.Get(activation) ||
      !reader.Get(num_hidden)) {
    return malformed("truncated header");
  }
  std::vector<int64_t> hidden(num_hidden > 1024 ? 0 : num_hidden);
  if (hidden.size() != num_hidden) return malformed("too many hidden layers");
  for (int64_t& h : hidden) {
    if (!reader.Get(h)) return malformed("truncated header");
  }
  if (state_dim != options_.state_dim || num_actions != options_.num_actions ||
      activation != static_cast<uint32_t>(options_.activation) || hidden != options_.hidden_sizes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "policy snapshot: architecture (state_dim %d, num_actions %d, %d hidden layers) does "
        "not match this policy's (state_dim %d, num_actions %d, %d hidden layers)",
        state_dim, num_actions, hidden.size(), options_.state_dim, options_.num_actions,
        options_.hidden_sizes.size()));
  }
  const auto named = impl_->NamedParameters();
  if (!reader.Get(num_tensors) || num_tensors != named.size()) {
    return malformed("wrong number of parameter tensors");
  }
  // Decode everything first so a bad snapshot leaves the policy unchanged.
  std::vector<at::Tensor> decoded;
  for (const auto& [name, tensor] : named) {
    uint32_t name_len = 0, ndim = 0;
    std::string got_name;
    if (!reader.Get(name_len) || !reader.GetBytes(name_len, got_name) || got_name != name) {
      return malformed(absl::StrCat("expected parameter ", name));
    }
    if (!reader.Get(ndim) || ndim != static_cast<uint32_t>(tensor.dim())) {
      return malformed(absl::StrCat(name, ": wrong rank"));
    }
    for (int64_t d : tensor.sizes()) {
      int64_t got = 0;
      if (!reader.Get(got) || got != d) return malformed(absl::StrCat(name, ": wrong shape"));
    }
    at::Tensor values = at::empty(tensor.sizes(), at::kFloat);
    if (!reader.GetRaw(static_cast<size_t>(values.numel()) * sizeof(float),
                       values.data_ptr<float>())) {
      return malformed(absl::StrCat(name, ": truncated data"));
    }
    decoded.push_back(std::move(values));
  }
  if (!reader.AtEnd()) return malformed("trailing bytes");
  try {
    c10::NoGradGuard no_grad;
    for (size_t i = 0; i < named.size(); ++i) named[i].second.copy_(decoded[i]);
  } catch (const c10::Error& e) {
    return TorchError("Policy::LoadSnapshot", e);
  }
  version_ = snapshot.version;
  return absl::OkStatus();
}

// Encoded snapshot: "WQSNAP01" i64 version, u32 len + sha256 hex, u64 len + bytes.
std::string EncodePolicySnapshot(const PolicySnapshot& snapshot) {
  std::string out;
  out.append(kSnapshotMagic, sizeof(kSnapshotMagic));
  Put<int64_t>(out, snapshot.version);
  Put<uint32_t>(out, static_cast<uint32_t>(snapshot.sha256.size()));
  out.append(snapshot.sha256);
  Put<uint64_t>(out, snapshot.bytes.size());
  out.append(snapshot.bytes);
  return out;
}

absl::StatusOr<PolicySnapshot> DecodePolicySnapshot(const std::string& encoded) {
  Reader reader(encoded);
  std::string magic;
  PolicySnapshot snapshot;
  uint32_t sha_len = 0;
  uint64_t bytes_len = 0;
  if (!reader.GetBytes(sizeof(kSnapshotMagic), magic) ||
      magic != std::string(kSnapshotMagic, sizeof(kSnapshotMagic))) {
    return absl::InvalidArgumentError("policy snapshot: bad magic");
  }
  if (!reader.Get(snapshot.version) || !reader.Get(sha_len) ||
      !reader.GetBytes(sha_len, snapshot.sha256) || !reader.Get(bytes_len) ||
      !reader.GetBytes(bytes_len, snapshot.bytes) || !reader.AtEnd()) {
    return absl::InvalidArgumentError("policy snapshot: truncated or trailing bytes");
  }
  if (base::Sha256Hex(snapshot.bytes) != snapshot.sha256) {
    return absl::DataLossError("policy snapshot: sha256 does not match its bytes");
  }
  return snapshot;
}

}  // namespace windquant::rl
