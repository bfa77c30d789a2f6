// EvaluatorNode: the evaluator process's parts wired together (DESIGN.md
// section 5): the tokenized calibration and evaluation text, the
// PipelineEvaluator (embeddings, final norm, lm_head), one gRPC activation
// transport per actor, the EvaluationQueue (λ, rewards, reports to the
// learner) and the Evaluator service on a started server. λ: the evaluator is
// its one owner (DESIGN.md section 4): it rewards each episode with the λ of
// its PPO batch, pushes λ with the reports and keeps it in
// queue_dir/lambda.txt; the learner's answers tell it where the learner's
// batches stand (EvaluationQueue). windquant-evaluator runs one over
// TCP; `windquant quantize` runs one beside the learner and actor nodes with
// in-process channels.
//
//   auto node = EvaluatorNode::Create(job::EvaluatorNodeOptionsFrom(config), address,
//                                     &registry, log, learner, actors, names);
//   WQ_RETURN_IF_ERROR((*node)->Start());   // queue workers: calibration, evaluations
//   ...
//   (*node)->Stop();
//
// Thread-safety: Create/Start/Stop from one thread; server() is thread-safe.
#ifndef WINDQUANT_EVALUATOR_EVALUATOR_NODE_H_
#define WINDQUANT_EVALUATOR_EVALUATOR_NODE_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/base/log.h"
#include "common/base/text_range.h"
#include "common/metrics/registry.h"
#include "common/model/compute_options.h"
#include "common/model/llama_weights.h"
#include "common/net/canceller.h"
#include "common/net/peer_options.h"
#include "common/net/server.h"
#include "common/quant/calibration_options.h"
#include "common/transport/grpc_activation_transport.h"
#include "common/transport/tensor_pipes.h"
#include "evaluator/evaluation_queue.h"
#include "evaluator/evaluator_service.h"
#include "evaluator/pipeline_evaluator.h"
#include "grpcpp/channel.h"
#include "windquant/v1/learner.grpc.pb.h"

namespace windquant::evaluator {

// What an evaluator node reads (the run config's keys beside each field; built from the
// config by job::EvaluatorNodeOptionsFrom).
struct EvaluatorNodeOptions {
  std::string model_dir;                  // model.dir: tokenizer, embeddings, final norm, lm_head
  model::ComputeOptions compute;          // model.device: where the head computes
  quant::CalibrationOptions calibration;  // calibration.*: the windows and the loss slice
  base::TextRange selection;              // evaluation.selection: the PPL term
  // evaluation.heldout: final numbers only (EvaluatePlan with text HELDOUT); none
  // when its text is "" or shorter than one window.
  base::TextRange heldout;
  int context = 256;                  // evaluation.context
  int batch = 16;                     // evaluation.batch
  int64_t calib_slice_tokens = 8192;  // evaluation.calib_slice_tokens
  rl::EnvironmentOptions env;         // env.*: the episode-end reward's weights
  rl::LagrangeOptions lagrange;       // lagrange.*: the evaluator's λ, which it owns
  int stages = 1;                     // service.stages
  int replicas = 1;                   // service.replicas
  // The server and the calls to the learner: service.tls.*, service.max_message_bytes,
  // service.rpc_deadline_ms (also the actors' calls).
  net::PeerOptions peer;
  // service.hidden_states: grpc, or a pipe of this kind to every actor beside the gRPC
  // streams (the evaluator's end on compute.device).
  transport::PipeKind hidden_states = transport::PipeKind::kGrpc;
  std::string queue_dir;    // output.dir + "/evaluator-queue": pending plans, λ
  size_t max_queue = 4096;  // plans waiting at most
};

class EvaluatorNode {
 public:
  using Options = EvaluatorNodeOptions;

  // `actors`: one channel per actor, stage-major (stage s, replica r at
  // s * replicas + r, as service.actor_addresses), `actor_names` the same
  // order (for error messages). Serves on `address` (port 0 = a free one).
  // With `shared_weights` (the caller's, kept alive by it) the embeddings,
  // final norm and lm_head are those tensors instead of a copy loaded here.
  // `log` gets the queue's lines. INVALID_ARGUMENT naming the key for a wrong actor
  // count or unreadable text.
  static absl::StatusOr<std::unique_ptr<EvaluatorNode>> Create(
      const Options& options, const std::string& address, metrics::Registry* registry,
      base::LogSink log, std::shared_ptr<grpc::Channel> learner,
      std::vector<std::shared_ptr<grpc::Channel>> actors, std::vector<std::string> actor_names,
      const model::LlamaWeights* shared_weights = nullptr);
  ~EvaluatorNode();

  // Starts the queue (its λ from queue_dir; its workers calibrate their
  // replica, then evaluate plans).
  absl::Status Start();
  // Cancels calls to the learner in flight and stops the queue (no more
  // calls to the actors); the server still serves. Idempotent.
  void StopClients();
  // StopClients, then drains the server. Idempotent.
  void Stop();

  net::GrpcServer& server() { return *server_; }

 private:
  EvaluatorNode() = default;
  absl::StatusOr<ReportAnswer> SendReport(const Report& r);
  absl::StatusOr<plan::UnitTable> Table();

  absl::Duration deadline_;
  std::unique_ptr<PipelineEvaluator> pipeline_;
  std::vector<std::unique_ptr<transport::GrpcActivationTransport>> transports_;
  std::unique_ptr<v1::Learner::Stub> learner_;
  // Shutdown cancels the calls to the learner in flight (a report waiting for
  // a learner that is down would otherwise hold Stop() for its whole deadline).
  net::Canceller stopping_;
  std::unique_ptr<EvaluationQueue> queue_;
  absl::Mutex table_mu_;
  std::optional<plan::UnitTable> table_ ABSL_GUARDED_BY(table_mu_);
  std::unique_ptr<EvaluatorService> service_;
  std::unique_ptr<net::GrpcServer> server_;
  bool running_ = false;  // Create succeeded, Stop not called
};

}  // namespace windquant::evaluator

#endif  // WINDQUANT_EVALUATOR_EVALUATOR_NODE_H_
