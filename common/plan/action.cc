#include "common/plan/action.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace windquant::plan {

absl::StatusOr<Action> ActionFromIndex(int index) {
  if (index < 0 || index >= kNumActions) {
    return absl::InvalidArgumentError(
        absl::StrCat("action index ", index, " out of range [0, ", kNumActions, ")"));
  }
  return kAllActions[index];
}

double BitsOf(Action a) {
  switch (a) {
    case Action::k16:
      return 16.0;
    case Action::k8:
      return 8.0;
    case Action::k4:
      return 4.0;
    case Action::k3:
      return 3.0;
    case Action::k2:
      return 2.0;
    case Action::k1_58:
      return std::log2(3.0);
    case Action::k1:
      return 1.0;
  }
  return 0.0;  // unreachable
}

std::string_view ActionName(Action a) {
  switch (a) {
    case Action::k16:
      return "16";
    case Action::k8:
      return "8";
    case Action::k4:
      return "4";
    case Action::k3:
      return "3";
    case Action::k2:
      return "2";
    case Action::k1_58:
      return "1.58";
    case Action::k1:
      return "1";
  }
  return "?";
}

absl::StatusOr<Action> ParseAction(std::string_view text) {
  for (Action a : kAllActions) {
    if (text == ActionName(a)) return a;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown action '", std::string(text),
                                                 "': expected one of 16, 8, 4, 3, 2, 1.58, 1"));
}

absl::StatusOr<Action> ActionFromBits(double bits) {
  if (std::isfinite(bits)) {
    for (Action a : kAllActions) {
      if (a == Action::k1_58) {
        if (std::fabs(bits - 1.58) <= 0.01 || std::fabs(bits - std::log2(3.0)) <= 0.01) return a;
      } else if (bits == BitsOf(a)) {
        return a;
      }
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("no action with ", bits, " bits: expected one of 16, 8, 4, 3, 2, 1.58, 1"));
}

}  // namespace windquant::plan
