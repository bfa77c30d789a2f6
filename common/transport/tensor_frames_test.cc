#include "common/transport/tensor_frames.h"

#include <deque>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace windquant::transport {
namespace {

using ::windquant::testing::StatusIs;

// NCCL's contract on one link: messages in order, and the receiver's buffer must have the
// sent element count and type (ncclRecv's count and datatype).
class FakePipe : public TensorPipe {
 public:
  absl::Status Send(const at::Tensor& t) override {
    if (!t.is_contiguous()) return absl::InternalError("fake pipe: send of a strided tensor");
    queue_.push_back(t.clone());
    return absl::OkStatus();
  }
  absl::Status Recv(at::Tensor& t, absl::Time) override {
    if (queue_.empty()) return absl::UnavailableError("fake pipe: nothing sent");
    at::Tensor m = queue_.front();
    queue_.pop_front();
    if (m.numel() != t.numel() || m.scalar_type() != t.scalar_type()) {
      return absl::DataLossError(absl::StrCat("fake pipe: received ", m.numel(), " x ",
                                              c10::toString(m.scalar_type()), " into ", t.numel(),
                                              " x ", c10::toString(t.scalar_type())));
    }
    t.copy_(m.reshape(t.sizes()));
    return absl::OkStatus();
  }
  std::deque<at::Tensor> queue_;
};

// Every framed dtype goes through unchanged (its own dtype, bit for bit) with its index;
// a strided tensor is sent contiguous; frames arrive in order.
TEST(TensorFramesTest, MicroBatchesRoundTripInTheirDtypeAndOrder) {
  at::manual_seed(3);
  FakePipe pipe;
  std::vector<MicroBatch> sent;
  int32_t index = 7;
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    sent.push_back({index++, at::randn({2, 5, 8}).to(dtype)});
  }
  sent.push_back({-4, at::randn({8, 5, 3}).transpose(0, 2)});  // [3, 5, 8], strided
  for (const MicroBatch& b : sent) ASSERT_TRUE(SendFrame(pipe, b).ok());
  EXPECT_EQ(pipe.queue_.size(), 2 * sent.size());
  for (const MicroBatch& b : sent) {
    absl::StatusOr<MicroBatch> got = RecvFrame(pipe, at::kCPU);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->index, b.index);
    EXPECT_EQ(got->hidden.scalar_type(), b.hidden.scalar_type());
    EXPECT_EQ(got->hidden.sizes(), b.hidden.sizes());
    EXPECT_TRUE(at::equal(got->hidden, b.hidden));
  }
  EXPECT_THAT(RecvFrame(pipe, at::kCPU).status(), StatusIs(absl::StatusCode::kUnavailable));
}

TEST(TensorFramesTest, WhatCannotBeFramedIsRefusedBeforeAnythingIsSent) {
  FakePipe pipe;
  EXPECT_THAT(SendFrame(pipe, {0, at::zeros({4, 8})}),
              StatusIs(absl::StatusCode::kInvalidArgument, "[batch, seq, hidden]"));
  EXPECT_THAT(SendFrame(pipe, {0, at::zeros({1, 2, 3}, at::kInt)}),
              StatusIs(absl::StatusCode::kInvalidArgument, "Int"));
  EXPECT_THAT(SendFrame(pipe, {0, at::zeros({1, 0, 3})}),
              StatusIs(absl::StatusCode::kInvalidArgument, "dimension 1 is 0"));
  EXPECT_THAT(SendFrame(pipe, {0, at::Tensor()}),
              StatusIs(absl::StatusCode::kInvalidArgument, "[batch, seq, hidden]"));
  EXPECT_TRUE(pipe.queue_.empty());
}

// A header off the wire is checked word by word, in one line naming the word, before any
// payload buffer is allocated.
TEST(TensorFramesTest, AMalformedHeaderIsRefusedNamingItsWord) {
  struct Case {
    std::vector<int64_t> words;
    const char* expect;
  };
  const Case cases[] = {
      {{0, 0, 5, 8, 1}, "word 1 (batch) is 0"},
      {{0, 2, -1, 8, 1}, "word 2 (seq) is -1"},
      {{0, 2, 5, (int64_t{1} << 24) + 1, 1}, "word 3 (hidden) is 16777217"},
      {{0, 1 << 20, 1 << 20, 1 << 20, 1}, "element limit"},
      {{0, 2, 5, 8, 9}, "word 4 (dtype) is 9"},
      {{int64_t{1} << 40, 2, 5, 8, 1}, "word 0 (index)"},
  };
  for (const Case& c : cases) {
    FakePipe pipe;
    pipe.queue_.push_back(at::tensor(c.words, at::kLong));
    EXPECT_THAT(RecvFrame(pipe, at::kCPU).status(),
                StatusIs(absl::StatusCode::kDataLoss, c.expect));
    EXPECT_TRUE(pipe.queue_.empty());  // the payload was never asked for
  }
  // A payload that does not match its header: the pipe's own error (NCCL: a count mismatch).
  FakePipe pipe;
  ASSERT_TRUE(pipe.Send(at::tensor(std::vector<int64_t>{1, 2, 5, 8, 2}, at::kLong)).ok());
  ASSERT_TRUE(pipe.Send(at::zeros({2, 5, 8}, at::kFloat)).ok());  // header said bfloat16
  EXPECT_THAT(RecvFrame(pipe, at::kCPU).status(), StatusIs(absl::StatusCode::kDataLoss));
}

}  // namespace
}  // namespace windquant::transport
