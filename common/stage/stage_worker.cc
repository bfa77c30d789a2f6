#include "common/stage/stage_worker.h"

#include <c10/core/GradMode.h>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/model/checkpoint.h"

namespace windquant::stage {

namespace {

quant::StageFitterOptions FitterOptions(const StageWorkerOptions& options) {
  quant::StageFitterOptions o;
  o.units = options.units;
  o.compensation = options.compensation;
  o.cache_dir = options.cache_dir;
  return o;
}

}  // namespace

StageWorker::StageWorker(model::LlamaWeights weights, const StageWorkerOptions& options)
    : options_(options),
      model_(std::make_shared<const model::LlamaModel>(std::move(weights), options.compute)),
      fitter_(model_, FitterOptions(options)) {}

absl::StatusOr<std::unique_ptr<StageWorker>> StageWorker::Create(
    const StageWorkerOptions& options) {
  WQ_ASSIGN_OR_RETURN(auto checkpoint, model::Checkpoint::Open(options.model_dir));
  const int64_t layers = checkpoint->config().num_hidden_layers;
  const int64_t end = options.end_layer < 0 ? layers : options.end_layer;
  if (options.first_layer < 0 || options.first_layer >= end || end > layers) {
    return absl::InvalidArgumentError(absl::StrCat("stage layers [", options.first_layer, ", ", end,
                                                   ") are not within the model's ", layers,
                                                   " layers"));
  }
  model::LoadRequest request;
  request.first_layer = options.first_layer;
  request.end_layer = end;
  request.embeddings = false;
  request.head = false;
  WQ_ASSIGN_OR_RETURN(model::LlamaWeights weights, checkpoint->LoadWeights(request));
  return FromWeights(std::move(weights), options);
}

absl::StatusOr<std::unique_ptr<StageWorker>> StageWorker::FromWeights(
    model::LlamaWeights weights, const StageWorkerOptions& options) {
  if (weights.layers.empty()) {
    return absl::InvalidArgumentError("stage holds no decoder layers");
  }
  return std::unique_ptr<StageWorker>(new StageWorker(std::move(weights), options));
}

absl::Status StageWorker::CheckHidden(const at::Tensor& hidden, const std::string& field) const {
  const auto& c = model_->config();
  if (!hidden.defined() || hidden.dim() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": must be [batch, seq, hidden]"));
  }
  if (hidden.scalar_type() != model_->dtype()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": ", model::DtypeName(hidden.scalar_type()), ", but this stage computes in ",
        model::DtypeName(model_->dtype()), " (model.compute_dtype)"));
  }
  if (hidden.size(2) != c.hidden_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": hidden size ", hidden.size(2), ", the model's is ", c.hidden_size));
  }
  if (hidden.size(0) < 1 || hidden.size(1) < 1 || hidden.size(1) > c.max_position_embeddings) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": batch must be >= 1 and seq in [1, ",
                                                   c.max_position_embeddings, "]"));
  }
  if (!at::isfinite(hidden).all().item<bool>()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": contains NaN or Inf"));
  }
  return absl::OkStatus();
}

void StageWorker::StartCalibration() {
  absl::MutexLock lock(&calib_mu_);
  fitter_.StartPass();
}

absl::StatusOr<at::Tensor> StageWorker::Calibrate(const at::Tensor& hidden) {
  WQ_RETURN_IF_ERROR(CheckHidden(hidden, "hidden"));
  absl::MutexLock lock(&calib_mu_);
  return fitter_.Calibrate(hidden);
}

absl::StatusOr<plan::UnitTable> StageWorker::FinishCalibration(const std::string& fingerprint) {
  absl::MutexLock lock(&calib_mu_);
  // The table fingerprint is the stage's cache identity too (all the actor knows of the
  // model beyond its own layers).
  WQ_ASSIGN_OR_RETURN(quant::StageQuantization fitted,
                      fitter_.FinishPass(fingerprint, fingerprint));
  WQ_RETURN_IF_ERROR(fitted.cache_write);
  plan::UnitTable table = fitted.fits.table();
  WQ_RETURN_IF_ERROR(SetFits(std::move(fitted.fits), std::move(fitted.stats)));
  return table;
}

absl::Status StageWorker::SetFits(quant::StageFits fits, quant::ActivationStats stats) {
  WQ_ASSIGN_OR_RETURN(std::shared_ptr<const quant::QuantizedStage> stage,
                      quant::QuantizedStage::Create(
                          model_, std::make_shared<const quant::StageFits>(std::move(fits))));
  absl::MutexLock lock(&mu_);
  stage_ = std::move(stage);
  stats_ = std::move(stats);
  plans_.clear();
  return absl::OkStatus();
}

absl::Status StageWorker::LoadCachedFits(const std::string& fingerprint) {
  if (options_.cache_dir.empty()) return absl::NotFoundError("no fit cache configured");
  if (options_.compensation != quant::Compensation::kNone) {
    return absl::NotFoundError("error compensation needs the calibration pass");
  }
  absl::StatusOr<quant::CachedQuantization> hit;
  {
    absl::MutexLock lock(&calib_mu_);
    hit = fitter_.LoadCached(fingerprint);
  }
  if (!hit.ok()) return hit.status();
  hit->fits.set_fingerprint(fingerprint);
  // No statistics: the fits did not come from a pass of this worker.
  return SetFits(std::move(hit->fits), quant::ActivationStats());
}

absl::StatusOr<plan::UnitTable> StageWorker::table() const {
  absl::MutexLock lock(&mu_);
  if (stage_ == nullptr) return absl::FailedPreconditionError("stage not fitted yet");
  return stage_->table();
}

bool StageWorker::fitted() const {
  absl::MutexLock lock(&mu_);
  return stage_ != nullptr;
}

quant::ActivationStats StageWorker::activation_stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

std::shared_ptr<const quant::QuantizedStage> StageWorker::stage() const {
  absl::MutexLock lock(&mu_);
  return stage_;
}

absl::StatusOr<std::shared_ptr<const model::LlamaModel>> StageWorker::PlanModel(
    const std::string& plan_id, const std::shared_ptr<const std::vector<int>>& actions) {
  std::shared_ptr<const quant::QuantizedStage> stage;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = plans_.begin(); it != plans_.end(); ++it) {
      if (it->first == plan_id) {
        plans_.splice(plans_.begin(), plans_, it);
        return plans_.front().second;
      }
    }
    stage = stage_;
  }
  if (stage == nullptr) {
    return absl::FailedPreconditionError("stage not fitted yet: run the calibration pass first");
  }
  if (actions == nullptr || actions->empty()) {
    return absl::NotFoundError(absl::StrCat("plan ", plan_id, " unknown to this stage"));
  }
  WQ_ASSIGN_OR_RETURN(std::shared_ptr<const model::LlamaModel> planned, stage->PlanModel(actions));
  absl::MutexLock lock(&mu_);
  plans_.emplace_front(plan_id, planned);
  // A plan model that holds its layers' codes (~1.1 bytes per weight): one at a time.
  const int keep =
      quant::PlanLinears::HoldsCodes(stage->model(), stage->fits()) ? 1 : options_.plan_cache_size;
  while (static_cast<int>(plans_.size()) > std::max(1, keep)) {
    plans_.pop_back();
  }
  return planned;
}

absl::StatusOr<at::Tensor> StageWorker::Forward(
    const std::string& plan_id, const std::shared_ptr<const std::vector<int>>& actions,
    const at::Tensor& hidden) {
  WQ_RETURN_IF_ERROR(CheckHidden(hidden, "hidden"));
  const model::LlamaModel* m = model_.get();
  std::shared_ptr<const model::LlamaModel> planned;
  if (!plan_id.empty()) {
    WQ_ASSIGN_OR_RETURN(planned, PlanModel(plan_id, actions));
    m = planned.get();
  }
  try {
    c10::NoGradGuard no_grad;
    return m->ForwardLayers(hidden, first_layer(), end_layer());
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("stage forward: ", e.what_without_backtrace()));
  }
}

}  // namespace windquant::stage
