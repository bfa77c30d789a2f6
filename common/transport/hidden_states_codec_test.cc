// The hidden-states codec: float32 and bfloat16 round-trip bit for bit with their dtype in
// the framing; a peer's wrong dtype, shape or byte count is refused naming the field.
#include "common/transport/hidden_states_codec.h"

#include <cstring>
#include <limits>
#include <string>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "windquant/v1/types.pb.h"

namespace windquant::transport {
namespace {

bool BitEqual(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.contiguous(), y = b.contiguous();
  return x.sizes() == y.sizes() && x.scalar_type() == y.scalar_type() &&
         std::memcmp(x.data_ptr(), y.data_ptr(), x.numel() * x.element_size()) == 0;
}

void ExpectInvalid(const absl::StatusOr<at::Tensor>& t, const std::string& culprit) {
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << t.status();
  EXPECT_NE(t.status().message().find(culprit), std::string::npos) << t.status();
}

TEST(HiddenStatesCodecTest, Bfloat16RoundTripsBitExactly) {
  at::manual_seed(7);
  // Non-contiguous on purpose, with values bf16 rounds, negative zero, subnormals and
  // infinities (the codec moves bits; the stage checks finiteness).
  at::Tensor h = (at::randn({3, 5, 2}) * 1e3).to(at::kBFloat16).transpose(0, 2);
  h[0][0][0] = -0.0;
  h[0][0][1] = 1e-40;
  h[1][0][0] = std::numeric_limits<float>::infinity();
  v1::HiddenStates proto;
  EncodeHiddenStates(h, 4, &proto);
  EXPECT_EQ(proto.dtype(), "bfloat16");
  EXPECT_EQ(proto.data().size(), static_cast<size_t>(h.numel()) * 2);
  EXPECT_EQ(proto.micro_batch(), 4);
  auto back = DecodeHiddenStates(proto, "hidden", at::kBFloat16);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(BitEqual(*back, h));
}

TEST(HiddenStatesCodecTest, Float32RoundTripsAndAnEmptyDtypeIsFloat32) {
  at::manual_seed(8);
  const at::Tensor h = at::randn({2, 3, 4});
  v1::HiddenStates proto;
  EncodeHiddenStates(h, 0, &proto);
  EXPECT_EQ(proto.dtype(), "float32");
  auto back = DecodeHiddenStates(proto, "hidden", at::kFloat);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(BitEqual(*back, h));
  // A peer from before the dtype field.
  proto.clear_dtype();
  back = DecodeHiddenStates(proto, "hidden");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(BitEqual(*back, h));
  // Other dtypes travel as float32.
  EncodeHiddenStates(h.to(at::kDouble), 0, &proto);
  EXPECT_EQ(proto.dtype(), "float32");
}

TEST(HiddenStatesCodecTest, RefusesAMismatchedOrUnknownDtype) {
  v1::HiddenStates proto;
  EncodeHiddenStates(at::ones({1, 2, 4}, at::kBFloat16), 0, &proto);
  ExpectInvalid(DecodeHiddenStates(proto, "hidden", at::kFloat),
                "hidden.dtype: bfloat16, expected float32");
  EncodeHiddenStates(at::ones({1, 2, 4}), 0, &proto);
  ExpectInvalid(DecodeHiddenStates(proto, "hidden", at::kBFloat16),
                "hidden.dtype: float32, expected bfloat16");
  proto.set_dtype("float16");
  ExpectInvalid(DecodeHiddenStates(proto, "hidden"), "hidden.dtype: 'float16' unknown");
  // Bytes of the wrong dtype for the shape: 4-byte floats labelled bfloat16.
  proto.set_dtype("bfloat16");
  ExpectInvalid(DecodeHiddenStates(proto, "hidden"), "hidden.data: 32 bytes, the shape needs 16");
  proto.clear_shape();
  ExpectInvalid(DecodeHiddenStates(proto, "hidden"), "hidden.shape");
}

}  // namespace
}  // namespace windquant::transport
