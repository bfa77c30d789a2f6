// TableMerger: the learner's global unit table (DESIGN.md section 5). Each
// stage's actors register their part (any order, any replica; replicas of a
// stage must agree, all parts must share the model fingerprint); once every
// stage registered, the parts are merged (plan::UnitTable::Merge) and the
// merged table is kept in `path` (output.dir/unit_table.pb), so a restarted
// learner resumes (LoadSaved) without waiting for the actors. After that a
// registration only has to agree with the merged table (a restarted actor).
// Holds the stage tables and the merged one (shared with the callers of
// table()) for the life of the run.
// Thread-compatible (the learner calls it under its mutex).
#ifndef WINDQUANT_LEARNER_TABLE_MERGER_H_
#define WINDQUANT_LEARNER_TABLE_MERGER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/plan/unit_table.h"

namespace windquant::learner {

struct RegisterResult {
  int registered_stages = 0;
  int expected_stages = 0;
  bool complete = false;
  uint32_t total_units = 0;
};

class TableMerger {
 public:
  // The run's service.stages, service.replicas and quant.chunk_size; `path`
  // of the merged table's file.
  TableMerger(int stages, int replicas, int chunk_size, std::string path);

  // Checks a merged table beyond its shape (the learner: can it run on it?);
  // called before the table is written or taken from the saved file.
  using Validator = std::function<absl::Status(const plan::UnitTable&)>;
  void set_validator(Validator v) { validator_ = std::move(v); }
  // When not empty: every stage table must carry this fingerprint (the caller
  // knows the run's table identity, e.g. `windquant quantize` from its session),
  // so that fits an actor reloaded from an old cache entry (another calibration,
  // quantization or build) are refused instead of becoming the run's table.
  void set_expected_fingerprint(std::string fingerprint) {
    expected_fingerprint_ = std::move(fingerprint);
  }

  // Restores the merged table of `path` when the file exists (OK and nothing
  // changes when it does not). DATA_LOSS for a file that is not a UnitTable
  // or whose sha256 differs from the one saved with it in ChecksumPath() (a
  // file cut short or altered on disk), INVALID_ARGUMENT for an invalid
  // table; both name the file.
  absl::Status LoadSaved();
  // `path` + ".sha256": the lowercase hex sha256 of the table's file, written
  // after it.
  std::string ChecksumPath() const { return path_ + ".sha256"; }

  // Registers stage `stage`'s table from replica `replica`. When it
  // completes the table, merges and writes it; `*completed` (may be nullptr)
  // says whether this call did. Nothing changes (in memory or on disk) when
  // it fails. INVALID_ARGUMENT naming the field for a stage
  // or replica out of range, an invalid table, another chunk size than the
  // run's, or a table that disagrees with the ones registered before or with
  // the merged table; the errors of the merge and of the write.
  absl::StatusOr<RegisterResult> Register(int stage, int replica, const plan::UnitTable& table,
                                          bool* completed);

  // The merged table; nullptr until every stage registered.
  std::shared_ptr<const plan::UnitTable> table() const { return table_; }
  // UNAVAILABLE ("unit table incomplete: k of n stages") until complete.
  absl::Status CompleteOrUnavailable() const;

 private:
  // Stage and replica in range, a valid table of the run's chunk size.
  absl::Status CheckRegistration(int stage, int replica, const plan::UnitTable& table) const;
  // A valid table of the run's chunk size with a fingerprint and units in
  // every layer of its range.
  absl::Status CheckShape(const plan::UnitTable& table) const;
  // CheckShape of the whole model, then the validator.
  absl::Status CheckWhole(const plan::UnitTable& table) const;
  absl::Status MergeAndSave(std::vector<plan::UnitTable> parts);

  const int stages_;
  const int replicas_;
  const int chunk_size_;
  const std::string path_;
  std::map<int, plan::UnitTable> stage_tables_;
  std::shared_ptr<const plan::UnitTable> table_;
  Validator validator_;
  std::string expected_fingerprint_;
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_TABLE_MERGER_H_
