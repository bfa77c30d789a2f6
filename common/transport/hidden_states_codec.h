// Hidden states on the wire (windquant.v1.HiddenStates): shape + float32
// little-endian bytes. Decoding validates everything a peer could get wrong
// and names the field in INVALID_ARGUMENT. Thread-safe (pure functions).
#ifndef WINDQUANT_COMMON_TRANSPORT_HIDDEN_STATES_CODEC_H_
#define WINDQUANT_COMMON_TRANSPORT_HIDDEN_STATES_CODEC_H_

#include <string>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"

namespace windquant::v1 {
class HiddenStates;
}

namespace windquant::transport {

// [B, T, H] float32 (any layout, CPU or not) -> proto.
void EncodeHiddenStates(const at::Tensor& hidden, int32_t micro_batch, v1::HiddenStates* out);

// proto -> CPU float32 tensor. INVALID_ARGUMENT "<field>.shape: ..." for a
// shape that is not 3 positive dims or exceeds `max_elements`,
// "<field>.data: ..." when the bytes do not match the shape.
absl::StatusOr<at::Tensor> DecodeHiddenStates(const v1::HiddenStates& proto,
                                              const std::string& field,
                                              int64_t max_elements = int64_t{1} << 28);

}  // namespace windquant::transport

#endif  // WINDQUANT_COMMON_TRANSPORT_HIDDEN_STATES_CODEC_H_
