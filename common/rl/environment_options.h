// EnvironmentOptions: the WINDQuant decision process's settings (DESIGN.md
// section 4): the budget mode and step reward of the environment
// (environment.h) and the weights of the episode-end reward
// (episode_reward.h: EpisodeEndReward). The run config's `env` section as
// it is (config::RunConfig embeds it; the keys are validated once, in
// common/config/run_config.cc). Torch-free, so that the config need not
// include torch.
#ifndef WINDQUANT_COMMON_RL_ENVIRONMENT_OPTIONS_H_
#define WINDQUANT_COMMON_RL_ENVIRONMENT_OPTIONS_H_

#include <string>

namespace windquant::rl {

struct EnvironmentOptions {
  std::string budget_mode = "hard";        // hard (masking) | soft (penalty) | repair
  std::string repair_order = "proxy";      // repair mode: proxy | walk (search::RepairOrder)
  double step_saving_weight = 0.1;         // dense reward per bit saved vs running target
  double skip_penalty = 0.05;              // step penalty for action 16
  double bit_reduction_weight = 1.0;       // episode end: weighted bit reduction
  double loss_penalty_weight = 1.0;        // episode end: calibration loss increase
  double violation_penalty_weight = 10.0;  // episode end: bits over budget (soft)
  double ppl_penalty_weight = 1.0;         // scales lambda * relative PPL increase
};

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_ENVIRONMENT_OPTIONS_H_
