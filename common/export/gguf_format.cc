#include "common/export/gguf_format.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace windquant::exporter::gguf {
namespace {

struct TypeInfo {
  TensorType type;
  const char* name;
  int64_t values;
  int64_t bytes;
  bool codec;
};

constexpr TypeInfo kTypes[] = {
    {TensorType::kF32, "F32", 1, 4, true},        {TensorType::kF16, "F16", 1, 2, true},
    {TensorType::kQ4_0, "Q4_0", 32, 18, true},    {TensorType::kQ4_1, "Q4_1", 32, 20, true},
    {TensorType::kQ8_0, "Q8_0", 32, 34, true},    {TensorType::kQ2_K, "Q2_K", 256, 84, true},
    {TensorType::kQ3_K, "Q3_K", 256, 110, true},  {TensorType::kBF16, "BF16", 1, 2, true},
    {TensorType::kTQ1_0, "TQ1_0", 256, 54, true}, {TensorType::kTQ2_0, "TQ2_0", 256, 66, true},
};

const TypeInfo& Info(TensorType t) {
  for (const TypeInfo& i : kTypes) {
    if (i.type == t) return i;
  }
  return kTypes[0];  // unreachable for values of the enum
}

uint16_t Load16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
void Store16(uint16_t v, uint8_t* p) {
  p[0] = static_cast<uint8_t>(v & 0xFF);
  p[1] = static_cast<uint8_t>(v >> 8);
}

void DecodeQ8_0(const uint8_t* b, float* out) {
  const float d = HalfToFloat(Load16(b));
  for (int j = 0; j < 32; ++j) out[j] = d * static_cast<float>(static_cast<int8_t>(b[2 + j]));
}

void DecodeQ4_0(const uint8_t* b, float* out) {
  const float d = HalfToFloat(Load16(b));
  for (int j = 0; j < 16; ++j) {
    out[j] = d * static_cast<float>((b[2 + j] & 0x0F) - 8);
    out[j + 16] = d * static_cast<float>((b[2 + j] >> 4) - 8);
  }
}

void DecodeQ4_1(const uint8_t* b, float* out) {
  const float d = HalfToFloat(Load16(b)), m = HalfToFloat(Load16(b + 2));
  for (int j = 0; j < 16; ++j) {
    out[j] = d * static_cast<float>(b[4 + j] & 0x0F) + m;
    out[j + 16] = d * static_cast<float>(b[4 + j] >> 4) + m;
  }
}

// The 2-bit field of value i (0..255) in 64 bytes of 2-bit codes (Q2_K, Q3_K, TQ2_0).
int Code2(const uint8_t* qs, int i) {
  return (qs[i / 128 * 32 + i % 32] >> (2 * (i % 128 / 32))) & 3;
}
void SetCode2(int i, int v, uint8_t* qs) {
  qs[i / 128 * 32 + i % 32] |= static_cast<uint8_t>(v << (2 * (i % 128 / 32)));
}

// Q3_K's 6-bit scale k (0..63) from its 12 bytes.
int Q3Scale(const uint8_t* s, int k) {
  const int low = k < 8 ? s[k] & 0x0F : s[k - 8] >> 4;
  return low | (((s[8 + k % 4] >> (2 * (k / 4))) & 3) << 4);
}

// TQ1_0: the byte and digit (0 = most significant) of value i.
struct TritPlace {
  int byte, digit;
};
TritPlace TritOf(int i) {
  if (i < 160) return {i % 32, i / 32};
  if (i < 240) return {32 + (i - 160) % 16, (i - 160) / 16};
  return {48 + (i - 240) % 4, (i - 240) / 4};
}
int Trit(uint8_t byte, int digit) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const uint8_t q = static_cast<uint8_t>(byte * kPow3[digit]);  // modulo 256, as ggml
  return (q * 3) >> 8;
}

void DecodeQ2_K(const uint8_t* b, float* out) {
  const float d = HalfToFloat(Load16(b + 80)), dmin = HalfToFloat(Load16(b + 82));
  for (int i = 0; i < 256; ++i) {
    const uint8_t sc = b[i / 16];
    const float dl = d * static_cast<float>(sc & 0x0F), ml = dmin * static_cast<float>(sc >> 4);
    out[i] = dl * static_cast<float>(Code2(b + 16, i)) - ml;
  }
}

void DecodeQ3_K(const uint8_t* b, float* out) {
  const float d = HalfToFloat(Load16(b + 108));
  for (int i = 0; i < 256; ++i) {
    const float dl = d * static_cast<float>(Q3Scale(b + 96, i / 16) - 32);
    const int high = (b[i % 32] >> (i / 32)) & 1;
    out[i] = dl * static_cast<float>(Code2(b + 32, i) - (high ? 0 : 4));
  }
}

void DecodeTQ2_0(const uint8_t* b, float* out) {
  const float d = HalfToFloat(Load16(b + 64));
  for (int i = 0; i < 256; ++i) out[i] = static_cast<float>(Code2(b, i) - 1) * d;
}

void DecodeTQ1_0(const uint8_t* b, float* out) {
  const float d = HalfToFloat(Load16(b + 52));
  for (int i = 0; i < 256; ++i) {
    const TritPlace p = TritOf(i);
    out[i] = static_cast<float>(Trit(b[p.byte], p.digit) - 1) * d;
  }
}

void DecodeBlock(TensorType t, const uint8_t* block, float* o) {
  switch (t) {
    case TensorType::kQ8_0:
      return DecodeQ8_0(block, o);
    case TensorType::kQ4_0:
      return DecodeQ4_0(block, o);
    case TensorType::kQ4_1:
      return DecodeQ4_1(block, o);
    case TensorType::kQ2_K:
      return DecodeQ2_K(block, o);
    case TensorType::kQ3_K:
      return DecodeQ3_K(block, o);
    case TensorType::kTQ2_0:
      return DecodeTQ2_0(block, o);
    case TensorType::kTQ1_0:
      return DecodeTQ1_0(block, o);
    default:
      return;  // blocks of 1: DecodeRow
  }
}

}  // namespace

std::optional<TensorType> TensorTypeFrom(uint32_t value) {
  for (const TypeInfo& i : kTypes) {
    if (static_cast<uint32_t>(i.type) == value) return i.type;
  }
  return std::nullopt;
}

const char* TensorTypeName(TensorType t) { return Info(t).name; }
int64_t BlockValues(TensorType t) { return Info(t).values; }
int64_t BlockBytes(TensorType t) { return Info(t).bytes; }
bool HasCodec(TensorType t) { return Info(t).codec; }
double TypeBits(TensorType t) {
  return 8.0 * static_cast<double>(Info(t).bytes) / static_cast<double>(Info(t).values);
}

absl::StatusOr<uint64_t> RowBytes(TensorType t, int64_t n) {
  const TypeInfo& i = Info(t);
  if (n <= 0 || n % i.values != 0) {
    return absl::InvalidArgumentError(absl::StrCat("a row of ", n, " values is not a multiple of ",
                                                   i.name, "'s block of ", i.values));
  }
  return static_cast<uint64_t>(n / i.values * i.bytes);
}

absl::Status DecodeRow(TensorType t, absl::Span<const uint8_t> bytes, int64_t n, float* out) {
  const TypeInfo& i = Info(t);
  if (!i.codec) {
    return absl::UnimplementedError(
        absl::StrCat("GGUF type ", i.name, " has no decoder in windquant yet"));
  }
  absl::StatusOr<uint64_t> want = RowBytes(t, n);
  if (!want.ok()) return want.status();
  if (bytes.size() != *want) {
    return absl::InvalidArgumentError(
        absl::StrCat(i.name, " row of ", n, " values: ", bytes.size(), " bytes, not ", *want));
  }
  const uint8_t* b = bytes.data();
  switch (t) {
    case TensorType::kF32:
      std::memcpy(out, b, static_cast<size_t>(n) * 4);  // little-endian hosts only
      return absl::OkStatus();
    case TensorType::kF16:
      for (int64_t j = 0; j < n; ++j) out[j] = HalfToFloat(Load16(b + 2 * j));
      return absl::OkStatus();
    case TensorType::kBF16:
      for (int64_t j = 0; j < n; ++j) {
        out[j] = static_cast<float>(c10::BFloat16(Load16(b + 2 * j), c10::BFloat16::from_bits()));
      }
      return absl::OkStatus();
    default:
      break;
  }
  for (int64_t k = 0; k < n / i.values; ++k) {
    const uint8_t* block = b + k * i.bytes;
    DecodeBlock(t, block, out + k * i.values);
  }
  return absl::OkStatus();
}

void EncodeQ8_0(uint16_t d_bits, const int8_t codes[32], uint8_t* out) {
  Store16(d_bits, out);
  std::memcpy(out + 2, codes, 32);
}

void EncodeQ4_0(uint16_t d_bits, const int8_t codes[32], uint8_t* out) {
  Store16(d_bits, out);
  for (int j = 0; j < 16; ++j) {
    out[2 + j] = static_cast<uint8_t>((codes[j] + 8) | ((codes[j + 16] + 8) << 4));
  }
}

void EncodeQ4_1(uint16_t d_bits, uint16_t m_bits, const uint8_t codes[32], uint8_t* out) {
  Store16(d_bits, out);
  Store16(m_bits, out + 2);
  for (int j = 0; j < 16; ++j) out[4 + j] = static_cast<uint8_t>(codes[j] | (codes[j + 16] << 4));
}

void EncodeQ2_K(uint16_t d_bits, uint16_t dmin_bits, const uint8_t scales[16],
                const uint8_t codes[256], uint8_t* out) {
  std::memcpy(out, scales, 16);
  std::memset(out + 16, 0, 64);
  for (int i = 0; i < 256; ++i) SetCode2(i, codes[i], out + 16);
  Store16(d_bits, out + 80);
  Store16(dmin_bits, out + 82);
}

void EncodeQ3_K(uint16_t d_bits, const uint8_t scales[16], const int8_t codes[256], uint8_t* out) {
  std::memset(out, 0, 108);
  for (int i = 0; i < 256; ++i) {
    const int stored = codes[i] + 4;  // 0..7: the high bit set means "no -4"
    if (stored & 4) out[i % 32] |= static_cast<uint8_t>(1 << (i / 32));
    SetCode2(i, stored & 3, out + 32);
  }
  for (int k = 0; k < 16; ++k) {
    out[96 + k % 8] |= static_cast<uint8_t>((scales[k] & 0x0F) << (k < 8 ? 0 : 4));
    out[96 + 8 + k % 4] |= static_cast<uint8_t>(((scales[k] >> 4) & 3) << (2 * (k / 4)));
  }
  Store16(d_bits, out + 108);
}

void EncodeTQ2_0(uint16_t d_bits, const int8_t codes[256], uint8_t* out) {
  std::memset(out, 0, 64);
  for (int i = 0; i < 256; ++i) SetCode2(i, codes[i] + 1, out);
  Store16(d_bits, out + 64);
}

void EncodeTQ1_0(uint16_t d_bits, const int8_t codes[256], uint8_t* out) {
  int number[52] = {};  // per byte: its digits as a base-3 number of five digits
  static constexpr int kWeight[5] = {81, 27, 9, 3, 1};
  for (int i = 0; i < 256; ++i) {
    const TritPlace p = TritOf(i);
    number[p.byte] += (codes[i] + 1) * kWeight[p.digit];
  }
  for (int j = 0; j < 52; ++j) out[j] = static_cast<uint8_t>((number[j] * 256 + 242) / 243);
  Store16(d_bits, out + 52);
}

uint16_t HalfBitsOf(float x) { return c10::Half(x).x; }
float HalfToFloat(uint16_t bits) {
  return static_cast<float>(c10::Half(bits, c10::Half::from_bits()));
}
bool IsHalfExact(float x) { return std::isfinite(x) && HalfToFloat(HalfBitsOf(x)) == x; }

}  // namespace windquant::exporter::gguf
