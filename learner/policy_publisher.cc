#include "learner/policy_publisher.h"

#include <utility>

#include "common/base/status_macros.h"
#include "common/rl/greedy_plan.h"

namespace windquant::learner {
namespace {

absl::Status NoTable() { return absl::FailedPreconditionError("policy: unit table incomplete"); }

}  // namespace

absl::StatusOr<std::unique_ptr<PolicyPublisher>> PolicyPublisher::Create(const Options& options) {
  WQ_ASSIGN_OR_RETURN(std::unique_ptr<rl::PpoLearner> ppo,
                      rl::CreatePpoLearner(options.ppo, options.seed));
  return std::unique_ptr<PolicyPublisher>(new PolicyPublisher(options, std::move(ppo)));
}

absl::Status PolicyPublisher::SetTable(const plan::UnitTable& table) {
  WQ_ASSIGN_OR_RETURN(costs_, rl::UnitCosts::Create(table));
  version_model_of_ = -1;
  fitter_ = options_.screen_samples > 1 ? std::make_unique<rl::RewardModelFitter>(costs_->table())
                                        : nullptr;
  return absl::OkStatus();
}

absl::StatusOr<double> PolicyPublisher::ClonePlan(double target_bits,
                                                  const std::vector<int>& actions,
                                                  double target_prob) {
  if (costs_ == nullptr) return NoTable();
  return rl::WarmStartOnPlan(ppo_->policy(), costs_, options_.env, options_.warm_start_steps,
                             target_bits, actions, target_prob);
}

absl::StatusOr<std::vector<int>> PolicyPublisher::GreedyPlan(double target_bits) const {
  if (costs_ == nullptr) return NoTable();
  return rl::PolicyGreedyPlan(ppo_->policy(), costs_, options_.env, target_bits);
}

absl::StatusOr<rl::PpoStats> PolicyPublisher::Update(const std::vector<rl::Transition>& batch) {
  WQ_ASSIGN_OR_RETURN(rl::PpoStats stats, ppo_->Update(batch));
  if (fitter_ != nullptr) {
    version_model_ = fitter_->Model();
    version_model_of_ = ppo_->version();
  }
  return stats;
}

void PolicyPublisher::AddMeasured(const std::vector<int>& actions,
                                  const rl::PlanEvaluation& evaluation) {
  if (fitter_ != nullptr && !evaluation.cached) fitter_->Add(actions, evaluation.eval_ppl);
}

PublishedPolicy PolicyPublisher::Publish(int64_t known_version, int curriculum_step,
                                         double target_bits, double lambda) {
  PublishedPolicy p;
  p.snapshot = ppo_->Snapshot();
  p.curriculum_stage = curriculum_step;
  p.target_bits = target_bits;
  p.lambda = lambda;
  if (fitter_ != nullptr && p.snapshot.version != known_version) {
    p.reward_model = p.snapshot.version == version_model_of_ ? version_model_ : fitter_->Model();
  }
  return p;
}

}  // namespace windquant::learner
