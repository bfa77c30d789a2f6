#include "learner/learner_service.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/metrics/metric_names.h"
#include "common/net/status_convert.h"
#include "common/rl/transition_codec.h"

namespace windquant::learner {

using net::ToGrpcStatus;

LearnerService::LearnerService(LearnerCore* core, metrics::Registry* registry) : core_(core) {
  if (registry != nullptr) {
    auto family = metrics::GaugeFamily(*registry, metrics::kLearnerConnectedActors);
    if (family.ok()) connected_ = &(*family)->Get();
  }
}

grpc::Status LearnerService::RegisterUnitTable(grpc::ServerContext*,
                                               const v1::RegisterUnitTableRequest* req,
                                               v1::RegisterUnitTableReply* reply) {
  if (!req->has_table()) return ToGrpcStatus(absl::InvalidArgumentError("table: missing"));
  absl::StatusOr<plan::UnitTable> table = plan::UnitTable::FromProto(req->table());
  if (!table.ok()) {
    return ToGrpcStatus(
        absl::InvalidArgumentError(absl::StrCat("table: ", table.status().message())));
  }
  auto r = core_->RegisterTable(req->stage(), req->replica(), *table);
  if (!r.ok()) return ToGrpcStatus(r.status());
  reply->set_registered_stages(r->registered_stages);
  reply->set_expected_stages(r->expected_stages);
  reply->set_complete(r->complete);
  reply->set_total_units(r->total_units);
  return grpc::Status::OK;
}

grpc::Status LearnerService::StreamTransitions(
    grpc::ServerContext*,
    grpc::ServerReaderWriter<v1::TransitionAck, v1::TransitionBatch>* stream) {
  v1::TransitionBatch batch;
  std::shared_ptr<const plan::UnitTable> table;  // shared, not copied per batch
  while (stream->Read(&batch)) {
    if (table == nullptr) table = core_->SharedTable();
    if (table == nullptr) {
      return ToGrpcStatus(absl::UnavailableError("unit table incomplete"));
    }
    if (!batch.actor_id().empty()) {
      absl::Status s = net::RequireIdentifier("actor_id", batch.actor_id());
      if (!s.ok()) return ToGrpcStatus(s);
    }
    absl::StatusOr<rl::Episode> episode = rl::DecodeEpisode(batch, *table);
    if (!episode.ok()) return ToGrpcStatus(episode.status());
    absl::StatusOr<bool> accepted = core_->SubmitEpisode(*std::move(episode));
    if (!accepted.ok()) return ToGrpcStatus(accepted.status());
    v1::TransitionAck ack;
    ack.set_episode_id(batch.episode_id());
    ack.set_policy_version(core_->version());
    ack.set_accepted(*accepted);
    ack.set_evaluation_wait_ms(absl::ToInt64Milliseconds(core_->EvaluationWait()));
    if (!stream->Write(ack)) break;
  }
  return grpc::Status::OK;
}

grpc::Status LearnerService::WatchPolicy(grpc::ServerContext* context,
                                         const v1::WatchPolicyRequest* req,
                                         grpc::ServerWriter<v1::PolicySnapshot>* writer) {
  if (req->known_version() < -1) {
    return ToGrpcStatus(absl::InvalidArgumentError("known_version: must be >= -1"));
  }
  ++watchers_;
  if (connected_ != nullptr) connected_->Inc();
  int64_t known = req->known_version();
  grpc::Status result = grpc::Status::OK;
  while (!context->IsCancelled()) {
    if (shutting_down_) {
      result = ToGrpcStatus(absl::UnavailableError("learner shutting down"));
      break;
    }
    PublishedPolicy p = core_->WaitForPolicy(known, absl::Milliseconds(500));
    if (p.snapshot.version != known) {
      v1::PolicySnapshot out;
      out.set_version(p.snapshot.version);
      out.set_parameters(p.snapshot.bytes);
      out.set_sha256(p.snapshot.sha256);
      out.set_curriculum_stage(p.curriculum_stage);
      out.set_target_bits(p.target_bits);
      out.set_lambda(p.lambda);
      if (!p.reward_model.empty()) p.reward_model.ToProto(out.mutable_reward_model());
      if (!writer->Write(out)) break;
      known = p.snapshot.version;
    }
    if (core_->done() || core_->Status().stopped) break;  // stopped: nothing new will come
  }
  --watchers_;
  if (connected_ != nullptr) connected_->Dec();
  return result;
}

grpc::Status LearnerService::ReportEvaluation(grpc::ServerContext*, const v1::EvaluationReport* r,
                                              v1::ReportEvaluationReply* reply) {
  const std::vector<std::pair<const char*, double>> fields = {
      {"perplexity", r->perplexity()},
      {"loss", r->loss()},
      {"loss_increase", r->loss_increase()},
      {"relative_ppl_increase", r->relative_ppl_increase()},
      {"effective_bits", r->effective_bits()},
      {"lambda", r->lambda()},
      {"reward", r->reward()},
      {"lambda_after", r->lambda_after()}};
  for (const auto& [name, v] : fields) {
    absl::Status s = net::RequireFinite(name, v);
    if (!s.ok()) return ToGrpcStatus(s);
  }
  if (r->perplexity() < 1.0) {
    return ToGrpcStatus(absl::InvalidArgumentError("perplexity: must be >= 1"));
  }
  if (r->lambda() < 0) return ToGrpcStatus(absl::InvalidArgumentError("lambda: must be >= 0"));
  if (r->lambda_after() < 0) {
    return ToGrpcStatus(absl::InvalidArgumentError("lambda_after: must be >= 0"));
  }
  if (r->lambda_batch() < 0) {
    return ToGrpcStatus(absl::InvalidArgumentError("lambda_batch: must be >= 0"));
  }
  if (!(r->effective_bits() > 0 && r->effective_bits() <= 32)) {
    return ToGrpcStatus(absl::InvalidArgumentError("effective_bits: must be in (0, 32]"));
  }
  if (r->relative_ppl_increase() < -1) {
    return ToGrpcStatus(absl::InvalidArgumentError("relative_ppl_increase: must be >= -1"));
  }
  if (r->kind() != v1::PLAN_KIND_EPISODE && r->kind() != v1::PLAN_KIND_CANDIDATE) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        absl::StrCat("kind: ", static_cast<int>(r->kind()), " is not a PlanKind")));
  }
  EvaluationInput in;
  in.kind =
      r->kind() == v1::PLAN_KIND_CANDIDATE ? rl::PlanKind::kCandidate : rl::PlanKind::kEpisode;
  in.episode_id = r->episode_id();
  in.plan_id = r->plan_id();
  in.evaluation.effective_bits = r->effective_bits();
  in.evaluation.calib_nll = r->loss();
  in.evaluation.loss_increase = r->loss_increase();
  in.evaluation.eval_ppl = r->perplexity();
  in.evaluation.eval_nll = std::log(r->perplexity());  // perplexity >= 1, checked above
  in.evaluation.relative_ppl_increase = r->relative_ppl_increase();
  in.evaluation.tokens = r->tokens();
  in.evaluation.cached = r->cached();
  in.reward = r->reward();
  in.lambda = r->lambda();
  in.lambda_after = r->lambda_after();
  in.batch = r->lambda_batch();
  absl::StatusOr<bool> accepted = core_->ReportEvaluation(in);
  if (!accepted.ok()) return ToGrpcStatus(accepted.status());
  reply->set_accepted(*accepted);
  const LearnerStatus status = core_->Status();
  reply->set_lambda(status.lambda);
  reply->set_updates(status.updates);
  return grpc::Status::OK;
}

grpc::Status LearnerService::GetRunStatus(grpc::ServerContext*, const v1::RunStatusRequest*,
                                          v1::RunStatus* out) {
  const LearnerStatus s = core_->Status();
  out->set_curriculum_stage(s.curriculum_stage);
  out->set_curriculum_stages(s.curriculum_stages);
  out->set_target_bits(s.target_bits);
  out->set_updates(s.updates);
  out->set_episodes(s.episodes);
  out->set_policy_version(s.policy_version);
  out->set_best_plan_id(s.best_plan_id);
  out->set_best_plan_effective_bits(s.best_bits);
  out->set_best_plan_perplexity(s.best_perplexity);
  out->set_lambda(s.lambda);
  out->set_connected_actors(watchers_.load());
  out->set_done(s.done);
  out->set_unit_table_complete(s.table_complete);
  return grpc::Status::OK;
}

grpc::Status LearnerService::GetUnitTable(grpc::ServerContext*, const v1::GetUnitTableRequest* req,
                                          v1::UnitTable* out) {
  std::shared_ptr<const plan::UnitTable> table = core_->SharedTable();
  if (table == nullptr) {
    absl::StatusOr<plan::UnitTable> incomplete = core_->Table();  // its message
    if (!incomplete.ok()) return ToGrpcStatus(incomplete.status());
    table = core_->SharedTable();
  }
  if (!req->model_fingerprint().empty() && req->model_fingerprint() != table->fingerprint) {
    return ToGrpcStatus(absl::FailedPreconditionError(
        "model_fingerprint: the run's unit table has another fingerprint"));
  }
  table->ToProto(out);
  return grpc::Status::OK;
}

}  // namespace windquant::learner
