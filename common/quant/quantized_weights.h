// QuantizedWeights: the cached fitted quantizations of a stage ("no refitting
// per plan"): for every (layer, matrix, action) the fake-quant matrix whose
// column chunks are the units' fits. Applying a plan copies, per unit, the
// chosen action's columns into a model's weights.
// Memory: 7 float32 copies of the stage's linear weights (fine for the stages
// of small models; a 70B stage would apply fits per unit on the fly instead).
// Thread-compatible; Apply on distinct targets may run concurrently.
#ifndef WINDQUANT_COMMON_QUANT_QUANTIZED_WEIGHTS_H_
#define WINDQUANT_COMMON_QUANT_QUANTIZED_WEIGHTS_H_

#include <array>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "common/model/llama_weights.h"
#include "common/quant/action.h"
#include "common/quant/unit_table.h"

namespace windquant::quant {

class QuantizedWeights {
 public:
  int64_t first_layer = 0;
  // [layer - first_layer][matrix][action] -> fake-quant [out, in] float32.
  std::vector<std::array<std::array<at::Tensor, kNumActions>, model::kNumMatrices>> layers;

  const at::Tensor& at(int64_t layer, int matrix, int action) const {
    return layers[layer - first_layer][matrix][action];
  }

  // Writes into `target` (a stage holding the same layers) the weights of the
  // plan: for each unit of `table` within the stage, the columns of its chosen
  // action. `actions` is indexed by unit id (global order). Units outside the
  // stage are ignored. INVALID_ARGUMENT when a unit id is past the plan or an
  // action is out of range.
  absl::Status Apply(const UnitTable& table, const std::vector<int>& actions,
                     model::LlamaWeights* target) const;

  // Saves / loads as a safetensors file ("layers.<l>.<matrix>.<action>").
  absl::Status Save(const std::string& path) const;
  static absl::StatusOr<QuantizedWeights> Load(const std::string& path, int64_t first_layer,
                                               int64_t end_layer);
};

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_QUANTIZED_WEIGHTS_H_
