// Plan: one action per unit of the global unit order (DESIGN.md section 2) plus
// where it came from, and its totals computed from the UnitTable it was made for.
// Serialisation (JSON and the exact binary form) lives in plan_io.h.
// Plain data; thread-compatible.
#ifndef WINDQUANT_COMMON_PLAN_PLAN_H_
#define WINDQUANT_COMMON_PLAN_PLAN_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/plan/action.h"
#include "common/plan/unit_table.h"

namespace windquant::v1 {
class Plan;
}

namespace windquant::plan {

// Totals of a plan over a unit table. Every "bits" number is UnitTable's, i.e.
// UnitEffectiveBits summed over units (effective_bits.h).
struct PlanTotals {
  double total_bits = 0;          // sum over units of bits(u, a_u)
  int64_t quantized_weights = 0;  // sum of n over units
  double effective_bits = 0;      // total_bits / quantized_weights (the plan's "bits")
  // incl. embeddings/norms/lm_head at their stored bits (UnitTable::WholeModelBits): the
  // quantized checkpoint's tensor bytes * 8 / all parameters.
  double whole_model_bits = 0;
  std::array<int64_t, kNumActions> action_counts{};  // units per action index
};

class Plan {
 public:
  std::string plan_id;
  std::string model_fingerprint;  // UnitTable::fingerprint of the model it was made for
  std::string source;             // "rl", "uniform", "greedy", "lagrange", "random"
  double target_bits = 0;         // budget asked for (0 when none, e.g. uniform)
  int64_t policy_version = 0;
  uint64_t episode_id = 0;
  std::vector<int> actions;  // index into kAllActions, per unit id

  // A plan for `table`: fingerprint from the table, plan_id =
  // "<source>-<target>-<first 12 hex of sha256(fingerprint, actions)>".
  static Plan Make(const UnitTable& table, std::vector<int> actions, std::string source,
                   double target_bits);

  // Checks the plan against `table`: same fingerprint, one action per unit, every
  // action in range. INVALID_ARGUMENT, one line starting with `where` (a file name
  // or "plan") and naming the unit where one is at fault.
  absl::Status Validate(const UnitTable& table, const std::string& where = "plan") const;

  // Totals over `table` (call Validate first; out-of-range actions are skipped).
  PlanTotals Totals(const UnitTable& table) const;

  // Proto form; effective_bits is taken from `table`.
  void ToProto(const UnitTable& table, v1::Plan* out) const;
  // Copies the fields (no validation: see Validate).
  static Plan FromProto(const v1::Plan& proto);
};

// Human name of a unit for messages: "unit 17 (layer 1 k_proj chunk 0)".
std::string UnitName(const Unit& u);

}  // namespace windquant::plan

#endif  // WINDQUANT_COMMON_PLAN_PLAN_H_
