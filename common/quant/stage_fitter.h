// StageFitter: the one calibrate -> compensate -> fit -> cache path of the decoder layers
// [first_layer, end_layer) a model holds (DESIGN.md sections 3 and 8). Every user runs it:
// an actor's stage::StageWorker over its shard, and QuantizationSession over all layers
// (whose embeddings, head, tokenizer and texts stay its own). A pass:
//   StartPass(); Calibrate(hidden) per calibration batch, in order (activation
//   statistics, calibration.h; with Compensation::kGptq also the batches entering the
//   range); FinishPass: the inverse-Hessian factors from those batches one layer at a
//   time (GptqFactors::FromInputs, spilled to a scratch file under quant.cache_dir),
//   BuildStageFits, and the fit cache entry.
// Fit cache: one format, UnitTableCache's entries (unit table + fits + activation
// statistics + manifest), under FitCacheKey(cache identity, first_layer, end_layer): the
// layer range is part of the key, so a stage's entry and a whole model's never meet. The
// factors are not cached (a pass over the calibration batches costs less than their in^2
// floats on disk): a user that takes fits from the cache builds them with Factors().
// Memory (besides the shared model, which it does not copy): during a pass 16 bytes per
// input channel per linear of the range, and with compensation the batches entering the
// range (4 bytes x tokens x hidden), turned into the factors (gptq.h: ~1.2-1.3 x the
// BF16 weight bytes, spilled; one layer's Hessians, 8 bytes x in^2 per input kind, at a
// time) before the fits are built; nothing between passes.
// Thread-compatible: the caller serialises the calls (StageWorker holds a mutex).
#ifndef WINDQUANT_COMMON_QUANT_STAGE_FITTER_H_
#define WINDQUANT_COMMON_QUANT_STAGE_FITTER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "common/base/log.h"
#include "common/model/llama_model.h"
#include "common/quant/calibration.h"
#include "common/quant/compensation.h"
#include "common/quant/gptq.h"
#include "common/quant/stage_fits.h"
#include "common/quant/unit_table_builder.h"
#include "common/quant/unit_table_cache.h"
#include "common/quant/unit_table_options.h"

namespace windquant::quant {

// What a StageFitter reads; SessionOptions and StageWorkerOptions each carry these keys.
struct StageFitterOptions {
  UnitTableOptions units;                           // quant.chunk_size, quant.salient_fraction
  Compensation compensation = Compensation::kNone;  // quant.compensation
  // quant.cache_dir: the fit cache (when use_cache) and where the factors spill
  // (FactorSpillDir: the system's temporary directory when empty).
  std::string cache_dir;
  bool use_cache = true;  // read / write the fit cache in cache_dir (when set)
  base::LogSink log;      // progress lines (nullptr = silent)
};

// What a finished pass produced.
struct StageQuantization {
  StageFits fits;         // the range's table and fits; with the factors under kGptq
  ActivationStats stats;  // of the pass
  // OK, or why the cache entry could not be written (the fits are good either way).
  absl::Status cache_write;
};

class StageFitter {
 public:
  // The range is the decoder layers `model` holds (a stage's, or all of them).
  StageFitter(std::shared_ptr<const model::LlamaModel> model, StageFitterOptions options);

  int64_t first_layer() const { return first_layer_; }
  int64_t end_layer() const { return end_layer_; }
  const StageFitterOptions& options() const { return options_; }
  // True when a fit cache is read and written (use_cache and a cache_dir).
  bool caches() const { return options_.use_cache && !options_.cache_dir.empty(); }

  // Starts a calibration pass, discarding one in progress.
  void StartPass();
  // Runs hidden [B, T, H] (entering first_layer) through the range, accumulating;
  // returns the range's output. FAILED_PRECONDITION without StartPass; the Calibrator's
  // errors.
  absl::StatusOr<at::Tensor> Calibrate(const at::Tensor& hidden);
  // Ends the pass: factors (kGptq), the fits of the range with `table_fingerprint` in
  // their table, and (caches()) the cache entry of `cache_identity` (see CacheKey).
  // FAILED_PRECONDITION without a pass or when it saw no tokens; INVALID_ARGUMENT
  // "quant.compensation: gptq: ..." when a Hessian cannot be factored; BuildStageFits'
  // errors; INTERNAL for a torch error. `progress` is BuildStageFits'.
  absl::StatusOr<StageQuantization> FinishPass(const std::string& table_fingerprint,
                                               const std::string& cache_identity,
                                               const FitProgress& progress = nullptr);

  // The fit cache: the key of `cache_identity` (what names the model, calibration and
  // quantization to the caller: QuantizationSession's UnitTableFingerprint, an actor's
  // table fingerprint) for this range.
  std::string CacheKey(const std::string& cache_identity) const;
  // NOT_FOUND on a miss or when !caches(); DATA_LOSS for an unusable entry.
  absl::StatusOr<CachedQuantization> LoadCached(const std::string& cache_identity) const;
  // Writes the entry (fits of this range); OK without writing when !caches().
  absl::Status StoreCached(const std::string& cache_identity, const StageFits& fits,
                           const ActivationStats& stats) const;

  // The factors of the range from the calibration batches entering it (consumed), for
  // fits that came without them (from the cache). Errors as FinishPass's.
  absl::StatusOr<std::shared_ptr<const GptqFactors>> Factors(std::vector<at::Tensor> inputs) const;

 private:
  const std::shared_ptr<const model::LlamaModel> model_;
  const int64_t first_layer_, end_layer_;
  const StageFitterOptions options_;
  std::unique_ptr<Calibrator> calibrator_;  // during a pass
  std::vector<at::Tensor> inputs_;          // kGptq: the batches of the pass
};

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_STAGE_FITTER_H_
