// Packing of integer codes to bytes for the quantized checkpoint (exporter) and back.
// Layout (stable; the exporter's file format depends on it):
//   b-bit codes (b in {1,2,3,4,8}): unsigned values < 2^b written as one little-endian
//     bitstream, code i occupying bits [i*b, (i+1)*b) with bit 0 = LSB of byte 0;
//     ceil(n*b/8) bytes, unused high bits of the last byte are 0.
//   trits (ternary): values {0,1,2}, 5 per byte, byte = t0 + 3 t1 + 9 t2 + 27 t3 + 81 t4
//     (<= 242); ceil(n/5) bytes, missing trailing trits are 0. 8/5 = 1.6 bits per code.
// The action-level functions map FitUnit's signed codes (quantizer.h) to unsigned:
//   8/4/3: q + 2^(b-1);  2: q + 2 (q in -2..1);  1.58: trit q + 1;  1: (q + 1) / 2.
// Pure functions; thread-safe; no torch.
#ifndef WINDQUANT_COMMON_QUANT_PACKING_H_
#define WINDQUANT_COMMON_QUANT_PACKING_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/quant/action.h"

namespace windquant::quant {

// Bytes needed for n codes of `bits` bits (1..8).
int64_t PackedBitsBytes(int64_t n, int bits);
// Bytes needed for n trits.
int64_t PackedTritsBytes(int64_t n);
// Bytes PackCodes produces for n codes of action a (INVALID_ARGUMENT for action 16).
absl::StatusOr<int64_t> PackedCodesBytes(Action a, int64_t n);

// INVALID_ARGUMENT: bits not in {1,2,3,4,8}, a code >= 2^bits (names its index).
absl::StatusOr<std::vector<uint8_t>> PackBits(absl::Span<const uint8_t> codes, int bits);
// INVALID_ARGUMENT: bad bits, bytes.size() != PackedBitsBytes(count, bits).
absl::StatusOr<std::vector<uint8_t>> UnpackBits(absl::Span<const uint8_t> bytes, int bits,
                                                int64_t count);

// INVALID_ARGUMENT: a trit > 2 (names its index).
absl::StatusOr<std::vector<uint8_t>> PackTrits(absl::Span<const uint8_t> trits);
// INVALID_ARGUMENT: wrong size, a byte > 242.
absl::StatusOr<std::vector<uint8_t>> UnpackTrits(absl::Span<const uint8_t> bytes, int64_t count);

// Signed codes of action a (as in ActionFit::codes) to bytes and back.
// INVALID_ARGUMENT: action 16 (nothing to pack), a code outside the action's range.
absl::StatusOr<std::vector<uint8_t>> PackCodes(Action a, absl::Span<const int8_t> codes);
absl::StatusOr<std::vector<int8_t>> UnpackCodes(Action a, absl::Span<const uint8_t> bytes,
                                                int64_t count);

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_PACKING_H_
