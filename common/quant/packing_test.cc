#include "common/quant/packing.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace windquant::quant {
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
  // Trits 2,1,0,0,1 -> 2 + 3*1 + 81*1 = 86; a 6th trit 2 -> second byte 2.
  EXPECT_EQ(*PackTrits(std::vector<uint8_t>{2, 1, 0, 0, 1, 2}), (std::vector<uint8_t>{86, 2}));
  EXPECT_EQ(*PackTrits(std::vector<uint8_t>{2, 2, 2, 2, 2}), std::vector<uint8_t>{242});
}

TEST(PackingTest, SizesFollowTheFormula) {
  EXPECT_EQ(PackedBitsBytes(8, 3), 3);
  EXPECT_EQ(PackedBitsBytes(9, 3), 4);
  EXPECT_EQ(PackedBitsBytes(0, 4), 0);
  EXPECT_EQ(PackedTritsBytes(10), 2);
  EXPECT_EQ(PackedTritsBytes(11), 3);
  EXPECT_EQ(*PackedCodesBytes(Action::k1_58, 256 * 64), 3277);
  EXPECT_EQ(*PackedCodesBytes(Action::k2, 256 * 64), 4096);
  EXPECT_FALSE(PackedCodesBytes(Action::k16, 10).ok());
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
  for (int n : {0, 1, 4, 5, 6, 999}) {
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
    Action a;
    int lo, hi;
  };
  for (R r : {R{Action::k8, -128, 127}, R{Action::k4, -8, 7}, R{Action::k3, -4, 3},
              R{Action::k2, -2, 1}, R{Action::k1_58, -1, 1}, R{Action::k1, -1, 1}}) {
    std::vector<int8_t> codes(301);
    for (auto& c : codes) {
      c = static_cast<int8_t>(r.lo + int(rng() % (r.hi - r.lo + 1)));
      if (r.a == Action::k1 && c == 0) c = 1;
    }
    codes[0] = r.lo;
    codes[1] = r.hi;
    auto packed = PackCodes(r.a, codes);
    ASSERT_TRUE(packed.ok()) << ActionName(r.a) << packed.status();
    EXPECT_EQ(static_cast<int64_t>(packed->size()), *PackedCodesBytes(r.a, 301));
    auto back = UnpackCodes(r.a, *packed, 301);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, codes) << ActionName(r.a);
  }
}

TEST(PackingTest, RejectsBadInput) {
  EXPECT_FALSE(PackBits(std::vector<uint8_t>{4}, 2).ok());
  EXPECT_FALSE(PackBits(std::vector<uint8_t>{0}, 5).ok());
  EXPECT_FALSE(UnpackBits(std::vector<uint8_t>{0, 0}, 4, 1).ok());
  EXPECT_FALSE(PackTrits(std::vector<uint8_t>{3}).ok());
  EXPECT_FALSE(UnpackTrits(std::vector<uint8_t>{243}, 5).ok());
  EXPECT_FALSE(UnpackTrits(std::vector<uint8_t>{0}, 6).ok());
  EXPECT_FALSE(PackCodes(Action::k16, std::vector<int8_t>{0}).ok());
  EXPECT_FALSE(PackCodes(Action::k1, std::vector<int8_t>{0}).ok());
  EXPECT_FALSE(PackCodes(Action::k2, std::vector<int8_t>{2}).ok());
  EXPECT_FALSE(PackCodes(Action::k3, std::vector<int8_t>{-5}).ok());
  auto st = PackCodes(Action::k4, std::vector<int8_t>{0, 9});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("codes[1]"), std::string::npos);
}

}  // namespace
}  // namespace windquant::quant
