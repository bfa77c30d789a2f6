// QuantizationSession: the single-process quantization pipeline of a run's model,
// calibration and unit table (SessionOptions; job::SessionOptionsFrom builds them from
// the run config), used by `windquant baseline|export|eval|table` and the one-process job:
//   open the checkpoint, load every weight (in its stored dtype), tokenize the
//   calibration text (model.dir/tokenizer.json), SampleCalibrationWindows, then the
//   stage part over all layers: StageFitter (stage_fitter.h), the one calibrate ->
//   compensate -> fit -> cache path the actors' stage workers run over their shards
//   -- or the fits from its cache (unit_table_cache.h) when the fingerprint matches --
// and then measure the perplexity of plans on the held-out text
// (evaluation.heldout). Calibration reads only calibration.tokens of
// calibration.text (base::ReadTextRange).
// Owns one QuantizedStage of the whole model (weights + fits + unit table), which
// other users may share (stage()).
// With SessionOptions.fit = false the fits come later (AdoptFits).
// Memory, for the session's life: the weights in their stored dtype (2 bytes per
// weight for BF16) + the fits (~0.13 bytes per weight at chunk 128) + the token ids;
// a plan's weights exist one layer at a time inside a forward (4 bytes per weight of
// one layer); with quant.compensation: gptq also the inverse-Hessian factors (gptq.h,
// packed: 2 bytes x in^2 per input kind per layer; built one layer at a time, or shared
// with the actors' fits handed over by AdoptFits), and each plan model its compensated
// layers' codes (1 byte per weight: quantized_stage.h). Thread-safety: const methods
// may be called concurrently.
#ifndef WINDQUANT_COMMON_QUANT_QUANTIZATION_SESSION_H_
#define WINDQUANT_COMMON_QUANT_QUANTIZATION_SESSION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "common/base/log.h"
#include "common/base/text_range.h"
#include "common/model/checkpoint.h"
#include "common/model/llama_model.h"
#include "common/model/perplexity.h"
#include "common/model/tokenizer.h"
#include "common/plan/plan.h"
#include "common/plan/unit_table.h"
#include "common/quant/calibration.h"
#include "common/quant/calibration_options.h"
#include "common/quant/quantized_stage.h"
#include "common/quant/session_options.h"
#include "common/quant/stage_fits.h"
#include "common/quant/stage_fitter.h"
#include "common/quant/unit_table_options.h"

namespace windquant::quant {

class QuantizationSession {
 public:
  // Runs the pipeline above. Errors name the file or config key at fault
  // (missing model dir / tokenizer / text, text shorter than one window, ...).
  static absl::StatusOr<std::unique_ptr<QuantizationSession>> Create(const SessionOptions& options);

  // What the session was created with (log and use_cache as given).
  const SessionOptions& options() const { return options_; }
  // False only between Create with options.fit = false (and no cache hit) and AdoptFits;
  // table(), fits(), stage() and the plan methods need fits.
  bool fitted() const { return stage_ != nullptr; }
  const plan::UnitTable& table() const { return stage_->table(); }
  const StageFits& fits() const { return stage_->fits(); }
  // The full-precision model (all layers, embeddings and head).
  const model::LlamaModel& model() const { return *model_; }
  const std::shared_ptr<const model::LlamaModel>& shared_model() const { return model_; }
  // Weights + fits, to share with other users of the same model.
  const std::shared_ptr<const QuantizedStage>& stage() const { return stage_; }
  const model::Tokenizer& tokenizer() const { return *tokenizer_; }
  // Per-linear activation statistics (mean |x_j|); from the cache when it hit.
  const ActivationStats& activation_stats() const { return stats_; }
  // Calibration windows [samples, seq_len] int64 (BOS first).
  const at::Tensor& calibration_windows() const { return calib_windows_; }
  // Held-out text ids without BOS (options.heldout; empty when !load_eval_text).
  const std::vector<int32_t>& eval_ids() const { return eval_ids_; }
  // True when the unit table and fits came from the cache (nothing was fitted).
  bool from_cache() const { return from_cache_; }
  // The cache identity of the options, model and calibration text (UnitTableFingerprint:
  // every weight hashed); the fit cache keys the entry by it and the layers (FitCacheKey).
  const std::string& fingerprint() const { return fingerprint_; }
  // The unit table's identity (table_fingerprint.h) that every plan of these options
  // carries; known before any fit.
  const std::string& table_fingerprint() const { return table_fingerprint_; }

  // Takes fits of the whole model computed elsewhere from the same calibration (their
  // table's fingerprint is replaced by this session's) and the activation statistics
  // they came from; stores both in the cache when the session uses it. With
  // compensation, factors the fits carry (StageFits::shared_compensation) are kept.
  // FAILED_PRECONDITION when the session already has fits; INVALID_ARGUMENT when the
  // fits do not cover the model's layers.
  absl::Status AdoptFits(StageFits fits, ActivationStats stats);
  // The calibration pass, factors and BuildStageFits over every layer (StageFitter; stored
  // in the cache when the session uses it); what Create does unless options.fit = false.
  // FAILED_PRECONDITION when the session already has fits.
  absl::Status Fit();

  // The model with the plan applied (one action index per unit): shares the weights,
  // dequantizes a layer when a forward reaches it (QuantizedStage::PlanModel).
  // INVALID_ARGUMENT for a wrong length / action out of range.
  absl::StatusOr<std::shared_ptr<const model::LlamaModel>> PlanModel(
      const std::vector<int>& actions) const;

  // Perplexity (model/perplexity.h protocol, options' context and batch) of the model with
  // `actions` applied on the first `max_tokens` held-out ids (<= 0: all). An empty `actions`
  // measures the FP model.
  absl::StatusOr<model::PerplexityResult> Perplexity(const std::vector<int>& actions,
                                                     int64_t max_tokens) const;
  // Same on any ids (e.g. a calibration slice).
  absl::StatusOr<model::PerplexityResult> Perplexity(const std::vector<int>& actions,
                                                     const std::vector<int32_t>& ids,
                                                     int64_t max_tokens) const;

  // The fits (with the unit table) of `options` from the unit-table cache, without a
  // session: `checkpoint` (options.model_dir's) is hashed one decoder layer at a time, so
  // memory is one layer plus the embeddings plus the fits, for a model of any size (what
  // `windquant export` streams from). The table carries the fingerprint every plan of
  // the options carry. NOT_FOUND on a cache miss or without cache_dir; DATA_LOSS for an
  // unusable entry; errors of the model folder and calibration text as Create's.
  static absl::StatusOr<StageFits> LoadCachedFits(const SessionOptions& options,
                                                  const model::Checkpoint& checkpoint);

  // A Plan for this session's table: fingerprint filled, actions copied.
  plan::Plan MakePlan(std::vector<int> actions, std::string source, double target_bits) const;

 private:
  QuantizationSession() = default;
  absl::Status SetFits(StageFits fits);
  void WarnIfNotCached(const absl::Status& cache_write) const;

  SessionOptions options_;
  bool use_cache_ = true;  // options_.use_cache and a cache_dir
  std::string fingerprint_;
  std::string table_fingerprint_;  // the table's identity (table_fingerprint.h), set on every fit
  std::shared_ptr<const model::LlamaModel> model_;
  std::unique_ptr<StageFitter> fitter_;  // the stage part: every layer of model_
  std::shared_ptr<const QuantizedStage> stage_;
  std::unique_ptr<model::Tokenizer> tokenizer_;
  ActivationStats stats_;
  at::Tensor calib_windows_;
  std::vector<int32_t> eval_ids_;
  bool from_cache_ = false;
};

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_QUANTIZATION_SESSION_H_
