#include "job/unit_table_files.h"

#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/model/llama_weights.h"
#include "common/plan/action.h"
#include "common/plan/plan.h"
#include "common/plan/plan_io.h"
#include "job/unit_table_diff.h"
#include "windquant/v1/types.pb.h"

namespace windquant::job {
namespace {

const char* MatrixName(int m) {
  return m >= 0 && m < model::kNumMatrices ? model::kMatrixNames[m] : "?";
}

std::string ActionLabel(int a) { return std::string(plan::ActionName(plan::kAllActions[a])); }

std::string UnitJson(const plan::Unit& u) {
  nlohmann::json j = {{"id", u.id},
                      {"layer", u.layer},
                      {"matrix", MatrixName(u.matrix)},
                      {"chunk", u.chunk},
                      {"rows", u.rows},
                      {"cols", u.cols},
                      {"col_begin", u.col_begin},
                      {"salient_count", u.salient_count}};
  j["features"] = std::vector<double>(u.features.begin(), u.features.end());
  j["bits"] = std::vector<double>(u.bits.begin(), u.bits.end());
  j["error"] = std::vector<double>(u.error.begin(), u.error.end());
  return j.dump() + "\n";
}

std::string UnitText(const plan::Unit& u) {
  std::string s = absl::StrFormat("%s rows %lld cols %lld salient %lld\n", plan::UnitName(u),
                                  static_cast<long long>(u.rows), static_cast<long long>(u.cols),
                                  static_cast<long long>(u.salient_count));
  absl::StrAppend(&s, "  features");
  for (float f : u.features) absl::StrAppendFormat(&s, " %.6g", f);
  absl::StrAppend(&s, "\n");
  for (int a = 0; a < plan::kNumActions; ++a) {
    absl::StrAppendFormat(&s, "  %-5s bits %12.1f  error %.9g\n", ActionLabel(a), u.bits[a],
                          u.error[a]);
  }
  return s;
}

}  // namespace

absl::StatusOr<plan::UnitTable> ReadUnitTableFile(const std::string& path) {
  WQ_ASSIGN_OR_RETURN(const std::string bytes, base::ReadFile(path));
  v1::UnitTable proto;
  if (!proto.ParseFromString(bytes)) {
    return absl::DataLossError(absl::StrCat(path, ": not a windquant.v1.UnitTable"));
  }
  absl::StatusOr<plan::UnitTable> table = plan::UnitTable::FromProto(proto);
  if (!table.ok())
    return absl::Status(table.status().code(), absl::StrCat(path, ": ", table.status().message()));
  WQ_RETURN_IF_ERROR(table->Validate());
  return table;
}

absl::Status WriteUnitTableFile(const plan::UnitTable& table, const std::string& path) {
  v1::UnitTable proto;
  table.ToProto(&proto);
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
  }
  return base::WriteFileAtomic(path, proto.SerializeAsString());
}

std::string DumpUnitTable(const plan::UnitTable& t, bool as_json) {
  std::string out;
  if (!as_json) {
    out = absl::StrFormat("fingerprint %s, layers [%d, %d) of %d, chunk %d, salient %g, %d units\n",
                          t.fingerprint, t.first_layer, t.end_layer, t.num_layers, t.chunk_size,
                          t.salient_fraction, t.units.size());
  }
  for (const plan::Unit& u : t.units) absl::StrAppend(&out, as_json ? UnitJson(u) : UnitText(u));
  return out;
}

absl::StatusOr<RebasedPlan> RebasePlanFile(const std::string& plan_path, const std::string& from,
                                           const std::string& to, const std::string& out_dir) {
  WQ_ASSIGN_OR_RETURN(const plan::UnitTable a, ReadUnitTableFile(from));
  WQ_ASSIGN_OR_RETURN(const plan::UnitTable b, ReadUnitTableFile(to));
  const std::vector<std::string> layout = LayoutDifferences(a, b);
  if (!layout.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("rebase-plan: ", from, " and ", to,
                                                      " have different layouts: ", layout.front()));
  }
  WQ_ASSIGN_OR_RETURN(plan::Plan plan, plan::ReadPlanFile(plan_path, a));
  RebasedPlan r;
  r.bits_from = plan.Totals(a).effective_bits;
  plan.model_fingerprint = b.fingerprint;
  WQ_RETURN_IF_ERROR(plan::WritePlanFiles(plan, b, out_dir));
  r.plan_id = plan.plan_id;
  r.units = plan.actions.size();
  r.bits_to = plan.Totals(b).effective_bits;
  return r;
}

}  // namespace windquant::job
