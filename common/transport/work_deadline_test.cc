#include "common/transport/work_deadline.h"

#include "gtest/gtest.h"

namespace windquant::transport {
namespace {

model::LlamaConfig Llama32_1B() {
  model::LlamaConfig c;
  c.hidden_size = 2048;
  c.intermediate_size = 8192;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 8;
  c.num_hidden_layers = 16;
  return c;
}

TEST(WorkDeadlineTest, LayerWeightsOfTheLlama32_1BShape) {
  // q, o 2048x2048; k, v 512x2048; gate, up 8192x2048; down 2048x8192.
  EXPECT_EQ(LayerLinearWeights(Llama32_1B()), 2 * 2048 * 2048 + 2 * 512 * 2048 + 3 * 8192 * 2048);
  model::LlamaConfig explicit_head = Llama32_1B();
  explicit_head.head_dim = 64;  // the same as 2048 / 32
  EXPECT_EQ(LayerLinearWeights(explicit_head), LayerLinearWeights(Llama32_1B()));
}

TEST(WorkDeadlineTest, NoWorkIsTheBaseDeadline) {
  EXPECT_EQ(PassDeadline(absl::Seconds(30), 0, 0), kSanitizerSlowdown * absl::Seconds(30));
  EXPECT_EQ(PassDeadline(absl::Seconds(30), -5, 100), kSanitizerSlowdown * absl::Seconds(30));
  EXPECT_EQ(FitDeadline(absl::Seconds(30), 0), kSanitizerSlowdown * absl::Seconds(30));
}

TEST(WorkDeadlineTest, GrowsWithWeightsAndTokens) {
  const int64_t w = 16 * LayerLinearWeights(Llama32_1B());  // 973M weights
  const absl::Duration base = absl::Seconds(30);
  // Fitting the whole 1B shape: ~973 s at the floor, far past the base.
  EXPECT_EQ(FitDeadline(base, w),
            kSanitizerSlowdown * (base + absl::Seconds(w / kFitFloorWeightsPerSecond)));
  EXPECT_GT(FitDeadline(base, w), absl::Minutes(15));
  // A pass of 1024 tokens: the dequantization allowance plus ~1000 s of forward.
  const absl::Duration one = PassDeadline(base, w, 1024);
  const absl::Duration two = PassDeadline(base, w, 2048);
  EXPECT_GT(one, FitDeadline(base, w));
  EXPECT_EQ(two - one, kSanitizerSlowdown * absl::Seconds(static_cast<double>(w) * 1024 /
                                                          kPassFloorWeightTokensPerSecond));
  // Half the layers (a stage of two), half the allowance.
  EXPECT_LT(PassDeadline(base, w / 2, 1024), one);
}

TEST(WorkDeadlineTest, TableRegistrationGrowsWithUnits) {
  const absl::Duration base = absl::Seconds(30);
  EXPECT_EQ(RegisterTableDeadline(base, 0), kSanitizerSlowdown * base);
  EXPECT_EQ(RegisterTableDeadline(base, -1), kSanitizerSlowdown * base);
  // The 16-layer 1B shape at chunk 128: 2560 units, 25.6 s over the base.
  EXPECT_EQ(RegisterTableDeadline(base, 2560),
            kSanitizerSlowdown * (base + absl::Milliseconds(25600)));
}

}  // namespace
}  // namespace windquant::transport
