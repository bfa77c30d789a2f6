#include "learner/learner_node.h"

#include <optional>
#include <utility>

#include "common/base/status_macros.h"
#include "common/net/channel.h"
#include "common/net/status_convert.h"
#include "common/plan/plan.h"

namespace windquant::learner {

// The core's observer: the publisher's, and the end of the run for the finisher.
class LearnerNode::Observer : public RunObserver {
 public:
  explicit Observer(LearnerNode* node) : node_(node) {}
  void OnCheckpoint(int64_t update, bool done) override {
    if (node_->options_.publisher != nullptr) node_->options_.publisher->OnCheckpoint(update, done);
  }
  void OnBestPlan(const rl::CandidatePlan& best, const plan::UnitTable& table) override {
    if (node_->options_.publisher != nullptr) node_->options_.publisher->OnBestPlan(best, table);
  }
  void OnDone() override {
    absl::MutexLock lock(&node_->finish_mu_);
    node_->run_done_ = true;
  }

 private:
  LearnerNode* const node_;
};

absl::StatusOr<std::unique_ptr<LearnerNode>> LearnerNode::Create(LearnerNodeOptions options,
                                                                 const std::string& address,
                                                                 metrics::Registry* registry,
                                                                 base::LogSink log) {
  std::unique_ptr<LearnerNode> node(new LearnerNode());
  node->log_ = log;
  node->options_ = std::move(options);
  node->observer_ = std::make_unique<Observer>(node.get());
  WQ_ASSIGN_OR_RETURN(node->core_, LearnerCore::Create(node->options_.core, std::move(log),
                                                       registry, node->observer_.get()));
  node->core_->ExpectTableFingerprint(node->options_.expected_table_fingerprint);
  if (node->core_->done()) {  // resumed after the end: the result may be missing
    absl::MutexLock lock(&node->finish_mu_);
    node->run_done_ = true;
  }
  node->service_ = std::make_unique<LearnerService>(node->core_.get(), registry);
  WQ_ASSIGN_OR_RETURN(node->server_,
                      net::StartServer(node->options_.service, address, registry,
                                       node->service_.get(), v1::Learner::service_full_name()));
  if (node->options_.write_final)
    node->finisher_ = std::thread([n = node.get()] { n->FinishWhenDone(); });
  node->running_ = true;
  return node;
}

LearnerNode::~LearnerNode() { Stop(); }

void LearnerNode::Connect(std::shared_ptr<grpc::Channel> evaluator) {
  evaluator_ = v1::Evaluator::NewStub(std::move(evaluator));
  // Every plan goes to the evaluator from here; the reports come back through
  // Learner.ReportEvaluation.
  sender_ = std::make_unique<PlanSender>(
      core_.get(),
      [this](const OutgoingPlan& plan, net::Canceller* cancel) { return SubmitPlan(plan, cancel); },
      [this](net::Canceller* cancel) { return EvaluatorId(cancel); }, absl::Seconds(5), log_);
  sender_->Start();
  if (options_.start_search) starter_ = std::thread([this] { SearchStart(); });
}

void LearnerNode::SearchStart() {
  const absl::Duration kPoll = absl::Milliseconds(200), kRetry = absl::Seconds(5);
  auto stopped_within = [this](absl::Duration wait) {
    absl::MutexLock lock(&finish_mu_);
    auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(finish_mu_) { return stopping_; };
    return finish_mu_.AwaitWithTimeout(absl::Condition(&stopping), wait);
  };
  auto log = [this](const std::string& line) {
    if (log_) log_(line);
  };
  const PlanMeasurer measure = EvaluatorMeasurer();
  while (!core_->start().has_value()) {
    if (!core_->AwaitingStart()) {  // the table is not complete yet
      if (stopped_within(kPoll)) return;
      continue;
    }
    absl::StatusOr<RunStart> start = options_.start_search(*core_->SharedTable(), measure, log);
    absl::Status s = start.ok() ? core_->StartAt(*start) : start.status();
    if (s.ok()) return;
    log(absl::StrCat("learner: the run's start search failed (", s.message(), "); again in ",
                     absl::FormatDuration(kRetry)));
    if (stopped_within(kRetry)) return;
  }
}

absl::StatusOr<std::string> LearnerNode::SubmitPlan(const OutgoingPlan& plan,
                                                    net::Canceller* cancel) {
  std::shared_ptr<const plan::UnitTable> table = core_->SharedTable();
  if (table == nullptr) return absl::UnavailableError("unit table incomplete");
  v1::SubmitPlanRequest req;
  plan.plan.ToProto(*table, req.mutable_plan());
  req.mutable_plan()->set_charged_bits(plan.charged_bits);
  req.set_episode_id(plan.plan.episode_id);
  req.set_actor_id(plan.actor_id);
  req.set_kind(plan.kind == rl::PlanKind::kCandidate ? v1::PLAN_KIND_CANDIDATE
                                                     : v1::PLAN_KIND_EPISODE);
  v1::SubmitPlanReply reply;
  grpc::ClientContext ctx;
  net::ConfigureContext(ctx, options_.rpc_deadline);
  net::Canceller::Scope scope(cancel, &ctx);
  if (scope.cancelled()) return net::FromGrpcStatus(net::CancelledStatus());
  WQ_RETURN_IF_ERROR(net::FromGrpcStatus(evaluator_->SubmitPlan(&ctx, req, &reply)));
  return reply.evaluator_id();
}

absl::StatusOr<std::string> LearnerNode::EvaluatorId(net::Canceller* cancel) {
  v1::QueueStatus reply;
  grpc::ClientContext ctx;
  net::ConfigureContext(ctx, options_.rpc_deadline);
  net::Canceller::Scope scope(cancel, &ctx);
  if (scope.cancelled()) return net::FromGrpcStatus(net::CancelledStatus());
  WQ_RETURN_IF_ERROR(
      net::FromGrpcStatus(evaluator_->GetQueueStatus(&ctx, v1::QueueStatusRequest(), &reply)));
  return reply.evaluator_id();
}

void LearnerNode::FinishWhenDone() {
  {
    absl::MutexLock lock(&finish_mu_);
    auto ready = [this]()
                     ABSL_EXCLUSIVE_LOCKS_REQUIRED(finish_mu_) { return run_done_ || stopping_; };
    finish_mu_.Await(absl::Condition(&ready));
    if (!run_done_) {  // stopped before the end
      final_written_ = true;
      return;
    }
  }
  Finish();
}

void LearnerNode::MarkFinalWritten() {
  absl::MutexLock lock(&finish_mu_);
  final_written_ = true;
}

void LearnerNode::WaitForFinal() {
  if (!options_.write_final) return;
  absl::MutexLock lock(&finish_mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(finish_mu_) {
    return !run_done_ || final_written_ || stopping_;
  };
  finish_mu_.Await(absl::Condition(&ready));
}

absl::StatusOr<TextMeasurement> LearnerNode::MeasureOnEvaluator(const std::vector<int>& actions,
                                                                PlanText text) {
  std::shared_ptr<const plan::UnitTable> table = core_->SharedTable();
  if (table == nullptr || evaluator_ == nullptr) {
    return absl::UnavailableError("finish: no unit table or no evaluator to measure plans");
  }
  const double target = options_.core.curriculum.target_bits.empty()
                            ? 0
                            : options_.core.curriculum.target_bits.back();
  v1::EvaluatePlanRequest req;
  plan::Plan::Make(*table, actions, "final", target).ToProto(*table, req.mutable_plan());
  req.set_text(text == PlanText::kHeldOut ? v1::EVALUATION_TEXT_HELDOUT
                                          : v1::EVALUATION_TEXT_SELECTION);
  v1::EvaluationReport reply;
  grpc::ClientContext ctx;
  // A model-sized pass (a whole text through every stage): the selection's is one
  // evaluation's allowance, the held-out text's one sized by its length.
  net::ConfigureContext(ctx, text == PlanText::kHeldOut ? options_.heldout_allowance
                                                        : options_.core.evaluation_allowance);
  net::Canceller::Scope scope(&final_calls_, &ctx);
  if (scope.cancelled()) return net::FromGrpcStatus(net::CancelledStatus());
  WQ_RETURN_IF_ERROR(net::FromGrpcStatus(evaluator_->EvaluatePlan(&ctx, req, &reply)));
  return TextMeasurement{reply.perplexity(), reply.tokens(), reply.relative_ppl_increase()};
}

PlanMeasurer LearnerNode::EvaluatorMeasurer() {
  return [this](const std::vector<int>& actions, PlanText text) {
    return MeasureOnEvaluator(actions, text);
  };
}

std::optional<FinalArtifacts> LearnerNode::WriteFinal(const std::string& dir,
                                                      const std::string& run_id) {
  auto log = [this](const std::string& line) {
    if (log_) log_(line);
  };
  std::shared_ptr<const plan::UnitTable> table = core_->SharedTable();
  if (table == nullptr) return std::nullopt;  // done implies a table; nothing to write otherwise
  FinishOptions fo;
  fo.actors = options_.export_actors;
  fo.export_options.rpc_deadline = options_.rpc_deadline;
  fo.export_options.log = log;
  fo.log = log;
  fo.measure = EvaluatorMeasurer();
  fo.start = core_->start();
  fo.commit = options_.build_commit;
  absl::StatusOr<FinalArtifacts> final_files =
      options_.write_final(core_->Result(), *table, run_id, dir, fo);
  if (!final_files.ok()) {
    log(absl::StrCat("learner: final artifacts not written: ", final_files.status().message()));
    return std::nullopt;
  }
  log(absl::StrCat("learner: final artifacts in ", dir));
  return *std::move(final_files);
}

void LearnerNode::Finish() {
  auto log = [this](const std::string& line) {
    if (log_) log_(line);
  };
  RunPublisher* publisher = options_.publisher;
  if (publisher != nullptr) {
    absl::StatusOr<bool> there = publisher->HasFinal();
    if (there.ok() && *there) {
      log(absl::StrCat("learner: the run's result is in the store already (", publisher->Describe(),
                       "plans/final)"));
      MarkFinalWritten();
      return;
    }
  }
  const std::string dir = options_.core.dir + "/final";
  const std::optional<FinalArtifacts> final_files =
      WriteFinal(dir, publisher != nullptr ? publisher->run_id() : "local");
  MarkFinalWritten();
  if (!final_files.has_value() || publisher == nullptr) return;
  publisher->PublishFinal(dir, final_files->entries, final_files->metadata);
  // Waits while the store takes them (retrying while it is down), until Stop.
  while (!publisher->Flush(absl::Seconds(1))) {
    absl::MutexLock lock(&finish_mu_);
    if (stopping_) return;
  }
  log(absl::StrCat("learner: final artifacts pushed to ", publisher->Describe(), "plans/final"));
}

void LearnerNode::StopClients() {
  final_calls_.Cancel();
  if (sender_ != nullptr) sender_->Stop();
}

void LearnerNode::Stop() {
  if (!running_) return;
  running_ = false;
  StopClients();
  {
    absl::MutexLock lock(&finish_mu_);
    stopping_ = true;
  }
  if (finisher_.joinable()) finisher_.join();
  if (starter_.joinable()) starter_.join();
  service_->BeginShutdown();
  server_->Drain(absl::Now() + absl::Seconds(5));
}

}  // namespace windquant::learner
