// What identifies a run: the run config's text without the keys that only say
// where output goes or how the process runs (output.*, model.threads,
// service.*, training.checkpoint_every_updates; model.compute_dtype when float32, so
// that float32 runs keep the identity they had before the key), its digest, and the run's
// fingerprint (that text with the unit table's fingerprint: model +
// calibration + quant config), which a checkpoint must match to be resumed.
// The learner gets the text (its Options) and never the config itself.
#ifndef WINDQUANT_COMMON_CONFIG_RUN_DIGEST_H_
#define WINDQUANT_COMMON_CONFIG_RUN_DIGEST_H_

#include <string>

namespace windquant::config {

struct RunConfig;

// CanonicalText(config) without the keys above.
std::string RunDefiningText(const RunConfig& config);
// sha256 of RunDefiningText: what a run is before its table exists (the
// store's run ids start with its first 8 hex digits).
std::string RunConfigDigest(const RunConfig& config);
// sha256 of RunDefiningText without the seeds (training.seed, calibration.seed): what a
// variant is, so that the runs of one variant over paired seeds share it (report.json's
// config_digest).
std::string VariantDigest(const RunConfig& config);
// sha256 over the unit table's fingerprint and the run-defining text.
std::string RunFingerprint(const std::string& table_fingerprint,
                           const std::string& run_defining_text);
std::string RunFingerprint(const std::string& table_fingerprint, const RunConfig& config);

}  // namespace windquant::config

#endif  // WINDQUANT_COMMON_CONFIG_RUN_DIGEST_H_
