// ReportData: everything the HTML report of one plan shows, as a plain struct the
// trainer fills (and writes as report.json next to the plan), so the report can be
// rendered again later from that file alone (`windquant report`).
//
// Units: bits are effective bits per weight (DESIGN.md section 3, the one formula in
// common/plan/effective_bits.h); perplexities are plain exp(mean NLL); wall time in s.
// Embeddings, final norm and lm_head are not units and are not counted in the bits.
//
// report.json (every key is written; on reading, keys marked [opt] may be absent):
//   {"model_name": str, "fingerprint": str, "fp_perplexity": num, "target_bits": num,
//    "winner": str, "wall_time_s": num [opt], "notes": [str] [opt],
//    "units":  [{"layer": int, "matrix": int 0..6, "n_weights": int, "bits": num}],
//    "points": [{"label": str, "effective_bits": num, "perplexity": num}],
//    "curve":  [{"update": int, "mean_reward": num, "best_perplexity": num, "bits": num,
//                "lambda": num, "target_bits": num, "mean_perplexity": num [opt]}] [opt],
//    "max_ppl_increase": num [opt],
//    "measured": [{"effective_bits": num, "degradation": num, "label": str [opt]}] [opt]}
// The last two are written only for a quality-target run (max_ppl_increase > 0,
// docs/lagrange.md): epsilon and every measured plan's relative perplexity
// increase on the selection slice, the chart of degradation against bits.
// A perplexity that is unknown (e.g. no feasible plan yet) is written as null and read
// back as NaN; the report shows it as "n/a".
// Unknown keys are ignored, so a larger file may carry these keys beside its own:
// `windquant quantize` writes them into its report.json, where "wall_time_s" is an
// object {"prepare", "train", "total"}; the reader takes "total" from such an object.
// Plain data; thread-compatible. Functions are stateless and thread-safe.
#ifndef WINDQUANT_COMMON_REPORT_REPORT_DATA_H_
#define WINDQUANT_COMMON_REPORT_REPORT_DATA_H_

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace windquant::report {

// Matrix types in model::Matrix order (the same ints as quant::UnitInfo::matrix).
inline constexpr int kNumMatrixTypes = 7;
inline constexpr std::array<const char*, kNumMatrixTypes> kMatrixNames = {"q",    "k",  "v",   "o",
                                                                          "gate", "up", "down"};

// Label of the RL plan among `points`; baselines use their own labels
// ("uniform-4", "greedy", "lagrange", "random", ...).
inline constexpr char kRlLabel[] = "rl";

// One weight unit of the chosen (RL) plan.
struct ReportUnit {
  int32_t layer = 0;      // decoder layer, >= 0
  int32_t matrix = 0;     // 0..6: q k v o gate up down
  int64_t n_weights = 0;  // entries in the unit, > 0
  double bits = 0.0;      // effective bits per weight of this unit under its action
};

// One method on the perplexity-vs-bits picture.
struct ReportPoint {
  std::string label;            // "rl", "uniform-4", "greedy", ...
  double effective_bits = 0.0;  // plan's effective bits (Σ bits / Σ n)
  double perplexity = 0.0;      // measured on the evaluation text; NaN if unknown
};

// One row of the training curves, one per PPO update (or per logged update).
struct TrainingRow {
  int64_t update = 0;
  double mean_reward = 0.0;      // mean episode-end reward of the update's episodes
  double best_perplexity = 0.0;  // best feasible plan so far; NaN if none yet
  double bits = 0.0;             // mean effective bits of the update's plans
  double lambda = 0.0;           // Lagrange multiplier after the update
  double target_bits = 0.0;      // current curriculum target
  // Mean perplexity of the update's (sampled) plans; NaN if unknown or not recorded.
  double mean_perplexity = std::numeric_limits<double>::quiet_NaN();
};

// One measured plan of a quality-target run, on the degradation chart.
struct DegradationPoint {
  double effective_bits = 0.0;
  double degradation = 0.0;  // d = PPL / FP PPL - 1 on the selection slice; NaN if unknown
  std::string label;         // "" for a plan measured in training, else the final row's name
};

struct ReportData {
  std::string model_name;
  std::string fingerprint;          // model fingerprint (unit table / checkpoint)
  double fp_perplexity = 0.0;       // the unquantized model
  double target_bits = 0.0;         // final target average bits
  std::vector<ReportUnit> units;    // the RL plan, per unit
  std::vector<ReportPoint> points;  // the RL plan (label kRlLabel) and every baseline
  std::string winner;               // label of the best point at the budget
  std::vector<TrainingRow> curve;
  double wall_time_s = 0.0;
  std::vector<std::string> notes;  // free text lines, shown as a list
  // The quality-target mode: epsilon (0 = a fixed-budget run: neither key is
  // written and no degradation chart is drawn) and every plan it measured.
  double max_ppl_increase = 0.0;
  std::vector<DegradationPoint> measured;
};

// Checks ranges: matrix in 0..6, layer >= 0, n_weights > 0, finite non-negative bits,
// non-empty point labels. INVALID_ARGUMENT naming the field, e.g. "units[3].matrix: 9
// not in 0..6".
absl::Status ValidateReportData(const ReportData& data);

// report.json text (pretty-printed, keys in a fixed order; deterministic).
std::string ToJson(const ReportData& data);

// Parses and validates report.json text; `source` (usually the path) prefixes errors:
// "<source>: units[2].bits: expected a number".
absl::StatusOr<ReportData> FromJson(std::string_view text, const std::string& source);

// Reads and parses a report.json file. NOT_FOUND / INVALID_ARGUMENT name the path.
absl::StatusOr<ReportData> ReadReportJson(const std::string& path);
// Validates and writes report.json atomically (common/base WriteFileAtomic).
absl::Status WriteReportJson(const ReportData& data, const std::string& path);

}  // namespace windquant::report

#endif  // WINDQUANT_COMMON_REPORT_REPORT_DATA_H_
