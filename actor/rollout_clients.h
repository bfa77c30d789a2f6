// The peer of an actor's RolloutLoop (rollout_loop.h) behind an interface, so
// that the loop can run against a fake in its test: LearnerClient, the
// learner's run status, the merged unit table, the policy stream
// (WatchPolicy) and the transitions stream. GrpcLearnerClient is the real one
// over a channel. Every call of the client ends promptly with CANCELLED once Cancel() was
// called (calls in flight included: net::Canceller), so the loop's Stop()
// returns while a peer is down.
// Thread-safety: the gRPC client is thread-safe, except that
// SendTransitions / CloseTransitions (one stream) are called from one thread.
#ifndef WINDQUANT_ACTOR_ROLLOUT_CLIENTS_H_
#define WINDQUANT_ACTOR_ROLLOUT_CLIENTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/net/canceller.h"
#include "common/plan/unit_table.h"
#include "windquant/v1/learner.grpc.pb.h"

namespace windquant::actor {

class LearnerClient {
 public:
  using SnapshotFn = std::function<void(const v1::PolicySnapshot&)>;
  virtual ~LearnerClient() = default;
  // Waits for the learner (up to `deadline`).
  virtual absl::StatusOr<v1::RunStatus> GetRunStatus(absl::Duration deadline) = 0;
  // UNAVAILABLE until every stage registered its part.
  virtual absl::StatusOr<plan::UnitTable> GetUnitTable(absl::Duration deadline) = 0;
  // Subscribes (from `known_version`; -1 = the current snapshot first) and
  // calls `on_snapshot` for every snapshot until the stream ends; returns how
  // it ended (OK: the learner closed it).
  virtual absl::Status WatchPolicy(const std::string& actor_id, int64_t known_version,
                                   const SnapshotFn& on_snapshot) = 0;
  // Writes one episode on the transitions stream (opened on first use) and
  // reads its ack. On a failure the stream is closed and its status returned;
  // the next call opens a new one.
  virtual absl::StatusOr<v1::TransitionAck> SendTransitions(const v1::TransitionBatch& batch) = 0;
  // Ends the transitions stream, if one is open.
  virtual void CloseTransitions() = 0;
  virtual void Cancel() = 0;
};

class GrpcLearnerClient final : public LearnerClient {
 public:
  explicit GrpcLearnerClient(std::shared_ptr<grpc::Channel> channel);
  ~GrpcLearnerClient() override;
  absl::StatusOr<v1::RunStatus> GetRunStatus(absl::Duration deadline) override;
  absl::StatusOr<plan::UnitTable> GetUnitTable(absl::Duration deadline) override;
  absl::Status WatchPolicy(const std::string& actor_id, int64_t known_version,
                           const SnapshotFn& on_snapshot) override;
  absl::StatusOr<v1::TransitionAck> SendTransitions(const v1::TransitionBatch& batch) override;
  void CloseTransitions() override;
  void Cancel() override { cancel_.Cancel(); }

 private:
  void ResetStream();

  std::unique_ptr<v1::Learner::Stub> stub_;
  net::Canceller cancel_;
  // The transitions stream (SendTransitions' thread only).
  std::unique_ptr<grpc::ClientContext> stream_ctx_;
  std::unique_ptr<net::Canceller::Scope> stream_scope_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::TransitionBatch, v1::TransitionAck>> stream_;
};

}  // namespace windquant::actor

#endif  // WINDQUANT_ACTOR_ROLLOUT_CLIENTS_H_
