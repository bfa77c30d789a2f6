// LearnerNode: the learner process's parts wired together (DESIGN.md section
// 5): LearnerCore, its gRPC service on a started server, and the sender of its
// candidate plans to the evaluator. windquant-learner runs one over TCP;
// `windquant quantize` runs one beside the evaluator and actor nodes in one
// process, the peers reached through in-process channels (net::MakeInProcessChannel).
//
//   auto node = LearnerNode::Create(config, config.service.learner_address, &registry, log);
//   ... the evaluator's channel exists ...
//   (*node)->Connect(evaluator_channel);
//   ... (*node)->core().done() ...
//   (*node)->Stop();
//
// Thread-safety: Create/Connect/Stop from one thread; core() and server() are
// thread-safe.
#ifndef WINDQUANT_LEARNER_LEARNER_NODE_H_
#define WINDQUANT_LEARNER_LEARNER_NODE_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/config/run_config.h"
#include "common/metrics/registry.h"
#include "common/net/server.h"
#include "grpcpp/channel.h"
#include "learner/candidate_sender.h"
#include "learner/learner_core.h"
#include "learner/learner_service.h"
#include "windquant/v1/evaluator.grpc.pb.h"

namespace windquant::learner {

class LearnerNode {
 public:
  // The core (resumed from output.dir when a checkpoint is there) and the
  // Learner service serving on `address` (port 0 = a free one). `registry`
  // (metrics) must outlive the node.
  static absl::StatusOr<std::unique_ptr<LearnerNode>> Create(
      const config::RunConfig& config, const std::string& address, metrics::Registry* registry,
      std::function<void(const std::string&)> log);
  ~LearnerNode();

  // Starts sending candidate plans to the evaluator behind `evaluator`.
  void Connect(std::shared_ptr<grpc::Channel> evaluator);
  // Stops the sender (its calls in flight cancelled); the server still serves.
  // Idempotent.
  void StopClients();
  // StopClients, then drains the server (in-flight calls finish). Idempotent.
  void Stop();

  LearnerCore& core() { return *core_; }
  net::GrpcServer& server() { return *server_; }

 private:
  LearnerNode() = default;
  absl::Status SubmitCandidate(const quant::Plan& plan, net::Canceller* cancel);

  absl::Duration deadline_;
  std::unique_ptr<LearnerCore> core_;
  std::unique_ptr<LearnerService> service_;
  std::unique_ptr<net::GrpcServer> server_;
  std::unique_ptr<v1::Evaluator::Stub> evaluator_;
  std::unique_ptr<CandidateSender> sender_;
  bool running_ = false;  // Create succeeded, Stop not called
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_LEARNER_NODE_H_
