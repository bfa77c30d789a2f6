// Baseline plans (DESIGN.md section 3), computed from the same UnitTable as the
// RL plans, at the same effective bits (UnitTable::EffectiveBits).
//
// Error objective shared by greedy, Lagrangian and the comparisons in tests:
//     ProxyError(plan) = sum_u (n_u / N) * err_u(a_u)
// where err_u(a) is the unit table's activation-weighted *relative* error of the
// unit and n_u / N its share of the quantized weights. Relative errors are
// normalised per unit, so weighting them by weight share (not by raw squared
// error) keeps a unit of small weights from being ignored; it is the simplest
// weighting that makes "total error" additive over units.
//
// Budgets: a plan at target B must have EffectiveBits <= B, i.e. sum_u bits_u(a_u)
// <= B * N. Every function except UniformPlan returns such a plan, or
// INVALID_ARGUMENT when even the cheapest action everywhere exceeds B.
// Stateless functions; thread-safe.
#ifndef WINDQUANT_COMMON_SEARCH_BASELINES_H_
#define WINDQUANT_COMMON_SEARCH_BASELINES_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/plan/action.h"
#include "common/plan/plan.h"
#include "common/plan/unit_table.h"

namespace windquant::search {

// sum_u (n_u / N) err_u(a_u) (see above).
double ProxyError(const plan::UnitTable& table, const std::vector<int>& actions);

// Each unit's cheapest action (fewest bits; ties to the smaller error).
std::vector<int> CheapestActions(const plan::UnitTable& table);

// Lowest effective bits any plan can reach (each unit at its cheapest action).
double MinEffectiveBits(const plan::UnitTable& table);

// Every unit takes `action` (RTN-style). Its bits are whatever that costs; target_bits
// of the plan is set to those bits.
plan::Plan UniformPlan(const plan::UnitTable& table, plan::Action action);

// Greedy: start from the cheapest action of every unit; repeatedly take the single
// unit upgrade with the largest proxy-error decrease per extra bit that still fits
// the budget (priority queue with lazy invalidation), until none fits.
absl::StatusOr<plan::Plan> GreedyPlan(const plan::UnitTable& table, double target_bits);

// Lagrangian (as llama.cpp's target-bpw allocation): for a multiplier mu every unit
// takes argmin_a (n_u/N) err_u(a) + mu * bits_u(a) / N; mu is bisected for the
// smallest total bits that still fit the budget, then the leftover budget is spent
// by the greedy upgrades above.
absl::StatusOr<plan::Plan> LagrangePlan(const plan::UnitTable& table, double target_bits);

// How RepairToBudget brings a plan within its budget.
//   kProxy: while over it, the single unit step down (to the unit's most
//           expensive strictly cheaper action) that adds the least
//           (n_u/N) * error per bit saved is taken (ties to the lower unit).
//   kWalk:  the walk's last unit first: each unit, from the last one back,
//           steps down (the same step) until the plan fits or the unit is at
//           its cheapest, as the hard budget's mask cuts the end of the walk.
enum class RepairOrder { kProxy, kWalk };

// `actions` brought within the budget (EffectiveBits <= target_bits) by single
// unit steps down in `order`; a plan within the budget comes back unchanged. A
// plan that cannot fit ends with every unit at its cheapest action. The repair
// of the environment's `repair` budget mode (common/rl/environment.h).
// O(k log U) for k steps over U units.
std::vector<int> RepairToBudget(const plan::UnitTable& table, std::vector<int> actions,
                                double target_bits, RepairOrder order = RepairOrder::kProxy);

// Random feasible (seeded): uniform random action per unit, then, while over budget,
// a random unit above its cheapest action is moved to a random cheaper action.
absl::StatusOr<plan::Plan> RandomPlan(const plan::UnitTable& table, double target_bits,
                                      uint64_t seed);

// The anchors of every report (issue 36: allocation against the plainest plan at
// the same bits): for 4, 3 and 2 bits the uniform plan at its own effective bits,
// "uniform-<action>", then the Lagrangian plan at those same bits,
// "lagrange@uniform-<action>". LagrangePlan's errors.
inline constexpr plan::Action kAnchorActions[] = {plan::Action::k4, plan::Action::k3,
                                                  plan::Action::k2};
absl::StatusOr<std::vector<std::pair<std::string, plan::Plan>>> UniformAnchors(
    const plan::UnitTable& table);

}  // namespace windquant::search

#endif  // WINDQUANT_COMMON_SEARCH_BASELINES_H_
