#include "job/bisection_baseline.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/status_macros.h"
#include "common/rl/candidate_plan.h"
#include "common/search/baselines.h"

namespace windquant::job {
namespace {

// Probes answered from memory spend nothing; this bounds their number.
constexpr int kMaxProbes = 1000;

absl::Status ValidateBisection(const BisectionOptions& o) {
  if (!(o.cap_bits > o.low_bits)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("bisection: the cap %g must be above the lowest reachable bits %g",
                        o.cap_bits, o.low_bits));
  }
  if (!(o.max_ppl_increase > 0)) {
    return absl::InvalidArgumentError("bisection: max_ppl_increase must be > 0");
  }
  if (o.evaluations < 1 || o.per_probe < 1) {
    return absl::InvalidArgumentError("bisection: evaluations and per_probe must be >= 1");
  }
  if (!(o.min_step_bits > 0)) {
    return absl::InvalidArgumentError("bisection: min_step_bits must be > 0");
  }
  return absl::OkStatus();
}

double Degradation(double ppl, double fp) {
  const double d = ppl / fp - 1.0;
  return std::isfinite(d) ? d : std::numeric_limits<double>::infinity();
}

void LogResult(const base::LogSink& log, const char* name, const BisectionResult& r, double eps) {
  if (!log) return;
  log(
      absl::StrFormat("%s: %d probes, %d real evaluations (%d per probe): %.4f bits, d %.4f on the "
                      "selection slice (%s epsilon %g)",
                      name, r.steps.size(), r.evaluations, r.per_probe, r.bits, r.degradation,
                      r.within_epsilon ? "within" : "NOT within", eps));
}

}  // namespace

absl::StatusOr<BisectionResult> BisectBits(const BisectionOptions& o,
                                           const BisectionProber& probe) {
  WQ_RETURN_IF_ERROR(ValidateBisection(o));
  BisectionResult out;
  out.per_probe = o.per_probe;
  double lo = o.low_bits, hi = o.cap_bits;
  bool have_best = false;
  while (out.evaluations < o.evaluations && hi - lo >= o.min_step_bits &&
         static_cast<int>(out.steps.size()) < kMaxProbes) {
    const double b = 0.5 * (lo + hi);
    const int64_t give = std::min(o.per_probe, o.evaluations - out.evaluations);
    WQ_ASSIGN_OR_RETURN(BisectionProbe p, probe(b, give));
    if (p.evaluations < 0 || p.evaluations > give) {
      return absl::InternalError(absl::StrFormat(
          "bisection: a probe at %g bits spent %d evaluations of %d", b, p.evaluations, give));
    }
    out.evaluations += p.evaluations;
    out.screened += p.screened;
    out.steps.push_back({b, p.bits, p.degradation, p.evaluations});
    if (!have_best || rl::QualityTargetBetter(p.bits, p.degradation, out.bits, out.degradation,
                                              o.max_ppl_increase)) {
      have_best = true;
      out.actions = p.actions;
      out.target_bits = b;
      out.bits = p.bits;
      out.degradation = p.degradation;
    }
    if (p.degradation <= o.max_ppl_increase) {
      hi = std::min(b, p.bits);
    } else {
      lo = b;
    }
  }
  out.within_epsilon = have_best && out.degradation <= o.max_ppl_increase;
  return out;
}

double SmallestBitStep(const plan::UnitTable& table) {
  double step = std::numeric_limits<double>::infinity();
  for (const plan::Unit& u : table.units) {
    for (size_t a = 0; a < u.bits.size(); ++a) {
      for (size_t b = a + 1; b < u.bits.size(); ++b) {
        const double diff = std::abs(u.bits[a] - u.bits[b]);
        if (diff > 0) step = std::min(step, diff);
      }
    }
  }
  const double n = static_cast<double>(table.TotalWeights());
  return std::isfinite(step) && n > 0 ? step / n : 1e-6;
}

namespace {

// The bracket [lowest reachable bits, cap], epsilon and RL's evaluations as the budget.
BisectionOptions OptionsFor(const plan::UnitTable& table, double cap_bits, double max_ppl_increase,
                            int64_t rl_evaluations) {
  BisectionOptions o;
  o.low_bits = search::MinEffectiveBits(table);
  o.cap_bits = cap_bits;
  o.max_ppl_increase = max_ppl_increase;
  o.evaluations = std::max<int64_t>(1, rl_evaluations);
  o.min_step_bits = SmallestBitStep(table);
  return o;
}

}  // namespace

absl::StatusOr<BisectionResult> LagrangeBisect(const plan::UnitTable& table, double cap_bits,
                                               double max_ppl_increase, int64_t rl_evaluations,
                                               double fp_selection_ppl, const PlanMeasure& measure,
                                               const base::LogSink& log) {
  BisectionOptions o = OptionsFor(table, cap_bits, max_ppl_increase, rl_evaluations);
  o.per_probe = 1;
  std::map<std::vector<int>, double> measured;  // plan -> selection perplexity
  WQ_ASSIGN_OR_RETURN(BisectionResult r,
                      BisectBits(o, [&](double b, int64_t) -> absl::StatusOr<BisectionProbe> {
                        WQ_ASSIGN_OR_RETURN(plan::Plan plan, search::LagrangePlan(table, b));
                        BisectionProbe p;
                        p.bits = table.EffectiveBits(plan.actions);
                        auto it = measured.find(plan.actions);
                        if (it == measured.end()) {
                          WQ_ASSIGN_OR_RETURN(double ppl, measure(plan.actions));
                          it = measured.emplace(plan.actions, ppl).first;
                          p.evaluations = 1;
                        }
                        p.degradation = Degradation(it->second, fp_selection_ppl);
                        p.actions = std::move(plan.actions);
                        return p;
                      }));
  LogResult(log, "lagrange-bisect", r, max_ppl_increase);
  return r;
}

absl::StatusOr<BisectionResult> ScreenedBisect(const plan::UnitTable& table, double cap_bits,
                                               double max_ppl_increase, int64_t rl_evaluations,
                                               double fp_selection_ppl, uint64_t seed, int screen,
                                               const PlanMeasure& measure,
                                               const base::LogSink& log) {
  if (screen <= 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "screened-bisect: screen ", screen, " is not a screen (> 1 proposals per measurement)"));
  }
  BisectionOptions o = OptionsFor(table, cap_bits, max_ppl_increase, rl_evaluations);
  o.per_probe = (o.evaluations + kScreenedBisectSteps - 1) / kScreenedBisectSteps;
  WQ_ASSIGN_OR_RETURN(BisectionResult r,
                      BisectBits(o, [&](double b, int64_t give) -> absl::StatusOr<BisectionProbe> {
                        WQ_ASSIGN_OR_RETURN(SearchResult s,
                                            RunProductSearch(table, b, seed, give, screen, measure,
                                                             base::LogSink(), "screened-bisect"));
                        BisectionProbe p;
                        p.bits = table.EffectiveBits(s.actions);
                        p.degradation = Degradation(s.selection_ppl, fp_selection_ppl);
                        p.evaluations = s.evaluations;
                        p.screened = s.screened;
                        p.actions = std::move(s.actions);
                        return p;
                      }));
  LogResult(log, "screened-bisect", r, max_ppl_increase);
  return r;
}

}  // namespace windquant::job
