#include "common/quant/quantization_session.h"

#include <c10/core/GradMode.h>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/base/files.h"
#include "common/base/progress.h"
#include "common/base/status_macros.h"
#include "common/base/text_range.h"
#include "common/model/checkpoint.h"
#include "common/quant/table_fingerprint.h"
#include "common/quant/unit_table_cache.h"

namespace windquant::quant {
namespace {

constexpr int64_t kCalibrationBatch = 8;

// The calibration ids of options.calibration and the sha256 (plus token range) of the text
// they come from.
struct CalibrationText {
  std::vector<int32_t> ids;
  std::string sha;
};

absl::StatusOr<CalibrationText> ReadCalibration(const CalibrationOptions& calibration,
                                                const base::TextEncoder& encode) {
  CalibrationText calib;
  WQ_ASSIGN_OR_RETURN(calib.ids,
                      base::ReadTextRange(calibration.range(), "calibration", encode, &calib.sha));
  // The table depends on the part of the file calibration reads.
  absl::StrAppend(&calib.sha, " tokens=", calibration.tokens[0], ",", calibration.tokens[1]);
  return calib;
}

// `cache_key` (every weight hashed) only keys the cache; `table` is the table's identity,
// the one every path computes (table_fingerprint.h).
struct Fingerprints {
  std::string cache_key;
  std::string table;
};

// What the cache key hashes besides the weights.
FingerprintInputs CacheKeyInputs(const SessionOptions& options, const std::string& config_json,
                                 const CalibrationText& calib) {
  FingerprintInputs fin;
  fin.config_json = config_json;
  fin.calibration_text_sha256 = calib.sha;
  fin.calibration = options.calibration;
  fin.chunk_size = options.units.chunk_size;
  fin.quantizer = QuantizerFor(options.units);
  return fin;
}

absl::StatusOr<Fingerprints> ComputeFingerprints(const SessionOptions& options,
                                                 const std::string& config_json,
                                                 const model::LlamaWeights& weights,
                                                 const CalibrationText& calib) {
  FingerprintInputs fin = CacheKeyInputs(options, config_json, calib);
  fin.weights = &weights;
  Fingerprints f;
  WQ_ASSIGN_OR_RETURN(f.cache_key, UnitTableFingerprint(fin));
  WQ_ASSIGN_OR_RETURN(f.table, RunTableFingerprint(options.model_dir, options.units,
                                                   options.calibration, calib.ids));
  return f;
}

}  // namespace

absl::StatusOr<std::unique_ptr<QuantizationSession>> QuantizationSession::Create(
    const SessionOptions& options) {
  auto log = [&](const std::string& line) {
    if (options.log) options.log(line);
  };
  std::unique_ptr<QuantizationSession> s(new QuantizationSession());
  s->options_ = options;
  const std::string& dir = options.model_dir;
  WQ_ASSIGN_OR_RETURN(std::unique_ptr<model::Checkpoint> ckpt, model::Checkpoint::Open(dir));
  WQ_ASSIGN_OR_RETURN(model::LlamaWeights weights, ckpt->LoadWeights(model::LoadRequest{}));
  WQ_ASSIGN_OR_RETURN(const std::string config_json,
                      base::ReadFile((std::filesystem::path(dir) / "config.json").string()));
  WQ_ASSIGN_OR_RETURN(s->tokenizer_, model::Tokenizer::FromFile(
                                         (std::filesystem::path(dir) / "tokenizer.json").string()));

  const base::TextEncoder encode = [&tok = *s->tokenizer_](std::string_view text) {
    return tok.Encode(text, /*add_bos=*/false);
  };
  const CalibrationOptions& calibration = options.calibration;
  WQ_ASSIGN_OR_RETURN(const CalibrationText calib, ReadCalibration(calibration, encode));
  absl::StatusOr<at::Tensor> windows =
      SampleCalibrationWindows(calib.ids, calibration.samples, calibration.seq_len,
                               calibration.seed, weights.config.bos_token_id);
  if (!windows.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("calibration.text (", calibration.text, "): ", windows.status().message()));
  }
  s->calib_windows_ = *windows;
  if (options.load_eval_text) {
    WQ_ASSIGN_OR_RETURN(s->eval_ids_,
                        base::ReadTextRange(options.heldout, "evaluation.heldout", encode));
  }

  WQ_ASSIGN_OR_RETURN(const Fingerprints fingerprints,
                      ComputeFingerprints(options, config_json, weights, calib));
  const std::string& fingerprint = fingerprints.cache_key;
  s->fingerprint_ = fingerprint;
  s->table_fingerprint_ = fingerprints.table;
  s->use_cache_ = options.use_cache && !options.cache_dir.empty();

  try {
    s->model_ = std::make_shared<const model::LlamaModel>(std::move(weights), options.compute);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(dir, ": cannot build the model: ", e.what()));
  }
  StageFitterOptions fitter;
  fitter.units = options.units;
  fitter.compensation = options.compensation;
  fitter.cache_dir = options.cache_dir;
  fitter.use_cache = options.use_cache;
  fitter.log = options.log;
  s->fitter_ = std::make_unique<StageFitter>(s->model_, std::move(fitter));
  if (s->use_cache_) {
    absl::StatusOr<CachedQuantization> hit = s->fitter_->LoadCached(fingerprint);
    if (hit.ok()) {
      s->stats_ = std::move(hit->stats);
      s->from_cache_ = true;
      log(absl::StrCat(
          "unit table: cache hit ",
          UnitTableCache(options.cache_dir).EntryDir(s->fitter_->CacheKey(fingerprint))));
      WQ_RETURN_IF_ERROR(s->SetFits(std::move(hit->fits)));
      return s;
    }
    if (!absl::IsNotFound(hit.status())) {
      log(absl::StrCat("warning: unit table cache entry unusable, recomputing: ",
                       hit.status().message()));
    }
  }
  if (!options.fit) return s;
  WQ_RETURN_IF_ERROR(s->Fit());
  return s;
}

absl::StatusOr<StageFits> QuantizationSession::LoadCachedFits(const SessionOptions& options,
                                                              const model::Checkpoint& checkpoint) {
  if (options.cache_dir.empty()) return absl::NotFoundError("quant.cache_dir: not set");
  const std::filesystem::path dir(options.model_dir);
  WQ_ASSIGN_OR_RETURN(const std::string config_json,
                      base::ReadFile((dir / "config.json").string()));
  WQ_ASSIGN_OR_RETURN(const std::unique_ptr<model::Tokenizer> tokenizer,
                      model::Tokenizer::FromFile((dir / "tokenizer.json").string()));
  const base::TextEncoder encode = [&tok = *tokenizer](std::string_view text) {
    return tok.Encode(text, /*add_bos=*/false);
  };
  WQ_ASSIGN_OR_RETURN(const CalibrationText calib, ReadCalibration(options.calibration, encode));
  WQ_ASSIGN_OR_RETURN(
      const std::string cache_key,
      UnitTableFingerprint(CacheKeyInputs(options, config_json, calib), checkpoint));
  WQ_ASSIGN_OR_RETURN(
      const std::string table_fingerprint,
      RunTableFingerprint(options.model_dir, options.units, options.calibration, calib.ids));
  const int64_t layers = checkpoint.config().num_hidden_layers;
  WQ_ASSIGN_OR_RETURN(
      CachedQuantization hit,
      UnitTableCache(options.cache_dir).Load(FitCacheKey(cache_key, 0, layers), 0, layers));
  hit.fits.set_fingerprint(table_fingerprint);
  return std::move(hit.fits);
}

absl::Status QuantizationSession::SetFits(StageFits fits) {
  fits.set_fingerprint(table_fingerprint_);
  if (options_.compensation == Compensation::kGptq && fits.compensation() == nullptr) {
    // Fits from the cache come without factors (StageFitter): they are built from the
    // same calibration windows, entering layer 0, one layer at a time.
    std::vector<at::Tensor> inputs;
    WQ_RETURN_IF_ERROR(RunCalibrationWindows(*model_, calib_windows_, kCalibrationBatch, "hessians",
                                             [&](const at::Tensor& hidden) {
                                               inputs.push_back(hidden);
                                               return absl::OkStatus();
                                             }));
    WQ_ASSIGN_OR_RETURN(std::shared_ptr<const GptqFactors> factors,
                        fitter_->Factors(std::move(inputs)));
    fits.set_compensation(std::move(factors));
  }
  WQ_ASSIGN_OR_RETURN(
      stage_, QuantizedStage::Create(model_, std::make_shared<const StageFits>(std::move(fits))));
  return absl::OkStatus();
}

absl::Status QuantizationSession::Fit() {
  if (stage_ != nullptr) return absl::FailedPreconditionError("the session already has fits");
  const base::LogSink& sink = options_.log;
  if (sink) {
    sink(absl::StrFormat("calibrating on %d x %d tokens", options_.calibration.samples,
                         options_.calibration.seq_len));
  }
  // The stage part: the one fit path of every layer range (StageFitter), over all layers.
  fitter_->StartPass();
  WQ_RETURN_IF_ERROR(RunCalibrationWindows(
      *model_, calib_windows_, kCalibrationBatch, "calibration",
      [&](const at::Tensor& hidden) { return fitter_->Calibrate(hidden).status(); }));
  const int64_t num_layers = model_->config().num_hidden_layers;
  base::Progress progress(
      "unit table",
      static_cast<double>(UnitsPerLayer(model_->config(), options_.units.chunk_size) * num_layers),
      "units");
  const FitProgress on_progress = [&](int64_t done, int64_t total) {
    if (sink) progress.Update(static_cast<double>(done));
    (void)total;
  };
  absl::StatusOr<StageQuantization> fitted =
      fitter_->FinishPass(table_fingerprint_, fingerprint_, on_progress);
  if (!fitted.ok()) {
    return absl::Status(fitted.status().code(),
                        absl::StrCat("unit table: ", fitted.status().message()));
  }
  if (sink) progress.Finish(absl::StrCat(fitted->fits.table().units.size(), " units"));
  WarnIfNotCached(fitted->cache_write);
  stats_ = std::move(fitted->stats);
  return SetFits(std::move(fitted->fits));
}

void QuantizationSession::WarnIfNotCached(const absl::Status& cache_write) const {
  if (!cache_write.ok() && options_.log) {
    options_.log(
        absl::StrCat("warning: could not write the unit table cache: ", cache_write.message()));
  }
}

absl::Status QuantizationSession::AdoptFits(StageFits fits, ActivationStats stats) {
  if (stage_ != nullptr) return absl::FailedPreconditionError("the session already has fits");
  const int64_t layers = model_->config().num_hidden_layers;
  if (fits.first_layer() != 0 || fits.end_layer() != layers || stats.first_layer != 0 ||
      static_cast<int64_t>(stats.layers.size()) != layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fits of layers [", fits.first_layer(), ", ", fits.end_layer(), ") and statistics of ",
        stats.layers.size(), " layers do not cover the model's ", layers, " layers"));
  }
  fits.set_fingerprint(table_fingerprint_);
  // The factors the fits came with (the actors'): shared, not built a second time.
  if (options_.compensation != Compensation::kGptq) fits.set_compensation(nullptr);
  stats_ = std::move(stats);
  WarnIfNotCached(fitter_->StoreCached(fingerprint_, fits, stats_));
  return SetFits(std::move(fits));
}

absl::StatusOr<std::shared_ptr<const model::LlamaModel>> QuantizationSession::PlanModel(
    const std::vector<int>& actions) const {
  if (actions.size() != table().units.size()) {
    return absl::InvalidArgumentError(absl::StrCat("plan has ", actions.size(),
                                                   " actions, the unit table has ",
                                                   table().units.size(), " units"));
  }
  return stage_->PlanModel(std::make_shared<const std::vector<int>>(actions));
}

absl::StatusOr<model::PerplexityResult> QuantizationSession::Perplexity(
    const std::vector<int>& actions, int64_t max_tokens) const {
  return Perplexity(actions, eval_ids_, max_tokens);
}

absl::StatusOr<model::PerplexityResult> QuantizationSession::Perplexity(
    const std::vector<int>& actions, const std::vector<int32_t>& ids, int64_t max_tokens) const {
  model::PerplexityOptions popts;
  popts.context = options_.context;
  popts.batch_size = options_.batch;
  popts.max_tokens = max_tokens;
  if (actions.empty()) return model::ComputePerplexity(model(), ids, popts);
  WQ_ASSIGN_OR_RETURN(std::shared_ptr<const model::LlamaModel> planned, PlanModel(actions));
  return model::ComputePerplexity(*planned, ids, popts);
}

plan::Plan QuantizationSession::MakePlan(std::vector<int> actions, std::string source,
                                         double target_bits) const {
  return plan::Plan::Make(table(), std::move(actions), std::move(source), target_bits);
}

}  // namespace windquant::quant
