// The learner's options from the run config: the one place that maps the
// config's keys onto LearnerCore, its PolicyPublisher, the RunPublisher and
// the LearnerNode (windquant-learner and the in-process job build them here).
#ifndef WINDQUANT_JOB_LEARNER_OPTIONS_H_
#define WINDQUANT_JOB_LEARNER_OPTIONS_H_

#include <cstdint>

#include "absl/time/time.h"

#include "common/config/run_config.h"
#include "job/bisection_baseline.h"
#include "learner/learner_core.h"
#include "learner/learner_node.h"
#include "learner/policy_publisher.h"
#include "learner/run_publisher.h"
#include "learner/run_start.h"

namespace windquant::job {

// The tokens of the selection range (context x batch when it runs to the end
// of the text, whose length the learner does not read): what a search's
// evaluation reads.
int64_t SelectionTokens(const config::RunConfig& config);

// The tokens one RL evaluation carries: SelectionTokens and the calibration
// loss slice.
int64_t EvaluationTokens(const config::RunConfig& config);

// The deadline of the final rows' held-out measurement through the evaluator (one
// pass over the whole held-out text): service.evaluation_timeout_ms for every
// EvaluationTokens' worth of held-out tokens, rounded up, at least one. The held-out
// length is its range's, or for a range to the end of the text the file's size in
// bytes (a token covers at least one byte), or 64 evaluations' worth when the file
// cannot be read here.
absl::Duration HeldOutAllowance(const config::RunConfig& config);

// The quality-target mode's start from the Lagrangian bisection to epsilon
// under `cap_bits` (LagrangeBisect, kStartBisectEvaluations): its probe's bits
// as RL's cap when it found a plan within epsilon, else `cap_bits`.
learner::RunStart RunStartOf(const BisectionResult& bisection, double cap_bits);

// ppo.*, env.*, training.seed, training.warm_start_steps, training.screen_samples.
learner::PolicyPublisher::Options PolicyPublisherOptionsFrom(const config::RunConfig& config);

// output.dir, service.stages/replicas/evaluation_timeout_ms, quant.chunk_size,
// curriculum.*, lagrange.*, training.*, the
// policy's keys and the run-defining text (config::RunDefiningText).
learner::LearnerCore::Options LearnerCoreOptionsFrom(const config::RunConfig& config);

// output.store/dir/run_id, model.dir, the config digest and the final target;
// the caller adds s3, fresh, the timeouts and the log.
learner::RunPublisherOptions RunPublisherOptionsFrom(const config::RunConfig& config);

// The core's options, service.*, service.rpc_deadline_ms and HeldOutAllowance; with
// `write_final`, the final artifacts of the config (run_finisher.h) once the
// run is done, with the search rows (final_searches.h: the RL run's count of
// real evaluations each, training.seed) measured through the evaluator, and in the quality-target
// mode the run's start (core.await_start, start_search: RunStartOf the Lagrangian bisection
// measured through the evaluator). Without `write_final` the caller owns the result and the start
// (`windquant quantize`). The caller adds the publisher and the table fingerprint.
learner::LearnerNodeOptions LearnerNodeOptionsFrom(const config::RunConfig& config,
                                                   bool write_final);

}  // namespace windquant::job

#endif  // WINDQUANT_JOB_LEARNER_OPTIONS_H_
