// RunStart: where the quality-target mode's RL starts (docs/lagrange.md):
// the Lagrangian bisection over bits to epsilon, measured before training,
// whose probe's bits become RL's cap, so the warm start clones that very
// plan and the policy starts where d is near epsilon instead of at the
// user's cap. `windquant quantize` finds it in its own process
// (job/quantize_job.cc); the distributed learner through the evaluator
// (LearnerNode's start search) and keeps it in output.dir/rl_start.json, so
// a restarted learner starts where it started before without searching again.
// Stateless; thread-compatible.
#ifndef WINDQUANT_LEARNER_RUN_START_H_
#define WINDQUANT_LEARNER_RUN_START_H_

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "absl/status/statusor.h"

namespace windquant::learner {

struct RunStart {
  double cap_bits = 0;          // RL's cap from the start on (<= the run's)
  double bits = 0;              // the start plan's effective bits
  double degradation = 0;       // its d on the selection slice
  bool within_epsilon = false;  // false: no plan within epsilon, RL starts at the run's cap
  int64_t evaluations = 0;      // the real evaluations the search spent
};

// report.json's quality_target.rl_start (quantize's and the learner's).
nlohmann::json RunStartJson(const RunStart& start);

// output.dir/rl_start.json of the run with fingerprint `run_fingerprint`
// (config::RunFingerprint), written atomically; errors name the path.
absl::Status WriteRunStart(const std::string& path, const std::string& run_fingerprint,
                           const RunStart& start);
// The start kept at `path`: NOT_FOUND when there is none or it is another
// run's (another fingerprint); DATA_LOSS naming the path for a file that is
// not one (the caller removes it and searches again).
absl::StatusOr<RunStart> ReadRunStart(const std::string& path, const std::string& run_fingerprint);

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_RUN_START_H_
