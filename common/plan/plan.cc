#include "common/plan/plan.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/base/files.h"
#include "common/model/llama_weights.h"
#include "common/plan/effective_bits.h"
#include "windquant/v1/types.pb.h"

namespace windquant::plan {

std::string UnitName(const Unit& u) {
  const char* matrix =
      u.matrix >= 0 && u.matrix < model::kNumMatrices ? model::kMatrixNames[u.matrix] : "?";
  return absl::StrCat("unit ", u.id, " (layer ", u.layer, " ", matrix, " chunk ", u.chunk, ")");
}

Plan Plan::Make(const UnitTable& table, std::vector<int> actions, std::string source,
                double target_bits) {
  Plan p;
  p.actions = std::move(actions);
  p.source = std::move(source);
  p.target_bits = target_bits;
  p.model_fingerprint = table.fingerprint;
  const std::string digest =
      base::Sha256Hex(absl::StrCat(p.model_fingerprint, ":", absl::StrJoin(p.actions, ",")));
  p.plan_id =
      absl::StrCat(p.source, "-", target_bits > 0 ? absl::StrFormat("%.4g", target_bits) : "x", "-",
                   digest.substr(0, 12));
  return p;
}

absl::Status Plan::Validate(const UnitTable& table, const std::string& where) const {
  if (model_fingerprint != table.fingerprint) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": plan is for another model or quantization (fingerprint ",
                     model_fingerprint.substr(0, 12), ", unit table has ",
                     table.fingerprint.substr(0, 12), ")"));
  }
  if (actions.size() != table.units.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": plan has ", actions.size(), " units, the unit table has ", table.units.size()));
  }
  for (size_t i = 0; i < actions.size(); ++i) {
    if (actions[i] < 0 || actions[i] >= kNumActions) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", UnitName(table.units[i]),
                                                     ": unknown action index ", actions[i],
                                                     " (expected 0..", kNumActions - 1, ")"));
    }
  }
  return absl::OkStatus();
}

PlanTotals Plan::Totals(const UnitTable& table) const {
  PlanTotals t;
  for (size_t i = 0; i < table.units.size() && i < actions.size(); ++i) {
    const int a = actions[i];
    if (a < 0 || a >= kNumActions) continue;
    t.total_bits += table.units[i].bits[a];
    t.action_counts[a] += 1;
  }
  t.quantized_weights = table.TotalWeights();
  t.effective_bits =
      t.quantized_weights > 0 ? t.total_bits / static_cast<double>(t.quantized_weights) : 0;
  t.whole_model_bits = WholeModelBits(t.total_bits, t.quantized_weights, table.fixed_fp16_params,
                                      table.fixed_param_bits);
  return t;
}

void Plan::ToProto(const UnitTable& table, v1::Plan* out) const {
  out->Clear();
  out->set_plan_id(plan_id);
  out->set_model_fingerprint(model_fingerprint);
  for (int a : actions) out->add_actions(static_cast<uint32_t>(a));
  out->set_effective_bits(Totals(table).effective_bits);
  out->set_target_bits(target_bits);
  out->set_policy_version(policy_version);
  out->set_episode_id(episode_id);
  out->set_source(source);
}

Plan Plan::FromProto(const v1::Plan& proto) {
  Plan p;
  p.plan_id = proto.plan_id();
  p.model_fingerprint = proto.model_fingerprint();
  p.source = proto.source();
  p.target_bits = proto.target_bits();
  p.policy_version = proto.policy_version();
  p.episode_id = proto.episode_id();
  p.actions.reserve(proto.actions_size());
  for (uint32_t a : proto.actions()) {
    // Out-of-range values stay out of range (Validate names the unit).
    p.actions.push_back(a > static_cast<uint32_t>(kNumActions) ? kNumActions : static_cast<int>(a));
  }
  return p;
}

}  // namespace windquant::plan
