#include "common/transport/hidden_states_codec.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "windquant/v1/types.pb.h"

namespace windquant::transport {

void EncodeHiddenStates(const at::Tensor& hidden, int32_t micro_batch, v1::HiddenStates* out) {
  const at::Tensor t = hidden.to(at::kCPU, at::kFloat).contiguous();
  out->clear_shape();
  for (int64_t d : t.sizes()) out->add_shape(d);
  out->set_data(t.data_ptr<float>(), static_cast<size_t>(t.numel()) * sizeof(float));
  out->set_micro_batch(micro_batch);
}

absl::StatusOr<at::Tensor> DecodeHiddenStates(const v1::HiddenStates& proto,
                                              const std::string& field, int64_t max_elements) {
  if (proto.shape_size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".shape: must have 3 dims [batch, seq, hidden], got ", proto.shape_size()));
  }
  int64_t n = 1;
  std::vector<int64_t> shape;
  for (int i = 0; i < 3; ++i) {
    const int64_t d = proto.shape(i);
    if (d < 1 || d > max_elements || n > max_elements / d) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".shape[", i, "]: ", d, " out of range"));
    }
    n *= d;
    shape.push_back(d);
  }
  if (static_cast<int64_t>(proto.data().size()) != n * static_cast<int64_t>(sizeof(float))) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".data: ", proto.data().size(), " bytes, the shape needs ", n * 4));
  }
  at::Tensor t = at::empty(shape, at::kFloat);
  std::memcpy(t.data_ptr<float>(), proto.data().data(), proto.data().size());
  return t;
}

}  // namespace windquant::transport
