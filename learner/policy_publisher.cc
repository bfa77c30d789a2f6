#include "learner/policy_publisher.h"

#include <utility>

#include "common/base/status_macros.h"

namespace windquant::learner {
namespace {

absl::Status NoTable() { return absl::FailedPreconditionError("policy: unit table incomplete"); }

}  // namespace

absl::StatusOr<std::unique_ptr<PolicyPublisher>> PolicyPublisher::Create(
    const config::RunConfig& config) {
  WQ_ASSIGN_OR_RETURN(std::unique_ptr<rl::PpoLearner> ppo, rl::CreatePpoLearner(config));
  return std::unique_ptr<PolicyPublisher>(new PolicyPublisher(config, std::move(ppo)));
}

absl::Status PolicyPublisher::SetTable(const quant::UnitTable& table) {
  WQ_ASSIGN_OR_RETURN(costs_, rl::UnitCosts::Create(table));
  fitter_ = config_.training.screen_samples > 1
                ? std::make_unique<rl::RewardModelFitter>(costs_->table())
                : nullptr;
  return absl::OkStatus();
}

absl::StatusOr<double> PolicyPublisher::ClonePlan(double target_bits,
                                                  const std::vector<int>& actions,
                                                  double target_prob) {
  if (costs_ == nullptr) return NoTable();
  return rl::WarmStartOnPlan(ppo_->policy(), costs_, config_, target_bits, actions, target_prob);
}

absl::StatusOr<std::vector<int>> PolicyPublisher::GreedyPlan(double target_bits) const {
  if (costs_ == nullptr) return NoTable();
  return rl::PolicyGreedyPlan(ppo_->policy(), costs_, config_, target_bits);
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
  if (fitter_ != nullptr && p.snapshot.version != known_version) p.reward_model = fitter_->Model();
  return p;
}

}  // namespace windquant::learner
