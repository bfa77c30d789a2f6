#include "common/export/gguf_block_fit.h"

#include <cstdint>
#include <optional>
#include <vector>

#include "common/export/gguf_format.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace windquant::exporter {
namespace {

using gguf::TensorType;
using plan::Action;
using ::windquant::testing::IsOk;

// The type's decode of a block encoded from `values` (one row, no salient entries).
std::vector<float> RoundTrip(TensorType t, const BlockParams& p, const std::vector<float>& values) {
  const int64_t n = gguf::BlockValues(t);
  std::vector<float> target(n), out(n);
  for (int64_t j = 0; j < n; ++j) target[j] = values[j % values.size()];
  const std::vector<uint8_t> salient(n, 0);
  std::vector<uint8_t> block(gguf::BlockBytes(t));
  EncodeBlock(t, p, target.data(), target.data(), salient.data(), block.data());
  EXPECT_THAT(gguf::DecodeRow(t, block, n, out.data()), IsOk());
  return out;
}

void ExpectHolds(TensorType t, Action a, float s, const std::vector<float>& levels) {
  const std::optional<BlockParams> p = Fit(t, GridOf(a, s, 0.0f));
  ASSERT_TRUE(p.has_value()) << gguf::TensorTypeName(t) << " s " << s;
  const std::vector<float> back = RoundTrip(t, *p, levels);
  for (size_t j = 0; j < back.size(); ++j) {
    ASSERT_EQ(back[j], levels[j % levels.size()]) << gguf::TensorTypeName(t) << " value " << j;
  }
}

TEST(GgufBlockFitTest, EachGridFitsItsTypesExactly) {
  const float s = 0.0234375f;  // an FP16 value
  std::vector<float> three, two, ternary;
  for (int q = -4; q <= 3; ++q) three.push_back(s * static_cast<float>(q));
  for (int q = -2; q <= 1; ++q) two.push_back(s * (static_cast<float>(q) + 0.5f));
  for (int q = -1; q <= 1; ++q) ternary.push_back(s * static_cast<float>(q));
  ExpectHolds(TensorType::kQ3_K, Action::k3, s, three);
  ExpectHolds(TensorType::kQ3_K, Action::k2, s, two);
  ExpectHolds(TensorType::kQ3_K, Action::k1_58, s, ternary);
  ExpectHolds(TensorType::kQ2_K, Action::k2, s, two);
  ExpectHolds(TensorType::kQ2_K, Action::k1_58, s, ternary);
  ExpectHolds(TensorType::kTQ2_0, Action::k1_58, s, ternary);
  ExpectHolds(TensorType::kTQ1_0, Action::k1_58, s, ternary);
  ExpectHolds(TensorType::kQ4_0, Action::k3, s, three);
}

TEST(GgufBlockFitTest, GridsWiderThanTheCodesDoNotFit) {
  const float s = 0.5f;
  EXPECT_FALSE(Fit(TensorType::kQ3_K, GridOf(Action::k4, s, 0)).has_value());
  EXPECT_FALSE(Fit(TensorType::kQ2_K, GridOf(Action::k3, s, 0)).has_value());
  EXPECT_FALSE(Fit(TensorType::kTQ1_0, GridOf(Action::k2, s, 0)).has_value());
  EXPECT_FALSE(Fit(TensorType::kTQ2_0, GridOf(Action::k3, s, 0)).has_value());
  EXPECT_FALSE(Fit(TensorType::kQ3_K, GridOf(Action::k16, s, 0)).has_value());
  EXPECT_FALSE(Fit(TensorType::kQ2_K, GridOf(Action::k8, s, 0)).has_value());
}

// Q2_K's dmin * m = 1.5 s: m = 1 when 1.5 s is an FP16 value, m = 3 (dmin = s/2) when not
// (s with its last mantissa bit set), and the block still decodes to s*(q+1/2) exactly.
TEST(GgufBlockFitTest, Q2KMinScaleKeepsDminAnFp16Value) {
  const float even = 0.75f, odd = 1.0f + 1.0f / 1024.0f;  // 1.5 * odd needs 12 bits
  ASSERT_TRUE(gguf::IsHalfExact(odd));
  ASSERT_FALSE(gguf::IsHalfExact(1.5f * odd));
  const std::optional<BlockParams> pe = Fit(TensorType::kQ2_K, GridOf(Action::k2, even, 0));
  const std::optional<BlockParams> po = Fit(TensorType::kQ2_K, GridOf(Action::k2, odd, 0));
  ASSERT_TRUE(pe.has_value() && po.has_value());
  EXPECT_EQ(pe->min_scale, 1);
  EXPECT_EQ(pe->m, 1.5f * even);
  EXPECT_EQ(po->min_scale, 3);
  EXPECT_EQ(po->m, 0.5f * odd);
  std::vector<float> two;
  for (int q = -2; q <= 1; ++q) two.push_back(odd * (static_cast<float>(q) + 0.5f));
  ExpectHolds(TensorType::kQ2_K, Action::k2, odd, two);
}

// 1 bit alpha*(+-1)+beta: Q2_K (and Q4_1) when both levels and their gap are FP16
// values; not when the gap is not one; the symmetric types only when beta = 0.
TEST(GgufBlockFitTest, OneBitFitsQ2KWhenItsLevelsAreFp16) {
  const RowGrid exact = GridOf(Action::k1, 0.5f, 0.25f);  // levels -0.25, 0.75
  const std::optional<BlockParams> p = Fit(TensorType::kQ2_K, exact);
  ASSERT_TRUE(p.has_value());
  const std::vector<float> back = RoundTrip(TensorType::kQ2_K, *p, {-0.25f, 0.75f});
  EXPECT_EQ(back[0], -0.25f);
  EXPECT_EQ(back[1], 0.75f);
  EXPECT_FALSE(Fit(TensorType::kQ2_K, GridOf(Action::k1, 1000.0f, 0.0009765625f)).has_value());
  EXPECT_FALSE(Fit(TensorType::kQ3_K, exact).has_value());
  EXPECT_FALSE(Fit(TensorType::kTQ1_0, exact).has_value());
  EXPECT_TRUE(Fit(TensorType::kTQ1_0, GridOf(Action::k1, 0.5f, 0.0f)).has_value());
}

TEST(GgufBlockFitTest, CandidatesAreInOrderOfSize) {
  for (size_t i = 1; i + 2 < std::size(kCandidates); ++i) {  // F16, F32 last
    EXPECT_LT(gguf::TypeBits(kCandidates[i - 1]), gguf::TypeBits(kCandidates[i]))
        << gguf::TensorTypeName(kCandidates[i]);
  }
  EXPECT_EQ(kCandidates[0], TensorType::kTQ1_0);
}

}  // namespace
}  // namespace windquant::exporter
