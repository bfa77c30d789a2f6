// The rows of a distributed run's final report beside the RL plan: the search
// with restarts and the same search screened by the reward model, each given
// the RL run's count of real plan evaluations on the selection slice, and in
// the quality-target mode the two bisections of bits to epsilon (the caller
// runs them all, job/final_searches.h, through a PlanMeasurer), then every
// row's plan measured by the evaluator on the selection slice and the
// held-out text (apart: report.json's whole_ppl is null), and the plan the run returns: the lowest
// selection perplexity within the target, as `windquant quantize` returns (job/plan_measurement.h
// PickReturned; report.json uses its field names). Memory: a few plans (one int per unit each).
// Stateless; thread-compatible.
#ifndef WINDQUANT_LEARNER_FINAL_ROWS_H_
#define WINDQUANT_LEARNER_FINAL_ROWS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "absl/status/statusor.h"
#include "common/plan/unit_table.h"
#include "common/rl/run_result.h"
#include "common/search/bisection_result.h"
#include "common/search/search_result.h"

namespace windquant::learner {

// What the evaluator measures a plan on (Evaluator.EvaluatePlan's text).
enum class PlanText { kSelection, kHeldOut };

struct TextMeasurement {
  double perplexity = 0;
  int64_t tokens = 0;      // predicted tokens of the text
  double degradation = 0;  // perplexity / FP's on the text - 1 (the evaluator's)
};

// A plan's perplexity on `text` (its actions over the run's unit table): the
// evaluator's, through Evaluator.EvaluatePlan (LearnerNode binds it).
// FAILED_PRECONDITION on kHeldOut when the evaluator has no held-out text.
using PlanMeasurer =
    std::function<absl::StatusOr<TextMeasurement>(const std::vector<int>& actions, PlanText text)>;

// The name of where a plan of the learner came from (its candidate source) in
// the reports: "rl" (a sampled episode), "greedy-of-policy" (the learner's
// "rl-greedy": the policy's argmax plan after an update), "lagrange" (the
// reference plan); any other source as it is.
std::string PlanOrigin(const std::string& learner_source);

// A search run beside the RL run (job/final_searches.h runs it).
struct FinalSearch {
  std::string name;  // its row: "search" or "screened-search"
  uint64_t seed = 0;
  search::SearchResult result;
};

// A bisection of bits to epsilon run beside the RL run (the quality-target
// mode; job/final_searches.h runs it).
struct FinalBisection {
  std::string name;  // its row: "lagrange-bisect" or "screened-bisect"
  search::BisectionResult result;
};

struct FinalRow {
  std::string name;  // "rl", a search's or a bisection's
  std::vector<int> actions;
  double bits = 0;
  double selection_ppl = 0;
  double heldout_ppl = 0;      // valid when heldout_tokens > 0
  int64_t heldout_tokens = 0;  // 0: not measured
};

struct FinalRows {
  std::vector<FinalRow> rows;  // "rl" first, then the searches, then the bisections
  size_t returned = 0;         // the row returned (plan.json, the export)
  std::string origin;          // its origin: PlanOrigin of RL's source, or the row's name
  std::string heldout_note;    // why there are no held-out numbers ("" = measured)
  std::string searches_note;   // why there are no search rows ("" = run)
  std::vector<FinalSearch> searches;
  std::vector<FinalBisection> bisections;
  int64_t rl_evaluations = 0;  // RunResult::real_evaluations
};

// Measures RL's best plan, each search's and each bisection's with `measure` (null:
// RL's row from its evaluation, no held-out numbers) on both texts and picks
// the returned row: the
// lowest selection perplexity within `target_bits` (relative slack 1e-9),
// ties to the earlier row (RL). A failed measurement (an evaluator gone, the
// node stopping) leaves every row without held-out numbers (heldout_note says
// why) and, when on the selection slice, with the perplexities the run and
// the searches measured: the run's result is written still.
// FAILED_PRECONDITION when the run has no feasible plan. In the
// quality-target mode (`max_ppl_increase` > 0) the returned row is the
// rl::QualityTargetBetter one on the selection slice (d against the FP
// perplexity implied by RL's evaluation).
absl::StatusOr<FinalRows> MeasureFinalRows(
    const rl::RunResult& result, const plan::UnitTable& table, double target_bits,
    std::vector<FinalSearch> searches, std::vector<FinalBisection> bisections,
    const std::string& searches_note, const PlanMeasurer& measure, double max_ppl_increase = 0);

// What one real evaluation of each row read, for report.json's "cost" objects
// (search::EvaluationCostJson).
struct EvaluationCosts {
  int64_t rl_tokens = 0;      // RL's: the selection and calibration slices (the reward's terms)
  int64_t search_tokens = 0;  // a search's: the selection slice
  int rl_screen = 1;          // samples RL's actors draw per measured episode (screen_samples)
};

// Adds the rows to report.json as `windquant quantize` names them: "plans",
// "returned", "returned_plan_origin", "rl_real_evaluations", "rl_cost", "search",
// "screened_search", "lagrange_bisect", "screened_bisect" and the notes;
// `rl_source` is RL's candidate source.
void AddFinalRowsJson(const FinalRows& rows, const std::string& rl_source,
                      const EvaluationCosts& costs, nlohmann::json* report);

// The uniform anchors (search::UniformAnchors: pairs of a uniform plan at its own
// bits and the Lagrangian plan at the same bits; `name` and `actions` of each),
// each plan measured with `measure` on the selection slice and the held-out
// text, as report.json's "uniform_anchors" of `windquant quantize`: per pair
// {"uniform", "lagrange", "lagrange_over_uniform" (of the held-out perplexity)}.
// References only, never candidates for the returned plan. `measure`'s errors.
inline constexpr char kAnchorsNote[] =
    "uniform 4, 3 and 2-bit plans at their own effective bits, each with the Lagrangian plan at "
    "the same bits; not candidates for the winner or the returned plan";
absl::StatusOr<nlohmann::json> MeasureAnchors(const std::vector<FinalRow>& anchors,
                                              const plan::UnitTable& table,
                                              const PlanMeasurer& measure);

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_FINAL_ROWS_H_
