#include "common/model/llama_weights.h"

#include "absl/strings/str_cat.h"

namespace windquant::model {

std::string LinearTensorName(int64_t layer, Matrix m) {
  const int i = static_cast<int>(m);
  const char* block = i <= static_cast<int>(Matrix::kO) ? "self_attn" : "mlp";
  return absl::StrCat("model.layers.", layer, ".", block, ".", kMatrixNames[i], ".weight");
}

}  // namespace windquant::model
