#include "common/testing/transition_streams.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "windquant/v1/learner.grpc.pb.h"

namespace windquant::testing {

TransitionStreams::TransitionStreams(TransitionStreamsOptions options,
                                     std::vector<v1::TransitionBatch> batches)
    : options_(std::move(options)), batches_(std::move(batches)) {}

TransitionStreams::~TransitionStreams() { Stop(); }

void TransitionStreams::Start() {
  started_ = absl::Now();
  {
    absl::MutexLock lock(&mu_);
    result_.stream_sent.assign(options_.streams, 0);
  }
  for (int s = 0; s < options_.streams; ++s) threads_.emplace_back([this, s] { RunStream(s); });
}

bool TransitionStreams::WaitForAcks(int64_t n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return result_.sent >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
}

int64_t TransitionStreams::acks() const {
  absl::MutexLock lock(&mu_);
  return result_.sent;
}

TransitionStreams::Result TransitionStreams::Stop() {
  if (threads_.empty()) return Result();
  stop_ = true;
  for (auto& t : threads_) t.join();
  threads_.clear();
  absl::MutexLock lock(&mu_);
  result_.seconds = absl::ToDoubleSeconds(absl::Now() - started_);
  return std::exchange(result_, Result());
}

void TransitionStreams::RunStream(int index) {
  // Its own subchannel pool: a connection of its own, not one shared by every
  // channel of the process with the same arguments.
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(options_.max_message_bytes));
  args.SetMaxSendMessageSize(static_cast<int>(options_.max_message_bytes));
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto stub = v1::Learner::NewStub(
      grpc::CreateCustomChannel(options_.target, grpc::InsecureChannelCredentials(), args));
  std::vector<v1::TransitionBatch> batches = batches_;  // ids set per write
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.call_deadline));
  ctx.set_wait_for_ready(true);
  auto stream = stub->StreamTransitions(&ctx);
  const uint64_t base = options_.episode_id_base | (static_cast<uint64_t>(index + 1) << 32);
  bool broken = false;
  for (uint64_t n = 0; !stop_ && !batches.empty(); ++n) {
    v1::TransitionBatch& b = batches[(index + n) % batches.size()];
    const uint64_t id = base | (n + 1);
    b.set_episode_id(id);
    b.mutable_plan()->set_episode_id(id);
    v1::TransitionAck ack;
    const absl::Time t0 = absl::Now();
    if (!stream->Write(b) || !stream->Read(&ack)) {
      broken = true;
      break;
    }
    const double ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
    absl::MutexLock lock(&mu_);
    ++result_.sent;
    ++result_.stream_sent[index];
    if (ack.accepted()) ++result_.accepted;
    result_.transitions += b.actions_size();
    result_.payload_bytes += static_cast<int64_t>(b.ByteSizeLong());
    result_.ack_ms.push_back(ms);
  }
  if (!broken) stream->WritesDone();
  const grpc::Status status = stream->Finish();
  if (!status.ok() || broken) {
    absl::MutexLock lock(&mu_);
    result_.errors.push_back(absl::StrCat("stream ", index, ": ", status.error_code(), " ",
                                          status.error_message(), broken ? " (broken)" : ""));
  }
}

}  // namespace windquant::testing
