#include "job/node_options.h"

#include "common/rl/run_policy.h"

namespace windquant::job {

quant::SessionOptions SessionOptionsFrom(const config::RunConfig& config) {
  quant::SessionOptions o;
  o.model_dir = config.model.dir;
  o.compute = config.model.compute;
  o.calibration = config.calibration;
  o.units = config.quant;
  o.cache_dir = config.quant.cache_dir;
  o.compensation = config.quant.compensation;
  o.heldout = config.evaluation.heldout;
  o.context = config.evaluation.context;
  o.batch = config.evaluation.batch;
  return o;
}

actor::ActorNodeOptions ActorNodeOptionsFrom(const config::RunConfig& config) {
  actor::ActorNodeOptions o;
  o.worker.model_dir = config.model.dir;
  o.worker.compute = config.model.compute;
  o.worker.units = config.quant;
  o.worker.cache_dir = config.quant.cache_dir;
  o.worker.compensation = config.quant.compensation;
  o.stages = config.service.stages;
  o.replicas = config.service.replicas;
  o.peer = config.service;
  o.evaluation_timeout_ms = config.service.evaluation_timeout_ms;
  o.episodes_per_update = config.training.episodes_per_update;
  o.rollouts.policy = rl::RunPolicyOptions(config.ppo, config.training.seed);
  o.rollouts.env = config.env;
  o.rollouts.seed = config.training.seed;
  o.rollouts.screen_samples = config::ScreenSamplesPerEpisode(config.training);
  return o;
}

evaluator::EvaluatorNodeOptions EvaluatorNodeOptionsFrom(const config::RunConfig& config) {
  evaluator::EvaluatorNodeOptions o;
  o.model_dir = config.model.dir;
  o.compute = config.model.compute;
  o.calibration = config.calibration;
  o.selection = config.evaluation.selection;
  o.heldout = config.evaluation.heldout;
  o.context = config.evaluation.context;
  o.batch = config.evaluation.batch;
  o.calib_slice_tokens = config.evaluation.calib_slice_tokens;
  o.env = config.env;
  o.lagrange = config.lagrange;
  o.stages = config.service.stages;
  o.replicas = config.service.replicas;
  o.peer = config.service;
  // Checked when the config loaded (grpc or nccl).
  o.hidden_states =
      transport::ParseHiddenStates("service.hidden_states", config.service.hidden_states)
          .value_or(transport::PipeKind::kGrpc);
  o.queue_dir = config.output.dir + "/evaluator-queue";
  return o;
}

}  // namespace windquant::job
