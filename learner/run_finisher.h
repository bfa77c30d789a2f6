// RunFinisher: the result of a distributed run, written by the learner when
// its curriculum is done (`windquant quantize` writes its own, richer one):
//   plan.json, plan.bin      the best feasible plan (of the learner's table,
//                            whose fingerprint every path computes alike)
//   report.json, report.html the run's report (common/report): the best plan
//                            and the final stage's reference at the
//                            evaluator's perplexity (evaluation slice), bits
//                            per unit, the training curve; report.json also
//                            has "run_id" and, when exported, "exported"
//   quantized/, fake_quant/  with output.export: the exported model
//                            (quant::WriteQuantizedCheckpoint and
//                            WriteFakeQuantCheckpoint)
// With output.export the learner opens the run config's QuantizationSession
// (model, calibration, fits; from quant.cache_dir when cached) for the export
// and measures the exported fake-quant checkpoint as `windquant eval --model
// DIR --text evaluation.text --context evaluation.context --batch
// evaluation.batch --max-tokens N` does (N = evaluation.final_eval_tokens, or
// evaluation.eval_slice_tokens when that is 0); that number is report.json's
// "exported.perplexity".
// Memory: with the export, the session's (all weights in float32 plus the
// fits) until it returns; otherwise the plan and report only.
// Stateless; thread-compatible.
#ifndef WINDQUANT_LEARNER_RUN_FINISHER_H_
#define WINDQUANT_LEARNER_RUN_FINISHER_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/base/log.h"
#include "common/config/run_config.h"
#include "common/quant/unit_table.h"
#include "common/rl/run_result.h"

namespace windquant::learner {

struct FinalArtifacts {
  std::vector<std::string> entries;             // written under the directory
  std::map<std::string, std::string> metadata;  // for the store's manifest
};

// Writes the files above into `dir`. FAILED_PRECONDITION when the run has no
// feasible plan or the session's table is another one than `table`; the
// errors of the session, the export and the files.
absl::StatusOr<FinalArtifacts> WriteFinalArtifacts(
    const config::RunConfig& config, const rl::RunResult& result, const quant::UnitTable& table,
    const std::string& run_id, const std::string& dir, const base::LogSink& log);

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_RUN_FINISHER_H_
