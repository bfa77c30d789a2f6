#include "learner/update_batch.h"

#include <utility>

namespace windquant::learner {
namespace {

double Mean(const std::vector<double>& v) {
  double mean = 0;
  for (double x : v) mean += x / static_cast<double>(v.size());
  return mean;
}

}  // namespace

void UpdateBatch::Add(std::vector<rl::Transition> steps, double episode_return, double ppl,
                      double effective_bits) {
  steps_.push_back(std::move(steps));
  returns_.push_back(episode_return);
  ppl_.push_back(ppl);
  bits_.push_back(effective_bits);
}

void UpdateBatch::AddPredicted(std::vector<rl::Transition> steps) {
  predicted_.push_back(std::move(steps));
}

UpdateBatch::Taken UpdateBatch::Take() {
  Taken t;
  for (auto* episodes : {&steps_, &predicted_}) {
    for (auto& episode : *episodes) {
      t.transitions.insert(t.transitions.end(), std::make_move_iterator(episode.begin()),
                           std::make_move_iterator(episode.end()));
    }
  }
  t.predicted = predicted();
  predicted_.clear();
  t.mean_reward = Mean(returns_);
  t.mean_ppl = Mean(ppl_);
  t.mean_bits = Mean(bits_);
  steps_.clear();
  returns_.clear();
  ppl_.clear();
  bits_.clear();
  return t;
}

}  // namespace windquant::learner
