// CandidateQueue: the learner's candidate plans (the Lagrangian reference at
// the start of every curriculum step, the greedy plan of the policy after
// every PPO update) from queueing to their evaluation. A queued candidate
// stays pending until its evaluation arrives (TakeEvaluated) or the evaluator
// refuses it for good (Drop); the learner's outbox sends it (PlanSender).
// Ids: a random incarnation << 32 | a counter, so a report of a candidate of
// an earlier learner process never matches one of this process (a candidate
// in flight when the learner stops is lost). They are unique among candidates
// (rl::PlanKind keeps them apart from episodes' ids).
// Plan ids: "learner-<source>-<id>".
// Thread-compatible (the learner calls it under its mutex).
#ifndef WINDQUANT_LEARNER_CANDIDATE_QUEUE_H_
#define WINDQUANT_LEARNER_CANDIDATE_QUEUE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/plan/plan.h"

namespace windquant::learner {

class CandidateQueue {
 public:
  // A random incarnation (std::random_device).
  CandidateQueue();
  explicit CandidateQueue(uint32_t incarnation);

  // Queues the plan `actions` of the model `model_fingerprint`, made by
  // `source` for `target_bits` (policy_version -1: no policy's). Returns the
  // queued plan (episode_id, plan_id set).
  const plan::Plan& Queue(std::vector<int> actions, const std::string& source, double target_bits,
                          int64_t policy_version, const std::string& model_fingerprint);

  // The pending candidate `id`; nullptr when not pending.
  const plan::Plan* Find(uint64_t id) const;
  bool Pending(uint64_t id) const { return pending_.count(id) > 0; }
  // Stops waiting for candidate `id`; false when it was not pending.
  bool Drop(uint64_t id) { return pending_.erase(id) > 0; }
  // The evaluation of candidate `id` arrived: its plan, no longer pending.
  // nullopt (nothing changes) for an id not pending or another plan's id.
  std::optional<plan::Plan> TakeEvaluated(uint64_t id, const std::string& plan_id);

  size_t pending() const { return pending_.size(); }

 private:
  uint64_t next_id_;
  std::map<uint64_t, plan::Plan> pending_;  // queued or at the evaluator
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_CANDIDATE_QUEUE_H_
