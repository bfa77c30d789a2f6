// CandidateQueue: the learner's candidate plans (the Lagrangian reference at
// the start of every curriculum step, the greedy plan of the policy after
// every PPO update) from queueing to their evaluation. A queued candidate
// waits in the outbox until TakeOutbox hands it out (for Evaluator.SubmitPlan)
// and stays pending until its evaluation arrives (TakeEvaluated), the
// evaluator refuses it for good (Drop) or it expires (Expire, ExpiryQueue).
// Ids: rl::kCandidateEpisodeBit | a random incarnation << 32 | a counter, so a
// report of a candidate of an earlier learner process never matches one of
// this process (a candidate in flight when the learner stops is lost).
// Plan ids: "learner-<source>-<id without the candidate bit>".
// Thread-compatible (the learner calls it under its mutex).
#ifndef WINDQUANT_LEARNER_CANDIDATE_QUEUE_H_
#define WINDQUANT_LEARNER_CANDIDATE_QUEUE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/plan/plan.h"
#include "learner/expiry_queue.h"

namespace windquant::learner {

class CandidateQueue {
 public:
  // A random incarnation (std::random_device).
  CandidateQueue();
  explicit CandidateQueue(uint32_t incarnation);

  // Queues the plan `actions` of the model `model_fingerprint`, made by
  // `source` for `target_bits` (policy_version -1: no policy's); it is
  // pending from `now` on. Returns the queued plan (episode_id, plan_id set).
  const plan::Plan& Queue(std::vector<int> actions, const std::string& source, double target_bits,
                          int64_t policy_version, const std::string& model_fingerprint,
                          absl::Time now);

  // Whether plans wait to be handed out.
  bool HasOutbox() const { return !outbox_.empty(); }
  // The plans not yet handed out, in queueing order (expired ones included:
  // the caller checks Pending before sending).
  std::vector<plan::Plan> TakeOutbox();

  // Whether candidate `id` still waits for its evaluation.
  bool Pending(uint64_t id) const { return pending_.Contains(id); }
  // Stops waiting for candidate `id`; false when it was not pending.
  bool Drop(uint64_t id) { return pending_.Erase(id); }
  // The evaluation of candidate `id` arrived: its plan, no longer pending.
  // nullopt (nothing changes) for an id not pending or another plan's id.
  std::optional<plan::Plan> TakeEvaluated(uint64_t id, const std::string& plan_id);
  // Stops waiting for the candidates pending since before `cutoff`; returns
  // their plans in id order.
  std::vector<plan::Plan> Expire(absl::Time cutoff);

  size_t pending() const { return pending_.size(); }

 private:
  uint64_t next_id_;
  ExpiryQueue<plan::Plan> pending_;  // queued or at the evaluator
  std::vector<plan::Plan> outbox_;   // not yet handed out
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_CANDIDATE_QUEUE_H_
