#include "learner/learner_node.h"

#include "common/base/status_macros.h"
#include "common/net/channel.h"
#include "common/net/status_convert.h"

namespace windquant::learner {

absl::StatusOr<std::unique_ptr<LearnerNode>> LearnerNode::Create(
    const config::RunConfig& config, const std::string& address, metrics::Registry* registry,
    std::function<void(const std::string&)> log) {
  std::unique_ptr<LearnerNode> node(new LearnerNode());
  node->deadline_ = absl::Milliseconds(config.service.rpc_deadline_ms);
  WQ_ASSIGN_OR_RETURN(node->core_, LearnerCore::Create(config, std::move(log), registry));
  node->service_ = std::make_unique<LearnerService>(node->core_.get(), registry);
  WQ_ASSIGN_OR_RETURN(node->server_,
                      net::StartServer(config.service, address, registry, node->service_.get(),
                                       v1::Learner::service_full_name()));
  node->running_ = true;
  return node;
}

LearnerNode::~LearnerNode() { Stop(); }

void LearnerNode::Connect(std::shared_ptr<grpc::Channel> evaluator) {
  evaluator_ = v1::Evaluator::NewStub(std::move(evaluator));
  // Candidate plans go to the evaluator; their reports come back through
  // Learner.ReportEvaluation like an episode's.
  sender_ = std::make_unique<CandidateSender>(
      core_.get(), [this](const quant::Plan& plan, net::Canceller* cancel) {
        return SubmitCandidate(plan, cancel);
      });
  sender_->Start();
}

absl::Status LearnerNode::SubmitCandidate(const quant::Plan& plan, net::Canceller* cancel) {
  std::shared_ptr<const quant::UnitTable> table = core_->SharedTable();
  if (table == nullptr) return absl::UnavailableError("unit table incomplete");
  v1::SubmitPlanRequest req;
  plan.ToProto(*table, req.mutable_plan());
  req.set_episode_id(plan.episode_id);
  req.set_actor_id("learner");
  v1::SubmitPlanReply reply;
  grpc::ClientContext ctx;
  net::ConfigureContext(ctx, deadline_);
  net::Canceller::Scope scope(cancel, &ctx);
  if (scope.cancelled()) return net::FromGrpcStatus(net::CancelledStatus());
  return net::FromGrpcStatus(evaluator_->SubmitPlan(&ctx, req, &reply));
}

void LearnerNode::StopClients() {
  if (sender_ != nullptr) sender_->Stop();
}

void LearnerNode::Stop() {
  if (!running_) return;
  running_ = false;
  StopClients();
  service_->BeginShutdown();
  server_->Drain(absl::Now() + absl::Seconds(5));
}

}  // namespace windquant::learner
