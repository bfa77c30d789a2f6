// RunInProcessJob: the distributed job of DESIGN.md section 5 inside one
// process, for `windquant quantize`: one LearnerNode, one EvaluatorNode and
// service.stages x service.replicas ActorNodes, the same services and RPCs as
// the separate processes of deploy/local, each peer reached through an
// in-process gRPC channel (no sockets between them; every server also listens
// on a free loopback port, so `windquant status --learner` can watch the run).
// Runs until the learner is done (curriculum finished, candidates evaluated)
// or stopped (stop_after_updates) and, with write_final, its final artifacts
// are written, then stops every node and returns the
// learner's result. The learner resumes from output.dir as windquant-learner
// does; clearing output.dir for a fresh run is the caller's.
#ifndef WINDQUANT_JOB_IN_PROCESS_JOB_H_
#define WINDQUANT_JOB_IN_PROCESS_JOB_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/base/log.h"
#include "common/config/run_config.h"
#include "common/plan/unit_table.h"
#include "common/quant/calibration.h"
#include "common/quant/quantized_stage.h"
#include "common/quant/stage_fits.h"
#include "common/rl/run_result.h"
#include "learner/run_publisher.h"

namespace windquant::job {

// The actors' fits at the end of a job: replica 0 of every stage, in stage
// order, and the learner's merged table (the stages' units back to back).
struct ActorFits {
  std::shared_ptr<const plan::UnitTable> table;
  std::vector<std::shared_ptr<const quant::QuantizedStage>> stages;
  std::vector<quant::ActivationStats> stats;  // per stage (empty for cached fits)
};

struct InProcessJobOptions {
  // Every node's log lines, from the nodes' own threads, several at once (the actors'
  // rollout loops, the evaluator's replica workers, the learner's RPC handlers): the
  // sink must be thread-safe (base::LogSink).
  base::LogSink log;
  int64_t stop_after_updates = 0;  // LearnerCore::set_stop_after_updates
  // The sampling streams of the actors (ActorNode::Connect's incarnation is
  // derived from it and the actor's index): the same value and config give
  // the same episodes.
  uint64_t incarnation_seed = 0;
  // DEADLINE_EXCEEDED when the learner's status (updates, episodes,
  // evaluations) has not moved for this long.
  absl::Duration stall_timeout = absl::Minutes(15);
  // When set: FAILED_PRECONDITION unless the actors' merged table has the
  // same units (layer, matrix, columns, bits of every action) as this one,
  // so that the result's plans index it too (the caller measures and exports
  // them with its own fits). Borrowed.
  const plan::UnitTable* expected_table = nullptr;
  // When set: the run's table identity (QuantizationSession::table_fingerprint);
  // the learner refuses stage tables of another, so that fits an actor reloaded
  // from quant.cache_dir for another calibration or build are recalibrated
  // rather than merged (LearnerCore::ExpectTableFingerprint).
  std::string expected_fingerprint;
  // When set (borrowed): the learner's checkpoints and best plans go to the
  // artifact store as they are made (LearnerNodeOptions::publisher).
  learner::RunPublisher* publisher = nullptr;
  // When set: the whole model's weights, already loaded by the caller (who
  // keeps them alive); the actors' stages and the evaluator's head use these
  // tensors, so the process holds the weights once. Borrowed.
  const model::LlamaWeights* shared_weights = nullptr;
  // When set: filled on success (not when stopped early) with what the
  // actors fitted, so that the caller does not fit the model again.
  ActorFits* actor_fits = nullptr;
  // When set: the learner writes the distributed run's final artifacts into
  // output.dir/final (run_finisher.h: the plan, report.json with the search
  // rows measured through the evaluator) before the job returns, as
  // windquant-learner does; with output.export the learner has no actors to
  // assemble from (FAILED_PRECONDITION in its log, nothing written).
  bool write_final = false;
};

// The stages' fits and statistics as one StageFits over all layers (units in
// the merged table's order; copies the ~0.13 bytes per weight of parameters).
// FAILED_PRECONDITION when a stage is unfitted or has no statistics.
absl::StatusOr<std::pair<quant::StageFits, quant::ActivationStats>> MergeActorFits(
    const ActorFits& fits);

// Removes the job's run state under output.dir (the learner's checkpoint,
// unit_table.pb, plans.jsonl, status.txt, the quality-target start
// rl_start.json and the evaluator's queue) so that
// the next job starts fresh instead of resuming.
absl::Status ClearJobState(const config::RunConfig& config);

absl::StatusOr<rl::RunResult> RunInProcessJob(const config::RunConfig& config,
                                              const InProcessJobOptions& options);

}  // namespace windquant::job

#endif  // WINDQUANT_JOB_IN_PROCESS_JOB_H_
