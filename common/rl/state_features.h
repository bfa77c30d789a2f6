// The 15-number state of the WINDQuant decision process (DESIGN.md section 4).
//
// Indices 0..10 are the unit's static features, copied from
// plan::Unit::features (documented in common/plan/unit_table.h, computed in
// unit_table_builder.cc). Indices 11..14 are dynamic: they depend on where the
// episode is and what it has spent so far, and are computed here:
//
//   11 progress           t / T                                       [0, 1)
//   12 budget per weight  (bits left / weights left) / 16,            [-1, 1]
//                         bits left = B - bits spent, B = target * sum n;
//                         weights left include the current unit.
//                         Negative only in soft mode after an overrun.
//   13 urgency            clip(log2(bits left / min bits left) / 4, -1, 1)
//                         min bits left = what units t..T-1 need at their
//                         cheapest action. 0 = the budget is exactly tight
//                         (hard mode then allows only the cheapest actions),
//                         1 = 16x slack; -1 when the budget can no longer
//                         be met (soft mode only).
//   14 previous action    index of the previous unit's action / 6     [0, 1]
//                         (0 at t = 0, where progress = 0 tells it apart).
//
// Pure functions; thread-safe.
#ifndef WINDQUANT_COMMON_RL_STATE_FEATURES_H_
#define WINDQUANT_COMMON_RL_STATE_FEATURES_H_

#include <cstdint>

#include "common/plan/unit_table.h"

namespace windquant::rl {

inline constexpr int kStateDim = 15;
inline constexpr int kFeatProgress = plan::kNumStaticFeatures;  // 11
inline constexpr int kFeatBudgetPerWeight = kFeatProgress + 1;  // 12
inline constexpr int kFeatUrgency = kFeatProgress + 2;          // 13
inline constexpr int kFeatPrevAction = kFeatProgress + 3;       // 14
static_assert(kFeatPrevAction + 1 == kStateDim, "the state has 15 numbers");

// Where an episode stands before choosing the action of unit `step`.
struct EpisodeContext {
  int64_t step = 0;          // t, 0-based
  int64_t num_units = 0;     // T
  double bits_left = 0;      // B - bits spent on units 0..t-1
  double weights_left = 0;   // sum n over units t..T-1
  double min_bits_left = 0;  // sum over units t..T-1 of min_a bits(u, a)
  int previous_action = 0;   // action index of unit t-1 (ignored at t = 0)
};

// Writes the 15 features of `unit` in `context` into out[0..14]. Every value
// is finite and within the range documented above.
void ComputeState(const plan::Unit& unit, const EpisodeContext& context, float* out);

// The documented [low, high] of feature i (static ones from unit_table.h).
struct FeatureRange {
  float low;
  float high;
};
FeatureRange StateFeatureRange(int i);

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_STATE_FEATURES_H_
