#include "common/rl/plan_evaluator.h"

namespace windquant::rl {

uint64_t PlanHash(const std::vector<int>& actions) {
  uint64_t h = 1469598103934665603ull;
  for (int a : actions) {
    h ^= static_cast<uint64_t>(static_cast<uint32_t>(a));
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace windquant::rl
