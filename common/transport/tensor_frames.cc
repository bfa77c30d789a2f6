#include "common/transport/tensor_frames.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace windquant::transport {
namespace {

constexpr const char* kWordNames[kFrameHeaderWords] = {"index", "batch", "seq", "hidden", "dtype"};

absl::Status Malformed(int word, int64_t value, const char* why) {
  return absl::DataLossError(absl::StrCat("micro-batch frame: header word ", word, " (",
                                          kWordNames[word], ") is ", value, ": ", why));
}

}  // namespace

absl::StatusOr<int64_t> FrameDtypeCode(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return 1;
    case at::kBFloat16:
      return 2;
    case at::kHalf:
      return 3;
    default:
      return absl::InvalidArgumentError(absl::StrCat("micro-batch frame: hidden states of dtype ",
                                                     c10::toString(dtype),
                                                     " (expected float32, bfloat16 or float16)"));
  }
}

absl::StatusOr<at::Tensor> EncodeFrameHeader(const MicroBatch& batch) {
  const at::Tensor& t = batch.hidden;
  if (!t.defined() || t.dim() != 3) {
    return absl::InvalidArgumentError(
        "micro-batch frame: hidden states must be [batch, seq, hidden]");
  }
  for (int d = 0; d < 3; ++d) {
    if (t.size(d) < 1 || t.size(d) > kMaxFrameDim) {
      return absl::InvalidArgumentError(absl::StrCat("micro-batch frame: dimension ", d, " is ",
                                                     t.size(d), ", outside [1, ", kMaxFrameDim,
                                                     "]"));
    }
  }
  if (t.numel() > kMaxFrameElements) {
    return absl::InvalidArgumentError(
        absl::StrCat("micro-batch frame: ", t.numel(), " elements, over ", kMaxFrameElements));
  }
  WQ_ASSIGN_OR_RETURN(const int64_t code, FrameDtypeCode(t.scalar_type()));
  at::Tensor header = at::empty({kFrameHeaderWords}, at::kLong);
  int64_t* w = header.data_ptr<int64_t>();
  w[0] = batch.index;
  w[1] = t.size(0);
  w[2] = t.size(1);
  w[3] = t.size(2);
  w[4] = code;
  return header;
}

absl::StatusOr<FrameHeader> DecodeFrameHeader(const at::Tensor& header) {
  if (header.scalar_type() != at::kLong || header.numel() != kFrameHeaderWords ||
      !header.device().is_cpu()) {
    return absl::DataLossError("micro-batch frame: the header is not 5 int64 words on the host");
  }
  const at::Tensor h = header.contiguous();
  const int64_t* w = h.data_ptr<int64_t>();
  if (w[0] < std::numeric_limits<int32_t>::min() || w[0] > std::numeric_limits<int32_t>::max()) {
    return Malformed(0, w[0], "outside int32");
  }
  for (int i = 1; i <= 3; ++i) {
    if (w[i] < 1 || w[i] > kMaxFrameDim) {
      return Malformed(i, w[i], absl::StrCat("outside [1, ", kMaxFrameDim, "]").c_str());
    }
  }
  if (w[1] * w[2] * w[3] > kMaxFrameElements) {  // each <= 2^24: no overflow
    return Malformed(3, w[3], "batch x seq x hidden over the element limit");
  }
  FrameHeader out;
  out.index = static_cast<int32_t>(w[0]);
  out.batch = w[1];
  out.seq = w[2];
  out.hidden = w[3];
  switch (w[4]) {
    case 1:
      out.dtype = at::kFloat;
      break;
    case 2:
      out.dtype = at::kBFloat16;
      break;
    case 3:
      out.dtype = at::kHalf;
      break;
    default:
      return Malformed(4, w[4], "not a dtype code (1 float32, 2 bfloat16, 3 float16)");
  }
  return out;
}

absl::Status SendFrame(TensorPipe& pipe, const MicroBatch& batch) {
  WQ_ASSIGN_OR_RETURN(const at::Tensor header, EncodeFrameHeader(batch));
  WQ_RETURN_IF_ERROR(pipe.Send(header));
  return pipe.Send(batch.hidden.contiguous());
}

absl::StatusOr<MicroBatch> RecvFrame(TensorPipe& pipe, const at::Device& device,
                                     absl::Time deadline) {
  at::Tensor header = at::empty({kFrameHeaderWords}, at::kLong);
  WQ_RETURN_IF_ERROR(pipe.Recv(header, deadline));
  WQ_ASSIGN_OR_RETURN(const FrameHeader h, DecodeFrameHeader(header));
  at::Tensor hidden =
      at::empty({h.batch, h.seq, h.hidden}, at::TensorOptions().dtype(h.dtype).device(device));
  WQ_RETURN_IF_ERROR(pipe.Recv(hidden, deadline));
  return MicroBatch{h.index, std::move(hidden)};
}

}  // namespace windquant::transport
