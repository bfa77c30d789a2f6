#include "learner/candidate_queue.h"

#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rl/episode.h"

namespace windquant::learner {
namespace {

uint32_t RandomIncarnation() {
  std::random_device rd;
  return static_cast<uint32_t>(rd());
}

}  // namespace

CandidateQueue::CandidateQueue() : CandidateQueue(RandomIncarnation()) {}

CandidateQueue::CandidateQueue(uint32_t incarnation) {
  // 31 bits, so the ids stay below the candidate bit; odd, so never 0.
  const uint64_t high = (static_cast<uint64_t>(incarnation) & 0x7fffffffu) | 1u;
  next_id_ = rl::kCandidateEpisodeBit | (high << 32);
}

const plan::Plan& CandidateQueue::Queue(std::vector<int> actions, const std::string& source,
                                        double target_bits, int64_t policy_version,
                                        const std::string& model_fingerprint, absl::Time now) {
  plan::Plan p;
  p.episode_id = next_id_++;
  p.plan_id = absl::StrCat("learner-", source, "-", p.episode_id & ~rl::kCandidateEpisodeBit);
  p.model_fingerprint = model_fingerprint;
  p.actions = std::move(actions);
  p.target_bits = target_bits;
  p.policy_version = policy_version;
  p.source = source;
  pending_.Insert(p.episode_id, p, now);
  outbox_.push_back(std::move(p));
  return outbox_.back();
}

std::vector<plan::Plan> CandidateQueue::TakeOutbox() {
  std::vector<plan::Plan> out;
  out.swap(outbox_);
  return out;
}

std::optional<plan::Plan> CandidateQueue::TakeEvaluated(uint64_t id, const std::string& plan_id) {
  const plan::Plan* plan = pending_.Find(id);
  if (plan == nullptr || plan->plan_id != plan_id) return std::nullopt;
  return pending_.Take(id);
}

std::vector<plan::Plan> CandidateQueue::Expire(absl::Time cutoff) {
  std::vector<plan::Plan> out;
  for (auto& [id, plan] : pending_.Expire(cutoff)) out.push_back(std::move(plan));
  return out;
}

}  // namespace windquant::learner
