// Builds a stage's part of the UnitTable: enumerates its units (column chunks of every
// decoder linear in the global order layer, matrix, chunk), fits every action of every
// unit (fit_kernels.h, in parallel over the units of a matrix), computes the static RL
// features, and keeps the compact fits (StageFits) for applying plans without refitting.
//
// Memory while it runs: the float32 copy of the matrix being fitted (4 bytes per weight
// of one matrix; none when the weights are stored float32), a few row buffers per
// thread, and the growing StageFits (~0.13 bytes per weight at chunk 128).
// Thread-compatible.
#ifndef WINDQUANT_COMMON_QUANT_UNIT_TABLE_BUILDER_H_
#define WINDQUANT_COMMON_QUANT_UNIT_TABLE_BUILDER_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "common/model/llama_weights.h"
#include "common/plan/unit_table.h"
#include "common/quant/calibration.h"
#include "common/quant/stage_fits.h"
#include "common/quant/unit_fit.h"
#include "common/quant/unit_table_options.h"

namespace windquant::quant {

// Called after each matrix with (units done, units total).
using FitProgress = std::function<void(int64_t, int64_t)>;

// Units per decoder layer for this model shape and chunk size (the same for every layer).
int64_t UnitsPerLayer(const model::LlamaConfig& config, int64_t chunk_size);

// Fits the stage held by `weights` (layers [first_layer, first_layer+size), weights in any
// floating dtype) with QuantizerFor(options). `fingerprint` is stored in the table.
// INVALID_ARGUMENT when chunk_size < 1, statistics are missing for a linear, shapes
// disagree, or a weight or statistic is not finite (naming the tensor).
absl::StatusOr<StageFits> BuildStageFits(const model::LlamaWeights& weights,
                                         const ActivationStats& stats,
                                         const UnitTableOptions& options,
                                         const std::string& fingerprint,
                                         const FitProgress& progress = nullptr);

// Number of FP16 parameters outside the decoder linears (embeddings, norms,
// lm_head unless tied) for a config.
int64_t FixedFp16Params(const model::LlamaConfig& config);

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_UNIT_TABLE_BUILDER_H_
