// The unit table's fingerprint (UnitTable::fingerprint, Plan::model_fingerprint):
// the one identity of "this model, these calibration windows, this
// quantization" that every plan carries and Plan::Validate checks. It is
// defined here once and computed by every path from inputs that path has,
// without loading the whole model:
//   - the actors (stage by stage) and QuantizationSession: ModelKey;
//   - the evaluator (which owns the calibration text) and QuantizationSession:
//     CalibrationKey;
//   - whoever builds a table: TableFingerprint(model key, calibration key);
//   - the learner, which checks every stage table against it: RunTableFingerprint
//     (both keys from the run config: model.dir's headers and tokenizer, the
//     calibration text).
// So a plan made by the distributed learner, by `windquant quantize` or by a
// baseline is accepted by `windquant eval --plan` and `export` with the run's
// config, and a plan for another model, calibration or quantization is not.
//
// ModelKey = sha256 over, in this order: "windquant.model_key.v2", the model's
// config.json text, then for every *.safetensors file of the directory in name
// order its name, size, the sha256 of its JSON header and the sha256 of
// kModelKeySamples windows of kModelKeySampleBytes spread evenly over its data
// (the header pins names, shapes, dtypes and offsets; the samples tell apart
// two checkpoints of one architecture, e.g. a fine-tune, at ~1 MiB of reads
// per file instead of hashing every weight), then the chunk size and every
// QuantizerOptions field (%.17g).
// CalibrationKey = sha256 of "samples=S seq_len=L seed=E\n" followed by the
// calibration text's token ids (int32, little-endian, encoded without BOS).
// TableFingerprint = sha256 of model key + "\n" + calibration key.
// (The unit-table cache keys its entries with UnitTableFingerprint, a hash of
// every weight: a cache must never hand out fits of other weights.)
// Stateless; thread-safe.
#ifndef WINDQUANT_COMMON_QUANT_TABLE_FINGERPRINT_H_
#define WINDQUANT_COMMON_QUANT_TABLE_FINGERPRINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/quant/calibration_options.h"
#include "common/quant/unit_table_options.h"

namespace windquant::quant {

inline constexpr int kModelKeySamples = 16;
inline constexpr int64_t kModelKeySampleBytes = 64 * 1024;

// See above. NOT_FOUND / INVALID_ARGUMENT naming the file when config.json is
// missing, the directory holds no *.safetensors file or a header is truncated.
absl::StatusOr<std::string> ModelKey(const std::string& model_dir, int64_t chunk_size,
                                     const QuantizerOptions& quantizer);

std::string CalibrationKey(int samples, int seq_len, uint64_t seed,
                           const std::vector<int32_t>& calibration_ids);

std::string TableFingerprint(const std::string& model_key, const std::string& calibration_key);

// The table fingerprint of a run: ModelKey of `model_dir` (units.chunk_size,
// QuantizerFor(units)) and CalibrationKey of `calibration_ids`, the ids of the
// calibration range. The errors of ModelKey.
absl::StatusOr<std::string> RunTableFingerprint(const std::string& model_dir,
                                                const UnitTableOptions& units,
                                                const CalibrationOptions& calibration,
                                                const std::vector<int32_t>& calibration_ids);
// The same, reading the calibration range with model_dir's tokenizer (what the
// evaluator calibrates on) without loading any weight; for a node that holds no
// session (the distributed learner). Errors name the file.
absl::StatusOr<std::string> RunTableFingerprint(const std::string& model_dir,
                                                const UnitTableOptions& units,
                                                const CalibrationOptions& calibration);

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_TABLE_FINGERPRINT_H_
