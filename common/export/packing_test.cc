#include "common/export/packing.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace windquant::exporter {
namespace {

TEST(PackingTest, KnownLayouts) {
  // 2 bit: codes 1,2,3,0 -> bits (LSB first) 01 10 11 00 -> 0b00111001.
  auto p2 = PackBits(std::vector<uint8_t>{1, 2, 3, 0}, 2);
  ASSERT_TRUE(p2.ok());
  EXPECT_EQ(*p2, std::vector<uint8_t>{0x39});
  // 3 bit: 5,3,7 -> bit stream 1,0,1, 1,1,0, 1,1 | 1 -> 0xDD, 0x01.
  auto p3 = PackBits(std::vector<uint8_t>{5, 3, 7}, 3);
  ASSERT_TRUE(p3.ok());
  EXPECT_EQ(*p3, (std::vector<uint8_t>{0xDD, 0x01}));
  // 4 bit: 0xA, 0x5 -> 0x5A.
  EXPECT_EQ(*PackBits(std::vector<uint8_t>{0xA, 0x5}, 4), std::vector<uint8_t>{0x5A});
  // 1 bit: 1,0,0,0,0,0,0,1,1 -> 0x81, 0x01.
  EXPECT_EQ(*PackBits(std::vector<uint8_t>{1, 0, 0, 0, 0, 0, 0, 1, 1}, 1),
            (std::vector<uint8_t>{0x81, 0x01}));
  // Trits 2,1,0,0,1,2 -> one group 2 + 3*1 + 81*1 + 243*2 = 572, 27 bits in 4 bytes.
  EXPECT_EQ(*PackTrits(std::vector<uint8_t>{2, 1, 0, 0, 1, 2}),
            (std::vector<uint8_t>{0x3C, 0x02, 0x00, 0x00}));
  // 17 trits 2 -> 3^17 - 1 = 0x7B285C2; an 18th trit 1 starts the next 27 bits at bit 27.
  std::vector<uint8_t> twos(17, 2);
  EXPECT_EQ(*PackTrits(twos), (std::vector<uint8_t>{0xC2, 0x85, 0xB2, 0x07}));
  twos.push_back(1);
  EXPECT_EQ(*PackTrits(twos), (std::vector<uint8_t>{0xC2, 0x85, 0xB2, 0x0F, 0, 0, 0}));
  // 20-bit values (salient positions): 0xABCDE, 0x12345 -> one 40-bit stream.
  EXPECT_EQ(*PackUint(std::vector<uint32_t>{0xABCDE, 0x12345}, 20),
            (std::vector<uint8_t>{0xDE, 0xBC, 0x5A, 0x34, 0x12}));
}

TEST(PackingTest, SizesFollowTheFormula) {
  EXPECT_EQ(PackedBitsBytes(8, 3), 3);
  EXPECT_EQ(PackedBitsBytes(9, 3), 4);
  EXPECT_EQ(PackedBitsBytes(0, 4), 0);
  EXPECT_EQ(PackedTritsBytes(10), 4);
  EXPECT_EQ(PackedTritsBytes(17), 4);
  EXPECT_EQ(PackedTritsBytes(18), 7);
  EXPECT_EQ(PackedUintBytes(3, 21), 8);
  // 964 groups of 27 bits: 0.25 % above 16384 * log2(3) / 8 = 3245.9.
  EXPECT_EQ(*PackedCodesBytes(plan::Action::k1_58, 256 * 64), 3254);
  EXPECT_EQ(*PackedCodesBytes(plan::Action::k2, 256 * 64), 4096);
  EXPECT_FALSE(PackedCodesBytes(plan::Action::k16, 10).ok());
}

TEST(PackingTest, RoundTripsRandomCodesEveryWidthAndLength) {
  std::mt19937 rng(5);
  for (int bits : {1, 2, 3, 4, 8}) {
    for (int n : {0, 1, 5, 7, 8, 9, 63, 1000}) {
      std::vector<uint8_t> codes(n);
      for (auto& c : codes) c = rng() % (1u << bits);
      auto packed = PackBits(codes, bits);
      ASSERT_TRUE(packed.ok());
      EXPECT_EQ(static_cast<int64_t>(packed->size()), PackedBitsBytes(n, bits));
      auto back = UnpackBits(*packed, bits, n);
      ASSERT_TRUE(back.ok());
      EXPECT_EQ(*back, codes) << bits << " bits, n=" << n;
    }
  }
  for (int bits : {1, 7, 13, 21, 27, 31, 32}) {
    for (int n : {0, 1, 2, 9, 100}) {
      std::vector<uint32_t> values(n);
      for (auto& v : values) v = static_cast<uint32_t>(rng() & ((uint64_t{1} << bits) - 1));
      if (n > 0) values[0] = static_cast<uint32_t>((uint64_t{1} << bits) - 1);
      auto packed = PackUint(values, bits);
      ASSERT_TRUE(packed.ok());
      EXPECT_EQ(static_cast<int64_t>(packed->size()), PackedUintBytes(n, bits));
      auto back = UnpackUint(*packed, bits, n);
      ASSERT_TRUE(back.ok());
      EXPECT_EQ(*back, values) << bits << " bits, n=" << n;
    }
  }
  for (int n : {0, 1, 4, 16, 17, 18, 34, 35, 999}) {
    std::vector<uint8_t> trits(n);
    for (auto& t : trits) t = rng() % 3;
    auto packed = PackTrits(trits);
    ASSERT_TRUE(packed.ok());
    auto back = UnpackTrits(*packed, n);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, trits) << "n=" << n;
  }
}

TEST(PackingTest, ActionCodesRoundTrip) {
  std::mt19937 rng(6);
  struct R {
    plan::Action a;
    int lo, hi;
  };
  for (R r :
       {R{plan::Action::k8, -128, 127}, R{plan::Action::k4, -8, 7}, R{plan::Action::k3, -4, 3},
        R{plan::Action::k2, -2, 1}, R{plan::Action::k1_58, -1, 1}, R{plan::Action::k1, -1, 1}}) {
    std::vector<int8_t> codes(301);
    for (auto& c : codes) {
      c = static_cast<int8_t>(r.lo + int(rng() % (r.hi - r.lo + 1)));
      if (r.a == plan::Action::k1 && c == 0) c = 1;
    }
    codes[0] = r.lo;
    codes[1] = r.hi;
    auto packed = PackCodes(r.a, codes);
    ASSERT_TRUE(packed.ok()) << plan::ActionName(r.a) << packed.status();
    EXPECT_EQ(static_cast<int64_t>(packed->size()), *PackedCodesBytes(r.a, 301));
    auto back = UnpackCodes(r.a, *packed, 301);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, codes) << plan::ActionName(r.a);
  }
}

TEST(PackingTest, RejectsBadInput) {
  EXPECT_FALSE(PackBits(std::vector<uint8_t>{4}, 2).ok());
  EXPECT_FALSE(PackBits(std::vector<uint8_t>{0}, 5).ok());
  EXPECT_FALSE(UnpackBits(std::vector<uint8_t>{0, 0}, 4, 1).ok());
  EXPECT_FALSE(PackTrits(std::vector<uint8_t>{3}).ok());
  // 2^27 - 1 >= 3^17: not 17 packed trits.
  EXPECT_FALSE(UnpackTrits(std::vector<uint8_t>{0xFF, 0xFF, 0xFF, 0x07}, 5).ok());
  EXPECT_FALSE(PackUint(std::vector<uint32_t>{8}, 3).ok());
  EXPECT_FALSE(PackUint(std::vector<uint32_t>{0}, 33).ok());
  EXPECT_FALSE(UnpackUint(std::vector<uint8_t>{0}, 20, 1).ok());
  EXPECT_FALSE(UnpackTrits(std::vector<uint8_t>{0}, 6).ok());
  EXPECT_FALSE(PackCodes(plan::Action::k16, std::vector<int8_t>{0}).ok());
  EXPECT_FALSE(PackCodes(plan::Action::k1, std::vector<int8_t>{0}).ok());
  EXPECT_FALSE(PackCodes(plan::Action::k2, std::vector<int8_t>{2}).ok());
  EXPECT_FALSE(PackCodes(plan::Action::k3, std::vector<int8_t>{-5}).ok());
  auto st = PackCodes(plan::Action::k4, std::vector<int8_t>{0, 9});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("codes[1]"), std::string::npos);
}

}  // namespace
}  // namespace windquant::exporter
