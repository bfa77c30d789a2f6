// PipelineEvaluator: the evaluator's domain object (DESIGN.md section 5). Owns
// the tokenised calibration and evaluation texts, the embeddings, the final
// norm and lm_head (no decoder layer), and drives passes through the stages of
// one replica as a pipeline: one thread per stage boundary, several
// micro-batches in flight at once (micro-batch m+1 is on stage 0 while m is on
// stage 1). It
//   - runs the calibration pass and has every stage fit its shard;
//   - measures perplexity through the stages with exactly the protocol of
//     model::ComputePerplexity (BOS + chunk windows, NLL in double);
//   - evaluates plans with rl::PlanEvaluationCore over a PipelinePlanBackend
//     per replica: mean NLL on a calibration slice (the loss-increase term)
//     and perplexity on an evaluation slice (the PPL term) against the
//     full-precision reference measured once, identical plans (same
//     fingerprint and actions) answered from one cache for all replicas.
// The λ update is not here (it belongs to whoever orders evaluations).
//
// Thread-safety: all methods are thread-safe; passes over different replicas
// run concurrently. Borrows the transports passed to each call.
#ifndef WINDQUANT_EVALUATOR_PIPELINE_EVALUATOR_H_
#define WINDQUANT_EVALUATOR_PIPELINE_EVALUATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/llama_model.h"
#include "common/model/perplexity.h"
#include "common/plan/plan.h"
#include "common/plan/unit_table.h"
#include "common/rl/plan_evaluation.h"
#include "common/rl/plan_evaluation_core.h"
#include "common/transport/activation_transport.h"
#include "evaluator/replica_evaluator.h"

namespace windquant::evaluator {

struct PipelineEvaluatorOptions {
  model::ComputeOptions compute;      // where the embeddings and the head compute
  int64_t context = 256;              // window length N (BOS + N-1 tokens)
  int64_t batch_size = 16;            // windows per micro-batch
  int64_t calib_slice_tokens = 8192;  // calibration-text tokens of the loss term (0 = all)
  int64_t eval_slice_tokens = 16384;  // evaluation-text tokens of the PPL term (0 = all)
  int calibration_samples = 32;       // calibration pass: windows
  int calibration_seq_len = 256;      //   of this many tokens (incl. BOS)
  uint64_t calibration_seed = 0;
  int64_t calibration_batch = 8;    //   windows per micro-batch
  size_t result_cache_size = 4096;  // plans remembered (rl::PlanCache, oldest out first)
};

class PipelineEvaluator : public ReplicaEvaluator {
 public:
  // Loads embeddings + final norm + lm_head of `model_dir` (no layer).
  // INVALID_ARGUMENT when the options are out of range or a text is shorter
  // than one window.
  static absl::StatusOr<std::unique_ptr<PipelineEvaluator>> Create(
      const std::string& model_dir, const PipelineEvaluatorOptions& options,
      std::vector<int32_t> calibration_ids, std::vector<int32_t> evaluation_ids);
  // The same with head weights already loaded (tests).
  static absl::StatusOr<std::unique_ptr<PipelineEvaluator>> FromWeights(
      model::LlamaWeights head_weights, const PipelineEvaluatorOptions& options,
      std::vector<int32_t> calibration_ids, std::vector<int32_t> evaluation_ids);

  const model::LlamaConfig& config() const { return head_.config(); }
  const PipelineEvaluatorOptions& options() const { return options_; }
  // The calibration text (the loss term's slice is its first
  // options().calib_slice_tokens) and the evaluation text (the PPL term's).
  const std::vector<int32_t>& calibration_ids() const { return calibration_ids_; }
  const std::vector<int32_t>& evaluation_ids() const { return evaluation_ids_; }

  // The held-out text (evaluation.heldout, encoded without BOS): final numbers
  // only, no step that chooses a plan reads it. Call once before the evaluator
  // is shared between threads. INVALID_ARGUMENT for an id outside the vocabulary
  // or a text shorter than one window of options().context.
  absl::Status SetHeldOut(std::vector<int32_t> heldout_ids);
  bool has_heldout() const { return !heldout_ids_.empty(); }

  // Checks that `stages` chain to the whole model: layers [0, L) contiguous.
  absl::Status CheckChain(const std::vector<transport::ActivationTransport*>& stages) const;

  // quant::CalibrationKey of the calibration windows' definition (ids,
  // samples, length, seed): what the stages' tables depend on besides the model.
  std::string CalibrationFingerprint() const override;

  // Calibration pass through `stages`, then every stage fits its shard;
  // returns the stage tables in stage order.
  absl::StatusOr<std::vector<plan::UnitTable>> Calibrate(
      const std::vector<transport::ActivationTransport*>& stages,
      const std::string& fingerprint) override;

  // Perplexity of `ids` (a text encoded without BOS, first `max_tokens` ids;
  // <= 0 all) through `stages` running `spec`: the protocol of
  // model::ComputePerplexity with micro-batches of options.batch_size windows.
  absl::StatusOr<model::PerplexityResult> Perplexity(
      const std::vector<transport::ActivationTransport*>& stages, const transport::PassSpec& spec,
      const std::vector<int32_t>& ids, int64_t max_tokens);

  // The full-precision reference (computed on first use, then kept).
  absl::StatusOr<PlanEvaluation> Reference(
      const std::vector<transport::ActivationTransport*>& stages);

  // Evaluates `plan` (its actions over the global unit order) through
  // `stages`; identical plans are answered from the cache (cached = true).
  absl::StatusOr<PlanEvaluation> Evaluate(
      const std::vector<transport::ActivationTransport*>& stages, const plan::Plan& plan) override;

  // The perplexity of `plan` on the whole held-out text through `stages` (not
  // cached: a run asks for a few plans' once). The result's eval_* fields and
  // tokens are the held-out text's, effective_bits is 0 (the caller's table has
  // it); no loss term. FAILED_PRECONDITION naming evaluation.heldout when there
  // is no held-out text; Perplexity's errors.
  absl::StatusOr<PlanEvaluation> HeldOutPerplexity(
      const std::vector<transport::ActivationTransport*>& stages, const plan::Plan& plan) override;

  // The pass of `plan` through the stages (nullptr: full precision).
  static transport::PassSpec PlanPass(const plan::Plan* plan);

  // The stage-side plan id of `plan`: a digest of fingerprint + actions, so
  // identical plans share applied weights on the stages.
  static std::string PlanKey(const plan::Plan& plan);

 private:
  PipelineEvaluator(model::LlamaWeights head_weights, const PipelineEvaluatorOptions& options,
                    std::vector<int32_t> calibration_ids, std::vector<int32_t> evaluation_ids);

  // Runs `inputs` (count micro-batches produced on demand by `make_input`)
  // through the stages; `sink` gets every output of the last stage in order.
  absl::Status RunPipeline(const std::vector<transport::ActivationTransport*>& stages,
                           const transport::PassSpec& spec, int64_t count,
                           const std::function<absl::StatusOr<at::Tensor>(int64_t)>& make_input,
                           const std::function<absl::Status(int64_t, const at::Tensor&)>& sink);

  const PipelineEvaluatorOptions options_;
  const model::LlamaModel head_;  // embeddings, final norm, lm_head
  const std::vector<int32_t> calibration_ids_;
  const std::vector<int32_t> evaluation_ids_;
  std::vector<int32_t> heldout_ids_;  // set once before sharing (SetHeldOut)

  rl::PlanEvaluationCore core_;  // the reference and the cache of every replica
};

}  // namespace windquant::evaluator

#endif  // WINDQUANT_EVALUATOR_PIPELINE_EVALUATOR_H_
