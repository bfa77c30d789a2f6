// Episode-end evaluation (DESIGN.md section 4): the quality of a finished plan
// measured on the real quantized model, and the episode-end reward built from
// it.
//
// PlanEvaluator is the interface the trainer talks to (a remote evaluator can
// implement it later). LocalPlanEvaluator applies a plan from cached fits
// (quant::ApplyPlan: the model's weights shared, a layer dequantized when a
// forward reaches it; no refitting) to an in-process LlamaModel and measures
//   loss increase = mean NLL(plan) - mean NLL(FP) on the calibration slice,
//   perplexity    on the evaluation slice (and its relative increase d).
// CachingPlanEvaluator wraps any PlanEvaluator so that identical plans are
// evaluated once (keyed by a hash of the action vector, checked for equality).
#ifndef WINDQUANT_COMMON_RL_EPISODE_EVALUATOR_H_
#define WINDQUANT_COMMON_RL_EPISODE_EVALUATOR_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "common/config/run_config.h"
#include "common/model/llama_model.h"
#include "common/model/perplexity.h"
#include "common/quant/stage_fits.h"
#include "common/quant/unit_table.h"
#include "common/rl/plan_evaluation.h"

namespace windquant::rl {

// Thread-compatible (implementations may mutate a model).
class PlanEvaluator {
 public:
  virtual ~PlanEvaluator() = default;
  // Measures `actions` (one action index per unit of the global table).
  // INVALID_ARGUMENT for a malformed plan; INTERNAL for a model failure.
  virtual absl::StatusOr<PlanEvaluation> Evaluate(const std::vector<int>& actions) = 0;
  // FP perplexity on the evaluation slice (the reference of d).
  virtual double fp_eval_ppl() const = 0;
};

// Hash of an action vector (FNV-1a over the indices).
uint64_t PlanHash(const std::vector<int>& actions);

class CachingPlanEvaluator : public PlanEvaluator {
 public:
  // Does not own `inner`, which must outlive this.
  explicit CachingPlanEvaluator(PlanEvaluator* inner) : inner_(inner) {}
  absl::StatusOr<PlanEvaluation> Evaluate(const std::vector<int>& actions) override;
  double fp_eval_ppl() const override { return inner_->fp_eval_ppl(); }
  int64_t hits() const { return hits_; }
  int64_t misses() const { return misses_; }

 private:
  PlanEvaluator* inner_;
  std::unordered_multimap<uint64_t, std::pair<std::vector<int>, PlanEvaluation>> cache_;
  int64_t hits_ = 0, misses_ = 0;
};

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
  static absl::StatusOr<std::unique_ptr<LocalPlanEvaluator>> Create(
      const model::LlamaModel* model, const quant::StageFits* fits, const quant::UnitTable* table,
      std::vector<int32_t> calib_ids, std::vector<int32_t> eval_ids,
      const LocalEvaluatorOptions& options);

  absl::StatusOr<PlanEvaluation> Evaluate(const std::vector<int>& actions) override;
  double fp_eval_ppl() const override { return fp_eval_.perplexity; }
  double fp_calib_nll() const { return fp_calib_.nll; }

  // Perplexity of a plan (empty = the FP model) on arbitrary ids (e.g. the
  // whole evaluation text for final numbers). Not cached.
  absl::StatusOr<model::PerplexityResult> Measure(const std::vector<int>& actions,
                                                  const std::vector<int32_t>& ids,
                                                  int64_t max_tokens = 0);

 private:
  LocalPlanEvaluator() = default;
  // The model to measure: the FP one for empty `actions`, else the plan's.
  absl::StatusOr<std::shared_ptr<const model::LlamaModel>> Model(const std::vector<int>& actions);

  const model::LlamaModel* model_ = nullptr;
  const quant::StageFits* fits_ = nullptr;
  const quant::UnitTable* table_ = nullptr;
  std::vector<int32_t> calib_ids_, eval_ids_;
  model::PerplexityOptions ppl_options_;
  model::PerplexityResult fp_calib_, fp_eval_;
};

// The parts of the episode-end reward, for logs and tests.
struct EpisodeReward {
  double bit_reduction = 0;  // (16 - bits) / 16
  double violation = 0;      // max(0, bits - target)
  double total = 0;
};

// Episode-end reward (DESIGN.md section 4), one formula, here:
//   R = bit_reduction_weight     * (16 - bits) / 16
//     - loss_penalty_weight      * loss_increase
//     - violation_penalty_weight * max(0, bits - target)
//     - ppl_penalty_weight       * lambda * d            (prices "quality")
//     - ppl_penalty_weight * d - lambda * (bits - target) (prices "budget")
// bits = the plan's effective bits, d = relative PPL increase, lambda the
// current Lagrange multiplier (lagrange.h) and `prices` lagrange.prices: what
// lambda multiplies. A non-finite measurement gives a large finite penalty so
// PPO never sees NaN.
EpisodeReward EpisodeEndReward(const config::EnvConfig& env, const PlanEvaluation& evaluation,
                               double lambda, double target_bits,
                               std::string_view prices = "quality");

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_EPISODE_EVALUATOR_H_
