// The measured proxy (issue 36 item 4): a unit table whose error proxy is what
// each linear's quantization costs the model, measured, instead of the unit's
// own rounding error. With GPTQ compensation the rounding error misranks plans
// (docs/results-quant.md: the Lagrangian plan on it is 17.5 % worse than uniform
// 2-bit at uniform's bits); a unit's share of the loss depends on where its
// error goes, which only the model's forward knows.
//
// Each round linearises the loss around an anchor plan:
//   - the anchor's selection perplexity P0 is measured;
//   - for every group g (the units of one linear: one layer's matrix) and every
//     action a, the anchor with all of g's units at a is measured:
//         delta_g(a) = ln P(anchor, g <- a) - ln P0     (a change of mean NLL)
//     (no evaluation where g is already at a: delta 0);
//   - delta_g is made non-increasing in the group's bits (an action with fewer
//     bits never costs less than one with more: measurement noise) and shifted
//     so that the group's most expensive action costs 0;
//   - it is split over g's units in the shares of their rounding errors at that
//     action (n_u err_u(a) / sum_v n_v err_v(a); by weights when those are all 0),
//     written as err'_u(a) = share_u * delta_g(a) * N / n_u, so that
//     search::ProxyError of a plan whose groups each take one action is
//     sum_g delta_g(a_g): the predicted change of the mean NLL;
//   - the next anchor is search::LagrangePlan on that table at the target.
// The first anchor is the uniform plan with the most bits within the target (the
// cheapest action everywhere when none fits). A round stops early when its
// Lagrangian plan is its anchor. The last round's Lagrangian plan is measured
// too, and the returned plan is the best measured of the anchors and that plan
// (every one within the target): a linearisation that misleads (units of one
// linear split by their rounding errors, interactions between linears) never
// returns a plan worse than one it measured.
// Cost (G linears: 35 on stories260k, 112 on LLaMA-3.2-1B): the first round
// 1 + 6 G evaluations, every later one 1 + 7 G at most (its anchor may mix
// actions inside a linear), and the last plan 1.
// Thread-compatible (calls `measure` on the caller's thread).
#ifndef WINDQUANT_JOB_MEASURED_PROXY_H_
#define WINDQUANT_JOB_MEASURED_PROXY_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/plan/unit_table.h"
#include "job/search_baseline.h"

namespace windquant::job {

struct MeasuredProxyOptions {
  double target_bits = 0;  // the plan's budget (effective bits), at least the cheapest plan's
  int rounds = 2;          // linearisations, >= 1
};

struct MeasuredProxyResult {
  plan::UnitTable table;           // the input table, errors from the last round
  std::vector<int> actions;        // the best measured plan (see above)
  double selection_ppl = 0;        // of `actions`
  std::vector<double> anchor_ppl;  // each round's anchor, on the selection slice
  int64_t groups = 0;
  int64_t evaluations = 0;  // plans measured, the final one included
};

// The planned count of evaluations for `rounds` rounds on `table` (an upper bound:
// groups already at an action and early stops measure fewer).
int64_t MeasuredProxyEvaluations(const plan::UnitTable& table, int rounds);

// INVALID_ARGUMENT naming --bits for a target below the table's cheapest plan
// and --rounds for rounds < 1; `measure`'s errors, and INVALID_ARGUMENT for a
// perplexity that is not finite and positive (naming the round).
absl::StatusOr<MeasuredProxyResult> MeasureProxy(const plan::UnitTable& table,
                                                 const MeasuredProxyOptions& options,
                                                 const PlanMeasure& measure);

}  // namespace windquant::job

#endif  // WINDQUANT_JOB_MEASURED_PROXY_H_
