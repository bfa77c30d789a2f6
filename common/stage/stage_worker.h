// StageWorker: one stage of the model (DESIGN.md sections 2 and 5): owns
// decoder layers [first_layer, end_layer) of one replica (only those tensors
// are loaded), takes part in the calibration pass, fits every (unit, action)
// of its shard into its part of the unit table, and runs hidden-state
// micro-batches through its layers with a plan applied. An actor serves one
// over gRPC (actor/actor_service.h); in one process it is reached through
// transport::LocalActivationTransport.
//
// Plans: a plan is applied by a model sharing the stage's weights that
// dequantizes each layer's chosen actions when a forward reaches it
// (quant::QuantizedStage::PlanModel); the plan models are kept per plan id
// (LRU, `plan_cache_size`; on the CPU without compensation each holds only its actions;
// otherwise one plan, which holds its layers' codes on the stage's device once a forward
// has reached them, ~1.1 bytes per weight: quant/quantized_stage.h).
// Calibration, compensation, fits and the fit cache are quant::StageFitter's, the one
// path every layer range takes (QuantizationSession runs the same over all layers):
// when `cache_dir` is set the stage's table, fits and statistics are stored there
// (quant/unit_table_cache.h, keyed by the table fingerprint and the stage's layers),
// and a restarted actor reloads them instead of waiting for a new calibration pass.
// Memory: the stage's weights in their stored dtype (2 bytes per weight for
// BF16) and, once fitted, its StageFits (~0.13 bytes per weight at chunk 128),
// for the worker's life (with compensation also the inverse-Hessian factors, packed:
// 2 bytes x in^2 per input kind per layer, ~1.2-1.3 x the BF16 weight bytes: quant/gptq.h;
// and during the calibration pass the stage's input batches, 4 bytes x tokens x hidden,
// turned into the factors one layer at a time: quant/stage_fitter.h); the kept plan's
// codes, when it holds them (~1.1 bytes per weight, on the stage's device); during a
// forward with a plan, 4 bytes per weight of the layer being computed (+2 in bfloat16),
// per concurrent forward.
//
// Thread-safety: all methods are thread-safe. Forward calls run concurrently;
// calibration calls (and the fit that ends a pass) are serialised.
#ifndef WINDQUANT_COMMON_STAGE_STAGE_WORKER_H_
#define WINDQUANT_COMMON_STAGE_STAGE_WORKER_H_

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/model/llama_model.h"
#include "common/plan/unit_table.h"
#include "common/quant/calibration.h"
#include "common/quant/compensation.h"
#include "common/quant/quantized_stage.h"
#include "common/quant/stage_fits.h"
#include "common/quant/stage_fitter.h"
#include "common/quant/unit_table_options.h"

namespace windquant::stage {

// What a stage worker reads (the run config's keys beside each field; the actor node's
// builder in job/node_options.h fills them).
struct StageWorkerOptions {
  std::string model_dir;          // model.dir
  model::ComputeOptions compute;  // model.device / compute_dtype: where and in what it computes
  int64_t first_layer = 0;
  int64_t end_layer = -1;         // exclusive; -1 = num_hidden_layers
  quant::UnitTableOptions units;  // quant.chunk_size, quant.salient_fraction
  std::string cache_dir;          // quant.cache_dir; empty = no fit cache
  int plan_cache_size = 4;        // plans kept applied (1 when they hold codes)
  // quant.compensation: kGptq collects the stage's inputs in the calibration pass for the
  // factors and applies plans with error compensation (quant/gptq.h); the fit cache is
  // then not read at a restart (the factors are not cached).
  quant::Compensation compensation = quant::Compensation::kNone;
};

class StageWorker {
 public:
  using Options = StageWorkerOptions;

  // Loads the stage's layers. Errors: the checkpoint's (one line naming the
  // file), INVALID_ARGUMENT for a layer range outside the model.
  static absl::StatusOr<std::unique_ptr<StageWorker>> Create(const StageWorkerOptions& options);
  // Wraps weights already loaded (tests, the one-process wiring).
  static absl::StatusOr<std::unique_ptr<StageWorker>> FromWeights(
      model::LlamaWeights weights, const StageWorkerOptions& options);

  int64_t first_layer() const { return model_->first_layer(); }
  int64_t end_layer() const { return model_->end_layer(); }
  const model::LlamaConfig& config() const { return model_->config(); }
  // Where the stage's layers are and compute (its ComputeOptions' device).
  at::Device device() const { return model_->device(); }
  // The checkpoint the stage's layers come from (its other tensors are read from there).
  const std::string& model_dir() const { return options_.model_dir; }

  // Starts a calibration pass (discarding one in progress).
  void StartCalibration();
  // Runs hidden [B, T, H] through the stage accumulating activation statistics.
  // FAILED_PRECONDITION without StartCalibration; INVALID_ARGUMENT for a bad shape.
  absl::StatusOr<at::Tensor> Calibrate(const at::Tensor& hidden);
  // Fits the shard from the statistics so far and returns its unit table
  // (fingerprint stored in it; the fit cache entry is keyed by it and the stage's layers).
  // FAILED_PRECONDITION when nothing was calibrated; StageFitter::FinishPass's errors, and
  // the cache's when the entry cannot be written.
  absl::StatusOr<plan::UnitTable> FinishCalibration(const std::string& fingerprint);
  // Loads fits saved by an earlier FinishCalibration for `fingerprint`;
  // NOT_FOUND when there are none (or with compensation); DATA_LOSS for an unusable entry.
  absl::Status LoadCachedFits(const std::string& fingerprint);

  // The stage table once fitted, else FAILED_PRECONDITION.
  absl::StatusOr<plan::UnitTable> table() const;
  bool fitted() const;
  // The stage's weights + fits once fitted (nullptr before), to share read-only.
  std::shared_ptr<const quant::QuantizedStage> stage() const;
  // The activation statistics of the last FinishCalibration (a few KB per layer;
  // empty before, and when the fits came from the cache).
  quant::ActivationStats activation_stats() const;

  // Runs hidden [B, T, H] through the stage with `plan_id`'s weights. `actions`
  // (one per global unit) is needed the first time a plan id is seen; empty
  // `plan_id` = full precision. Errors: INVALID_ARGUMENT (shape, non-finite
  // values, plan length, action out of range), FAILED_PRECONDITION (plan
  // given before the shard was fitted), NOT_FOUND (plan id unknown and no
  // actions), INTERNAL (torch).
  absl::StatusOr<at::Tensor> Forward(const std::string& plan_id,
                                     const std::shared_ptr<const std::vector<int>>& actions,
                                     const at::Tensor& hidden);

  // Checks a hidden-state tensor against the stage: 3-D [B, T, H] in the stage's compute
  // dtype (INVALID_ARGUMENT naming both dtypes otherwise), T <= max_position_embeddings,
  // finite. `field` names it in the message. The finiteness check reads one bool back
  // to the host: input validation, outside the forward.
  absl::Status CheckHidden(const at::Tensor& hidden, const std::string& field) const;

 private:
  StageWorker(model::LlamaWeights weights, const StageWorkerOptions& options);
  absl::StatusOr<std::shared_ptr<const model::LlamaModel>> PlanModel(
      const std::string& plan_id, const std::shared_ptr<const std::vector<int>>& actions);
  absl::Status SetFits(quant::StageFits fits, quant::ActivationStats stats);

  const StageWorkerOptions options_;
  const std::shared_ptr<const model::LlamaModel> model_;

  mutable absl::Mutex calib_mu_;
  // The calibration pass, the factors, the fits and the fit cache of the stage's layers.
  quant::StageFitter fitter_ ABSL_GUARDED_BY(calib_mu_);

  mutable absl::Mutex mu_;
  std::shared_ptr<const quant::QuantizedStage> stage_ ABSL_GUARDED_BY(mu_);
  quant::ActivationStats stats_ ABSL_GUARDED_BY(mu_);
  // Most recently used first.
  std::list<std::pair<std::string, std::shared_ptr<const model::LlamaModel>>> plans_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace windquant::stage

#endif  // WINDQUANT_COMMON_STAGE_STAGE_WORKER_H_
