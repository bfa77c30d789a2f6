#include "common/transport/hidden_states_codec.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/model/compute_options.h"
#include "common/model/llama_model.h"
#include "windquant/v1/types.pb.h"

namespace windquant::transport {

void EncodeHiddenStates(const at::Tensor& hidden, int32_t micro_batch, v1::HiddenStates* out) {
  const at::ScalarType dtype = hidden.scalar_type() == at::kBFloat16 ? at::kBFloat16 : at::kFloat;
  const at::Tensor t = hidden.to(at::kCPU, dtype).contiguous();
  out->clear_shape();
  for (int64_t d : t.sizes()) out->add_shape(d);
  out->set_data(t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size());
  out->set_dtype(model::DtypeName(dtype));
  out->set_micro_batch(micro_batch);
}

absl::StatusOr<at::Tensor> DecodeHiddenStates(const v1::HiddenStates& proto,
                                              const std::string& field,
                                              std::optional<at::ScalarType> expected,
                                              int64_t max_elements) {
  const std::optional<model::ComputeDtype> named = proto.dtype().empty()
                                                       ? model::ComputeDtype::kFloat32
                                                       : model::ParseComputeDtype(proto.dtype());
  if (!named.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".dtype: '", proto.dtype(), "' unknown, must be float32 or bfloat16"));
  }
  model::ComputeOptions compute;
  compute.dtype = *named;
  const at::ScalarType dtype = model::TorchDtype(compute);
  if (expected.has_value() && *expected != dtype) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".dtype: ", model::DtypeName(dtype),
                                                   ", expected ", model::DtypeName(*expected),
                                                   " (peers of another model.compute_dtype)"));
  }
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
  const int64_t bytes = n * static_cast<int64_t>(c10::elementSize(dtype));
  if (static_cast<int64_t>(proto.data().size()) != bytes) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".data: ", proto.data().size(),
                                                   " bytes, the shape needs ", bytes, " (",
                                                   model::DtypeName(dtype), ")"));
  }
  at::Tensor t = at::empty(shape, dtype);
  std::memcpy(t.data_ptr(), proto.data().data(), proto.data().size());
  return t;
}

}  // namespace windquant::transport
