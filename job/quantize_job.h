// RunQuantizeJob: the whole WINDQuant job in one process (DESIGN.md sections
// 4-5), what `windquant quantize` runs: the run config's model, texts and
// (when cached) unit table (quant::QuantizationSession); training by the
// learner, evaluator and actor services wired with in-process gRPC channels
// (RunInProcessJob: PPO with the curriculum, warm start and checkpoints),
// whose actors fit the unit table and hand it over (it is fitted once, and
// cached for the next run); then the best feasible plan and every baseline
// measured at the final target (EvaluationSlices, PickWinner), and the
// artifacts in output.dir: plan.json / plan.bin (source: the returned plan's
// origin, ReturnedPlanOrigin), report.json / report.html
// (quantize_report.h) and, unless disabled, the quantized and fake-quant
// checkpoints. With output.store, the run goes to the artifact store too
// (learner/run_publisher.h): checkpoints and best plans as they are made,
// then the result as the run's "final" plan (plan, report, exported model);
// without --resume it is a new run there.
// Memory: one copy of the weights in their stored dtype (2 bytes per weight
// for BF16), shared by the session, the actors' stages and the evaluator's
// head; the fits (~0.13 bytes per weight at chunk 128) held by the actors
// while training and by the session after it (both for a moment while they
// are handed over); a plan's float32 weights one layer at a time per forward
// in flight. All released on return.
// Thread-compatible (sets nothing process-wide: at::set_num_threads is the caller's).
#ifndef WINDQUANT_JOB_QUANTIZE_JOB_H_
#define WINDQUANT_JOB_QUANTIZE_JOB_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/base/log.h"
#include "common/config/run_config.h"
#include "common/store/artifact_store.h"
#include "job/bisection_baseline.h"
#include "job/plan_measurement.h"
#include "job/search_baseline.h"

namespace windquant::job {

struct QuantizeOptions {
  bool resume = false;       // continue from output.dir/checkpoint (else it is cleared)
  bool use_cache = true;     // unit-table and fit caches (quant.cache_dir), the actors' too
  bool export_model = true;  // output.dir/quantized and output.dir/fake_quant (and output.export)
  // Measure uniform, greedy, lagrange, random, search and screened-search at
  // the end; each search (search_baseline.h: ProductSearchOptions, with
  // restarts; screened-search also screened by the reward model) spends as
  // many real plan evaluations on the selection slice as the RL run did (its
  // cache misses over the whole run, resumes included, the reference plan
  // included). The returned plan is then the one of RL, search and
  // screened-search with the lowest selection perplexity (PickReturned).
  // In the quality-target mode also the bisections over bits to epsilon
  // (bisection_baseline.h: lagrange-bisect, screened-bisect, with the same
  // count), which compete for the returned plan under the mode's rule.
  bool baselines = true;
  // The commit the binary was built from (base::BuildCommit; the CLI sets it), recorded in
  // report.json next to the config's variant digest (config::VariantDigest).
  std::string build_commit = "unknown";
  int64_t stop_after_updates = 0;  // > 0: stop (checkpoint first) after that many updates
  base::LogSink log;               // progress lines
  // With output.store: S3 settings, and how long the end waits for the store
  // to take the result (it retries while the store is down).
  store::S3Options s3;
  absl::Duration store_timeout = absl::Minutes(5);
  // Wall times count from here (the caller's start, e.g. before loading the config).
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
};

struct QuantizeResult {
  // stop_after_updates reached: only the checkpoint was written.
  bool stopped_early = false;
  int64_t updates = 0;
  std::string checkpoint_dir;
  MeasuredPlan fp;
  std::vector<MeasuredPlan> plans;  // the RL plan first, then the baselines
  // With baselines: search::UniformAnchors (common/search/baselines.h), measured as the plans are;
  // not candidates for the winner or the returned plan.
  std::vector<MeasuredPlan> anchors;
  // Where the returned plan came from: the RL run's (ReturnedPlanOrigin: "rl"
  // a sampled episode, "greedy-of-policy" the policy's argmax plan, "lagrange"
  // the reference plan, which no policy plan beat on the selection slice), or
  // "search" / "screened-search" when that search's plan measured lower on
  // the selection slice.
  std::string origin;
  std::string returned = "rl";   // the row of `plans` returned (plan.json, export)
  int64_t rl_evaluations = 0;    // real plan evaluations of the RL run (its start's included)
  SearchResult search;           // the search baseline (evaluations 0 when not run)
  SearchResult screened_search;  // the screened search (evaluations 0 when not run)
  // The quality-target mode's bisections over bits (bisection_baseline.h), rows
  // "lagrange-bisect" and "screened-bisect"; run (bisected) only in that mode
  // with baselines, each with at most rl_evaluations real evaluations.
  bool bisected = false;
  BisectionResult lagrange_bisect, screened_bisect;
  // The quality-target mode's start (also the lagrange-bisect row): the Lagrangian
  // bisection to epsilon measured before training, whose plan RL starts from
  // (docs/lagrange.md); evaluations 0 in the fixed-budget mode.
  BisectionResult rl_start;
  std::string winner;         // "" when no plan is within the target
  bool have_heldout = false;  // the winner metric is the held-out PPL (else whole text)
  double lambda = 0;
  double seconds = 0;     // since options.start
  std::string store_run;  // with output.store: "<store> runs/<run id>/"
};

// FAILED_PRECONDITION when no feasible plan was found at the final target;
// UNAVAILABLE when the store did not take the result within store_timeout
// (it is in output.dir then); the config's, the session's, the services',
// the store's and the files' errors.
absl::StatusOr<QuantizeResult> RunQuantizeJob(const config::RunConfig& config,
                                              const QuantizeOptions& options);

}  // namespace windquant::job

#endif  // WINDQUANT_JOB_QUANTIZE_JOB_H_
