// UpdateBatch: the evaluated episodes the learner collects for its next PPO
// update (training.episodes_per_update of them), each with its return and
// measured perplexity and effective bits for the training curve.
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
    std::vector<rl::Transition> transitions;  // episode after episode
    // Means over the episodes (0 when there were none).
    double mean_reward = 0;  // episode return: step rewards + episode-end reward
    double mean_ppl = 0;     // evaluation-slice perplexity
    double mean_bits = 0;    // effective bits
  };

  // One evaluated episode: its steps (the end reward added), its return,
  // perplexity and effective bits.
  void Add(std::vector<rl::Transition> steps, double episode_return, double ppl,
           double effective_bits);
  int episodes() const { return static_cast<int>(steps_.size()); }
  // The batch so far; leaves it empty.
  Taken Take();

 private:
  std::vector<std::vector<rl::Transition>> steps_;
  std::vector<double> returns_, ppl_, bits_;
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_UPDATE_BATCH_H_
