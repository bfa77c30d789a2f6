#include "evaluator/evaluator_service.h"

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/net/status_convert.h"
#include "common/rl/plan_validation.h"

namespace windquant::evaluator {

using net::ToGrpcStatus;

absl::StatusOr<plan::Plan> EvaluatorService::CheckPlan(const v1::Plan& proto,
                                                       double* effective_bits) {
  WQ_RETURN_IF_ERROR(net::RequireIdentifier("plan.plan_id", proto.plan_id()));
  WQ_ASSIGN_OR_RETURN(plan::UnitTable table, table_());
  WQ_RETURN_IF_ERROR(rl::ValidatePlan(proto, table, rl::PlanScope::kRun));
  plan::Plan plan = plan::Plan::FromProto(proto);
  *effective_bits = table.EffectiveBits(plan.actions);
  return plan;
}

grpc::Status EvaluatorService::SubmitPlan(grpc::ServerContext*, const v1::SubmitPlanRequest* req,
                                          v1::SubmitPlanReply* reply) {
  if (!req->has_plan()) return ToGrpcStatus(absl::InvalidArgumentError("plan: missing"));
  if (!req->actor_id().empty()) {
    absl::Status s = net::RequireIdentifier("actor_id", req->actor_id());
    if (!s.ok()) return ToGrpcStatus(s);
  }
  double bits = 0;
  absl::StatusOr<plan::Plan> plan = CheckPlan(req->plan(), &bits);
  if (!plan.ok()) return ToGrpcStatus(plan.status());
  if (req->kind() != v1::PLAN_KIND_EPISODE && req->kind() != v1::PLAN_KIND_CANDIDATE) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        absl::StrCat("kind: ", static_cast<int>(req->kind()), " is not a PlanKind")));
  }
  if (req->episode_id() != 0) plan->episode_id = req->episode_id();
  QueuedPlan q;
  q.kind =
      req->kind() == v1::PLAN_KIND_CANDIDATE ? rl::PlanKind::kCandidate : rl::PlanKind::kEpisode;
  q.plan = *std::move(plan);
  q.effective_bits = bits;
  q.charged_bits = req->plan().charged_bits();
  if (!(q.charged_bits >= 0 && q.charged_bits <= 32)) {
    return ToGrpcStatus(absl::InvalidArgumentError("plan.charged_bits: must be in [0, 32]"));
  }
  q.actor_id = req->actor_id();
  absl::StatusOr<int> depth = queue_->Submit(std::move(q));
  if (!depth.ok()) return ToGrpcStatus(depth.status());
  reply->set_accepted(true);
  reply->set_queue_depth(*depth);
  reply->set_evaluator_id(queue_->evaluator_id());
  return grpc::Status::OK;
}

grpc::Status EvaluatorService::GetQueueStatus(grpc::ServerContext*, const v1::QueueStatusRequest*,
                                              v1::QueueStatus* out) {
  out->set_evaluator_id(queue_->evaluator_id());
  out->set_queue_depth(queue_->depth());
  out->set_evaluated(queue_->evaluated());
  return grpc::Status::OK;
}

grpc::Status EvaluatorService::EvaluatePlan(grpc::ServerContext*,
                                            const v1::EvaluatePlanRequest* req,
                                            v1::EvaluationReport* out) {
  if (!req->has_plan()) return ToGrpcStatus(absl::InvalidArgumentError("plan: missing"));
  if (req->tokens() != 0) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        "tokens: only 0 (the configured evaluation slice) is supported"));
  }
  double bits = 0;
  absl::StatusOr<plan::Plan> plan = CheckPlan(req->plan(), &bits);
  if (!plan.ok()) return ToGrpcStatus(plan.status());
  if (req->text() != v1::EVALUATION_TEXT_SELECTION && req->text() != v1::EVALUATION_TEXT_HELDOUT) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        absl::StrCat("text: ", static_cast<int>(req->text()), " is not an EvaluationText")));
  }
  const bool heldout = req->text() == v1::EVALUATION_TEXT_HELDOUT;
  absl::StatusOr<PlanEvaluation> e =
      heldout ? queue_->HeldOutNow(*plan) : queue_->EvaluateNow(*plan);
  if (!e.ok()) return ToGrpcStatus(e.status());
  out->set_episode_id(plan->episode_id);
  out->set_plan_id(plan->plan_id);
  out->set_perplexity(e->eval_ppl);
  out->set_loss(e->calib_nll);
  out->set_loss_increase(e->loss_increase);
  out->set_relative_ppl_increase(e->relative_ppl_increase);
  out->set_effective_bits(bits);
  out->set_lambda(queue_->lambda());
  out->set_tokens(e->tokens);
  out->set_cached(e->cached);
  return grpc::Status::OK;
}

}  // namespace windquant::evaluator
