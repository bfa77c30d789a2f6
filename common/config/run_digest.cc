#include "common/config/run_digest.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/files.h"
#include "common/config/run_config.h"

namespace windquant::config {

std::string RunDefiningText(const RunConfig& config) {
  std::string kept;
  for (absl::string_view line : absl::StrSplit(CanonicalText(config), '\n')) {
    if (absl::StartsWith(line, "output.") || absl::StartsWith(line, "service.") ||
        absl::StartsWith(line, "model.threads=") ||
        absl::StartsWith(line, "training.checkpoint_every_updates=")) {
      continue;
    }
    // float32 runs keep the digest and fingerprint they had before model.compute_dtype
    // existed (their checkpoints still resume); a bfloat16 run is another run.
    if (line == "model.compute_dtype=float32") continue;
    // So do runs on a consecutive selection slice (evaluation.selection.windows 0).
    if (line == "evaluation.selection.windows=0") continue;
    absl::StrAppend(&kept, line, "\n");
  }
  return kept;
}

std::string RunConfigDigest(const RunConfig& config) {
  return base::Sha256Hex(RunDefiningText(config));
}

std::string VariantDigest(const RunConfig& config) {
  std::string kept;
  for (absl::string_view line : absl::StrSplit(RunDefiningText(config), '\n')) {
    if (line.empty() || absl::StartsWith(line, "training.seed=") ||
        absl::StartsWith(line, "calibration.seed=")) {
      continue;
    }
    absl::StrAppend(&kept, line, "\n");
  }
  return base::Sha256Hex(kept);
}

std::string RunFingerprint(const std::string& table_fingerprint,
                           const std::string& run_defining_text) {
  return base::Sha256Hex(absl::StrCat("unit_table=", table_fingerprint, "\n", run_defining_text));
}

std::string RunFingerprint(const std::string& table_fingerprint, const RunConfig& config) {
  return RunFingerprint(table_fingerprint, RunDefiningText(config));
}

}  // namespace windquant::config
