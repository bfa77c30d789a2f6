#include "common/export/packing.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace windquant::exporter {
namespace {

constexpr uint32_t kTritGroupLimit = 129140163;  // 3^17

absl::Status CheckBits(int bits) {
  if (bits == 1 || bits == 2 || bits == 3 || bits == 4 || bits == 8) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("bits: ", bits, " not supported (expected 1, 2, 3, 4 or 8)"));
}

// Unsigned code = signed code + offset; bits = 0 means trits.
struct CodeLayout {
  int bits;
  int offset;
  int lo, hi;   // signed range
  bool binary;  // 1 bit: {-1, 1} -> {0, 1}
};

absl::StatusOr<CodeLayout> LayoutOf(plan::Action a) {
  switch (a) {
    case plan::Action::k8:
      return CodeLayout{8, 128, -128, 127, false};
    case plan::Action::k4:
      return CodeLayout{4, 8, -8, 7, false};
    case plan::Action::k3:
      return CodeLayout{3, 4, -4, 3, false};
    case plan::Action::k2:
      return CodeLayout{2, 2, -2, 1, false};
    case plan::Action::k1_58:
      return CodeLayout{0, 1, -1, 1, false};
    case plan::Action::k1:
      return CodeLayout{1, 0, -1, 1, true};
    case plan::Action::k16:
      break;
  }
  return absl::InvalidArgumentError("action: 16 stores FP16 values, it has no codes to pack");
}

}  // namespace

int64_t PackedBitsBytes(int64_t n, int bits) { return (n * bits + 7) / 8; }
int64_t PackedTritsBytes(int64_t n) {
  return PackedUintBytes((n + kTritsPerGroup - 1) / kTritsPerGroup, kTritGroupBits);
}
int64_t PackedUintBytes(int64_t n, int bits) { return (n * bits + 7) / 8; }

absl::StatusOr<int64_t> PackedCodesBytes(plan::Action a, int64_t n) {
  auto layout = LayoutOf(a);
  if (!layout.ok()) return layout.status();
  return layout->bits == 0 ? PackedTritsBytes(n) : PackedBitsBytes(n, layout->bits);
}

absl::StatusOr<std::vector<uint8_t>> PackBits(absl::Span<const uint8_t> codes, int bits) {
  if (auto st = CheckBits(bits); !st.ok()) return st;
  std::vector<uint8_t> out(PackedBitsBytes(codes.size(), bits), 0);
  const unsigned limit = 1u << bits;
  uint64_t bitpos = 0;
  for (size_t i = 0; i < codes.size(); ++i, bitpos += bits) {
    if (codes[i] >= limit) {
      return absl::InvalidArgumentError(
          absl::StrCat("codes[", i, "]: ", codes[i], " does not fit in ", bits, " bits"));
    }
    // A code spans at most two bytes (bits <= 8).
    const uint32_t v = uint32_t{codes[i]} << (bitpos % 8);
    out[bitpos / 8] |= static_cast<uint8_t>(v);
    if ((bitpos % 8) + bits > 8) out[bitpos / 8 + 1] |= static_cast<uint8_t>(v >> 8);
  }
  return out;
}

absl::StatusOr<std::vector<uint8_t>> UnpackBits(absl::Span<const uint8_t> bytes, int bits,
                                                int64_t count) {
  if (auto st = CheckBits(bits); !st.ok()) return st;
  if (count < 0 || static_cast<int64_t>(bytes.size()) != PackedBitsBytes(count, bits)) {
    return absl::InvalidArgumentError(absl::StrCat("bytes: size ", bytes.size(),
                                                   " != ", PackedBitsBytes(count, bits), " for ",
                                                   count, " codes of ", bits, " bits"));
  }
  std::vector<uint8_t> out(count);
  const uint32_t mask = (1u << bits) - 1;
  uint64_t bitpos = 0;
  for (int64_t i = 0; i < count; ++i, bitpos += bits) {
    uint32_t v = bytes[bitpos / 8];
    if ((bitpos % 8) + bits > 8) v |= uint32_t{bytes[bitpos / 8 + 1]} << 8;
    out[i] = static_cast<uint8_t>((v >> (bitpos % 8)) & mask);
  }
  return out;
}

absl::StatusOr<std::vector<uint8_t>> PackUint(absl::Span<const uint32_t> values, int bits) {
  if (bits < 1 || bits > 32) {
    return absl::InvalidArgumentError(absl::StrCat("bits: ", bits, " not in [1, 32]"));
  }
  std::vector<uint8_t> out(PackedUintBytes(values.size(), bits), 0);
  const uint64_t limit = uint64_t{1} << bits;
  uint64_t bitpos = 0;
  for (size_t i = 0; i < values.size(); ++i, bitpos += bits) {
    if (values[i] >= limit) {
      return absl::InvalidArgumentError(
          absl::StrCat("values[", i, "]: ", values[i], " does not fit in ", bits, " bits"));
    }
    // A value spans at most five bytes (bits <= 32, shifted by < 8).
    const uint64_t v = uint64_t{values[i]} << (bitpos % 8);
    for (uint64_t b = bitpos / 8, s = 0; s < (bitpos % 8) + bits; ++b, s += 8) {
      out[b] |= static_cast<uint8_t>(v >> s);
    }
  }
  return out;
}

absl::StatusOr<std::vector<uint32_t>> UnpackUint(absl::Span<const uint8_t> bytes, int bits,
                                                 int64_t count) {
  if (bits < 1 || bits > 32) {
    return absl::InvalidArgumentError(absl::StrCat("bits: ", bits, " not in [1, 32]"));
  }
  if (count < 0 || static_cast<int64_t>(bytes.size()) != PackedUintBytes(count, bits)) {
    return absl::InvalidArgumentError(absl::StrCat("bytes: size ", bytes.size(),
                                                   " != ", PackedUintBytes(count, bits), " for ",
                                                   count, " values of ", bits, " bits"));
  }
  std::vector<uint32_t> out(count);
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  uint64_t bitpos = 0;
  for (int64_t i = 0; i < count; ++i, bitpos += bits) {
    uint64_t v = 0;
    for (uint64_t b = bitpos / 8, s = 0; s < (bitpos % 8) + bits; ++b, s += 8) {
      v |= uint64_t{bytes[b]} << s;
    }
    out[i] = static_cast<uint32_t>((v >> (bitpos % 8)) & mask);
  }
  return out;
}

absl::StatusOr<std::vector<uint8_t>> PackTrits(absl::Span<const uint8_t> trits) {
  const size_t groups = (trits.size() + kTritsPerGroup - 1) / kTritsPerGroup;
  std::vector<uint32_t> values(groups, 0);
  for (size_t g = 0; g < groups; ++g) {
    uint32_t v = 0;
    for (int t = kTritsPerGroup - 1; t >= 0; --t) {
      const size_t i = g * kTritsPerGroup + t;
      const unsigned trit = i < trits.size() ? trits[i] : 0;
      if (trit > 2) {
        return absl::InvalidArgumentError(
            absl::StrCat("trits[", i, "]: ", trit, " is not 0, 1 or 2"));
      }
      v = v * 3 + trit;
    }
    values[g] = v;
  }
  return PackUint(values, kTritGroupBits);
}

absl::StatusOr<std::vector<uint8_t>> UnpackTrits(absl::Span<const uint8_t> bytes, int64_t count) {
  if (count < 0 || static_cast<int64_t>(bytes.size()) != PackedTritsBytes(count)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bytes: size ", bytes.size(), " != ", PackedTritsBytes(count), " for ", count, " trits"));
  }
  const int64_t groups = (count + kTritsPerGroup - 1) / kTritsPerGroup;
  absl::StatusOr<std::vector<uint32_t>> values = UnpackUint(bytes, kTritGroupBits, groups);
  if (!values.ok()) return values.status();
  std::vector<uint8_t> out(count);
  for (int64_t g = 0; g < groups; ++g) {
    uint32_t v = (*values)[g];
    if (v >= kTritGroupLimit) {
      return absl::InvalidArgumentError(
          absl::StrCat("group ", g, ": ", v, " >= 3^17 is not 17 packed trits"));
    }
    for (int t = 0; t < kTritsPerGroup; ++t, v /= 3) {
      const int64_t i = g * kTritsPerGroup + t;
      if (i < count) out[i] = static_cast<uint8_t>(v % 3);
    }
  }
  return out;
}

absl::StatusOr<std::vector<uint8_t>> PackCodes(plan::Action a, absl::Span<const int8_t> codes) {
  auto layout = LayoutOf(a);
  if (!layout.ok()) return layout.status();
  std::vector<uint8_t> u(codes.size());
  for (size_t i = 0; i < codes.size(); ++i) {
    const int q = codes[i];
    if (q < layout->lo || q > layout->hi || (layout->binary && q == 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "codes[", i, "]: ", q, " out of range for action ", std::string(plan::ActionName(a))));
    }
    u[i] = static_cast<uint8_t>(layout->binary ? (q + 1) / 2 : q + layout->offset);
  }
  return layout->bits == 0 ? PackTrits(u) : PackBits(u, layout->bits);
}

absl::StatusOr<std::vector<int8_t>> UnpackCodes(plan::Action a, absl::Span<const uint8_t> bytes,
                                                int64_t count) {
  auto layout = LayoutOf(a);
  if (!layout.ok()) return layout.status();
  auto u = layout->bits == 0 ? UnpackTrits(bytes, count) : UnpackBits(bytes, layout->bits, count);
  if (!u.ok()) return u.status();
  std::vector<int8_t> out(count);
  for (int64_t i = 0; i < count; ++i) {
    out[i] = static_cast<int8_t>(layout->binary ? 2 * (*u)[i] - 1 : (*u)[i] - layout->offset);
  }
  return out;
}

}  // namespace windquant::exporter
