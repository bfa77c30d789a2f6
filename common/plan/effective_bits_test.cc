// Bit counts below were computed by hand from DESIGN.md section 3 and effective_bits.h:
//   bits = (n-k)*b + k*(8+ceil(log2 n)) + rows*16*params + 16*[k>0];  16: n*16.
#include "common/plan/effective_bits.h"

#include <cmath>

#include "gtest/gtest.h"

namespace windquant::plan {
namespace {

const double kLog2_3 = std::log2(3.0);

TEST(EffectiveBitsTest, SalientCountRoundsHalfUp) {
  EXPECT_EQ(SalientCount(2048, 0.005), 10);      // 10.24
  EXPECT_EQ(SalientCount(11008, 0.005), 55);     // 55.04
  EXPECT_EQ(SalientCount(294912, 0.005), 1475);  // 1474.56
  EXPECT_EQ(SalientCount(100, 0.005), 1);        // 0.5 rounds up
  EXPECT_EQ(SalientCount(32, 0.005), 0);         // 0.16
  EXPECT_EQ(SalientCount(2000, 0.005), 10);      // 10.000000000000002, not 11
  EXPECT_EQ(SalientCount(2048, 0.0), 0);
  EXPECT_EQ(SalientCount(10, 2.0), 10);
  EXPECT_EQ(SalientCount(0, 0.5), 0);
}

TEST(EffectiveBitsTest, IndexBits) {
  EXPECT_EQ(IndexBits(1), 0);
  EXPECT_EQ(IndexBits(2), 1);
  EXPECT_EQ(IndexBits(3), 2);
  EXPECT_EQ(IndexBits(2048), 11);
  EXPECT_EQ(IndexBits(11008), 14);
  EXPECT_EQ(IndexBits(1048576), 20);
  EXPECT_EQ(IndexBits(1048577), 21);
}

TEST(EffectiveBitsTest, ParamsPerRow) {
  EXPECT_EQ(ScaleParamsPerRow(Action::k16), 0);
  EXPECT_EQ(ScaleParamsPerRow(Action::k8), 1);
  EXPECT_EQ(ScaleParamsPerRow(Action::k2), 1);
  EXPECT_EQ(ScaleParamsPerRow(Action::k1_58), 1);
  EXPECT_EQ(ScaleParamsPerRow(Action::k1), 2);
}

struct Case {
  int64_t rows, cols;
  double bits[kNumActions];  // 16, 8, 4, 3, 2, (1.58 given by formula below), 1
};

TEST(EffectiveBitsTest, HandComputedUnits) {
  // 64x32: n=2048, k=10, index 11 -> salient 10*19+16 = 206; rows*16 = 1024.
  //   8: 2038*8 + 206 + 1024 = 17534;  1: 2038 + 206 + 2048 = 4292.
  // 172x64: n=11008, k=55, index 14 -> salient 55*22+16 = 1226; rows*16 = 2752.
  // 4096x72 (narrow last chunk): n=294912, k=1475, index 19 -> 1475*27+16 = 39841;
  //   rows*16 = 65536.
  // 4096x256: n=1048576, k=5243, index 20 -> 5243*28+16 = 146820.
  // 4x8: n=32, k=0 -> no salient bits at all (not even the unit scale).
  const Case cases[] = {
      {64, 32, {32768, 17534, 9382, 7344, 5306, 0, 4292}},
      {172, 64, {176128, 91602, 47790, 36837, 25884, 0, 17683}},
      {4096, 72, {4718592, 2452873, 1279125, 985688, 692251, 0, 464350}},
      {4096, 256, {16777216, 8559020, 4385688, 3342355, 2299022, 0, 1321225}},
      {4, 8, {512, 320, 192, 160, 128, 0, 160}},
  };
  const double salient_plus_rows[] = {206 + 1024, 1226 + 2752, 39841 + 65536, 146820 + 65536, 64};
  const int64_t k_of[] = {10, 55, 1475, 5243, 0};
  for (int c = 0; c < 5; ++c) {
    const Case& u = cases[c];
    const int64_t n = u.rows * u.cols;
    const int64_t k = SalientCount(n, kDefaultSalientFraction);
    ASSERT_EQ(k, k_of[c]) << u.rows << "x" << u.cols;
    for (Action a : kAllActions) {
      double expected = u.bits[ActionIndex(a)];
      if (a == Action::k1_58) expected = (n - k) * kLog2_3 + salient_plus_rows[c];
      EXPECT_DOUBLE_EQ(UnitEffectiveBits(u.rows, u.cols, k, a), expected)
          << u.rows << "x" << u.cols << " action " << ActionName(a);
    }
  }
  // 64x32 ternary spelled out: 2038*log2(3) + 1230 = 4460.1536 bits.
  EXPECT_NEAR(UnitEffectiveBits(64, 32, 10, Action::k1_58), 4460.153576, 1e-5);
}

TEST(EffectiveBitsTest, SixteenProtectsNothing) {
  EXPECT_EQ(UnitEffectiveBits(64, 32, 10, Action::k16), 64 * 32 * 16);
  EXPECT_EQ(UnitEffectiveBits(64, 32, 0, Action::k16), 64 * 32 * 16);
}

TEST(EffectiveBitsTest, NoSalientMeansNoUnitScale) {
  // 64x32, k=0, 4 bit: 2048*4 + 64*16 = 9216.
  EXPECT_EQ(UnitEffectiveBits(64, 32, 0, Action::k4), 9216);
  EXPECT_DOUBLE_EQ(UnitBitsPerWeight(64, 32, 0, Action::k4), 4.5);
  EXPECT_EQ(UnitBitsPerWeight(0, 32, 0, Action::k4), 0.0);
}

// The fixed tensors count at the bits of the dtype the quantized checkpoint stores them in.
TEST(EffectiveBitsTest, FixedParamsCountAtTheirStoredBits) {
  EXPECT_EQ(FixedParamBits("float32"), 32);
  EXPECT_EQ(FixedParamBits("bfloat16"), 16);
  EXPECT_EQ(FixedParamBits("float16"), 16);
  EXPECT_EQ(FixedParamBits(""), 16);
  // stories260k at 2 bits: 1000 linear bits over 500 weights, 100 fixed params in F32:
  // (1000 + 3200) / 600 = 7.0.
  EXPECT_DOUBLE_EQ(WholeModelBits(1000, 500, 100, 32), 7.0);
  EXPECT_DOUBLE_EQ(WholeModelBits(1000, 500, 100, 16), 2600.0 / 600);
  EXPECT_EQ(WholeModelBits(0, 0, 0, 16), 0.0);
}

}  // namespace
}  // namespace windquant::plan
