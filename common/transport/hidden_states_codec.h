// Hidden states on the wire (windquant.v1.HiddenStates): shape + the dtype's name +
// little-endian bytes, float32 or bfloat16 (the run's model.compute_dtype; bfloat16
// travels as its 2 bytes, bit for bit). Decoding validates everything a peer could get
// wrong and names the field in INVALID_ARGUMENT. Thread-safe (pure functions).
#ifndef WINDQUANT_COMMON_TRANSPORT_HIDDEN_STATES_CODEC_H_
#define WINDQUANT_COMMON_TRANSPORT_HIDDEN_STATES_CODEC_H_

#include <optional>
#include <string>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"

namespace windquant::v1 {
class HiddenStates;
}

namespace windquant::transport {

// [B, T, H] (any layout, CPU or not) -> proto. bfloat16 is sent as is; any other dtype
// as float32.
void EncodeHiddenStates(const at::Tensor& hidden, int32_t micro_batch, v1::HiddenStates* out);

// proto -> CPU tensor of the proto's dtype (float32 when the field is empty).
// INVALID_ARGUMENT "<field>.dtype: ..." for a dtype other than float32 and bfloat16, or
// other than `expected` when given; "<field>.shape: ..." for a shape that is not 3
// positive dims or exceeds `max_elements`; "<field>.data: ..." when the bytes do not
// match the shape and dtype.
absl::StatusOr<at::Tensor> DecodeHiddenStates(const v1::HiddenStates& proto,
                                              const std::string& field,
                                              std::optional<at::ScalarType> expected = std::nullopt,
                                              int64_t max_elements = int64_t{1} << 28);

}  // namespace windquant::transport

#endif  // WINDQUANT_COMMON_TRANSPORT_HIDDEN_STATES_CODEC_H_
