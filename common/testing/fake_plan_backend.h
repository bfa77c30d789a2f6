// FakePlanBackend: a PlanBackend with closed-form numbers and no model, for
// the tests of what sits above a backend (PlanEvaluationCore, the
// evaluator's queue). For a plan, every slice's mean NLL is
//   kFpNll + kNllPerActionStep * (sum of the action indices),
// the FP model's is kFpNll; the calibration slice predicts kCalibTokens
// tokens, the evaluation slice kEvalTokens. It counts its measurements and can
// be told to fail the next ones.
// Header-only; thread-safe.
#ifndef WINDQUANT_COMMON_TESTING_FAKE_PLAN_BACKEND_H_
#define WINDQUANT_COMMON_TESTING_FAKE_PLAN_BACKEND_H_

#include <atomic>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <utility>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/rl/plan_backend.h"

namespace windquant::testing {

class FakePlanBackend : public rl::PlanBackend {
 public:
  static constexpr double kFpNll = 2.0;
  static constexpr double kNllPerActionStep = 0.01;
  static constexpr int64_t kCalibTokens = 100;
  static constexpr int64_t kEvalTokens = 300;

  // The mean NLL of the model running `plan` (nullptr: FP) on either slice.
  static double Nll(const plan::Plan* plan) {
    if (plan == nullptr) return kFpNll;
    return kFpNll +
           kNllPerActionStep * std::accumulate(plan->actions.begin(), plan->actions.end(), 0);
  }

  absl::StatusOr<rl::SliceMeasurement> Measure(const plan::Plan* plan) override {
    {
      absl::MutexLock lock(&mu_);
      if (!fail_with_.ok()) return fail_with_;
    }
    (plan == nullptr ? fp_measurements_ : plan_measurements_).fetch_add(1);
    if (plan != nullptr && plan->actions.empty()) {
      return absl::InvalidArgumentError("plan: no actions");
    }
    rl::SliceMeasurement m;
    m.calibration = Slice(Nll(plan), kCalibTokens);
    m.evaluation = Slice(Nll(plan), kEvalTokens);
    return m;
  }

  // Every later measurement fails with `status` (OkStatus: none).
  void FailWith(absl::Status status) {
    absl::MutexLock lock(&mu_);
    fail_with_ = std::move(status);
  }
  int64_t fp_measurements() const { return fp_measurements_.load(); }
  int64_t plan_measurements() const { return plan_measurements_.load(); }

 private:
  static model::PerplexityResult Slice(double nll, int64_t tokens) {
    model::PerplexityResult r;
    r.tokens = tokens;
    r.total_nll = nll * static_cast<double>(tokens);
    r.nll = nll;
    r.perplexity = std::exp(nll);
    r.seconds = 0.5;
    return r;
  }

  absl::Mutex mu_;
  absl::Status fail_with_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> fp_measurements_{0}, plan_measurements_{0};
};

}  // namespace windquant::testing

#endif  // WINDQUANT_COMMON_TESTING_FAKE_PLAN_BACKEND_H_
