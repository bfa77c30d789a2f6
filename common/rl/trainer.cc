#include "common/rl/trainer.h"

#include <ATen/ATen.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/progress.h"
#include "common/base/status_macros.h"
#include "common/rl/curriculum.h"
#include "common/rl/environment.h"
#include "common/rl/lagrange.h"
#include "common/rl/policy.h"
#include "common/rl/ppo.h"

namespace windquant::rl {
namespace {

constexpr double kWarmStartLearningRate = 1e-3;
// Plans may sit exactly on the budget; the sums behind EffectiveBits round.
constexpr double kFeasibleBitsSlack = 1e-9;

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

absl::StatusOr<double> BehaviourClone(Policy& policy, const std::vector<Transition>& transitions,
                                      int steps, double lr, double target_prob) {
  if (transitions.empty()) return absl::InvalidArgumentError("behaviour cloning: no transitions");
  const int64_t n = static_cast<int64_t>(transitions.size());
  const int64_t s = policy.options().state_dim, a = policy.options().num_actions;
  try {
    at::Tensor states = at::empty({n, s}, at::kFloat);
    at::Tensor masks = at::empty({n, a}, at::kByte);
    at::Tensor actions = at::empty({n}, at::kLong);
    for (int64_t i = 0; i < n; ++i) {
      const Transition& t = transitions[i];
      if (static_cast<int64_t>(t.state.size()) != s || static_cast<int64_t>(t.mask.size()) != a) {
        return absl::InvalidArgumentError(absl::StrCat("behaviour cloning: transition ", i, " has a wrong shape"));
      }
      std::copy(t.state.begin(), t.state.end(), states.data_ptr<float>() + i * s);
      std::copy(t.mask.begin(), t.mask.end(), masks.data_ptr<uint8_t>() + i * a);
      actions.data_ptr<int64_t>()[i] = t.action;
    }
    const at::Tensor bool_masks = masks.to(at::kBool);
    std::vector<at::Tensor> params = policy.Parameters();
    std::vector<at::Tensor> m1, m2;
    for (const auto& p : params) {
      m1.push_back(at::zeros_like(p));
      m2.push_back(at::zeros_like(p));
    }
    constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8;
    double mean_prob = 0;
    for (int step = 0; step <= steps; ++step) {
      WQ_ASSIGN_OR_RETURN(EvaluateResult r, policy.Evaluate(states, bool_masks, actions));
      mean_prob = r.log_probs.detach().exp().mean().item<double>();
      if (step == steps || mean_prob >= target_prob) break;
      for (auto& p : params) {
        if (p.grad().defined()) p.mutable_grad().zero_();
      }
      at::Tensor loss = -r.log_probs.mean();
      loss.backward();
      at::NoGradGuard no_grad;
      const double c1 = 1.0 - std::pow(kBeta1, step + 1), c2 = 1.0 - std::pow(kBeta2, step + 1);
      for (size_t k = 0; k < params.size(); ++k) {
        const at::Tensor g = params[k].grad();
        if (!g.defined()) continue;
        m1[k].mul_(kBeta1).add_(g, 1.0 - kBeta1);
        m2[k].mul_(kBeta2).addcmul_(g, g, 1.0 - kBeta2);
        params[k].sub_((m1[k] / c1) / ((m2[k] / c2).sqrt() + kEps) * lr);
      }
    }
    for (auto& p : params) {
      if (p.grad().defined()) p.mutable_grad().zero_();
    }
    return mean_prob;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("behaviour cloning: ", e.what_without_backtrace()));
  }
}

struct Trainer::Impl {
  const quant::UnitTable* table = nullptr;
  std::shared_ptr<const UnitCosts> costs;
  std::unique_ptr<CachingPlanEvaluator> evaluator;
  TrainerOptions options;
  const config::RunConfig* config = nullptr;
  std::unique_ptr<PpoLearner> learner;
  std::unique_ptr<BatchLambda> lagrange;  // rewards use batch_lambda()
  std::unique_ptr<Curriculum> curriculum;
  RunCheckpoint state;  // the run's progress (the same fields a checkpoint holds)

  void Log(const std::string& line) const {
    if (options.log) options.log(line);
  }
  double final_target() const { return config->curriculum.target_bits.back(); }

  // Updates the best plans with a measured candidate (ConsiderCandidate).
  void Consider(const std::vector<int>& plan, const PlanEvaluation& e, const std::string& source,
                double target, int64_t policy_version) {
    CandidatePlan cand{plan, e, target, source, state.update, policy_version};
    ConsiderCandidate(cand, final_target(), &state.best, &state.best_stage);
  }

  absl::Status Checkpoint() {
    if (options.checkpoint_dir.empty()) return absl::OkStatus();
    state.stage = curriculum->stage();
    state.updates_in_stage = curriculum->updates_in_stage();
    state.curriculum_finished = curriculum->finished();
    state.lambda = lagrange->lambda();
    WQ_ASSIGN_OR_RETURN(state.learner_state, learner->SaveState());
    WQ_RETURN_IF_ERROR(WriteRunCheckpoint(options.checkpoint_dir, state));
    Log(absl::StrFormat("checkpoint: update %d written to %s", state.update,
                        RunCheckpointPath(options.checkpoint_dir)));
    return absl::OkStatus();
  }

  absl::StatusOr<CandidatePlan> Reference(double target) {
    CandidatePlan c;
    if (!options.reference_plan) return c;
    WQ_ASSIGN_OR_RETURN(c.actions, options.reference_plan(target));
    WQ_ASSIGN_OR_RETURN(c.evaluation, evaluator->Evaluate(c.actions));
    c.target_bits = target;
    c.source = "lagrange";
    c.update = state.update;
    return c;
  }

  // Reference candidate + warm start at the beginning of a stage.
  absl::Status StartStage() {
    const double target = curriculum->target_bits();
    state.best_stage = CandidatePlan{};
    state.stage_reference_ppl = 0;
    Log(absl::StrFormat("curriculum: stage %d/%d, target %.3f bits", curriculum->stage() + 1,
                        curriculum->num_stages(), target));
    if (options.reference_plan) {
      WQ_ASSIGN_OR_RETURN(CandidatePlan ref, Reference(target));
      Consider(ref.actions, ref.evaluation, "lagrange", target, -1);
      state.stage_reference_ppl = ref.evaluation.eval_ppl;
      Log(absl::StrFormat("reference (lagrange) at %.3f: %.4f bits, PPL %.4f", target,
                          ref.evaluation.effective_bits, ref.evaluation.eval_ppl));
      if (config->training.warm_start == "lagrange") {
        WQ_ASSIGN_OR_RETURN(double prob,
                            WarmStartOnPlan(learner->policy(), costs, *config, target, ref.actions));
        Log(absl::StrFormat("warm start: behaviour-cloned the lagrange plan, mean p(action) %.3f", prob));
      }
    } else if (config->training.warm_start == "lagrange") {
      return absl::InvalidArgumentError("training.warm_start: lagrange needs a reference plan");
    }
    state.warm_started_stage = curriculum->stage();
    return absl::OkStatus();
  }

  absl::StatusOr<UpdateRecord> Update(std::chrono::steady_clock::time_point t0) {
    const double target = curriculum->target_bits();
    const EnvOptions env_options = MakeEnvOptions(config->env, target);
    const int n = config->training.episodes_per_update;
    BatchedEnvironment env(costs, env_options, n);
    at::Generator gen = MakeGenerator(SplitMix64(state.rng_seed ^ SplitMix64(state.update + 1)));
    WQ_ASSIGN_OR_RETURN(Rollout ro, env.Run(learner->policy(), gen, false, state.next_episode_id));
    state.next_episode_id += n;
    const double lambda_now = lagrange->batch_lambda();
    const int64_t version = learner->version();
    UpdateRecord rec;
    std::vector<double> ds;
    for (int i = 0; i < n; ++i) {
      WQ_ASSIGN_OR_RETURN(PlanEvaluation e, evaluator->Evaluate(ro.plans[i]));
      const EpisodeReward r = EpisodeEndReward(config->env, e, lambda_now, target);
      ro.episodes[i].back().reward += static_cast<float>(r.total);
      rec.mean_reward += (ro.step_return[i] + r.total) / n;
      rec.mean_ppl += e.eval_ppl / n;
      rec.mean_bits += e.effective_bits / n;
      ds.push_back(e.relative_ppl_increase);
      Consider(ro.plans[i], e, "rl", target, version);
    }
    for (double d : ds) lagrange->Observe(d);
    lagrange->EndBatch();
    std::vector<Transition> batch;
    for (auto& ep : ro.episodes) {
      for (auto& t : ep) batch.push_back(std::move(t));
    }
    WQ_ASSIGN_OR_RETURN(PpoStats stats, learner->Update(batch));
    // The greedy plan of the updated policy is a candidate too.
    WQ_ASSIGN_OR_RETURN(std::vector<int> greedy,
                        PolicyGreedyPlan(learner->policy(), costs, *config, target));
    WQ_ASSIGN_OR_RETURN(PlanEvaluation ge, evaluator->Evaluate(greedy));
    ++state.update;
    Consider(greedy, ge, "rl-greedy", target, learner->version());
    rec.update = state.update;
    rec.stage = curriculum->stage();
    rec.target_bits = target;
    rec.best_ppl = state.best.actions.empty() ? 0 : state.best.evaluation.eval_ppl;
    rec.best_bits = state.best.actions.empty() ? 0 : state.best.evaluation.effective_bits;
    rec.lambda = lagrange->lambda();
    rec.policy_loss = stats.policy_loss;
    rec.value_loss = stats.value_loss;
    rec.entropy = stats.entropy;
    rec.evaluations = evaluator->misses();
    rec.seconds = Seconds(t0);
    return rec;
  }
};

Trainer::Trainer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Trainer::~Trainer() = default;

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const quant::UnitTable& table,
                                                         PlanEvaluator* evaluator,
                                                         TrainerOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->table = &table;
  impl->options = std::move(options);
  impl->config = &impl->options.config;
  const config::RunConfig& c = *impl->config;
  if (c.curriculum.target_bits.empty()) {
    return absl::InvalidArgumentError("curriculum.target_bits: must not be empty");
  }
  WQ_ASSIGN_OR_RETURN(impl->costs, UnitCosts::Create(table));
  impl->evaluator = std::make_unique<CachingPlanEvaluator>(evaluator);
  WQ_ASSIGN_OR_RETURN(impl->learner, CreatePpoLearner(c));
  impl->lagrange = std::make_unique<BatchLambda>(c.lagrange);
  impl->curriculum = std::make_unique<Curriculum>(c.curriculum);
  impl->state.fingerprint = impl->options.fingerprint;
  impl->state.rng_seed = c.training.seed;
  impl->state.lambda = c.lagrange.lambda_init;
  return std::unique_ptr<Trainer>(new Trainer(std::move(impl)));
}

absl::StatusOr<TrainerResult> Trainer::Run() {
  Impl& m = *impl_;
  const auto t0 = std::chrono::steady_clock::now();
  TrainerResult result;
  if (m.options.resume && !m.options.checkpoint_dir.empty()) {
    absl::StatusOr<RunCheckpoint> ck = ReadRunCheckpoint(m.options.checkpoint_dir, m.options.fingerprint);
    if (ck.ok()) {
      WQ_RETURN_IF_ERROR(m.learner->LoadState(ck->learner_state));
      m.state = *std::move(ck);
      m.lagrange->Restore(m.state.lambda);
      m.curriculum->Restore(m.state.stage, m.state.updates_in_stage, m.state.curriculum_finished);
      result.resumed_from_update = m.state.update;
      m.Log(absl::StrFormat("resume: continuing from update %d (stage %d, lambda %.4f)", m.state.update,
                            m.state.stage + 1, m.state.lambda));
    } else if (absl::IsNotFound(ck.status())) {
      m.Log(absl::StrCat("resume: ", ck.status().message(), "; starting fresh"));
    } else {
      return ck.status();
    }
  }
  base::Progress progress("quantize", static_cast<double>(m.state.update + m.curriculum->MaxRemainingUpdates()),
                          "updates");
  int64_t updates_here = 0;
  while (!m.curriculum->finished()) {
    if (m.state.warm_started_stage < m.curriculum->stage()) WQ_RETURN_IF_ERROR(m.StartStage());
    WQ_ASSIGN_OR_RETURN(UpdateRecord rec, m.Update(t0));
    m.state.curve.push_back(rec);
    ++updates_here;
    const int stage_before = m.curriculum->stage();
    std::string reason;
    const double stage_best = m.state.best_stage.actions.empty()
                                  ? std::numeric_limits<double>::infinity()
                                  : m.state.best_stage.evaluation.eval_ppl;
    if (m.curriculum->OnUpdate(stage_best, m.state.stage_reference_ppl, &reason)) {
      m.state.stages.push_back({stage_before, rec.target_bits, rec.update, reason});
      m.Log(absl::StrFormat("curriculum: stage %d (target %.3f) %s after update %d: %s", stage_before + 1,
                            rec.target_bits, m.curriculum->finished() ? "finished" : "advanced",
                            rec.update, reason));
    }
    const std::string line = absl::StrFormat(
        "stage %d/%d @%.2f | episodes %d | reward %.4f | PPL %.3f @ %.3f bits | best PPL %.4f @ %.4f | lambda %.3f",
        rec.stage + 1, m.curriculum->num_stages(), rec.target_bits, m.state.next_episode_id, rec.mean_reward,
        rec.mean_ppl, rec.mean_bits, rec.best_ppl, rec.best_bits, rec.lambda);
    if (m.options.show_progress) progress.Update(static_cast<double>(m.state.update), line);
    m.Log(absl::StrCat("update ", rec.update, ": ", line));
    const bool stop = m.options.stop_after_updates > 0 && updates_here >= m.options.stop_after_updates;
    if (m.state.update % m.config->training.checkpoint_every_updates == 0 || m.curriculum->finished() || stop) {
      WQ_RETURN_IF_ERROR(m.Checkpoint());
    }
    if (stop) {
      result.stopped_early = true;
      break;
    }
  }
  if (m.options.show_progress) progress.Finish();
  if (m.options.reference_plan) {
    WQ_ASSIGN_OR_RETURN(result.reference, m.Reference(m.final_target()));
    if (!result.stopped_early) m.Consider(result.reference.actions, result.reference.evaluation, "lagrange",
                                          m.final_target(), -1);
  }
  result.best = m.state.best;
  result.curve = m.state.curve;
  result.stages = m.state.stages;
  result.lambda = m.lagrange->lambda();
  result.updates = m.state.update;
  result.evaluations = m.evaluator->misses();
  result.cache_hits = m.evaluator->hits();
  result.seconds = Seconds(t0);
  return result;
}

absl::StatusOr<double> WarmStartOnPlan(Policy& policy, std::shared_ptr<const UnitCosts> costs,
                                       const config::RunConfig& config, double target_bits,
                                       const std::vector<int>& plan) {
  WQ_ASSIGN_OR_RETURN(std::vector<Transition> demo,
                      ReplayPlan(std::move(costs), MakeEnvOptions(config.env, target_bits), plan));
  return BehaviourClone(policy, demo, config.training.warm_start_steps, kWarmStartLearningRate,
                        kWarmStartTargetProb);
}

absl::StatusOr<std::vector<int>> PolicyGreedyPlan(const Policy& policy,
                                                  std::shared_ptr<const UnitCosts> costs,
                                                  const config::RunConfig& config,
                                                  double target_bits) {
  BatchedEnvironment env(std::move(costs), MakeEnvOptions(config.env, target_bits), 1);
  // Deterministic: the generator is not drawn from.
  at::Generator gen = MakeGenerator(0);
  WQ_ASSIGN_OR_RETURN(Rollout r, env.Run(policy, gen, /*deterministic=*/true, -1));
  return std::move(r.plans[0]);
}

bool ConsiderCandidate(const CandidatePlan& candidate, double final_target, CandidatePlan* best,
                       CandidatePlan* best_stage) {
  const PlanEvaluation& e = candidate.evaluation;
  if (!std::isfinite(e.eval_ppl)) return false;
  auto better = [&](const CandidatePlan& c) {
    return c.actions.empty() || e.eval_ppl < c.evaluation.eval_ppl;
  };
  bool changed = false;
  if (e.effective_bits <= final_target + kFeasibleBitsSlack && better(*best)) {
    *best = candidate;
    best->target_bits = final_target;
    changed = true;
  }
  if (best_stage != nullptr && candidate.source != "lagrange" &&
      e.effective_bits <= candidate.target_bits + kFeasibleBitsSlack && better(*best_stage)) {
    *best_stage = candidate;
  }
  return changed;
}

absl::StatusOr<std::unique_ptr<PpoLearner>> CreatePpoLearner(const config::RunConfig& c) {
  PolicyOptions po;
  po.state_dim = kStateDim;
  po.num_actions = quant::kNumActions;
  po.hidden_sizes.assign(c.ppo.hidden.begin(), c.ppo.hidden.end());
  po.init_seed = c.training.seed;
  PpoConfig p;
  p.clip_ratio = c.ppo.clip_ratio;
  p.gamma = c.ppo.gamma;
  p.gae_lambda = c.ppo.gae_lambda;
  p.value_coef = c.ppo.value_coef;
  p.entropy_coef = c.ppo.entropy_coef;
  p.learning_rate = c.ppo.learning_rate;
  p.max_grad_norm = c.ppo.max_grad_norm;
  p.epochs = c.ppo.epochs;
  p.minibatch_size = c.ppo.minibatch_size;
  p.max_policy_lag = c.ppo.max_policy_lag;
  p.seed = c.training.seed;
  return PpoLearner::Create(po, p);
}

}  // namespace windquant::rl
