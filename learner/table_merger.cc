#include "learner/table_merger.h"

#include <filesystem>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "windquant/v1/types.pb.h"

namespace windquant::learner {

TableMerger::TableMerger(int stages, int replicas, int chunk_size, std::string path)
    : stages_(stages), replicas_(replicas), chunk_size_(chunk_size), path_(std::move(path)) {}

absl::Status TableMerger::LoadSaved() {
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(path_, ec))) {
    return absl::OkStatus();
  }
  WQ_ASSIGN_OR_RETURN(std::string bytes, base::ReadFile(path_));
  // Without its checksum file (a table restored from the store, or saved
  // before there was one) the table is taken as it parses and validates.
  const std::string sum_path = ChecksumPath();
  if (base::PathExists(sum_path)) {
    WQ_ASSIGN_OR_RETURN(std::string sum, base::ReadFile(sum_path));
    if (sum != base::Sha256Hex(bytes)) {
      return absl::DataLossError(absl::StrCat(path_, ": its sha256 is not the one in ", sum_path,
                                              " (cut short or altered)"));
    }
  }
  v1::UnitTable proto;
  if (!proto.ParseFromString(bytes)) {
    return absl::DataLossError(absl::StrCat(path_, ": not a UnitTable"));
  }
  absl::StatusOr<plan::UnitTable> table = plan::UnitTable::FromProto(proto);
  absl::Status s = table.ok() ? CheckWhole(*table) : table.status();
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(path_, ": ", s.message()));
  stage_tables_[0] = *table;
  table_ = std::make_shared<const plan::UnitTable>(*std::move(table));
  return absl::OkStatus();
}

absl::Status TableMerger::CheckWhole(const plan::UnitTable& table) const {
  WQ_RETURN_IF_ERROR(CheckShape(table));
  if (table.first_layer != 0 || table.end_layer != table.num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("unit table: layers [", table.first_layer, ", ",
                                                   table.end_layer, ") are not the whole model"));
  }
  if (validator_) WQ_RETURN_IF_ERROR(validator_(table));
  return absl::OkStatus();
}

absl::Status TableMerger::CheckShape(const plan::UnitTable& table) const {
  WQ_RETURN_IF_ERROR(table.Validate());
  if (table.num_layers < 1 || table.first_layer >= table.end_layer) {
    return absl::InvalidArgumentError(absl::StrCat("table: layers [", table.first_layer, ", ",
                                                   table.end_layer, ") of ", table.num_layers,
                                                   " hold no layer"));
  }
  if (table.fingerprint.empty()) {
    return absl::InvalidArgumentError("table.model_fingerprint: empty");
  }
  // Units are in id order, so layers are ascending: each layer of the range
  // must have at least one unit.
  int32_t want = table.first_layer;
  for (const plan::Unit& u : table.units) {
    if (u.layer == want) ++want;
    if (u.layer >= want) {
      return absl::InvalidArgumentError(absl::StrCat("table.units: layer ", want, " has no units"));
    }
  }
  if (want != table.end_layer) {
    return absl::InvalidArgumentError(absl::StrCat("table.units: layer ", want, " has no units"));
  }
  if (table.chunk_size != chunk_size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("table.chunk_size: ", table.chunk_size, ", the run's is ", chunk_size_));
  }
  return absl::OkStatus();
}

absl::Status TableMerger::CheckRegistration(int stage, int replica,
                                            const plan::UnitTable& table) const {
  if (stage < 0 || stage >= stages_) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage: ", stage, " outside [0, ", stages_, ")"));
  }
  if (replica < 0 || replica >= replicas_) {
    return absl::InvalidArgumentError(
        absl::StrCat("replica: ", replica, " outside [0, ", replicas_, ")"));
  }
  if (!expected_fingerprint_.empty() && table.fingerprint != expected_fingerprint_) {
    return absl::InvalidArgumentError(
        absl::StrCat("table.model_fingerprint: ", table.fingerprint.substr(0, 12),
                     " is not the run's ", expected_fingerprint_.substr(0, 12),
                     " (fits of another calibration, quantization or build: an old "
                     "quant.cache_dir entry?)"));
  }
  return CheckShape(table);
}

absl::StatusOr<RegisterResult> TableMerger::Register(int stage, int replica,
                                                     const plan::UnitTable& table,
                                                     bool* completed) {
  if (completed != nullptr) *completed = false;
  WQ_RETURN_IF_ERROR(CheckRegistration(stage, replica, table));
  RegisterResult r;
  r.expected_stages = stages_;
  if (table_ != nullptr) {
    // Complete already (e.g. a restarted actor): it must agree.
    if (table.fingerprint != table_->fingerprint) {
      return absl::InvalidArgumentError("table.model_fingerprint: differs from the run's table");
    }
    r.registered_stages = stages_;
    r.complete = true;
    r.total_units = static_cast<uint32_t>(table_->units.size());
    return r;
  }
  for (const auto& [s, t] : stage_tables_) {
    if (t.fingerprint != table.fingerprint) {
      return absl::InvalidArgumentError(
          absl::StrCat("table.model_fingerprint: differs from stage ", s, "'s"));
    }
    if (t.num_layers != table.num_layers) {
      return absl::InvalidArgumentError(absl::StrCat("table.num_layers: ", table.num_layers,
                                                     ", stage ", s, "'s is ", t.num_layers));
    }
  }
  auto it = stage_tables_.find(stage);
  if (it != stage_tables_.end()) {
    if (it->second.first_layer != table.first_layer || it->second.end_layer != table.end_layer ||
        it->second.units.size() != table.units.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("table: replica ", replica, " of stage ", stage,
                       " disagrees with the table registered before"));
    }
    r.registered_stages = static_cast<int>(stage_tables_.size());
    return r;
  }
  r.registered_stages = static_cast<int>(stage_tables_.size()) + 1;
  if (r.registered_stages == stages_) {
    // Merged, checked and written before the stage is kept: a table the run
    // cannot use changes nothing.
    std::vector<plan::UnitTable> parts = {table};
    for (const auto& [s, t] : stage_tables_) parts.push_back(t);
    WQ_RETURN_IF_ERROR(MergeAndSave(std::move(parts)));
    if (completed != nullptr) *completed = true;
  }
  stage_tables_[stage] = table;
  r.complete = table_ != nullptr;
  if (table_ != nullptr) r.total_units = static_cast<uint32_t>(table_->units.size());
  return r;
}

absl::Status TableMerger::MergeAndSave(std::vector<plan::UnitTable> parts) {
  WQ_ASSIGN_OR_RETURN(plan::UnitTable merged, plan::UnitTable::Merge(std::move(parts)));
  WQ_RETURN_IF_ERROR(CheckWhole(merged));
  v1::UnitTable proto;
  merged.ToProto(&proto);
  const std::string bytes = proto.SerializeAsString();
  // The checksum file goes first and comes last: a crash in between leaves
  // a table without one, never one with another table's.
  std::error_code ec;
  std::filesystem::remove(ChecksumPath(), ec);
  WQ_RETURN_IF_ERROR(base::WriteFileAtomic(path_, bytes));
  WQ_RETURN_IF_ERROR(base::WriteFileAtomic(ChecksumPath(), base::Sha256Hex(bytes)));
  table_ = std::make_shared<const plan::UnitTable>(std::move(merged));
  return absl::OkStatus();
}

absl::Status TableMerger::CompleteOrUnavailable() const {
  if (table_ != nullptr) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat("unit table incomplete: ", stage_tables_.size(), " of ", stages_, " stages"));
}

}  // namespace windquant::learner
