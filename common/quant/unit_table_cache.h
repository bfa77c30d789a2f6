// UnitTableCache: the fit cache, the one format of every fit path (StageFitter, used by
// the actors' stage workers and by QuantizationSession): the unit table, the fits and the
// activation statistics of a layer range of a model + calibration + quant config, on disk
// under their key, so that a second run (or a restarted actor) with the same inputs fits
// nothing.
//
// Key (FitCacheKey) = SHA-256 of "windquant.fit_cache.v3", the caller's cache identity
// and the layer range [first_layer, end_layer). The identity names the model, the
// calibration and the quantization as far as the caller can vouch for them:
// QuantizationSession's is UnitTableFingerprint (below: every weight hashed), an actor's
// the table fingerprint it is handed (table_fingerprint.h: the model key samples the
// weights). The range is part of the key: a stage's entry is never a whole model's.
// UnitTableFingerprint = SHA-256 over, in this order:
//   "windquant.unit_table.v2", the model's config.json text, every tensor of the
//   loaded weights (name, shape, float32 bytes; layer linears and norms, then
//   embeddings / final norm / lm_head when present), the SHA-256 of the
//   calibration text bytes, calibration samples / seq_len / seed, and the quant
//   config: chunk size, salient fraction, every QuantizerOptions field.
// Layout: <dir>/<key>/
//     unit_table.pb          serialized windquant.v1.UnitTable (layers [first, end))
//     fits.safetensors       StageFits::Save (format windquant.fits version 2: FP16
//                            scales/offsets + INT8 salient sets, ~0.13 bytes per weight)
//     act_stats.safetensors  mean |x_j| per linear input ("layers.<l>.<matrix>")
//     manifest.json          sha256 of each file above and the key (written last)
// Every file is written atomically; a missing manifest means "not cached". A file
// whose hash disagrees with the manifest, or that fails to parse, is reported as
// DATA_LOSS so the caller recomputes (it is never used). Entries of older versions
// (keyed by UnitTableFingerprint alone, or an actor's stage-*.fits files) are not read:
// they simply miss.
// Memory: Load holds one file's bytes at a time while checking its hash, then the
// StageFits and statistics it returns. Thread-compatible; concurrent writers of one
// key write identical bytes.
#ifndef WINDQUANT_COMMON_QUANT_UNIT_TABLE_CACHE_H_
#define WINDQUANT_COMMON_QUANT_UNIT_TABLE_CACHE_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/model/checkpoint.h"
#include "common/model/llama_weights.h"
#include "common/plan/unit_table.h"
#include "common/quant/calibration.h"
#include "common/quant/calibration_options.h"
#include "common/quant/stage_fits.h"
#include "common/quant/unit_fit.h"

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

// The cache key of `identity` for layers [first_layer, end_layer) (see the top).
std::string FitCacheKey(const std::string& identity, int64_t first_layer, int64_t end_layer);

// What the cache holds for one key.
struct CachedQuantization {
  StageFits fits;         // with the unit table
  ActivationStats stats;  // mean_abs only (mean_sq undefined, tokens 0)
};

class UnitTableCache {
 public:
  explicit UnitTableCache(std::string dir) : dir_(std::move(dir)) {}

  // The entry of `key` for layers [first_layer, end_layer); the table keeps the
  // fingerprint it was stored with. NOT_FOUND when nothing is cached for `key`;
  // DATA_LOSS (naming the file) when a cached file is corrupted or inconsistent.
  absl::StatusOr<CachedQuantization> Load(const std::string& key, int64_t first_layer,
                                          int64_t end_layer) const;
  // Writes the entry of `key` (atomically per file, manifest last).
  absl::Status Store(const std::string& key, const StageFits& fits,
                     const ActivationStats& stats) const;

  std::string EntryDir(const std::string& key) const;

 private:
  std::string dir_;
};

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_UNIT_TABLE_CACHE_H_
