// UnitTableCache: the unit table, the fits and the activation statistics of a
// model + calibration + quant config, on disk under their fingerprint, so that a
// second run with the same inputs fits nothing.
//
// Fingerprint (UnitTableFingerprint) = SHA-256 over, in this order:
//   "windquant.unit_table.v2", the model's config.json text, every tensor of the
//   loaded weights (name, shape, float32 bytes; layer linears and norms, then
//   embeddings / final norm / lm_head when present), the SHA-256 of the
//   calibration text bytes, calibration samples / seq_len / seed, and the quant
//   config: chunk size, salient fraction, every QuantizerOptions field.
// Layout: <dir>/<fingerprint>/
//     unit_table.pb          serialized windquant.v1.UnitTable
//     fits.safetensors       StageFits::Save (format windquant.fits version 2: FP16
//                            scales/offsets + INT8 salient sets, ~0.13 bytes per weight)
//     act_stats.safetensors  mean |x_j| per linear input ("layers.<l>.<matrix>")
//     manifest.json          sha256 of each file above (written last)
// Every file is written atomically; a missing manifest means "not cached". A file
// whose hash disagrees with the manifest, or that fails to parse, is reported as
// DATA_LOSS so the caller recomputes (it is never used). Version 1 entries (float32
// dequantized copies of every action) have other fingerprints and are never read.
// Memory: Load holds one file's bytes at a time while checking its hash, then the
// StageFits and statistics it returns. Thread-compatible; concurrent writers of one
// fingerprint write identical bytes.
#ifndef WINDQUANT_COMMON_QUANT_UNIT_TABLE_CACHE_H_
#define WINDQUANT_COMMON_QUANT_UNIT_TABLE_CACHE_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/model/checkpoint.h"
#include "common/model/llama_weights.h"
#include "common/quant/calibration.h"
#include "common/quant/calibration_options.h"
#include "common/quant/stage_fits.h"
#include "common/quant/unit_fit.h"
#include "common/quant/unit_table.h"

namespace windquant::quant {

struct FingerprintInputs {
  std::string config_json;  // the model's config.json text
  const model::LlamaWeights* weights = nullptr;
  std::string calibration_text_sha256;
  CalibrationOptions calibration;  // samples, seq_len and seed are hashed
  int64_t chunk_size = 0;
  QuantizerOptions quantizer;
};

// Lowercase hex SHA-256 as described above. INTERNAL on a torch/OpenSSL error.
absl::StatusOr<std::string> UnitTableFingerprint(const FingerprintInputs& in);
// The same fingerprint of the whole model of `checkpoint` (in.weights unused), read one
// decoder layer at a time: memory is one layer in its stored dtype plus the embeddings,
// whatever the model's size. Errors: the checkpoint's (naming file and tensor).
absl::StatusOr<std::string> UnitTableFingerprint(const FingerprintInputs& in,
                                                 const model::Checkpoint& checkpoint);

// What the cache holds for one fingerprint.
struct CachedQuantization {
  StageFits fits;         // with the unit table
  ActivationStats stats;  // mean_abs only (mean_sq undefined, tokens 0)
};

class UnitTableCache {
 public:
  explicit UnitTableCache(std::string dir) : dir_(std::move(dir)) {}

  // NOT_FOUND when nothing is cached for `fingerprint`; DATA_LOSS (naming the file)
  // when a cached file is corrupted or inconsistent.
  absl::StatusOr<CachedQuantization> Load(const std::string& fingerprint, int64_t first_layer,
                                          int64_t end_layer) const;
  // Writes the entry of `fits.table().fingerprint` (atomically per file, manifest last).
  absl::Status Store(const StageFits& fits, const ActivationStats& stats) const;

  std::string EntryDir(const std::string& fingerprint) const;

 private:
  std::string dir_;
};

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_UNIT_TABLE_CACHE_H_
