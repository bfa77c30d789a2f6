#include "job/in_process_job.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "actor/actor_node.h"
#include "common/base/progress.h"
#include "common/base/split_mix64.h"
#include "common/base/status_macros.h"
#include "common/metrics/registry.h"
#include "common/net/channel.h"
#include "common/rl/policy.h"
#include "evaluator/evaluator_node.h"
#include "job/learner_options.h"
#include "job/node_options.h"
#include "learner/learner_node.h"

namespace windquant::job {
namespace {

constexpr char kLoopback[] = "127.0.0.1:0";

// Stops every node's outgoing calls before any server goes down (actors and
// the evaluator call each other: a call over an in-process channel into a
// server already shut down must never happen), then drains the servers.
struct Nodes {
  std::unique_ptr<learner::LearnerNode> learner;
  std::vector<std::unique_ptr<actor::ActorNode>> actors;
  std::unique_ptr<evaluator::EvaluatorNode> evaluator;
  ~Nodes() {
    for (auto& a : actors) a->StopClients();
    if (evaluator != nullptr) evaluator->StopClients();
    if (learner != nullptr) learner->StopClients();
    for (auto& a : actors) a->Stop();
    if (evaluator != nullptr) evaluator->Stop();
    if (learner != nullptr) learner->Stop();
  }
};

absl::Status SameUnits(const plan::UnitTable& a, const plan::UnitTable& b) {
  if (a.units.size() != b.units.size()) {
    return absl::FailedPreconditionError(absl::StrCat("quantize: the actors' unit table has ",
                                                      a.units.size(), " units, the session's ",
                                                      b.units.size()));
  }
  for (size_t i = 0; i < a.units.size(); ++i) {
    const plan::Unit& x = a.units[i];
    const plan::Unit& y = b.units[i];
    if (x.layer != y.layer || x.matrix != y.matrix || x.col_begin != y.col_begin ||
        x.rows != y.rows || x.cols != y.cols || x.bits != y.bits) {
      return absl::FailedPreconditionError(absl::StrCat(
          "quantize: unit ", i, " of the actors' unit table differs from the session's"));
    }
  }
  return absl::OkStatus();
}

// Until the learner is done or stopped; progress in updates (of the
// curriculum's most) run by this process. DEADLINE_EXCEEDED after
// `stall_timeout` without progress.
absl::Status WaitForLearner(learner::LearnerCore& core, const config::RunConfig& config,
                            absl::Duration stall_timeout) {
  learner::LearnerStatus last = core.Status();
  const int64_t first_update = last.updates;
  const int64_t most = static_cast<int64_t>(config.curriculum.max_updates) *
                       static_cast<int64_t>(config.curriculum.target_bits.size());
  base::Progress progress(
      "quantize", static_cast<double>(std::max<int64_t>(1, most - first_update)), "updates");
  absl::Time moved = absl::Now();
  while (true) {
    const learner::LearnerStatus st = core.Status();
    if (st.done || st.stopped) break;
    if (st.updates != last.updates || st.episodes != last.episodes ||
        st.evaluations != last.evaluations || st.table_complete != last.table_complete) {
      moved = absl::Now();
      const std::string best = st.best_perplexity > 0 ? absl::StrFormat("%.4f", st.best_perplexity)
                                                      : std::string("none yet at the final target");
      progress.Update(static_cast<double>(st.updates - first_update),
                      absl::StrFormat("stage %d/%d, %d episodes, best PPL %s, lambda %.4f",
                                      st.curriculum_stage + 1, st.curriculum_stages, st.episodes,
                                      best, st.lambda));
      last = st;
    } else if (absl::Now() - moved > stall_timeout) {
      return absl::DeadlineExceededError(absl::StrCat(
          "quantize: the job made no progress for ", absl::FormatDuration(stall_timeout),
          " (updates ", st.updates, ", episodes ", st.episodes, ", unit table ",
          st.table_complete ? "complete" : "incomplete", "); see the log above"));
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  progress.Finish();
  return absl::OkStatus();
}

// Replica 0 of every stage: its fits and statistics.
void CollectActorFits(const Nodes& nodes, const config::ServiceConfig& svc,
                      std::shared_ptr<const plan::UnitTable> table, ActorFits* out) {
  *out = ActorFits();
  out->table = std::move(table);
  for (int s = 0; s < svc.stages; ++s) {
    const stage::StageWorker& w = nodes.actors[static_cast<size_t>(s * svc.replicas)]->worker();
    out->stages.push_back(w.stage());
    out->stats.push_back(w.activation_stats());
  }
}

}  // namespace

absl::StatusOr<std::pair<quant::StageFits, quant::ActivationStats>> MergeActorFits(
    const ActorFits& fits) {
  if (fits.table == nullptr) return absl::FailedPreconditionError("no merged unit table");
  std::vector<quant::StageFits::UnitParams> params;
  params.reserve(fits.table->units.size());
  quant::ActivationStats stats;
  for (size_t s = 0; s < fits.stages.size(); ++s) {
    if (fits.stages[s] == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("stage ", s, " was never fitted"));
    }
    const quant::StageFits& f = fits.stages[s]->fits();
    const quant::ActivationStats& st = fits.stats[s];
    if (st.layers.empty() || st.first_layer != f.first_layer() ||
        static_cast<int64_t>(st.layers.size()) != f.end_layer() - f.first_layer()) {
      return absl::FailedPreconditionError(
          absl::StrCat("stage ", s, " has no activation statistics of its fits"));
    }
    if (s == 0) stats.first_layer = st.first_layer;
    stats.layers.insert(stats.layers.end(), st.layers.begin(), st.layers.end());
    for (size_t i = 0; i < f.table().units.size(); ++i) params.push_back(f.params(i));
  }
  WQ_ASSIGN_OR_RETURN(quant::StageFits merged,
                      quant::StageFits::Create(*fits.table, std::move(params)));
  // Error compensation: the stages' factors, shared (the session does not build its own).
  std::vector<std::shared_ptr<const quant::GptqFactors>> factors;
  for (const auto& st : fits.stages) factors.push_back(st->fits().shared_compensation());
  absl::StatusOr<quant::GptqFactors> all = quant::GptqFactors::Concat(factors);
  if (all.ok())
    merged.set_compensation(std::make_shared<const quant::GptqFactors>(*std::move(all)));
  return std::make_pair(std::move(merged), std::move(stats));
}

absl::Status ClearJobState(const config::RunConfig& config) {
  const std::filesystem::path dir(config.output.dir);
  std::error_code ec;
  for (const char* name : {"checkpoint", "unit_table.pb", "unit_table.pb.sha256", "plans.jsonl",
                           "status.txt", "evaluator-queue", "held-episodes", "rl_start.json"}) {
    std::filesystem::remove_all(dir / name, ec);
    if (ec) {
      return absl::InternalError(absl::StrCat((dir / name).string(), ": ", ec.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<rl::RunResult> RunInProcessJob(const config::RunConfig& config,
                                              const InProcessJobOptions& options) {
  const config::ServiceConfig& svc = config.service;
  if (svc.hidden_states == "nccl") {
    return absl::FailedPreconditionError(
        "service.hidden_states: nccl, but this job runs the evaluator and every stage in one "
        "process (nccl links GPUs of the distributed service; use grpc)");
  }
  auto log = options.log ? options.log : [](const std::string&) {};
  metrics::Registry registry;  // the job's RPC and service metrics (not served)
  WQ_ASSIGN_OR_RETURN(net::ChannelOptions co, net::ChannelOptionsFromConfig(svc, "in-process"));
  co.registry = &registry;
  Nodes nodes;
  // Without write_final the final result is the caller's (quantize's report).
  learner::LearnerNodeOptions lo = LearnerNodeOptionsFrom(config, options.write_final);
  lo.publisher = options.publisher;
  lo.expected_table_fingerprint = options.expected_fingerprint;
  WQ_ASSIGN_OR_RETURN(nodes.learner,
                      learner::LearnerNode::Create(std::move(lo), kLoopback, &registry, log));
  nodes.learner->core().set_stop_after_updates(options.stop_after_updates);
  WQ_ASSIGN_OR_RETURN(auto learner_channel, net::MakeInProcessChannel(nodes.learner->server(), co));
  std::vector<std::shared_ptr<grpc::Channel>> actor_channels;
  std::vector<std::string> actor_names;
  const actor::ActorNodeOptions actor_options = ActorNodeOptionsFrom(config);
  for (int s = 0; s < svc.stages; ++s) {  // stage-major, as service.actor_addresses
    for (int r = 0; r < svc.replicas; ++r) {
      WQ_ASSIGN_OR_RETURN(auto node,
                          actor::ActorNode::Create(actor_options, s, r, kLoopback, &registry, log,
                                                   learner_channel, options.shared_weights));
      WQ_ASSIGN_OR_RETURN(auto channel, net::MakeInProcessChannel(node->server(), co));
      actor_channels.push_back(std::move(channel));
      actor_names.push_back(absl::StrCat("in-process ", node->identity().actor_id));
      nodes.actors.push_back(std::move(node));
    }
  }
  evaluator::EvaluatorNodeOptions eo = EvaluatorNodeOptionsFrom(config);
  // Every stage is in this process: its hidden states go over in-process pipes beside
  // the gRPC calls, as tensors on the stages' device (no serialisation, no host copy).
  eo.hidden_states = transport::PipeKind::kInProcess;
  WQ_ASSIGN_OR_RETURN(nodes.evaluator, evaluator::EvaluatorNode::Create(
                                           eo, kLoopback, &registry, log, learner_channel,
                                           actor_channels, actor_names, options.shared_weights));
  WQ_ASSIGN_OR_RETURN(auto evaluator_channel,
                      net::MakeInProcessChannel(nodes.evaluator->server(), co));
  log(absl::StrCat("job: learner on ", nodes.learner->server().address(), ", evaluator on ",
                   nodes.evaluator->server().address(), ", ", nodes.actors.size(), " actors (",
                   svc.stages, " stages x ", svc.replicas,
                   " replicas), in-process channels and hidden-states pipes"));
  nodes.learner->Connect(evaluator_channel);
  for (size_t i = 0; i < nodes.actors.size(); ++i) {
    const uint64_t mixed = base::SplitMix64(options.incarnation_seed ^ base::SplitMix64(i + 1));
    WQ_RETURN_IF_ERROR(nodes.actors[i]->StartRollouts(static_cast<uint32_t>(mixed)));
  }
  WQ_RETURN_IF_ERROR(nodes.evaluator->Start());

  learner::LearnerCore& core = nodes.learner->core();
  WQ_RETURN_IF_ERROR(WaitForLearner(core, config, options.stall_timeout));
  // The finisher measures plans through the evaluator: every node serves until it is done.
  if (options.write_final && core.Status().done) nodes.learner->WaitForFinal();
  std::shared_ptr<const plan::UnitTable> table = core.SharedTable();
  if (options.expected_table != nullptr) {
    if (table == nullptr)
      return absl::InternalError("quantize: the job ended without a unit table");
    WQ_RETURN_IF_ERROR(SameUnits(*table, *options.expected_table));
  }
  absl::StatusOr<rl::RunResult> result = core.Result();
  if (result.ok() && !result->stopped_early && options.actor_fits != nullptr) {
    CollectActorFits(nodes, svc, table, options.actor_fits);
  }
  return result;
}

}  // namespace windquant::job
