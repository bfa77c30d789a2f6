// The arguments of the tiny `windquant quantize` runs of the integration tests
// (quantize_resume_integration_test, quantize_quality_target_integration_test):
// the test model at one target, `updates` updates of 4 episodes with a small
// policy, a checkpoint after every update, the final numbers on the first 4096
// held-out tokens only (time). Test-only, header-only.
#ifndef WINDQUANT_COMMON_RL_QUANTIZE_TEST_ARGS_H_
#define WINDQUANT_COMMON_RL_QUANTIZE_TEST_ARGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/config/run_config.h"
#include "gtest/gtest.h"

namespace windquant::rl {

// Appends `--set KEY=VALUE` pairs to `argv` (a failed test when `config` does not load).
inline void AppendTinyQuantizeSets(const std::string& config, const std::string& out_dir,
                                   const std::string& cache_dir, double target_bits, int updates,
                                   std::vector<std::string>* argv) {
  const auto test_config = config::LoadRunConfig(config);
  if (!test_config.ok()) {
    ADD_FAILURE() << test_config.status();
    return;
  }
  const int64_t heldout_begin = test_config->evaluation.heldout.tokens[0];
  for (const std::string& s : std::vector<std::string>{
           absl::StrCat("evaluation.heldout.tokens=[", heldout_begin, ",", heldout_begin + 4096,
                        "]"),
           "output.dir=" + out_dir,
           "quant.cache_dir=" + cache_dir,
           "model.threads=1",
           "calibration.samples=8",
           "evaluation.calib_slice_tokens=1024",
           absl::StrCat("curriculum.target_bits=[", target_bits, "]"),
           absl::StrCat("curriculum.min_updates=", updates),
           absl::StrCat("curriculum.max_updates=", updates),
           "training.episodes_per_update=4",
           "training.checkpoint_every_updates=1",
           "training.warm_start_steps=50",
           "ppo.hidden=[32,32]",
           "ppo.minibatch_size=64",
       }) {
    argv->push_back("--set");
    argv->push_back(s);
  }
}

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_QUANTIZE_TEST_ARGS_H_
