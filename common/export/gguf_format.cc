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
    {TensorType::kF32, "F32", 1, 4, true},         {TensorType::kF16, "F16", 1, 2, true},
    {TensorType::kQ4_0, "Q4_0", 32, 18, true},     {TensorType::kQ4_1, "Q4_1", 32, 20, true},
    {TensorType::kQ8_0, "Q8_0", 32, 34, true},     {TensorType::kQ2_K, "Q2_K", 256, 84, false},
    {TensorType::kQ3_K, "Q3_K", 256, 110, false},  {TensorType::kBF16, "BF16", 1, 2, true},
    {TensorType::kTQ1_0, "TQ1_0", 256, 54, false}, {TensorType::kTQ2_0, "TQ2_0", 256, 66, false},
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
    float* o = out + k * i.values;
    if (t == TensorType::kQ8_0) DecodeQ8_0(block, o);
    if (t == TensorType::kQ4_0) DecodeQ4_0(block, o);
    if (t == TensorType::kQ4_1) DecodeQ4_1(block, o);
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

uint16_t HalfBitsOf(float x) { return c10::Half(x).x; }
float HalfToFloat(uint16_t bits) {
  return static_cast<float>(c10::Half(bits, c10::Half::from_bits()));
}
bool IsHalfExact(float x) { return std::isfinite(x) && HalfToFloat(HalfBitsOf(x)) == x; }

}  // namespace windquant::exporter::gguf
