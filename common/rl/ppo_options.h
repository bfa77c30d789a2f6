// PpoOptions: PPO's settings (ppo.h: rl::PpoLearner; DESIGN.md section 4), the
// run config's `ppo` section as it is (config::RunConfig embeds it; the keys
// are validated once, in common/config/run_config.cc). Torch-free, so that
// the config need not include torch.
#ifndef WINDQUANT_COMMON_RL_PPO_OPTIONS_H_
#define WINDQUANT_COMMON_RL_PPO_OPTIONS_H_

#include <vector>

namespace windquant::rl {

struct PpoOptions {
  std::vector<int> hidden = {128, 128};  // policy MLP layer sizes
  double learning_rate = 3e-4;           // Adam
  double clip_ratio = 0.2;               // eps of the clipped surrogate, in (0, 1)
  // Undiscounted: an episode is one step per unit (thousands in a real model)
  // and its main reward comes at the end; 0.99^1000 would leave the first units
  // nearly no credit for it.
  double gamma = 1.0;
  double gae_lambda = 0.95;
  double value_coef = 0.5;
  double entropy_coef = 0.01;
  double max_grad_norm = 0.5;  // global L2 norm; <= 0 disables clipping
  int epochs = 4;              // passes over the batch per update
  int minibatch_size = 256;
  int max_policy_lag = 2;  // keep transitions of policy version >= current - lag
};

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_PPO_OPTIONS_H_
