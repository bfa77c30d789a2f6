#include "evaluator/evaluator_node.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/base/text_range.h"
#include "common/model/tokenizer.h"
#include "common/net/channel.h"
#include "common/net/status_convert.h"
#include "common/transport/work_deadline.h"

namespace windquant::evaluator {
absl::StatusOr<std::unique_ptr<EvaluatorNode>> EvaluatorNode::Create(
    const Options& c, const std::string& address, metrics::Registry* registry, base::LogSink log,
    std::shared_ptr<grpc::Channel> learner, std::vector<std::shared_ptr<grpc::Channel>> actors,
    std::vector<std::string> actor_names, const model::LlamaWeights* shared_weights) {
  if (static_cast<int>(actors.size()) != c.stages * c.replicas ||
      actor_names.size() != actors.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("service.actor_addresses: ", actors.size(),
                     " entries, stages x replicas = ", c.stages * c.replicas));
  }
  std::unique_ptr<EvaluatorNode> node(new EvaluatorNode());
  node->deadline_ = absl::Milliseconds(c.peer.rpc_deadline_ms);
  WQ_ASSIGN_OR_RETURN(auto tok, model::Tokenizer::FromFile(c.model_dir + "/tokenizer.json"));
  const base::TextEncoder encode = [&t = *tok](std::string_view text) {
    return t.Encode(text, /*add_bos=*/false);
  };
  // Calibration windows and the loss slice come from the calibration range,
  // the PPL term from the selection slice; the held-out text is read only by
  // EvaluatePlan's final numbers.
  WQ_ASSIGN_OR_RETURN(std::vector<int32_t> calib,
                      base::ReadTextRange(c.calibration.range(), "calibration", encode));
  WQ_ASSIGN_OR_RETURN(
      std::vector<int32_t> eval,
      base::ReadWindows(c.selection, "evaluation.selection", encode, c.context - 1));
  PipelineEvaluatorOptions po;
  po.compute = c.compute;
  po.context = c.context;
  po.batch_size = c.batch;
  po.calib_slice_tokens = c.calib_slice_tokens;
  po.eval_slice_tokens = 0;  // the whole selection range
  po.calibration_samples = c.calibration.samples;
  po.calibration_seq_len = c.calibration.seq_len;
  po.calibration_seed = c.calibration.seed;
  po.calibration_batch = std::max(1, c.batch);
  if (shared_weights != nullptr) {
    model::LlamaWeights head;  // the same tensors, no decoder layer
    head.config = shared_weights->config;
    head.embed_tokens = shared_weights->embed_tokens;
    head.final_norm = shared_weights->final_norm;
    head.lm_head = shared_weights->lm_head;
    WQ_ASSIGN_OR_RETURN(
        node->pipeline_,
        PipelineEvaluator::FromWeights(std::move(head), po, std::move(calib), std::move(eval)));
  } else {
    WQ_ASSIGN_OR_RETURN(node->pipeline_, PipelineEvaluator::Create(
                                             c.model_dir, po, std::move(calib), std::move(eval)));
  }
  if (!c.heldout.text.empty()) {
    WQ_ASSIGN_OR_RETURN(std::vector<int32_t> heldout,
                        base::ReadTextRange(c.heldout, "evaluation.heldout", encode));
    absl::Status s = node->pipeline_->SetHeldOut(std::move(heldout));
    if (!s.ok() && log) log(absl::StrCat("evaluator: no held-out numbers: ", s.message()));
  }
  std::vector<std::vector<transport::ActivationTransport*>> replicas(c.replicas);
  for (int r = 0; r < c.replicas; ++r) {
    for (int s = 0; s < c.stages; ++s) {
      const size_t i = static_cast<size_t>(s * c.replicas + r);
      node->transports_.push_back(std::make_unique<transport::GrpcActivationTransport>(
          actors[i], absl::StrCat("stage ", s, " replica ", r, " at ", actor_names[i]),
          node->deadline_, transport::LayerLinearWeights(node->pipeline_->config())));
      if (c.hidden_states != transport::PipeKind::kGrpc) {
        node->transports_.back()->UsePipe(c.hidden_states, at::Device(c.compute.device));
      }
      replicas[r].push_back(node->transports_.back().get());
    }
  }
  node->learner_ = v1::Learner::NewStub(std::move(learner));
  EvaluatorNode* n = node.get();
  node->queue_ = std::make_unique<EvaluationQueue>(
      node->pipeline_.get(), replicas, c.env, c.lagrange, c.queue_dir, c.max_queue,
      [n](const Report& r) { return n->SendReport(r); }, registry, std::move(log));
  node->service_ =
      std::make_unique<EvaluatorService>(node->queue_.get(), [n] { return n->Table(); });
  WQ_ASSIGN_OR_RETURN(node->server_,
                      net::StartServer(c.peer, address, registry, node->service_.get(),
                                       v1::Evaluator::service_full_name()));
  node->running_ = true;
  return node;
}

EvaluatorNode::~EvaluatorNode() { Stop(); }

absl::Status EvaluatorNode::Start() {
  absl::Status s = queue_->Start();
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat("queue: ", s.message()));
  return absl::OkStatus();
}

// One attempt; the queue retries UNAVAILABLE / DEADLINE_EXCEEDED with backoff
// (the learner answers a duplicate with accepted=false, so a retry after a
// lost reply records nothing twice).
absl::StatusOr<ReportAnswer> EvaluatorNode::SendReport(const Report& r) {
  v1::EvaluationReport req;
  req.set_kind(r.kind == rl::PlanKind::kCandidate ? v1::PLAN_KIND_CANDIDATE
                                                  : v1::PLAN_KIND_EPISODE);
  req.set_episode_id(r.episode_id);
  req.set_plan_id(r.plan_id);
  req.set_perplexity(r.evaluation.eval_ppl);
  req.set_loss(r.evaluation.calib_nll);
  req.set_loss_increase(r.evaluation.loss_increase);
  req.set_relative_ppl_increase(r.evaluation.relative_ppl_increase);
  req.set_effective_bits(r.evaluation.effective_bits);
  req.set_lambda(r.lambda);
  req.set_tokens(r.evaluation.tokens);
  req.set_cached(r.evaluation.cached);
  if (r.grant.has_value()) {
    req.set_reward(r.grant->reward);
    req.set_lambda_after(r.grant->lambda_after);
    req.set_lambda_batch(r.grant->batch);
  }
  v1::ReportEvaluationReply reply;
  grpc::ClientContext ctx;
  net::ConfigureContext(ctx, deadline_, /*wait_for_ready=*/true);
  net::Canceller::Scope scope(&stopping_, &ctx);
  if (scope.cancelled()) return net::FromGrpcStatus(net::CancelledStatus());
  grpc::Status s = learner_->ReportEvaluation(&ctx, req, &reply);
  if (!s.ok()) return net::FromGrpcStatus(s);
  ReportAnswer answer;
  answer.accepted = reply.accepted();
  answer.updates = reply.updates();
  answer.lambda = reply.lambda();
  return answer;
}

// The run's table, fetched once. The lock is not held across the RPC: while
// the learner is away every SubmitPlan fails fast with UNAVAILABLE (the learner's
// sender retries) instead of queueing behind one call's deadline.
absl::StatusOr<plan::UnitTable> EvaluatorNode::Table() {
  {
    absl::MutexLock lock(&table_mu_);
    if (table_.has_value()) return *table_;
  }
  grpc::ClientContext ctx;
  net::ConfigureContext(ctx, std::min(deadline_, absl::Seconds(5)));
  net::Canceller::Scope scope(&stopping_, &ctx);
  v1::UnitTable proto;
  grpc::Status s = learner_->GetUnitTable(&ctx, v1::GetUnitTableRequest(), &proto);
  if (!s.ok()) return net::FromGrpcStatus(s);
  WQ_ASSIGN_OR_RETURN(plan::UnitTable t, plan::UnitTable::FromProto(proto));
  absl::MutexLock lock(&table_mu_);
  if (!table_.has_value()) table_ = std::move(t);
  return *table_;
}

// Outgoing work first (it may wait on peers that are going away too), then
// the server drains its in-flight calls.
void EvaluatorNode::StopClients() {
  stopping_.Cancel();
  queue_->Stop();
}

void EvaluatorNode::Stop() {
  if (!running_) return;
  running_ = false;
  StopClients();
  server_->Drain(absl::Now() + absl::Seconds(10));
}

}  // namespace windquant::evaluator
