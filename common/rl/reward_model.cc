#include "common/rl/reward_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "common/base/status_macros.h"
#include "common/rl/episode_reward.h"
#include "common/search/baselines.h"
#include "windquant/v1/types.pb.h"

namespace windquant::rl {
namespace {

// Ridge strengths tried, relative to the kernel's scale (agreement in [0, 1]).
constexpr double kRidges[] = {0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0};

double LogProxy(const plan::UnitTable& table, const std::vector<int>& actions) {
  return std::log(std::max(search::ProxyError(table, actions), 1e-300));
}

// The inverse of the symmetric positive definite n x n matrix `a` (row major)
// by Cholesky; false when it is not positive definite.
bool InvertSpd(std::vector<double> a, int n, std::vector<double>* inv) {
  for (int j = 0; j < n; ++j) {
    double d = a[j * n + j];
    for (int k = 0; k < j; ++k) d -= a[j * n + k] * a[j * n + k];
    if (!(d > 0)) return false;
    d = std::sqrt(d);
    a[j * n + j] = d;
    for (int i = j + 1; i < n; ++i) {
      double s = a[i * n + j];
      for (int k = 0; k < j; ++k) s -= a[i * n + k] * a[j * n + k];
      a[i * n + j] = s / d;
    }
  }
  inv->assign(static_cast<size_t>(n) * n, 0.0);
  std::vector<double> y(n);
  for (int c = 0; c < n; ++c) {
    for (int i = 0; i < n; ++i) {  // L y = e_c
      double s = i == c ? 1.0 : 0.0;
      for (int k = 0; k < i; ++k) s -= a[i * n + k] * y[k];
      y[i] = s / a[i * n + i];
    }
    for (int i = n - 1; i >= 0; --i) {  // L^T x = y
      double s = y[i];
      for (int k = i + 1; k < n; ++k) s -= a[k * n + i] * (*inv)[k * n + c];
      (*inv)[i * n + c] = s / a[i * n + i];
    }
  }
  return true;
}

// The dual coefficients of kernel ridge regression of `r` on `k` with the
// ridge of the lowest leave-one-out error (e_i = beta_i / inverse_ii); empty
// when no ridge gives a positive definite system.
std::vector<double> RidgeByLeaveOneOut(const std::vector<double>& k, const std::vector<double>& r) {
  const int n = static_cast<int>(r.size());
  double best_loo = std::numeric_limits<double>::infinity();
  std::vector<double> best;
  for (const double ridge : kRidges) {
    std::vector<double> m = k, inv;
    for (int i = 0; i < n; ++i) m[i * n + i] += ridge;
    if (!InvertSpd(std::move(m), n, &inv)) continue;
    std::vector<double> beta(n, 0.0);
    double loo = 0;
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) beta[i] += inv[i * n + j] * r[j];
      const double e = beta[i] / inv[i * n + i];
      loo += e * e;
    }
    if (loo < best_loo) {
      best_loo = loo;
      best = std::move(beta);
    }
  }
  return best;
}

}  // namespace

double RewardModel::Predict(const plan::UnitTable& table, const std::vector<int>& actions) const {
  double y = bias + scale * LogProxy(table, actions);
  for (size_t u = 0; u < actions.size() && (u + 1) * plan::kNumActions <= correction.size(); ++u) {
    y += correction[u * plan::kNumActions + actions[u]];
  }
  return y;
}

void RewardModel::ToProto(v1::RewardModel* out) const {
  out->set_bias(bias);
  out->set_scale(scale);
  out->mutable_correction()->Assign(correction.begin(), correction.end());
  out->set_plans(plans);
  out->mutable_measured()->Assign(measured.begin(), measured.end());
}

absl::StatusOr<RewardModel> RewardModel::FromProto(const v1::RewardModel& in) {
  RewardModel m;
  m.bias = in.bias();
  m.scale = in.scale();
  m.plans = in.plans();
  m.correction.assign(in.correction().begin(), in.correction().end());
  m.measured.assign(in.measured().begin(), in.measured().end());
  std::sort(m.measured.begin(), m.measured.end());
  bool finite = std::isfinite(m.bias) && std::isfinite(m.scale);
  for (float c : m.correction) finite = finite && std::isfinite(c);
  if (!finite) return absl::InvalidArgumentError("reward_model: a number is not finite");
  return m;
}

namespace {

// Indices of `episodes`, best first: by predicted log perplexity
// (`predicted`, filled), unmeasured distinct plans before repeats and plans
// the model was fitted on.
std::vector<size_t> ScreenOrder(const std::vector<Episode>& episodes, const RewardModel& model,
                                const plan::UnitTable& table, std::vector<double>* predicted) {
  predicted->resize(episodes.size());
  for (size_t i = 0; i < episodes.size(); ++i) {
    (*predicted)[i] = model.Predict(table, episodes[i].plan.actions);
  }
  std::vector<size_t> order(episodes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return (*predicted)[a] < (*predicted)[b]; });
  std::set<std::vector<int>> taken;
  std::vector<size_t> first, repeats;
  for (size_t i : order) {
    const std::vector<int>& a = episodes[i].plan.actions;
    const bool fresh =
        !std::binary_search(model.measured.begin(), model.measured.end(), PlanHash(a)) &&
        taken.insert(a).second;
    (fresh ? first : repeats).push_back(i);
  }
  first.insert(first.end(), repeats.begin(), repeats.end());
  return first;
}

}  // namespace

std::vector<Episode> KeepBestPredicted(std::vector<Episode> episodes, size_t keep,
                                       const RewardModel& model, const plan::UnitTable& table) {
  if (episodes.size() <= keep) return episodes;
  std::vector<double> predicted;
  const std::vector<size_t> order = ScreenOrder(episodes, model, table, &predicted);
  std::vector<Episode> out;
  for (size_t j = 0; j < keep; ++j) out.push_back(std::move(episodes[order[j]]));
  return out;
}

absl::StatusOr<std::vector<Episode>> RunScreened(RolloutWorker& worker, const Policy& policy,
                                                 double target_bits, int64_t samples, size_t keep,
                                                 const RewardModel& model) {
  std::vector<Episode> all;
  for (int64_t drawn = 0; drawn < samples; drawn += worker.envs()) {
    WQ_ASSIGN_OR_RETURN(std::vector<Episode> batch, worker.Run(policy, target_bits));
    for (Episode& e : batch) all.push_back(std::move(e));
  }
  std::vector<double> predicted;
  const std::vector<size_t> order = ScreenOrder(all, model, worker.table(), &predicted);
  std::vector<Episode> out;
  out.reserve(all.size());
  for (size_t j = 0; j < order.size(); ++j) {
    Episode& e = all[order[j]];
    if (j >= keep) {
      e.screened_out = true;
      e.predicted_log_ppl = predicted[order[j]];
    }
    out.push_back(std::move(e));
  }
  return out;
}

PlanEvaluation PredictedEvaluation(double predicted_log_ppl, double effective_bits,
                                   double fp_eval_ppl) {
  PlanEvaluation e;
  e.effective_bits = effective_bits;
  e.eval_nll = predicted_log_ppl;
  e.eval_ppl = std::exp(predicted_log_ppl);
  e.relative_ppl_increase = e.eval_ppl / fp_eval_ppl - 1.0;
  e.loss_increase = predicted_log_ppl - std::log(fp_eval_ppl);
  return e;
}

void RewardModelFitter::Add(const std::vector<int>& actions, double perplexity) {
  if (!std::isfinite(perplexity) || perplexity <= 0 || actions.size() != table_.units.size() ||
      actions.empty()) {
    return;
  }
  for (int a : actions) {
    if (a < 0 || a >= plan::kNumActions) return;
  }
  std::vector<double> row(plans_.size() + 1);
  for (size_t j = 0; j < plans_.size(); ++j) {
    int same = 0;
    for (size_t u = 0; u < actions.size(); ++u) same += actions[u] == plans_[j][u];
    row[j] = static_cast<double>(same) / static_cast<double>(actions.size());
  }
  row.back() = 1.0;
  agreement_.push_back(std::move(row));
  plans_.emplace_back(actions.begin(), actions.end());
  hashes_.push_back(PlanHash(actions));
  log_ppl_.push_back(std::log(perplexity));
  log_proxy_.push_back(LogProxy(table_, actions));
  ++added_;
  if (plans_.size() > kMaxPlans) {  // the oldest goes
    plans_.erase(plans_.begin());
    log_ppl_.erase(log_ppl_.begin());
    log_proxy_.erase(log_proxy_.begin());
    agreement_.erase(agreement_.begin());
    for (std::vector<double>& row : agreement_) row.erase(row.begin());
  }
}

const RewardModel& RewardModelFitter::Model() {
  if (model_added_ != added_) {
    model_ = Fit();
    model_added_ = added_;
  }
  return model_;
}

RewardModel RewardModelFitter::Fit() const {
  RewardModel m;
  const int n = static_cast<int>(plans_.size());
  if (n < static_cast<int>(kMinPlans)) return m;
  // The prior's two numbers: least squares of log PPL on log proxy.
  double mx = 0, my = 0;
  for (int i = 0; i < n; ++i) {
    mx += log_proxy_[i] / n;
    my += log_ppl_[i] / n;
  }
  double sxy = 0, sxx = 0;
  for (int i = 0; i < n; ++i) {
    sxy += (log_proxy_[i] - mx) * (log_ppl_[i] - my);
    sxx += (log_proxy_[i] - mx) * (log_proxy_[i] - mx);
  }
  m.scale = sxx > 1e-12 ? std::max(0.0, sxy / sxx) : 0.0;
  m.bias = my - m.scale * mx;
  std::vector<double> r(n), k(static_cast<size_t>(n) * n);
  for (int i = 0; i < n; ++i) {
    r[i] = log_ppl_[i] - (m.bias + m.scale * log_proxy_[i]);
    for (int j = 0; j <= i; ++j) k[i * n + j] = k[j * n + i] = agreement_[i][j];
  }
  const std::vector<double> beta = RidgeByLeaveOneOut(k, r);
  // The primal form: a plan's agreement with plan i, summed, is a sum over
  // units of [its action == plan i's] / U.
  const size_t units = table_.units.size();
  std::vector<double> c(units * plan::kNumActions, 0.0);
  for (size_t i = 0; i < beta.size(); ++i) {
    for (size_t u = 0; u < units; ++u) c[u * plan::kNumActions + plans_[i][u]] += beta[i];
  }
  m.correction.resize(c.size());
  for (size_t i = 0; i < c.size(); ++i) {
    m.correction[i] = static_cast<float>(c[i] / static_cast<double>(units));
  }
  m.plans = n;
  m.measured = hashes_;
  std::sort(m.measured.begin(), m.measured.end());
  return m;
}

}  // namespace windquant::rl
