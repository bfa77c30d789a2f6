// The one place that maps the run config onto the Options of the components a binary
// wires (`windquant` through job/, and the three service mains): each function below
// names the keys it reads once, so a component's header says what it reads and
// nothing else needs the whole config::RunConfig. The config is validated before
// (common/config); these only copy.
#ifndef WINDQUANT_JOB_NODE_OPTIONS_H_
#define WINDQUANT_JOB_NODE_OPTIONS_H_

#include "actor/actor_node.h"
#include "common/config/run_config.h"
#include "common/quant/quantization_session.h"
#include "evaluator/evaluator_node.h"

namespace windquant::job {

// model.dir, model.device, calibration.*, quant.*, evaluation.heldout,
// evaluation.context, evaluation.batch; use_cache, load_eval_text, fit and log at
// their defaults.
quant::SessionOptions SessionOptionsFrom(const config::RunConfig& config);

// model.dir, quant.*, service.stages, service.replicas, service.tls.*,
// service.max_message_bytes, service.rpc_deadline_ms, service.evaluation_timeout_ms,
// training.episodes_per_update, training.seed, training.screen_samples, ppo.hidden, env.*.
actor::ActorNodeOptions ActorNodeOptionsFrom(const config::RunConfig& config);

// model.dir, calibration.*, evaluation.selection, evaluation.heldout, evaluation.context,
// evaluation.batch, evaluation.calib_slice_tokens, lagrange.*, service.stages,
// service.replicas, service.tls.*, service.max_message_bytes, service.rpc_deadline_ms,
// output.dir (the evaluator's queue directory).
evaluator::EvaluatorNodeOptions EvaluatorNodeOptionsFrom(const config::RunConfig& config);

}  // namespace windquant::job

#endif  // WINDQUANT_JOB_NODE_OPTIONS_H_
