// Packing of integer codes to bytes for the quantized checkpoint (exporter) and back.
// Layout (stable; the exporter's file format depends on it):
//   b-bit codes (b in {1,2,3,4,8}): unsigned values < 2^b written as one little-endian
//     bitstream, code i occupying bits [i*b, (i+1)*b) with bit 0 = LSB of byte 0;
//     ceil(n*b/8) bytes, unused high bits of the last byte are 0.
//   unsigned values of 1..32 bits (PackUint: salient positions, trit groups): the same
//     little-endian bitstream, ceil(n*b/8) bytes.
//   trits (ternary): values {0,1,2} in groups of 17, group value t0 + 3 t1 + ... + 3^16 t16
//     (< 3^17 < 2^27) written as 27-bit values (PackUint); missing trailing trits are 0.
//     27/17 = 1.5882 bits per code, 0.2 % above log2(3) = 1.5850, the bits counted
//     (effective_bits.h; 5 per byte would be 1.6, 0.95 % above).
// The action-level functions map FitUnit's signed codes (quantizer.h) to unsigned:
//   8/4/3: q + 2^(b-1);  2: q + 2 (q in -2..1);  1.58: trit q + 1;  1: (q + 1) / 2.
// Pure functions; thread-safe; no torch.
#ifndef WINDQUANT_COMMON_EXPORT_PACKING_H_
#define WINDQUANT_COMMON_EXPORT_PACKING_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/plan/action.h"

namespace windquant::exporter {

// Bytes needed for n codes of `bits` bits (1..8).
int64_t PackedBitsBytes(int64_t n, int bits);
inline constexpr int kTritsPerGroup = 17;
inline constexpr int kTritGroupBits = 27;
// Bytes needed for n trits.
int64_t PackedTritsBytes(int64_t n);
// Bytes needed for n values of `bits` bits (1..32).
int64_t PackedUintBytes(int64_t n, int bits);
// Bytes PackCodes produces for n codes of action a (INVALID_ARGUMENT for action 16).
absl::StatusOr<int64_t> PackedCodesBytes(plan::Action a, int64_t n);

// INVALID_ARGUMENT: bits not in {1,2,3,4,8}, a code >= 2^bits (names its index).
absl::StatusOr<std::vector<uint8_t>> PackBits(absl::Span<const uint8_t> codes, int bits);
// INVALID_ARGUMENT: bad bits, bytes.size() != PackedBitsBytes(count, bits).
absl::StatusOr<std::vector<uint8_t>> UnpackBits(absl::Span<const uint8_t> bytes, int bits,
                                                int64_t count);

// INVALID_ARGUMENT: bits not in [1, 32], a value >= 2^bits (names its index).
absl::StatusOr<std::vector<uint8_t>> PackUint(absl::Span<const uint32_t> values, int bits);
// INVALID_ARGUMENT: bad bits, bytes.size() != PackedUintBytes(count, bits).
absl::StatusOr<std::vector<uint32_t>> UnpackUint(absl::Span<const uint8_t> bytes, int bits,
                                                 int64_t count);
// INVALID_ARGUMENT: a trit > 2 (names its index).
absl::StatusOr<std::vector<uint8_t>> PackTrits(absl::Span<const uint8_t> trits);
// INVALID_ARGUMENT: wrong size, a group value >= 3^17.
absl::StatusOr<std::vector<uint8_t>> UnpackTrits(absl::Span<const uint8_t> bytes, int64_t count);

// Signed codes of action a (as in ActionFit::codes) to bytes and back.
// INVALID_ARGUMENT: action 16 (nothing to pack), a code outside the action's range.
absl::StatusOr<std::vector<uint8_t>> PackCodes(plan::Action a, absl::Span<const int8_t> codes);
absl::StatusOr<std::vector<int8_t>> UnpackCodes(plan::Action a, absl::Span<const uint8_t> bytes,
                                                int64_t count);

}  // namespace windquant::exporter

#endif  // WINDQUANT_COMMON_EXPORT_PACKING_H_
