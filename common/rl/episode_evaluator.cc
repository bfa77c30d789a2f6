#include "common/rl/episode_evaluator.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/quant/quantized_stage.h"

namespace windquant::rl {
namespace {

// Stand-in for a non-finite measurement in the reward (a plan that broke the
// model): large enough to be the worst outcome, finite so PPO stays numeric.
constexpr double kBrokenPlanPenalty = 1e3;

double Finite(double x) { return std::isfinite(x) ? x : kBrokenPlanPenalty; }

}  // namespace

uint64_t PlanHash(const std::vector<int>& actions) {
  uint64_t h = 1469598103934665603ull;
  for (int a : actions) {
    h ^= static_cast<uint64_t>(static_cast<uint32_t>(a));
    h *= 1099511628211ull;
  }
  return h;
}

absl::StatusOr<PlanEvaluation> CachingPlanEvaluator::Evaluate(const std::vector<int>& actions) {
  const uint64_t key = PlanHash(actions);
  auto range = cache_.equal_range(key);
  for (auto it = range.first; it != range.second; ++it) {
    if (it->second.first == actions) {
      ++hits_;
      PlanEvaluation e = it->second.second;
      e.cached = true;
      return e;
    }
  }
  WQ_ASSIGN_OR_RETURN(PlanEvaluation e, inner_->Evaluate(actions));
  ++misses_;
  e.cached = false;
  cache_.emplace(key, std::make_pair(actions, e));
  return e;
}

absl::StatusOr<std::unique_ptr<LocalPlanEvaluator>> LocalPlanEvaluator::Create(
    const model::LlamaModel* model, const quant::StageFits* fits, const quant::UnitTable* table,
    std::vector<int32_t> calib_ids, std::vector<int32_t> eval_ids,
    const LocalEvaluatorOptions& options) {
  std::unique_ptr<LocalPlanEvaluator> e(new LocalPlanEvaluator());
  e->model_ = model;
  e->fits_ = fits;
  e->table_ = table;
  e->calib_ids_ = std::move(calib_ids);
  e->eval_ids_ = std::move(eval_ids);
  e->ppl_options_.context = options.context;
  e->ppl_options_.batch_size = options.batch;
  WQ_ASSIGN_OR_RETURN(e->fp_calib_,
                      model::ComputePerplexity(*model, e->calib_ids_, e->ppl_options_));
  WQ_ASSIGN_OR_RETURN(e->fp_eval_, model::ComputePerplexity(*model, e->eval_ids_, e->ppl_options_));
  return e;
}

absl::StatusOr<std::shared_ptr<const model::LlamaModel>> LocalPlanEvaluator::Model(
    const std::vector<int>& actions) {
  // A non-owning handle on the FP model (it outlives this evaluator).
  std::shared_ptr<const model::LlamaModel> fp(std::shared_ptr<const model::LlamaModel>(), model_);
  if (actions.empty()) return fp;
  if (actions.size() != table_->units.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan: ", actions.size(), " actions for ", table_->units.size(), " units"));
  }
  return quant::ApplyPlan(
      *model_,
      std::shared_ptr<const quant::StageFits>(std::shared_ptr<const quant::StageFits>(), fits_),
      std::make_shared<const std::vector<int>>(actions));
}

absl::StatusOr<PlanEvaluation> LocalPlanEvaluator::Evaluate(const std::vector<int>& actions) {
  if (actions.empty()) return absl::InvalidArgumentError("plan: no actions");
  WQ_ASSIGN_OR_RETURN(std::shared_ptr<const model::LlamaModel> m, Model(actions));
  WQ_ASSIGN_OR_RETURN(model::PerplexityResult calib,
                      model::ComputePerplexity(*m, calib_ids_, ppl_options_));
  WQ_ASSIGN_OR_RETURN(model::PerplexityResult eval,
                      model::ComputePerplexity(*m, eval_ids_, ppl_options_));
  PlanEvaluation out;
  out.effective_bits = table_->EffectiveBits(actions);
  out.calib_nll = calib.nll;
  out.loss_increase = calib.nll - fp_calib_.nll;
  out.eval_nll = eval.nll;
  out.eval_ppl = eval.perplexity;
  out.relative_ppl_increase = eval.perplexity / fp_eval_.perplexity - 1.0;
  out.tokens = calib.tokens + eval.tokens;
  out.seconds = calib.seconds + eval.seconds;
  return out;
}

absl::StatusOr<model::PerplexityResult> LocalPlanEvaluator::Measure(const std::vector<int>& actions,
                                                                    const std::vector<int32_t>& ids,
                                                                    int64_t max_tokens) {
  WQ_ASSIGN_OR_RETURN(std::shared_ptr<const model::LlamaModel> m, Model(actions));
  model::PerplexityOptions o = ppl_options_;
  o.max_tokens = max_tokens;
  return model::ComputePerplexity(*m, ids, o);
}

EpisodeReward EpisodeEndReward(const config::EnvConfig& env, const PlanEvaluation& e, double lambda,
                               double target_bits, std::string_view prices) {
  EpisodeReward r;
  r.bit_reduction = (16.0 - e.effective_bits) / 16.0;
  r.violation = std::max(0.0, e.effective_bits - target_bits);
  // DESIGN.md section 4, episode-end reward (formula documented in the header).
  r.total = env.bit_reduction_weight * r.bit_reduction -
            env.loss_penalty_weight * Finite(e.loss_increase) -
            env.violation_penalty_weight * r.violation -
            env.ppl_penalty_weight * (prices == "budget" ? 1.0 : lambda) *
                Finite(e.relative_ppl_increase);
  if (prices == "budget") r.total -= lambda * (e.effective_bits - target_bits);
  return r;
}

}  // namespace windquant::rl
