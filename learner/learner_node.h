// LearnerNode: the learner process's parts wired together (DESIGN.md section
// 5): LearnerCore, its gRPC service on a started server, and the sender of its
// plans (episodes' and candidates') to the evaluator. windquant-learner runs one over TCP;
// `windquant quantize` runs one beside the evaluator and actor nodes in one
// process, the peers reached through in-process channels (net::MakeInProcessChannel).
//
//   // options: job::LearnerNodeOptionsFrom(config, ...)
//   auto node = LearnerNode::Create(options, address, &registry, log);
//   ... the evaluator's channel exists ...
//   (*node)->Connect(evaluator_channel);
//   ... (*node)->core().done() ...
//   (*node)->Stop();
//
// With a RunPublisher (output.store) the core's checkpoints and best plans go
// to the store as they are made; with write_final, once the run is done (or
// at Create, for a run that was done before but whose result the store
// lacks), a thread writes the final artifacts (run_finisher.h) into
// output.dir/final and pushes them as the run's "final" plan. Their search
// rows and held-out numbers are measured by the evaluator (Evaluator.
// EvaluatePlan, each call under the evaluation allowance,
// service.evaluation_timeout_ms), which must serve until then. With a
// start_search (the quality-target mode) the run starts where it says, found
// through the same evaluator once the table is complete (run_start.h).
//
// Thread-safety: Create/Connect/Stop from one thread; core() and server() are
// thread-safe.
#ifndef WINDQUANT_LEARNER_LEARNER_NODE_H_
#define WINDQUANT_LEARNER_LEARNER_NODE_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/base/log.h"
#include "common/metrics/registry.h"
#include "common/net/canceller.h"
#include "common/net/server.h"
#include "grpcpp/channel.h"
#include "learner/export_assembler.h"
#include "learner/learner_core.h"
#include "learner/learner_service.h"
#include "learner/plan_sender.h"
#include "learner/run_finisher.h"
#include "learner/run_publisher.h"
#include "learner/run_start.h"
#include "windquant/v1/evaluator.grpc.pb.h"

namespace windquant::learner {

// Writes the final artifacts of the done run `result` (on `table`) into `dir`
// (the run's config is the writer's: job/learner_options.h binds it).
// The node fills the options' actors (export_actors), deadline and log.
using FinalWriter = std::function<absl::StatusOr<FinalArtifacts>(
    const rl::RunResult& result, const plan::UnitTable& table, const std::string& run_id,
    const std::string& dir, FinishOptions options)>;

// The quality-target mode's start search (run_start.h; job/learner_options.h
// binds it): the run's start over the merged `table`, measuring plans on the
// selection slice through `measure` (the evaluator's Evaluator.EvaluatePlan).
using StartSearch = std::function<absl::StatusOr<RunStart>(
    const plan::UnitTable& table, const PlanMeasurer& measure, const base::LogSink& log)>;

struct LearnerNodeOptions {
  LearnerCore::Options core;  // also core.dir: output.dir (final/ goes there)
  // service.*: the server's message limit, TLS and token (net::StartServer).
  net::PeerOptions service;
  // service.rpc_deadline_ms: the deadline of SubmitPlan and GetQueueStatus to
  // the evaluator.
  absl::Duration rpc_deadline = absl::Milliseconds(30000);
  // The deadline of the final rows' held-out measurement (a pass over the whole
  // held-out text; job::HeldOutAllowance).
  absl::Duration heldout_allowance = absl::Minutes(30);
  // Borrowed, may be null; must outlive the node.
  RunPublisher* publisher = nullptr;
  // Write (and push) the final artifacts when the run is done; null = not
  // (the caller makes the run's result, as `windquant quantize` does).
  FinalWriter write_final;
  // The run's table identity when the caller knows it (quant::RunTableFingerprint):
  // stage tables of another are refused from the first on (LearnerCore::
  // ExpectTableFingerprint). "" = any.
  std::string expected_table_fingerprint;
  // With output.export: the actors of every stage (stage-major), from which the
  // final export is assembled (run_finisher.h).
  std::vector<ExportStageActors> export_actors;
  // With core.await_start: once the table is complete a thread runs it (after
  // Connect: it measures through the evaluator, each call under the
  // evaluation allowance) and starts the run there (LearnerCore::StartAt);
  // a failed search (the evaluator away) is retried every 5 s until Stop.
  StartSearch start_search;
  // The binary's commit (base::BuildCommit; the service main sets it), into the
  // final report; "" = unknown.
  std::string build_commit;
};

class LearnerNode {
 public:
  // The core (resumed from output.dir when a checkpoint is there) and the
  // Learner service serving on `address` (port 0 = a free one). `registry`
  // (metrics) must outlive the node.
  static absl::StatusOr<std::unique_ptr<LearnerNode>> Create(LearnerNodeOptions options,
                                                             const std::string& address,
                                                             metrics::Registry* registry,
                                                             base::LogSink log);
  ~LearnerNode();

  // Starts sending plans to the evaluator behind `evaluator`.
  void Connect(std::shared_ptr<grpc::Channel> evaluator);
  // Stops the sender (its calls in flight cancelled); the server still serves.
  // Idempotent.
  void StopClients();
  // StopClients, then waits for the final artifacts being written (not for
  // a run still going), then drains the server (in-flight calls finish).
  // Idempotent.
  void Stop();
  // With write_final and a done run: waits until the final artifacts are
  // written into output.dir/final or given up (not for the store's push);
  // returns at once otherwise, or once Stop/StopClients began.
  void WaitForFinal();

  LearnerCore& core() { return *core_; }
  net::GrpcServer& server() { return *server_; }

 private:
  class Observer;
  LearnerNode() = default;
  // PlanSender's calls: one SubmitPlan (the accepting evaluator_id), one GetQueueStatus.
  absl::StatusOr<std::string> SubmitPlan(const OutgoingPlan& plan, net::Canceller* cancel);
  absl::StatusOr<std::string> EvaluatorId(net::Canceller* cancel);
  // The finisher thread: waits for the end of the run, then Finish().
  void FinishWhenDone();
  void Finish();
  // Writes the final artifacts; nullopt when they were not written (logged).
  std::optional<FinalArtifacts> WriteFinal(const std::string& dir, const std::string& run_id);
  // The start_search thread: waits for LearnerCore::AwaitingStart, then searches and starts.
  void SearchStart();
  // A plan's perplexity measured by the evaluator (FinishOptions::measure), and
  // the same as a PlanMeasurer.
  absl::StatusOr<TextMeasurement> MeasureOnEvaluator(const std::vector<int>& actions,
                                                     PlanText text);
  PlanMeasurer EvaluatorMeasurer();
  void MarkFinalWritten();

  base::LogSink log_;
  LearnerNodeOptions options_;
  std::unique_ptr<Observer> observer_;  // outlives core_
  absl::Mutex finish_mu_;
  bool run_done_ ABSL_GUARDED_BY(finish_mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(finish_mu_) = false;
  bool final_written_ ABSL_GUARDED_BY(finish_mu_) = false;  // or given up
  net::Canceller final_calls_;                              // the finisher's calls to the evaluator
  std::thread finisher_;
  std::thread starter_;  // start_search's
  std::unique_ptr<LearnerCore> core_;
  std::unique_ptr<LearnerService> service_;
  std::unique_ptr<net::GrpcServer> server_;
  std::unique_ptr<v1::Evaluator::Stub> evaluator_;
  std::unique_ptr<PlanSender> sender_;
  bool running_ = false;  // Create succeeded, Stop not called
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_LEARNER_NODE_H_
