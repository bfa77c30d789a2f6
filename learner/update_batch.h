// UpdateBatch: the evaluated episodes the learner collects for its next PPO
// update (training.episodes_per_update of them), each with its return and
// measured perplexity and effective bits for the training curve, and, with
// reward-model screening, the screened-out samples of the same policy (their
// rewards predicted), which PPO learns from too but which neither count
// towards episodes_per_update nor enter the curve's means.
// Holds the episodes' transitions (one rl::Transition per unit, about 200
// bytes) until Take.
// Thread-compatible (the learner calls it under its mutex).
#ifndef WINDQUANT_LEARNER_UPDATE_BATCH_H_
#define WINDQUANT_LEARNER_UPDATE_BATCH_H_

#include <vector>

#include "common/rl/ppo.h"

namespace windquant::learner {

class UpdateBatch {
 public:
  struct Taken {
    // Episode after episode: the measured ones, then the predicted ones.
    std::vector<rl::Transition> transitions;
    int predicted = 0;  // screened-out episodes among them
    // Means over the episodes (0 when there were none).
    double mean_reward = 0;  // episode return: step rewards + episode-end reward
    double mean_ppl = 0;     // evaluation-slice perplexity
    double mean_bits = 0;    // effective bits
  };

  // One evaluated episode: its steps (the end reward added), its return,
  // perplexity and effective bits.
  void Add(std::vector<rl::Transition> steps, double episode_return, double ppl,
           double effective_bits);
  // A screened-out sample: its steps (the predicted end reward added).
  void AddPredicted(std::vector<rl::Transition> steps);
  // Measured episodes so far.
  int episodes() const { return static_cast<int>(steps_.size()); }
  int predicted() const { return static_cast<int>(predicted_.size()); }
  // The batch so far; leaves it empty.
  Taken Take();

 private:
  std::vector<std::vector<rl::Transition>> steps_, predicted_;
  std::vector<double> returns_, ppl_, bits_;
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_UPDATE_BATCH_H_
