// InProcessPlanBackend: the PlanBackend of a whole model in this process
// (DESIGN.md section 4). A plan is applied from cached fits (quant::ApplyPlan:
// the model's weights shared, a layer dequantized when a forward reaches it;
// no refitting) and measured with model::ComputePerplexity.
// Memory: borrows the model, the fits and the table; keeps only the two
// slices' token ids. A measurement holds the plan's dequantized layers until
// it returns.
// Thread-compatible.
#ifndef WINDQUANT_COMMON_RL_IN_PROCESS_PLAN_BACKEND_H_
#define WINDQUANT_COMMON_RL_IN_PROCESS_PLAN_BACKEND_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/llama_model.h"
#include "common/model/perplexity.h"
#include "common/plan/unit_table.h"
#include "common/quant/stage_fits.h"
#include "common/rl/plan_backend.h"

namespace windquant::rl {

class InProcessPlanBackend : public PlanBackend {
 public:
  // `model` holds the FP weights of every layer + head (not modified). `model`,
  // `fits` and `table` are not owned and must outlive this. calib_ids /
  // eval_ids: the slices (texts encoded without BOS, already cut to
  // evaluation.calib_slice_tokens / eval_slice_tokens); `options`: context
  // and batch of every measurement.
  InProcessPlanBackend(const model::LlamaModel* model, const quant::StageFits* fits,
                       const plan::UnitTable* table, std::vector<int32_t> calib_ids,
                       std::vector<int32_t> eval_ids, const model::PerplexityOptions& options);

  // INVALID_ARGUMENT for a plan without actions or with one count of actions
  // other than the table's units; the model's errors. effective_bits: the
  // table's for a plan, 0 for the FP model.
  absl::StatusOr<SliceMeasurement> Measure(const plan::Plan* plan) override;

  // Perplexity of a plan (empty = the FP model) on arbitrary ids (e.g. the
  // whole evaluation text for final numbers), the first `max_tokens` (<= 0 all).
  absl::StatusOr<model::PerplexityResult> Perplexity(const std::vector<int>& actions,
                                                     const std::vector<int32_t>& ids,
                                                     int64_t max_tokens = 0);

 private:
  // The model to measure: the FP one for empty `actions`, else the plan's.
  absl::StatusOr<std::shared_ptr<const model::LlamaModel>> Model(const std::vector<int>& actions);

  const model::LlamaModel* model_;
  const quant::StageFits* fits_;
  const plan::UnitTable* table_;
  const std::vector<int32_t> calib_ids_, eval_ids_;
  const model::PerplexityOptions options_;
};

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_IN_PROCESS_PLAN_BACKEND_H_
