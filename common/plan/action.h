// Action: the precision chosen for one unit (DESIGN.md section 2).
// The 7 actions are indexed in the order listed in `Action`; that index is what the
// policy outputs and what plans store. Pure value helpers, thread-safe.
#ifndef WINDQUANT_COMMON_PLAN_ACTION_H_
#define WINDQUANT_COMMON_PLAN_ACTION_H_

#include <array>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace windquant::plan {

enum class Action { k16 = 0, k8, k4, k3, k2, k1_58, k1 };

inline constexpr int kNumActions = 7;
inline constexpr std::array<Action, kNumActions> kAllActions = {
    Action::k16, Action::k8, Action::k4, Action::k3, Action::k2, Action::k1_58, Action::k1};

// Index of `a` in kAllActions (0..6).
inline int ActionIndex(Action a) { return static_cast<int>(a); }
// Inverse of ActionIndex; INVALID_ARGUMENT outside 0..6.
absl::StatusOr<Action> ActionFromIndex(int index);

// Bits per (non-salient) weight of the action's codes: 16, 8, 4, 3, 2, log2(3), 1.
// Ternary counts log2(3) = 1.585 bits (the information content); the exported
// checkpoint packs 17 trits in 27 bits (packing.h), 1.588 bits.
double BitsOf(Action a);

// Display / config name: "16", "8", "4", "3", "2", "1.58", "1".
std::string_view ActionName(Action a);

// Parses exactly a name as written by ActionName (e.g. "1.58"; "1.6" or "2bit" are
// rejected). Error: INVALID_ARGUMENT naming the text.
absl::StatusOr<Action> ParseAction(std::string_view text);
// Parses a bit-width number: 16, 8, 4, 3, 2, 1 exactly, or within 0.01 of 1.58 / log2(3)
// (so 1.58, 1.585 and log2(3) all map to k1_58). INVALID_ARGUMENT otherwise.
absl::StatusOr<Action> ActionFromBits(double bits);

}  // namespace windquant::plan

#endif  // WINDQUANT_COMMON_PLAN_ACTION_H_
