#include "common/quant/stage_fitter.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace windquant::quant {

StageFitter::StageFitter(std::shared_ptr<const model::LlamaModel> model, StageFitterOptions options)
    : model_(std::move(model)),
      first_layer_(model_->first_layer()),
      end_layer_(model_->end_layer()),
      options_(std::move(options)) {}

void StageFitter::StartPass() {
  calibrator_ = std::make_unique<Calibrator>(*model_, first_layer_, end_layer_);
  inputs_.clear();
}

absl::StatusOr<at::Tensor> StageFitter::Calibrate(const at::Tensor& hidden) {
  if (calibrator_ == nullptr) return absl::FailedPreconditionError("calibration pass not started");
  if (options_.compensation == Compensation::kGptq) {
    try {
      inputs_.push_back(hidden.to(model_->device()).clone());
    } catch (const c10::Error& e) {
      return absl::InternalError(absl::StrCat("calibration: ", e.what_without_backtrace()));
    }
  }
  return calibrator_->RunStage(hidden);
}

absl::StatusOr<std::shared_ptr<const GptqFactors>> StageFitter::Factors(
    std::vector<at::Tensor> inputs) const {
  if (options_.log) {
    options_.log("error compensation (quant.compensation: gptq): calibration Hessians");
  }
  GptqOptions gptq;
  gptq.spill_dir = FactorSpillDir(options_.cache_dir);
  absl::StatusOr<GptqFactors> factors =
      GptqFactors::FromInputs(*model_, first_layer_, end_layer_, std::move(inputs), gptq);
  if (!factors.ok()) {
    return absl::Status(factors.status().code(),
                        absl::StrCat("quant.compensation: gptq: ", factors.status().message()));
  }
  return std::make_shared<const GptqFactors>(*std::move(factors));
}

absl::StatusOr<StageQuantization> StageFitter::FinishPass(const std::string& table_fingerprint,
                                                          const std::string& cache_identity,
                                                          const FitProgress& progress) {
  if (calibrator_ == nullptr) return absl::FailedPreconditionError("calibration pass not started");
  StageQuantization out;
  out.stats = calibrator_->Finish();
  calibrator_.reset();
  std::vector<at::Tensor> inputs = std::move(inputs_);
  inputs_.clear();
  for (const auto& layer : out.stats.layers) {
    for (const auto& s : layer) {
      if (s.tokens == 0) return absl::FailedPreconditionError("calibration saw no tokens");
    }
  }
  // The factors first: the batches they consume are released before the fits are built.
  std::shared_ptr<const GptqFactors> factors;
  if (options_.compensation == Compensation::kGptq) {
    WQ_ASSIGN_OR_RETURN(factors, Factors(std::move(inputs)));
  }
  absl::StatusOr<StageFits> fits;
  try {
    fits =
        BuildStageFits(model_->weights(), out.stats, options_.units, table_fingerprint, progress);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("fitting layers [", first_layer_, ", ", end_layer_,
                                            "): ", e.what_without_backtrace()));
  }
  if (!fits.ok()) return fits.status();
  out.cache_write = StoreCached(cache_identity, *fits, out.stats);
  out.fits = *std::move(fits);
  out.fits.set_compensation(std::move(factors));
  return out;
}

std::string StageFitter::CacheKey(const std::string& cache_identity) const {
  return FitCacheKey(cache_identity, first_layer_, end_layer_);
}

absl::StatusOr<CachedQuantization> StageFitter::LoadCached(
    const std::string& cache_identity) const {
  if (!caches()) return absl::NotFoundError("no fit cache (quant.cache_dir)");
  return UnitTableCache(options_.cache_dir)
      .Load(CacheKey(cache_identity), first_layer_, end_layer_);
}

absl::Status StageFitter::StoreCached(const std::string& cache_identity, const StageFits& fits,
                                      const ActivationStats& stats) const {
  if (!caches()) return absl::OkStatus();
  return UnitTableCache(options_.cache_dir).Store(CacheKey(cache_identity), fits, stats);
}

}  // namespace windquant::quant
