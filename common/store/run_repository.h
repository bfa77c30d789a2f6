// RunRepository: the runs of an artifact store (DESIGN.md section 6). A run
// (one training run: `windquant quantize` or the distributed learner) is
//   runs/<run_id>/run.json             RunInfo, rewritten as the run goes
//   runs/<run_id>/plans/<plan_id>/     plans (PlanRepository, manifest last):
//       best-<digest>                  every new best feasible plan as found
//                                      (plan.json, plan.bin); <digest> = the
//                                      first 12 hex of sha256(fingerprint ":"
//                                      actions), so a plan pushed twice is one
//       final                          the run's result: plan.json, plan.bin,
//                                      report.json, report.html, quantized/,
//                                      fake_quant/ (when exported)
//   runs/<run_id>/checkpoints/<id>/    the learner's checkpoints (run.ckpt,
//                                      unit_table.pb, plans.jsonl), id
//                                      "u<update, 8 digits>-<unix ms, 13 digits>"
//                                      so that the newest sorts last
// Every plan and checkpoint is a PlanRepository entry: written object by
// object, its manifest (sizes, sha256, metadata) last, verified on pull.
// Run ids: [A-Za-z0-9._-], as plan ids (ValidatePlanId).
// Thread-compatible; does not own the store.
#ifndef WINDQUANT_COMMON_STORE_RUN_REPOSITORY_H_
#define WINDQUANT_COMMON_STORE_RUN_REPOSITORY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/store/artifact_store.h"
#include "common/store/plan_repository.h"

namespace windquant::store {

inline constexpr char kRunsPrefix[] = "runs/";
inline constexpr char kRunInfoName[] = "run.json";
inline constexpr char kRunInfoFormat[] = "windquant.run.v1";
inline constexpr char kFinalPlanId[] = "final";

// What run.json says about a run.
struct RunInfo {
  std::string run_id;
  std::string model;          // model.dir's base name
  std::string config_digest;  // config::RunConfigDigest: the run's config
  double target_bits = 0;     // the final curriculum target
  std::string created;        // RunRepository::FormatTime
  std::string updated;
  std::string state = "running";  // "running" or "done"
  int64_t updates = 0;            // PPO updates of the newest checkpoint pushed
  std::string best_plan;          // plan id under plans/ ("" = none yet)
  double best_bits = 0, best_perplexity = 0;
};

// A plan of a run, as its manifest describes it.
struct RunPlan {
  std::string plan_id;
  std::map<std::string, std::string> metadata;  // effective_bits, perplexity, created, ...
  int64_t size_bytes = 0;                       // all objects together
};

class RunRepository {
 public:
  explicit RunRepository(ArtifactStore* store) : store_(store) {}

  static std::string RunPrefix(absl::string_view run_id);
  // The run's plans ("runs/<id>/plans/") and checkpoints ("runs/<id>/checkpoints/").
  PlanRepository Plans(absl::string_view run_id) const;
  PlanRepository Checkpoints(absl::string_view run_id) const;

  static std::string CheckpointId(int64_t update, absl::Time time);
  // RFC 3339 UTC with milliseconds ("2025-01-31T12:00:00.000Z"): sorts as it reads.
  static std::string FormatTime(absl::Time time);

  absl::Status PutRunInfo(const RunInfo& info);
  // NOT_FOUND when the run has no run.json; DATA_LOSS for a bad one.
  absl::StatusOr<RunInfo> GetRunInfo(absl::string_view run_id);
  // Every run with a run.json, newest first (created, then id).
  absl::StatusOr<std::vector<RunInfo>> ListRuns();
  // The newest run (created, then id) whose id starts with `id_prefix`;
  // NOT_FOUND when there is none.
  absl::StatusOr<std::string> LatestRun(absl::string_view id_prefix);
  // The run's complete plans, newest first (metadata "created", then id).
  absl::StatusOr<std::vector<RunPlan>> ListPlans(absl::string_view run_id);
  // The newest complete checkpoint's id; NOT_FOUND when there is none.
  absl::StatusOr<std::string> LatestCheckpoint(absl::string_view run_id);
  // Deletes every complete checkpoint but the newest `keep` (>= 1).
  absl::Status PruneCheckpoints(absl::string_view run_id, int keep);

  static std::string RunInfoToJson(const RunInfo& info);
  static absl::StatusOr<RunInfo> ParseRunInfo(absl::string_view json, absl::string_view run_id);

 private:
  ArtifactStore* store_;
};

}  // namespace windquant::store

#endif  // WINDQUANT_COMMON_STORE_RUN_REPOSITORY_H_
