// Unit tables as files (windquant.v1.UnitTable), for `windquant table`:
// reading and writing them, printing every unit, and moving a plan from one
// table to another of the same layout (so that `windquant eval --plan`
// measures a distributed run's plan with the one-process evaluator).
// Thread-safe (functions of their arguments and the files they name).
#ifndef WINDQUANT_JOB_UNIT_TABLE_FILES_H_
#define WINDQUANT_JOB_UNIT_TABLE_FILES_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/plan/unit_table.h"

namespace windquant::job {

// DATA_LOSS when the file is not a windquant.v1.UnitTable; the table's own
// errors, prefixed with `path`.
absl::StatusOr<plan::UnitTable> ReadUnitTableFile(const std::string& path);
// Writes atomically, creating the parent directory.
absl::Status WriteUnitTableFile(const plan::UnitTable& table, const std::string& path);

// Every unit: id, layer, matrix, chunk, shape, salient count, features and
// per action its effective bits and error proxy; a header line and indented
// lines per unit, or (as_json) one JSON object per unit and line.
std::string DumpUnitTable(const plan::UnitTable& table, bool as_json);

struct RebasedPlan {
  std::string plan_id;
  size_t units = 0;
  double bits_from = 0, bits_to = 0;  // effective bits on the two tables
};

// Reads `plan_path` (plan.json / plan.bin) against the table in `from` and
// writes the same actions as a plan of the table in `to` (its fingerprint)
// to out_dir/plan.json and out_dir/plan.bin. FAILED_PRECONDITION naming the
// first difference when the two layouts differ (LayoutDifferences).
absl::StatusOr<RebasedPlan> RebasePlanFile(const std::string& plan_path, const std::string& from,
                                           const std::string& to, const std::string& out_dir);

}  // namespace windquant::job

#endif  // WINDQUANT_JOB_UNIT_TABLE_FILES_H_
