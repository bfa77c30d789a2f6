#include "common/plan/plan_io.h"

#include <cstring>
#include <filesystem>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/model/llama_weights.h"
#include "nlohmann/json.hpp"
#include "windquant/v1/types.pb.h"

namespace windquant::plan {
namespace {

using nlohmann::json;

constexpr size_t kHeaderBytes = 8 + 4 + 8;
constexpr size_t kDigestBytes = 32;
constexpr char kJsonFormat[] = "windquant.plan.v1";

void PutLe(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t GetLe(std::string_view in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= static_cast<uint64_t>(static_cast<uint8_t>(in[at + i])) << (8 * i);
  return v;
}
std::string Sha256Raw(std::string_view data) {
  return absl::HexStringToBytes(base::Sha256Hex(absl::string_view(data.data(), data.size())));
}

}  // namespace

std::string PlanToJson(const Plan& plan, const UnitTable& table) {
  const PlanTotals t = plan.Totals(table);
  json counts = json::object();
  for (int a = 0; a < kNumActions; ++a)
    counts[std::string(ActionName(kAllActions[a]))] = t.action_counts[a];
  json units = json::array();
  for (size_t i = 0; i < table.units.size() && i < plan.actions.size(); ++i) {
    const Unit& u = table.units[i];
    const int a = plan.actions[i];
    units.push_back({{"id", u.id},
                     {"layer", u.layer},
                     {"matrix", model::kMatrixNames[u.matrix]},
                     {"chunk", u.chunk},
                     {"rows", u.rows},
                     {"cols", u.cols},
                     {"action", std::string(ActionName(kAllActions[a]))},
                     {"salient", u.salient_count},
                     {"bits", u.bits[a]}});
  }
  json j = {{"format", kJsonFormat},
            {"plan_id", plan.plan_id},
            {"model_fingerprint", plan.model_fingerprint},
            {"source", plan.source},
            {"target_bits", plan.target_bits},
            {"policy_version", plan.policy_version},
            {"episode_id", plan.episode_id},
            {"totals",
             {{"effective_bits", t.effective_bits},
              {"whole_model_bits", t.whole_model_bits},
              {"total_bits", t.total_bits},
              {"quantized_weights", t.quantized_weights},
              {"fixed_fp16_params", table.fixed_fp16_params},
              {"fixed_param_bits", table.fixed_param_bits},
              {"action_counts", counts}}},
            {"units", units}};
  return j.dump(1) + "\n";
}

absl::StatusOr<Plan> PlanFromJson(std::string_view text, const UnitTable& table,
                                  const std::string& source) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not a JSON object"));
  }
  Plan p;
  try {
    if (j.value("format", std::string()) != kJsonFormat) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": format: expected \"", kJsonFormat, "\""));
    }
    p.plan_id = j.value("plan_id", std::string());
    p.model_fingerprint = j.value("model_fingerprint", std::string());
    p.source = j.value("source", std::string());
    p.target_bits = j.value("target_bits", 0.0);
    p.policy_version = j.value("policy_version", int64_t{0});
    p.episode_id = j.value("episode_id", uint64_t{0});
    if (!j.contains("units") || !j["units"].is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": units: missing or not an array"));
    }
    const json& units = j["units"];
    if (p.model_fingerprint != table.fingerprint) return p.Validate(table, source);  // names both
    if (units.size() != table.units.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": plan has ", units.size(), " units, the unit table has ", table.units.size()));
    }
    for (size_t i = 0; i < units.size(); ++i) {
      const json& ju = units[i];
      const std::string where = absl::StrCat(source, ": units[", i, "]");
      if (!ju.is_object() || !ju.contains("action") || !ju["action"].is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": action: missing or not a string"));
      }
      if (i < table.units.size()) {
        const Unit& u = table.units[i];
        if (ju.value("id", int64_t{-1}) != u.id || ju.value("layer", -1) != u.layer ||
            ju.value("chunk", -1) != u.chunk ||
            ju.value("matrix", std::string()) != model::kMatrixNames[u.matrix]) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": id/layer/matrix/chunk disagree with ", UnitName(u)));
        }
      }
      const std::string name = ju["action"].get<std::string>();
      absl::StatusOr<Action> a = ParseAction(name);
      if (!a.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, i < table.units.size() ? absl::StrCat(" ", UnitName(table.units[i])) : "",
            ": unknown action \"", name, "\""));
      }
      p.actions.push_back(ActionIndex(*a));
    }
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", e.what()));
  }
  WQ_RETURN_IF_ERROR(p.Validate(table, source));
  return p;
}

std::string PlanToBinary(const Plan& plan, const UnitTable& table) {
  v1::Plan proto;
  plan.ToProto(table, &proto);
  const std::string payload = proto.SerializeAsString();
  std::string out(kPlanMagic, sizeof(kPlanMagic));
  PutLe(&out, kPlanBinaryVersion, 4);
  PutLe(&out, payload.size(), 8);
  out += payload;
  out += Sha256Raw(out);
  return out;
}

absl::StatusOr<Plan> PlanFromBinary(std::string_view bytes, const UnitTable& table,
                                    const std::string& source) {
  if (bytes.size() < kHeaderBytes + kDigestBytes || std::memcmp(bytes.data(), kPlanMagic, 8) != 0) {
    return absl::DataLossError(
        absl::StrCat(source, ": not a plan file (bad magic or truncated header)"));
  }
  const uint64_t version = GetLe(bytes, 8, 4);
  if (version != kPlanBinaryVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": unsupported plan format version ", version));
  }
  const uint64_t payload = GetLe(bytes, 12, 8);
  if (payload != bytes.size() - kHeaderBytes - kDigestBytes) {
    return absl::DataLossError(absl::StrCat(source, ": truncated or padded (payload length ",
                                            payload, ", file has ", bytes.size(), " bytes)"));
  }
  const std::string_view body = bytes.substr(0, bytes.size() - kDigestBytes);
  if (Sha256Raw(body) != bytes.substr(body.size())) {
    return absl::DataLossError(absl::StrCat(source, ": checksum mismatch (corrupted file)"));
  }
  v1::Plan proto;
  if (!proto.ParseFromArray(bytes.data() + kHeaderBytes, static_cast<int>(payload))) {
    return absl::DataLossError(absl::StrCat(source, ": payload is not a windquant.v1.Plan"));
  }
  Plan p = Plan::FromProto(proto);
  WQ_RETURN_IF_ERROR(p.Validate(table, source));
  return p;
}

absl::Status WritePlanFiles(const Plan& plan, const UnitTable& table, const std::string& dir) {
  WQ_RETURN_IF_ERROR(plan.Validate(table));
  const std::filesystem::path d(dir);
  WQ_RETURN_IF_ERROR(base::WriteFileAtomic((d / "plan.json").string(), PlanToJson(plan, table)));
  return base::WriteFileAtomic((d / "plan.bin").string(), PlanToBinary(plan, table));
}

absl::StatusOr<Plan> ReadPlanFile(const std::string& path, const UnitTable& table) {
  WQ_ASSIGN_OR_RETURN(const std::string bytes, base::ReadFile(path));
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), kPlanMagic, 4) == 0) {
    return PlanFromBinary(bytes, table, path);
  }
  return PlanFromJson(bytes, table, path);
}

}  // namespace windquant::plan
