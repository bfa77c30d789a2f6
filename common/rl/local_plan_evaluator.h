// LocalPlanEvaluator: the PlanEvaluator of a whole model in this process
// (DESIGN.md section 4): PlanEvaluationCore over an InProcessPlanBackend, the
// full-precision reference measured at creation, no cache (wrap it in a
// CachingPlanEvaluator for one). It measures
//   loss increase = mean NLL(plan) - mean NLL(FP) on the calibration slice,
//   perplexity    on the evaluation slice (and its relative increase d).
// Memory: InProcessPlanBackend's.
// Thread-compatible.
#ifndef WINDQUANT_COMMON_RL_LOCAL_PLAN_EVALUATOR_H_
#define WINDQUANT_COMMON_RL_LOCAL_PLAN_EVALUATOR_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/llama_model.h"
#include "common/model/perplexity.h"
#include "common/plan/unit_table.h"
#include "common/quant/stage_fits.h"
#include "common/rl/in_process_plan_backend.h"
#include "common/rl/plan_evaluation_core.h"
#include "common/rl/plan_evaluator.h"

namespace windquant::rl {

struct LocalEvaluatorOptions {
  int64_t context = 256;  // window length incl. BOS (perplexity.h protocol)
  int64_t batch = 16;     // windows per forward
};

class LocalPlanEvaluator : public PlanEvaluator {
 public:
  // `model` holds the FP weights of every layer + head (not modified). `fits`
  // and `table` are not owned and must outlive this.
  // calib_ids / eval_ids: the slices (texts encoded without BOS, already cut
  // to evaluation.calib_slice_tokens / eval_slice_tokens).
  // The model's errors measuring the full-precision reference.
  static absl::StatusOr<std::unique_ptr<LocalPlanEvaluator>> Create(
      const model::LlamaModel* model, const quant::StageFits* fits, const plan::UnitTable* table,
      std::vector<int32_t> calib_ids, std::vector<int32_t> eval_ids,
      const LocalEvaluatorOptions& options);

  // INVALID_ARGUMENT for a plan without actions or of the wrong length.
  absl::StatusOr<PlanEvaluation> Evaluate(const std::vector<int>& actions) override;
  double fp_eval_ppl() const override { return reference_.eval_ppl; }
  double fp_calib_nll() const { return reference_.calib_nll; }

  // Perplexity of a plan (empty = the FP model) on arbitrary ids (e.g. the
  // whole evaluation text for final numbers). Not cached.
  absl::StatusOr<model::PerplexityResult> Measure(const std::vector<int>& actions,
                                                  const std::vector<int32_t>& ids,
                                                  int64_t max_tokens = 0) {
    return backend_.Perplexity(actions, ids, max_tokens);
  }

 private:
  LocalPlanEvaluator(const model::LlamaModel* model, const quant::StageFits* fits,
                     const plan::UnitTable* table, std::vector<int32_t> calib_ids,
                     std::vector<int32_t> eval_ids, const model::PerplexityOptions& options)
      : backend_(model, fits, table, std::move(calib_ids), std::move(eval_ids), options),
        core_(/*cache_capacity=*/0) {}

  InProcessPlanBackend backend_;
  PlanEvaluationCore core_;
  PlanEvaluation reference_;
};

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_LOCAL_PLAN_EVALUATOR_H_
