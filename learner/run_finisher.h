// RunFinisher: the result of a distributed run, written by the learner when
// its curriculum is done (`windquant quantize` writes its own, richer one):
//   plan.json, plan.bin      the returned plan (of the learner's table, whose
//                            fingerprint every path computes alike): the
//                            lowest selection perplexity of RL's best feasible
//                            plan and the searches' (final_rows.h)
//   report.json, report.html the run's report (common/report): the best plan,
//                            the searches' and the final stage's reference at
//                            the evaluator's perplexity (evaluation slice), bits
//                            per unit, the training curve; report.json also
//                            has "run_id", "commit", "config_digest", the rows of `windquant
//                            quantize` (RL, the searches and in the quality-target mode the
//                            bisections, on the selection slice and the held-out text, their
//                            evaluation counts, the returned plan's origin) and, when exported,
//                            "exported"
//   quantized/, fake_quant/  with output.export: the exported model, assembled from
//                            the stages' actors (export_assembler.h): the learner
//                            owns no layers and loads no weights; report.json's
//                            "exported" gives the evaluator's perplexity of the plan
//                            (the weights the actors apply, on evaluation.selection)
//                            and the bytes pulled
// Memory: the plan, the report and the assembler's one chunk.
// Stateless; thread-compatible.
#ifndef WINDQUANT_LEARNER_RUN_FINISHER_H_
#define WINDQUANT_LEARNER_RUN_FINISHER_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/base/log.h"
#include "common/base/text_range.h"
#include "common/plan/unit_table.h"
#include "common/rl/run_result.h"
#include "learner/export_assembler.h"
#include "learner/final_rows.h"
#include "learner/run_start.h"

namespace windquant::learner {

struct FinalArtifacts {
  std::vector<std::string> entries;             // written under the directory
  std::map<std::string, std::string> metadata;  // for the store's manifest
};

struct FinishOptions {
  std::string model_dir;          // model.dir: the report's model name
  std::string run_defining_text;  // config::RunDefiningText: the report's run fingerprint
  std::string config_digest;      // config::VariantDigest: report.json's "config_digest"
  std::string commit;             // the binary's (base::BuildCommit); "" = "unknown"
  double target_bits = 2.0;       // the last of curriculum.target_bits: the plan's target
  base::TextRange selection;      // evaluation.selection: what the evaluator measured on
  int context = 256;              // evaluation.context
  int batch = 16;                 // evaluation.batch
  bool export_model = true;       // output.export
  // The actors of every stage (stage-major), for the export; empty = none reachable.
  std::vector<ExportStageActors> actors;
  ExportAssemblerOptions export_options;
  base::LogSink log;
  // The evaluator's measurements of a plan (LearnerNode binds Evaluator.EvaluatePlan);
  // null: the report has RL's row from its evaluation and no held-out numbers.
  PlanMeasurer measure;
  // The searches run beside RL (job/final_searches.h); searches_note says why
  // there are none.
  std::vector<FinalSearch> searches;
  std::string searches_note;
  // The quality-target mode's bisections of bits to epsilon (job/final_searches.h),
  // rows after the searches; searches_note says why there are none.
  std::vector<FinalBisection> bisections;
  EvaluationCosts costs;  // what RL's and the searches' evaluations read
  // The uniform anchors (MeasureAnchors), measured when `measure` is set; empty: none.
  std::vector<FinalRow> anchors;
  // The quality-target mode (lagrange.prices: target): its epsilon (0 = the
  // fixed-budget mode) and the learner's output.dir, whose plans.jsonl has
  // every measured plan for the report's degradation chart.
  double max_ppl_increase = 0;
  std::string records_dir;
  // The quality-target mode's start (LearnerNode fills it from the core):
  // report.json's quality_target.rl_start; nullopt: none.
  std::optional<RunStart> start;
};

// Writes the files above into `dir`. FAILED_PRECONDITION when the run has no
// feasible plan, or with output.export and no actors; the errors of the export
// (nothing of it is left in `dir` then) and of the files.
absl::StatusOr<FinalArtifacts> WriteFinalArtifacts(const rl::RunResult& result,
                                                   const plan::UnitTable& table,
                                                   const std::string& run_id,
                                                   const std::string& dir,
                                                   const FinishOptions& options);

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_RUN_FINISHER_H_
