#include "common/quant/quantization_session.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/base/files.h"
#include "common/base/progress.h"
#include "common/base/status_macros.h"
#include "common/config/text_range.h"
#include "common/model/checkpoint.h"
#include "common/quant/table_fingerprint.h"
#include "common/quant/unit_table_builder.h"
#include "common/quant/unit_table_cache.h"

namespace windquant::quant {
namespace {

constexpr int64_t kCalibrationBatch = 8;

}  // namespace

absl::StatusOr<std::unique_ptr<QuantizationSession>> QuantizationSession::Create(
    const config::RunConfig& config, const SessionOptions& options) {
  auto log = [&](const std::string& line) {
    if (options.log) options.log(line);
  };
  std::unique_ptr<QuantizationSession> s(new QuantizationSession());
  s->config_ = config;
  const std::string& dir = config.model.dir;
  WQ_ASSIGN_OR_RETURN(std::unique_ptr<model::Checkpoint> ckpt, model::Checkpoint::Open(dir));
  WQ_ASSIGN_OR_RETURN(model::LlamaWeights weights, ckpt->LoadWeights(model::LoadRequest{}));
  WQ_ASSIGN_OR_RETURN(const std::string config_json,
                      base::ReadFile((std::filesystem::path(dir) / "config.json").string()));
  WQ_ASSIGN_OR_RETURN(s->tokenizer_, model::Tokenizer::FromFile(
                                         (std::filesystem::path(dir) / "tokenizer.json").string()));

  const config::TextEncoder encode = [&tok = *s->tokenizer_](std::string_view text) {
    return tok.Encode(text, /*add_bos=*/false);
  };
  std::string calib_sha;
  WQ_ASSIGN_OR_RETURN(const std::vector<int32_t> calib_ids,
                      config::ReadTextRange(config::CalibrationRange(config.calibration),
                                            "calibration", encode, &calib_sha));
  // The table depends on the part of the file calibration reads.
  absl::StrAppend(&calib_sha, " tokens=", config.calibration.tokens[0], ",",
                  config.calibration.tokens[1]);
  absl::StatusOr<at::Tensor> windows =
      SampleCalibrationWindows(calib_ids, config.calibration.samples, config.calibration.seq_len,
                               config.calibration.seed, weights.config.bos_token_id);
  if (!windows.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("calibration.text (", config.calibration.text,
                                                   "): ", windows.status().message()));
  }
  s->calib_windows_ = *windows;
  if (options.load_eval_text) {
    WQ_ASSIGN_OR_RETURN(s->eval_ids_, config::ReadTextRange(config.evaluation.heldout,
                                                            "evaluation.heldout", encode));
  }

  UnitTableOptions topts;
  topts.chunk_size = config.quant.chunk_size;
  topts.quantizer.salient_fraction = config.quant.salient_fraction;
  FingerprintInputs fin;
  fin.config_json = config_json;
  fin.weights = &weights;
  fin.calibration_text_sha256 = calib_sha;
  fin.calibration = config.calibration;
  fin.chunk_size = topts.chunk_size;
  fin.quantizer = topts.quantizer;
  WQ_ASSIGN_OR_RETURN(const std::string fingerprint, UnitTableFingerprint(fin));
  // The table's identity is the one every path computes (table_fingerprint.h);
  // `fingerprint` (every weight hashed) only keys the cache.
  WQ_ASSIGN_OR_RETURN(const std::string model_key,
                      ModelKey(dir, topts.chunk_size, topts.quantizer));
  const std::string table_fingerprint = TableFingerprint(
      model_key, CalibrationKey(config.calibration.samples, config.calibration.seq_len,
                                config.calibration.seed, calib_ids));

  const at::Device device =
      config.model.device == "cuda" ? at::Device(at::kCUDA) : at::Device(at::kCPU);
  const int64_t num_layers = weights.config.num_hidden_layers;
  std::shared_ptr<const model::LlamaModel> model;
  try {
    model = std::make_shared<const model::LlamaModel>(std::move(weights), device);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(dir, ": cannot build the model: ", e.what()));
  }
  auto finish = [&](StageFits fits) -> absl::StatusOr<std::unique_ptr<QuantizationSession>> {
    fits.set_fingerprint(table_fingerprint);
    WQ_ASSIGN_OR_RETURN(s->stage_, QuantizedStage::Create(
                                       model, std::make_shared<const StageFits>(std::move(fits))));
    return std::move(s);
  };

  UnitTableCache cache(config.quant.cache_dir);
  if (options.use_cache && !config.quant.cache_dir.empty()) {
    absl::StatusOr<CachedQuantization> hit = cache.Load(fingerprint, 0, num_layers);
    if (hit.ok()) {
      s->stats_ = std::move(hit->stats);
      s->from_cache_ = true;
      log(absl::StrCat("unit table: cache hit ", cache.EntryDir(fingerprint)));
      return finish(std::move(hit->fits));
    }
    if (!absl::IsNotFound(hit.status())) {
      log(absl::StrCat("warning: unit table cache entry unusable, recomputing: ",
                       hit.status().message()));
    }
  }

  log(absl::StrFormat("calibrating on %d x %d tokens", config.calibration.samples,
                      config.calibration.seq_len));
  WQ_ASSIGN_OR_RETURN(s->stats_, CalibrateModel(*model, s->calib_windows_, kCalibrationBatch));
  base::Progress progress(
      "unit table",
      static_cast<double>(UnitsPerLayer(model->config(), topts.chunk_size) * num_layers), "units");
  topts.progress = [&](int64_t done, int64_t total) {
    if (options.log) progress.Update(static_cast<double>(done));
    (void)total;
  };
  absl::StatusOr<StageFits> fits;
  try {
    fits = BuildStageFits(model->weights(), s->stats_, topts, fingerprint);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("unit table: ", e.what_without_backtrace()));
  }
  if (!fits.ok()) return fits.status();
  if (options.log) progress.Finish(absl::StrCat(fits->table().units.size(), " units"));
  if (options.use_cache && !config.quant.cache_dir.empty()) {
    absl::Status st = cache.Store(*fits, s->stats_);
    if (!st.ok())
      log(absl::StrCat("warning: could not write the unit table cache: ", st.message()));
  }
  return finish(*std::move(fits));
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
  popts.context = config_.evaluation.context;
  popts.batch_size = config_.evaluation.batch;
  popts.max_tokens = max_tokens;
  if (actions.empty()) return model::ComputePerplexity(model(), ids, popts);
  WQ_ASSIGN_OR_RETURN(std::shared_ptr<const model::LlamaModel> planned, PlanModel(actions));
  return model::ComputePerplexity(*planned, ids, popts);
}

Plan QuantizationSession::MakePlan(std::vector<int> actions, std::string source,
                                   double target_bits) const {
  return Plan::Make(table(), std::move(actions), std::move(source), target_bits);
}

}  // namespace windquant::quant
