#include "learner/candidate_queue.h"

#include <random>
#include <utility>

#include "absl/strings/str_cat.h"

namespace windquant::learner {
namespace {

uint32_t RandomIncarnation() {
  std::random_device rd;
  return static_cast<uint32_t>(rd());
}

}  // namespace

CandidateQueue::CandidateQueue() : CandidateQueue(RandomIncarnation()) {}

// Odd, so an id is never 0.
CandidateQueue::CandidateQueue(uint32_t incarnation)
    : next_id_((static_cast<uint64_t>(incarnation) | 1u) << 32) {}

const plan::Plan& CandidateQueue::Queue(std::vector<int> actions, const std::string& source,
                                        double target_bits, int64_t policy_version,
                                        const std::string& model_fingerprint) {
  plan::Plan p;
  p.episode_id = next_id_++;
  p.plan_id = absl::StrCat("learner-", source, "-", p.episode_id);
  p.model_fingerprint = model_fingerprint;
  p.actions = std::move(actions);
  p.target_bits = target_bits;
  p.policy_version = policy_version;
  p.source = source;
  return pending_.emplace(p.episode_id, std::move(p)).first->second;
}

const plan::Plan* CandidateQueue::Find(uint64_t id) const {
  auto it = pending_.find(id);
  return it == pending_.end() ? nullptr : &it->second;
}

std::optional<plan::Plan> CandidateQueue::TakeEvaluated(uint64_t id, const std::string& plan_id) {
  auto it = pending_.find(id);
  if (it == pending_.end() || it->second.plan_id != plan_id) return std::nullopt;
  std::optional<plan::Plan> p(std::move(it->second));
  pending_.erase(it);
  return p;
}

}  // namespace windquant::learner
