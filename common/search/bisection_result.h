// BisectionResult: what a bisection of bits to epsilon (job/bisection_baseline.h)
// returns, and its object and note in a report (`windquant quantize`'s and the
// distributed learner's, one writer). Torch-free; a plain value.
#ifndef WINDQUANT_COMMON_SEARCH_BISECTION_RESULT_H_
#define WINDQUANT_COMMON_SEARCH_BISECTION_RESULT_H_

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace windquant::search {

struct BisectionStep {
  double target_bits = 0;  // the probe's b
  double bits = 0;         // its plan's bits
  double degradation = 0;  // its plan's d
  int64_t evaluations = 0;
};

struct BisectionResult {
  std::vector<int> actions;  // the best probe's plan (rl::QualityTargetBetter)
  double target_bits = 0;    // the best probe's b (its method builds `actions` again at it)
  double bits = 0;
  double degradation = 0;
  bool within_epsilon = false;
  int64_t evaluations = 0;  // spent in all, <= the budget
  int64_t screened = 0;     // the probes' screened proposals, in all
  int64_t per_probe = 0;
  std::vector<BisectionStep> steps;
};

// The report's "lagrange_bisect" / "screened_bisect" object: its real
// evaluations (and the RL run's), the split, the probes (b, the plan's bits
// and d), the plan it chose and what its evaluations cost (EvaluationCostJson,
// `tokens_per_evaluation` the selection slice's tokens).
nlohmann::json BisectionRowJson(const BisectionResult& b, int64_t rl_evaluations,
                                int64_t tokens_per_evaluation);

// The report's note on the bisection row `row_name` ("lagrange-bisect",
// "screened-bisect") under `cap_bits`.
std::string BisectionNote(const std::string& row_name, const BisectionResult& b, double cap_bits,
                          int64_t rl_evaluations);

}  // namespace windquant::search

#endif  // WINDQUANT_COMMON_SEARCH_BISECTION_RESULT_H_
