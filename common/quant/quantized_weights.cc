#include "common/quant/quantized_weights.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/model/safetensors.h"
#include "common/model/safetensors_writer.h"

namespace windquant::quant {
namespace {

std::string EntryName(int64_t layer, int matrix, int action) {
  return absl::StrCat("layers.", layer, ".", model::kMatrixNames[matrix], ".", action);
}

}  // namespace

absl::Status QuantizedWeights::Apply(const UnitTable& table, const std::vector<int>& actions,
                                     model::LlamaWeights* target) const {
  const int64_t end_layer = first_layer + static_cast<int64_t>(layers.size());
  if (target->first_layer != first_layer ||
      target->first_layer + static_cast<int64_t>(target->layers.size()) != end_layer) {
    return absl::InvalidArgumentError("plan target holds other layers than the quantized stage");
  }
  at::NoGradGuard no_grad;
  for (const Unit& u : table.units) {
    if (u.layer < first_layer || u.layer >= end_layer) continue;
    if (u.id >= actions.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "plan has ", actions.size(), " actions, but unit id ", u.id, " is in the table"));
    }
    const int a = actions[u.id];
    if (a < 0 || a >= kNumActions) {
      return absl::InvalidArgumentError(
          absl::StrCat("unit ", u.id, ": action index ", a, " out of range"));
    }
    at::Tensor& w = target->layers[u.layer - first_layer].linear[u.matrix];
    w.slice(1, u.col_begin, u.col_begin + u.cols)
        .copy_(at(u.layer, u.matrix, a).slice(1, u.col_begin, u.col_begin + u.cols));
  }
  return absl::OkStatus();
}

absl::Status QuantizedWeights::Save(const std::string& path) const {
  model::SafetensorsWriter writer;
  for (size_t l = 0; l < layers.size(); ++l) {
    for (int m = 0; m < model::kNumMatrices; ++m) {
      for (int a = 0; a < kNumActions; ++a) {
        WQ_RETURN_IF_ERROR(writer.Add(EntryName(first_layer + l, m, a), layers[l][m][a]));
      }
    }
  }
  return writer.Write(path);
}

absl::StatusOr<QuantizedWeights> QuantizedWeights::Load(const std::string& path,
                                                        int64_t first_layer, int64_t end_layer) {
  WQ_ASSIGN_OR_RETURN(auto file, model::SafetensorsFile::Open(path));
  QuantizedWeights out;
  out.first_layer = first_layer;
  out.layers.resize(end_layer - first_layer);
  for (int64_t l = first_layer; l < end_layer; ++l) {
    for (int m = 0; m < model::kNumMatrices; ++m) {
      for (int a = 0; a < kNumActions; ++a) {
        const std::string name = EntryName(l, m, a);
        const model::TensorInfo* info = file->Find(name);
        if (info == nullptr || info->dtype != model::Dtype::kF32 || info->shape.size() != 2) {
          return absl::DataLossError(
              absl::StrCat(path, ": tensor ", name, " missing or not 2-D F32"));
        }
        std::string_view bytes = file->Data(*info);
        at::Tensor t = at::empty({info->shape[0], info->shape[1]}, at::kFloat);
        std::memcpy(t.data_ptr<float>(), bytes.data(), bytes.size());
        out.layers[l - first_layer][m][a] = t;
      }
    }
  }
  return out;
}

}  // namespace windquant::quant
