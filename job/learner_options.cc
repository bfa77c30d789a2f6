#include "job/learner_options.h"

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/status_macros.h"
#include "common/config/run_digest.h"
#include "common/search/baselines.h"
#include "job/final_searches.h"
#include "learner/run_finisher.h"

namespace windquant::job {
namespace {

// The report's search rows (and in the quality-target mode its bisection
// rows), measured through the evaluator (options->measure); when they fail,
// the report says why and keeps RL's row.
void AddFinalSearches(const config::RunConfig& c, const rl::RunResult& result,
                      const plan::UnitTable& table, learner::FinishOptions* options) {
  if (!options->measure || result.best.actions.empty()) {
    options->searches_note = "searches not run: no evaluator to measure plans or no RL plan";
    return;
  }
  // In the quality-target mode at RL's plan's bits (as quantize_job.cc's
  // CompareAtBits), else at the final target.
  const double bits = c.lagrange.quality_target() ? result.best.evaluation.effective_bits
                                                  : c.curriculum.target_bits.back();
  absl::StatusOr<std::vector<learner::FinalSearch>> searches =
      RunFinalSearches(table, bits, c.training.seed, result.real_evaluations,
                       c.training.screen_samples, options->measure, options->log);
  if (!searches.ok()) {
    options->searches_note = absl::StrCat("searches not run: ", searches.status().message());
    if (options->log) options->log(absl::StrCat("finish: ", options->searches_note));
    return;
  }
  options->searches = *std::move(searches);
  if (!c.lagrange.quality_target()) return;
  absl::StatusOr<std::vector<learner::FinalBisection>> bisections = RunFinalBisections(
      table, c.curriculum.target_bits.back(), c.lagrange.max_ppl_increase(), c.training.seed,
      result.real_evaluations, c.training.screen_samples, options->measure, options->log);
  if (bisections.ok()) {
    options->bisections = *std::move(bisections);
  } else {
    options->searches_note = absl::StrCat("bisections not run: ", bisections.status().message());
    if (options->log) options->log(absl::StrCat("finish: ", options->searches_note));
  }
}

// The report's uniform anchors (quantize's), measured through the evaluator by
// WriteFinalArtifacts; none without an evaluator.
void AddUniformAnchors(const plan::UnitTable& table, learner::FinishOptions* options) {
  if (!options->measure) return;
  absl::StatusOr<std::vector<std::pair<std::string, plan::Plan>>> anchors =
      search::UniformAnchors(table);
  if (!anchors.ok()) {
    if (options->log) {
      options->log(absl::StrCat("finish: no uniform anchors: ", anchors.status().message()));
    }
    return;
  }
  for (auto& [name, plan] : *anchors) options->anchors.push_back({name, std::move(plan.actions)});
}

// The quality-target mode's start search (learner::StartSearch): the
// Lagrangian bisection to epsilon under the cap, each probe measured through
// the evaluator, whose d is against its own FP perplexity (the bisection is
// given ratios to FP: FP's perplexity 1, a plan's 1 + d).
absl::StatusOr<learner::RunStart> SearchStart(const config::RunConfig& c,
                                              const plan::UnitTable& table,
                                              const learner::PlanMeasurer& measure,
                                              const base::LogSink& log) {
  const double cap = c.curriculum.target_bits.back();
  WQ_ASSIGN_OR_RETURN(
      const BisectionResult r,
      LagrangeBisect(table, cap, c.lagrange.max_ppl_increase(), kStartBisectEvaluations, 1.0,
                     SelectionRatio(table, measure, log, "learner: start search"), nullptr));
  if (log) {
    log(absl::StrFormat(
        "learner: start search: the Lagrangian bisection to epsilon %g: %.4f bits, d %.4f (%s), "
        "%d plans measured",
        c.lagrange.max_ppl_increase(), r.bits, r.degradation,
        r.within_epsilon ? "within" : "NOT within: RL starts at the cap", r.evaluations));
  }
  return RunStartOf(r, cap);
}

}  // namespace

learner::RunStart RunStartOf(const BisectionResult& b, double cap_bits) {
  learner::RunStart s;
  s.cap_bits = b.within_epsilon ? b.target_bits : cap_bits;
  s.bits = b.bits;
  s.degradation = b.degradation;
  s.within_epsilon = b.within_epsilon;
  s.evaluations = b.evaluations;
  return s;
}

int64_t SelectionTokens(const config::RunConfig& c) {
  const std::vector<int64_t>& r = c.evaluation.selection.tokens;
  if (c.evaluation.selection.windows > 0) {
    return c.evaluation.selection.windows * (c.evaluation.context - 1);
  }
  if (r.size() == 2 && r[1] > r[0]) return r[1] - r[0];
  return int64_t{c.evaluation.context} * std::max(1, c.evaluation.batch);
}

int64_t EvaluationTokens(const config::RunConfig& c) {
  return SelectionTokens(c) + std::max<int64_t>(0, c.evaluation.calib_slice_tokens);
}

absl::Duration HeldOutAllowance(const config::RunConfig& c) {
  constexpr int64_t kUnknownPasses = 64;
  const base::TextRange& h = c.evaluation.heldout;
  const int64_t per_pass = std::max<int64_t>(1, EvaluationTokens(c));
  int64_t passes = kUnknownPasses;
  if (h.tokens.size() == 2 && h.tokens[1] > h.tokens[0]) {
    passes = (h.tokens[1] - h.tokens[0] + per_pass - 1) / per_pass;
  } else {
    std::error_code ec;
    const uintmax_t bytes = std::filesystem::file_size(h.text, ec);
    if (!ec) passes = (static_cast<int64_t>(bytes) + per_pass) / per_pass;  // +1 token: BOS
  }
  return absl::Milliseconds(c.service.evaluation_timeout_ms) * std::max<int64_t>(1, passes);
}

learner::PolicyPublisher::Options PolicyPublisherOptionsFrom(const config::RunConfig& c) {
  learner::PolicyPublisher::Options o;
  o.ppo = c.ppo;
  o.env = c.env;
  o.seed = c.training.seed;
  o.warm_start_steps = c.training.warm_start_steps;
  o.screen_samples = c.training.screen_samples;
  return o;
}

learner::LearnerCore::Options LearnerCoreOptionsFrom(const config::RunConfig& c) {
  learner::LearnerCore::Options o;
  o.dir = c.output.dir;
  o.stages = c.service.stages;
  o.replicas = c.service.replicas;
  o.chunk_size = c.quant.chunk_size;
  o.curriculum = c.curriculum;
  o.lagrange = c.lagrange;
  o.policy = PolicyPublisherOptionsFrom(c);
  o.episodes_per_update = c.training.episodes_per_update;
  o.warm_start = c.training.warm_start == "lagrange";
  o.self_imitation = c.training.self_imitation;
  o.self_imitation_prob = c.training.self_imitation_prob;
  o.checkpoint_every_updates = c.training.checkpoint_every_updates;
  o.evaluation_allowance = absl::Milliseconds(c.service.evaluation_timeout_ms);
  o.run_config_text = config::RunDefiningText(c);
  return o;
}

learner::RunPublisherOptions RunPublisherOptionsFrom(const config::RunConfig& c) {
  learner::RunPublisherOptions o;
  o.store = c.output.store;
  o.dir = c.output.dir;
  o.run_id = c.output.run_id;
  o.model_dir = c.model.dir;
  o.config_digest = config::RunConfigDigest(c);
  o.target_bits = c.curriculum.target_bits.empty() ? 0 : c.curriculum.target_bits.back();
  return o;
}

learner::LearnerNodeOptions LearnerNodeOptionsFrom(const config::RunConfig& c, bool write_final) {
  learner::LearnerNodeOptions o;
  o.core = LearnerCoreOptionsFrom(c);
  o.service = c.service;
  o.rpc_deadline = absl::Milliseconds(c.service.rpc_deadline_ms);
  o.heldout_allowance = HeldOutAllowance(c);
  if (write_final) {
    o.write_final = [c](const rl::RunResult& result, const plan::UnitTable& table,
                        const std::string& run_id, const std::string& dir,
                        learner::FinishOptions options) {
      options.export_options.model_dir = c.model.dir;
      options.model_dir = c.model.dir;
      options.run_defining_text = config::RunDefiningText(c);
      options.config_digest = config::VariantDigest(c);
      options.target_bits = c.curriculum.target_bits.back();
      options.selection = c.evaluation.selection;
      options.context = c.evaluation.context;
      options.batch = c.evaluation.batch;
      options.export_model = c.output.export_model;
      options.max_ppl_increase = c.lagrange.max_ppl_increase();
      options.records_dir = c.output.dir;
      options.costs.rl_tokens = EvaluationTokens(c);
      options.costs.search_tokens = SelectionTokens(c);
      options.costs.rl_screen = c.training.screen_samples;
      AddFinalSearches(c, result, table, &options);
      AddUniformAnchors(table, &options);
      return learner::WriteFinalArtifacts(result, table, run_id, dir, options);
    };
    if (c.lagrange.quality_target()) {
      o.core.await_start = true;
      o.start_search = [c](const plan::UnitTable& table, const learner::PlanMeasurer& measure,
                           const base::LogSink& log) {
        return SearchStart(c, table, measure, log);
      };
    }
  }
  return o;
}

}  // namespace windquant::job
