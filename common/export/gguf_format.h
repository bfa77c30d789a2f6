// The GGUF format (llama.cpp's model file; docs/gguf.md) as far as windquant writes and
// reads it: the tensor types (ggml_type numbers), their block sizes and bytes, and the
// block codecs of the types windquant's GGUF export uses. Written from the format's
// description in llama.cpp's ggml-common.h / gguf-py (our own code):
//   F32   4 bytes per value; F16 / BF16 2 bytes per value (blocks of 1)
//   Q8_0  32 values: FP16 d, 32 x int8 q;                   value = d * q
//   Q4_0  32 values: FP16 d, 16 bytes of nibbles;           value = d * (n - 8)
//   Q4_1  32 values: FP16 d, FP16 m, 16 bytes of nibbles;   value = d * n + m
// Nibbles: byte j holds value j in its low and value j + 16 in its high four bits.
// The 256-value types (llama.cpp's ggml-quants.c dequantize_row_*, gguf-py's quants.py):
//   Q2_K  16 bytes of sub-block scales (low nibble sc, high nibble m; sub-block k = values
//         16k..16k+15), 64 bytes of 2-bit codes n, FP16 d, FP16 dmin
//                                          value = (d * sc) * n - (dmin * m)
//   Q3_K  32 bytes hmask, 64 bytes of 2-bit codes, 12 bytes of 6-bit scales sc, FP16 d
//                                          value = (d * (sc - 32)) * q, q = low - (hi ? 0 : 4)
//   TQ2_0 64 bytes of 2-bit codes, FP16 d; value = (n - 1) * d
//   TQ1_0 48 + 4 bytes of base-3 digits (5 resp. 4 per byte), FP16 d; value = (t - 1) * d
// 2-bit codes (Q2_K, Q3_K, TQ2_0): value 128h + 32s + l is bits 2s..2s+1 of byte 32h + l;
// Q3_K's high bit of value 32s + l is bit s of hmask byte l. TQ1_0: byte b holds the digits
// t_0..t_4 (t_0 the most significant) as ceil(256 * sum t_i 3^(4-i) / 243); value
// 32n + m (n < 5) is digit n of byte m, value 160 + 16n + m digit n of byte 32 + m, value
// 240 + 4n + j digit n of qh byte j (4 digits, the fifth 0); digit n = (uint8(b * 3^n) * 3) >> 8.
// Q3_K's scales: sc_k's low four bits are the low (k < 8) or high (k >= 8) nibble of byte
// k % 8, its high two bits are bits 2(k/4), 2(k/4)+1 of byte 8 + k % 4.
// Pure functions; thread-safe; no torch tensors.
#ifndef WINDQUANT_COMMON_EXPORT_GGUF_FORMAT_H_
#define WINDQUANT_COMMON_EXPORT_GGUF_FORMAT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace windquant::exporter::gguf {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
inline constexpr uint32_t kVersion = 3;
inline constexpr uint64_t kAlignment = 32;  // general.alignment's default

// ggml_type numbers (stable in the file format).
enum class TensorType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
};

// Metadata value types (gguf_type numbers).
enum class ValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

// The type for a number read from a file; nullopt for one this list lacks.
std::optional<TensorType> TensorTypeFrom(uint32_t value);
const char* TensorTypeName(TensorType t);  // "Q4_0", ...
int64_t BlockValues(TensorType t);         // values per block (1 for F32/F16/BF16)
int64_t BlockBytes(TensorType t);          // bytes per block
// Bytes of a row of n values; INVALID_ARGUMENT unless n is a positive multiple of the block.
absl::StatusOr<uint64_t> RowBytes(TensorType t, int64_t n);
// Bits per value of the type (bytes * 8 / values of one block).
double TypeBits(TensorType t);
// Whether DecodeRow / the Encode functions handle the type.
bool HasCodec(TensorType t);

// Decodes one row of n values (n a multiple of the block) into out[n].
// UNIMPLEMENTED naming the type for a type without a codec; INVALID_ARGUMENT for a size
// that is not the row's.
absl::Status DecodeRow(TensorType t, absl::Span<const uint8_t> bytes, int64_t n, float* out);

// One block of the 32-value types from its FP16 parameters (bits) and integer codes
// (Q8_0: -128..127; Q4_0: -8..7 (stored + 8); Q4_1: 0..15). `out` receives BlockBytes.
// The caller guarantees the ranges (checked by the tests).
void EncodeQ8_0(uint16_t d_bits, const int8_t codes[32], uint8_t* out);
void EncodeQ4_0(uint16_t d_bits, const int8_t codes[32], uint8_t* out);
void EncodeQ4_1(uint16_t d_bits, uint16_t m_bits, const uint8_t codes[32], uint8_t* out);
// The 256-value types: `scales` as the block stores them (Q2_K: sc | m << 4, each 0..15;
// Q3_K: 0..63, meaning sc - 32), codes Q2_K 0..3, Q3_K -4..3, TQ1_0 / TQ2_0 -1..1.
void EncodeQ2_K(uint16_t d_bits, uint16_t dmin_bits, const uint8_t scales[16],
                const uint8_t codes[256], uint8_t* out);
void EncodeQ3_K(uint16_t d_bits, const uint8_t scales[16], const int8_t codes[256], uint8_t* out);
void EncodeTQ2_0(uint16_t d_bits, const int8_t codes[256], uint8_t* out);
void EncodeTQ1_0(uint16_t d_bits, const int8_t codes[256], uint8_t* out);

// FP16 <-> float (round to nearest even), BF16 -> float.
uint16_t HalfBitsOf(float x);
float HalfToFloat(uint16_t bits);
// Whether x is exactly an FP16 value (finite).
bool IsHalfExact(float x);

}  // namespace windquant::exporter::gguf

#endif  // WINDQUANT_COMMON_EXPORT_GGUF_FORMAT_H_
