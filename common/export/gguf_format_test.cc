// The 256-value block codecs (Q2_K, Q3_K, TQ2_0, TQ1_0) against an independent decoder
// written here from llama.cpp's ggml-quants.c (dequantize_row_q2_K / q3_K / tq2_0 / tq1_0:
// its block structs, loops and float arithmetic, transcribed; not windquant's code), bit
// for bit, and against the closed-form value of each code.
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/export/gguf_format.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace windquant::exporter::gguf {
namespace {

using ::windquant::testing::IsOk;

constexpr int kQK = 256;

// ---- The reference: ggml's structs and dequantize_row_* for one block. ----
struct RefQ2K {
  uint8_t scales[kQK / 16];
  uint8_t qs[kQK / 4];
  uint16_t d, dmin;
};
struct RefQ3K {
  uint8_t hmask[kQK / 8];
  uint8_t qs[kQK / 4];
  uint8_t scales[12];
  uint16_t d;
};
struct RefTQ1 {
  uint8_t qs[(kQK - 4 * kQK / 64) / 5];
  uint8_t qh[kQK / 64];
  uint16_t d;
};
struct RefTQ2 {
  uint8_t qs[kQK / 4];
  uint16_t d;
};
static_assert(sizeof(RefQ2K) == 84 && sizeof(RefQ3K) == 110);
static_assert(sizeof(RefTQ1) == 54 && sizeof(RefTQ2) == 66);

void RefDequantQ2K(const RefQ2K& x, float* y) {
  const float d = HalfToFloat(x.d), min = HalfToFloat(x.dmin);
  const uint8_t* q = x.qs;
  int is = 0;
  for (int n = 0; n < kQK; n += 128) {
    int shift = 0;
    for (int j = 0; j < 4; ++j) {
      uint8_t sc = x.scales[is++];
      float dl = d * (sc & 0xF), ml = min * (sc >> 4);
      for (int l = 0; l < 16; ++l) *y++ = dl * ((int8_t)((q[l] >> shift) & 3)) - ml;
      sc = x.scales[is++];
      dl = d * (sc & 0xF), ml = min * (sc >> 4);
      for (int l = 0; l < 16; ++l) *y++ = dl * ((int8_t)((q[l + 16] >> shift) & 3)) - ml;
      shift += 2;
    }
    q += 32;
  }
}

void RefDequantQ3K(const RefQ3K& x, float* y) {
  const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  uint32_t aux[4];
  const int8_t* scales = reinterpret_cast<const int8_t*>(aux);
  const float d_all = HalfToFloat(x.d);
  const uint8_t* q = x.qs;
  const uint8_t* hm = x.hmask;
  uint8_t m = 1;
  std::memcpy(aux, x.scales, 12);
  const uint32_t tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  int is = 0;
  for (int n = 0; n < kQK; n += 128) {
    int shift = 0;
    for (int j = 0; j < 4; ++j) {
      float dl = d_all * (scales[is++] - 32);
      for (int l = 0; l < 16; ++l) {
        *y++ = dl * ((int8_t)((q[l + 0] >> shift) & 3) - ((hm[l + 0] & m) ? 0 : 4));
      }
      dl = d_all * (scales[is++] - 32);
      for (int l = 0; l < 16; ++l) {
        *y++ = dl * ((int8_t)((q[l + 16] >> shift) & 3) - ((hm[l + 16] & m) ? 0 : 4));
      }
      shift += 2;
      m <<= 1;
    }
    q += 32;
  }
}

void RefDequantTQ1(const RefTQ1& x, float* y) {
  const uint8_t pow3[6] = {1, 3, 9, 27, 81, 243};
  const float d = HalfToFloat(x.d);
  for (size_t j = 0; j < sizeof(x.qs) - sizeof(x.qs) % 32; j += 32) {
    for (size_t n = 0; n < 5; ++n) {
      for (size_t m = 0; m < 32; ++m) {
        uint8_t q = x.qs[j + m] * pow3[n];
        int16_t xi = ((uint16_t)q * 3) >> 8;
        *y++ = (float)(xi - 1) * d;
      }
    }
  }
  for (size_t j = sizeof(x.qs) - sizeof(x.qs) % 32; j < sizeof(x.qs); j += 16) {
    for (size_t n = 0; n < 5; ++n) {
      for (size_t m = 0; m < 16; ++m) {
        uint8_t q = x.qs[j + m] * pow3[n];
        int16_t xi = ((uint16_t)q * 3) >> 8;
        *y++ = (float)(xi - 1) * d;
      }
    }
  }
  for (size_t n = 0; n < 4; ++n) {
    for (size_t j = 0; j < sizeof(x.qh); ++j) {
      uint8_t q = x.qh[j] * pow3[n];
      int16_t xi = ((uint16_t)q * 3) >> 8;
      *y++ = (float)(xi - 1) * d;
    }
  }
}

void RefDequantTQ2(const RefTQ2& x, float* y) {
  const float d = HalfToFloat(x.d);
  for (size_t j = 0; j < sizeof(x.qs); j += 32) {
    for (size_t l = 0; l < 4; ++l) {
      for (size_t m = 0; m < 32; ++m) {
        int8_t q = (x.qs[j + m] >> (l * 2)) & 3;
        *y++ = (float)(q - 1) * d;
      }
    }
  }
}

template <typename Ref>
Ref AsRef(const std::vector<uint8_t>& bytes) {
  Ref r;
  EXPECT_EQ(bytes.size(), sizeof(Ref));
  std::memcpy(&r, bytes.data(), sizeof(Ref));  // little-endian hosts, as the file
  return r;
}

// Windquant's decoder gives the reference's floats bit for bit.
void ExpectSameBits(TensorType t, const std::vector<uint8_t>& block, const float* want) {
  float got[kQK];
  ASSERT_THAT(DecodeRow(t, block, kQK, got), IsOk());
  for (int i = 0; i < kQK; ++i) {
    uint32_t a, b;
    std::memcpy(&a, &got[i], 4);
    std::memcpy(&b, &want[i], 4);
    ASSERT_EQ(a, b) << TensorTypeName(t) << " value " << i;
  }
}

TEST(GgufFormatTest, Q2KBlocksDecodeAsLlamaCpp) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    uint8_t scales[16], codes[kQK];
    for (uint8_t& s : scales) s = static_cast<uint8_t>(rng() & 0xFF);
    for (uint8_t& c : codes) c = static_cast<uint8_t>(rng() % 4);
    const float d = 0.0625f * static_cast<float>(1 + trial), dmin = -0.375f + 0.125f * trial;
    std::vector<uint8_t> block(84);
    EncodeQ2_K(HalfBitsOf(d), HalfBitsOf(dmin), scales, codes, block.data());
    float ref[kQK];
    RefDequantQ2K(AsRef<RefQ2K>(block), ref);
    for (int i = 0; i < kQK; ++i) {
      const uint8_t s = scales[i / 16];
      ASSERT_EQ(ref[i], d * (s & 0xF) * codes[i] - dmin * (s >> 4)) << i;
    }
    ExpectSameBits(TensorType::kQ2_K, block, ref);
  }
}

TEST(GgufFormatTest, Q3KBlocksDecodeAsLlamaCpp) {
  std::mt19937 rng(12);
  for (int trial = 0; trial < 20; ++trial) {
    uint8_t scales[16];
    int8_t codes[kQK];
    for (uint8_t& s : scales) s = static_cast<uint8_t>(rng() % 64);
    if (trial == 0) std::memset(scales, 33, 16);  // the exporter's: every sc - 32 = 1
    for (int8_t& c : codes) c = static_cast<int8_t>(static_cast<int>(rng() % 8) - 4);
    const float d = 0.03125f * static_cast<float>(trial + 1);
    std::vector<uint8_t> block(110);
    EncodeQ3_K(HalfBitsOf(d), scales, codes, block.data());
    float ref[kQK];
    RefDequantQ3K(AsRef<RefQ3K>(block), ref);
    for (int i = 0; i < kQK; ++i) {
      ASSERT_EQ(ref[i], d * (scales[i / 16] - 32) * codes[i]) << i;
    }
    ExpectSameBits(TensorType::kQ3_K, block, ref);
  }
}

TEST(GgufFormatTest, TernaryBlocksDecodeAsLlamaCpp) {
  std::mt19937 rng(13);
  for (int trial = 0; trial < 20; ++trial) {
    int8_t codes[kQK];
    for (int8_t& c : codes) c = static_cast<int8_t>(static_cast<int>(rng() % 3) - 1);
    if (trial == 1) std::memset(codes, 1, kQK);  // every byte's largest number (242)
    if (trial == 2) std::memset(codes, -1, kQK);
    const float d = -0.75f + 0.0625f * trial;
    std::vector<uint8_t> b1(54), b2(66);
    EncodeTQ1_0(HalfBitsOf(d), codes, b1.data());
    EncodeTQ2_0(HalfBitsOf(d), codes, b2.data());
    float r1[kQK], r2[kQK];
    RefDequantTQ1(AsRef<RefTQ1>(b1), r1);
    RefDequantTQ2(AsRef<RefTQ2>(b2), r2);
    for (int i = 0; i < kQK; ++i) {
      ASSERT_EQ(r1[i], static_cast<float>(codes[i]) * d) << i;
      ASSERT_EQ(r2[i], static_cast<float>(codes[i]) * d) << i;
    }
    ExpectSameBits(TensorType::kTQ1_0, b1, r1);
    ExpectSameBits(TensorType::kTQ2_0, b2, r2);
  }
}

// Every one of the 3^5 digit strings of a TQ1_0 byte (value k of the first 32-byte group
// is digit k / 32 of byte k % 32, so bytes 0..31 take the strings 0..31, 32..63, ...).
TEST(GgufFormatTest, Tq1EveryByteOfFiveDigitsRoundTrips) {
  for (int first = 0; first < 243; first += 32) {
    int8_t codes[kQK] = {};
    for (int m = 0; m < 32; ++m) {
      int x = std::min(first + m, 242);
      for (int n = 4; n >= 0; --n, x /= 3) codes[n * 32 + m] = static_cast<int8_t>(x % 3 - 1);
    }
    std::vector<uint8_t> block(54);
    EncodeTQ1_0(HalfBitsOf(1.0f), codes, block.data());
    float ref[kQK];
    RefDequantTQ1(AsRef<RefTQ1>(block), ref);
    for (int i = 0; i < 160; ++i) ASSERT_EQ(ref[i], codes[i]) << first << " " << i;
  }
}

TEST(GgufFormatTest, BlockSizesAndBits) {
  EXPECT_EQ(BlockBytes(TensorType::kQ2_K), 84);
  EXPECT_EQ(BlockBytes(TensorType::kQ3_K), 110);
  EXPECT_EQ(BlockBytes(TensorType::kTQ1_0), 54);
  EXPECT_EQ(BlockBytes(TensorType::kTQ2_0), 66);
  EXPECT_EQ(TypeBits(TensorType::kQ3_K), 3.4375);
  EXPECT_EQ(TypeBits(TensorType::kQ2_K), 2.625);
  EXPECT_EQ(TypeBits(TensorType::kTQ2_0), 2.0625);
  EXPECT_EQ(TypeBits(TensorType::kTQ1_0), 1.6875);
  for (TensorType t :
       {TensorType::kQ2_K, TensorType::kQ3_K, TensorType::kTQ1_0, TensorType::kTQ2_0}) {
    EXPECT_TRUE(HasCodec(t)) << TensorTypeName(t);
    EXPECT_EQ(BlockValues(t), kQK);
  }
}

}  // namespace
}  // namespace windquant::exporter::gguf
