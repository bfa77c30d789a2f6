// UnitTable: per unit (a column chunk of one decoder linear, DESIGN.md section 2)
// its static RL features and, per action, the effective bits and the error proxy.
// Computed per stage by whoever owns the weights, merged into the global table
// by the learner, serialised as windquant.v1.UnitTable, cached on disk under a
// fingerprint of model + calibration data + quant config.
// Plain data; thread-compatible.
#ifndef WINDQUANT_COMMON_PLAN_UNIT_TABLE_H_
#define WINDQUANT_COMMON_PLAN_UNIT_TABLE_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/plan/action.h"

namespace windquant::v1 {
class UnitTable;
}

namespace windquant::plan {

// Static per-unit features, each normalised to roughly [-1, 1] or [0, 1]
// (the normalisation of each is documented where it is computed,
// unit_table_builder.cc). The RL state (common/rl) appends 4 dynamic ones.
enum StaticFeature : int {
  kFeatWeightMean = 0,  // mean(W_u) / std(W of the matrix), clipped to [-1, 1]
  kFeatWeightVar,       // var(W_u) / var(W of the matrix), log2-scaled, clipped
  kFeatSparsity,        // fraction of |W_ij| < 0.01 * max|W of the matrix|
  kFeatOutlierFrac,     // fraction of |W_ij - mean| > 3 std(W_u), x10, clipped to 1
  kFeatActMeanRel,      // mean s_j over the unit / mean s_j over the matrix input, log2, clipped
  kFeatActMaxRel,       // max s_j over the unit / mean s_j over the layer input, log2 / 4, clipped
  kFeatMassShare,       // share of the layer's sum |W_ij| s_j in this unit, x num units in layer
  kFeatIsAttention,     // 1 for q, k, v, o
  kFeatIsMlp,           // 1 for gate, up, down
  kFeatDepth,           // layer / (num_layers - 1)
  kFeatErrRatio,        // log10(error(2 bit) / error(4 bit)) / 2, clipped to [0, 1]
  kNumStaticFeatures
};

struct Unit {
  uint32_t id = 0;  // position in the global order (layer, matrix, chunk)
  int32_t layer = 0;
  int32_t matrix = 0;  // model::Matrix as int: q k v o gate up down
  int32_t chunk = 0;   // chunk index within the matrix
  int64_t rows = 0;    // output features
  int64_t cols = 0;    // chunk width (last chunk may be narrower)
  int64_t col_begin = 0;
  int64_t salient_count = 0;
  std::array<float, kNumStaticFeatures> features{};
  std::array<double, kNumActions> bits{};   // UnitEffectiveBits per action index
  std::array<double, kNumActions> error{};  // activation-weighted relative error per action
  int64_t n() const { return rows * cols; }
};

class UnitTable {
 public:
  std::string fingerprint;  // model + calibration + quant config
  int32_t first_layer = 0;
  int32_t end_layer = 0;  // exclusive
  int32_t num_layers = 0;
  int32_t chunk_size = 0;
  double salient_fraction = 0;
  // Embeddings, norms, lm_head: not quantized, not in the average bits. (The name is
  // historical: they are stored and counted at fixed_param_bits, the model's dtype.)
  int64_t fixed_fp16_params = 0;
  int32_t fixed_param_bits = 16;  // FixedParamBits(torch_dtype) (effective_bits.h)
  std::vector<Unit> units;

  int64_t TotalWeights() const;
  // Effective bits of a plan (one action index per unit): sum bits / sum n.
  double EffectiveBits(const std::vector<int>& actions) const;
  // Bits over the whole model: quantized linears + fixed_param_bits * fixed_fp16_params
  // (plan::WholeModelBits), i.e. the tensor bytes of the quantized checkpoint * 8.
  double WholeModelBits(const std::vector<int>& actions) const;

  // Checks ids are 0..N-1 in order, arrays finite, layers within range.
  absl::Status Validate() const;
  // Merges stage tables (any order) into the global table; fails on a gap,
  // an overlap or fingerprints that differ.
  static absl::StatusOr<UnitTable> Merge(std::vector<UnitTable> stages);

  void ToProto(v1::UnitTable* out) const;
  static absl::StatusOr<UnitTable> FromProto(const v1::UnitTable& proto);
};

}  // namespace windquant::plan

#endif  // WINDQUANT_COMMON_PLAN_UNIT_TABLE_H_
