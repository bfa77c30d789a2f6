// Comparing two unit tables unit by unit (`windquant table diff`): the layout
// (ids, layers, matrices, chunks, shapes, salient counts, table header)
// exactly; per action the error proxy and the effective bits within relative
// tolerances; every static feature within an absolute tolerance.
// Fingerprints are shown, not compared (the one-process and the distributed
// fingerprints are computed differently). A may be one stage's table (layers
// [a, b)): it is then compared with B's units of those layers.
// Thread-safe (pure functions).
#ifndef WINDQUANT_JOB_UNIT_TABLE_DIFF_H_
#define WINDQUANT_JOB_UNIT_TABLE_DIFF_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/plan/action.h"
#include "common/plan/unit_table.h"

namespace windquant::job {

// Layout differences (exact fields, at most about 20); empty when the layouts agree.
std::vector<std::string> LayoutDifferences(const plan::UnitTable& a, const plan::UnitTable& b);

struct TableDiffTolerances {
  double error_rtol = 1e-3;    // error proxy, relative
  double feature_atol = 1e-3;  // static features, absolute
  double bits_rtol = 1e-12;    // effective bits, relative
};

// Largest difference of one field over every unit (and action / feature).
struct WorstDifference {
  double value = 0;
  std::string where;  // "<unit> action <a>" / "<unit> feature <f>"
  int64_t over = 0;   // entries out of tolerance (NaN counts as out)
  void Add(double v, double tolerance, const std::string& w);
};

struct TableDiff {
  std::string path_a, path_b;  // for the report
  std::string fingerprint_a, fingerprint_b;
  size_t units_a = 0, units_b = 0;  // B's: after narrowing to A's layers
  TableDiffTolerances tolerances;
  std::vector<std::string> layout;  // LayoutDifferences; the rest is empty when not
  WorstDifference error, bits, features;
  std::array<WorstDifference, plan::kNumActions> error_by_action;
  std::array<WorstDifference, plan::kNumStaticFeatures> by_feature;
  int64_t units_ok = 0;  // units with every entry within tolerance
  bool ok() const;       // same layout and nothing out of tolerance
};

TableDiff DiffUnitTables(const plan::UnitTable& a, plan::UnitTable b,
                         const TableDiffTolerances& tolerances);

// The report `windquant table diff` prints: text ending in EQUIVALENT or
// DIFFERENT, or (as_json) one JSON object; both end with a newline.
std::string FormatTableDiff(const TableDiff& diff, bool as_json);

}  // namespace windquant::job

#endif  // WINDQUANT_JOB_UNIT_TABLE_DIFF_H_
