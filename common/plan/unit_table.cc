#include "common/plan/unit_table.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/plan/effective_bits.h"
#include "windquant/v1/types.pb.h"

namespace windquant::plan {

int64_t UnitTable::TotalWeights() const {
  int64_t n = 0;
  for (const Unit& u : units) n += u.n();
  return n;
}

double UnitTable::EffectiveBits(const std::vector<int>& actions) const {
  double bits = 0;
  for (size_t i = 0; i < units.size() && i < actions.size(); ++i) bits += units[i].bits[actions[i]];
  const int64_t n = TotalWeights();
  return n > 0 ? bits / static_cast<double>(n) : 0.0;
}

double UnitTable::WholeModelBits(const std::vector<int>& actions) const {
  double bits = 0;
  for (size_t i = 0; i < units.size() && i < actions.size(); ++i) bits += units[i].bits[actions[i]];
  return plan::WholeModelBits(bits, TotalWeights(), fixed_fp16_params, fixed_param_bits);
}

absl::Status UnitTable::Validate() const {
  for (size_t i = 0; i < units.size(); ++i) {
    const Unit& u = units[i];
    const std::string where = absl::StrCat("unit table: unit ", i);
    if (i > 0 && u.id != units[i - 1].id + 1) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": id ", u.id, " out of order"));
    }
    if (u.layer < first_layer || u.layer >= end_layer) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": layer ", u.layer, " outside [",
                                                     first_layer, ", ", end_layer, ")"));
    }
    if (u.matrix < 0 || u.matrix >= 7 || u.rows <= 0 || u.cols <= 0 || u.salient_count < 0 ||
        u.salient_count > u.n()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": bad matrix/shape/salient count"));
    }
    for (int a = 0; a < kNumActions; ++a) {
      if (!std::isfinite(u.bits[a]) || !std::isfinite(u.error[a]) || u.bits[a] <= 0 ||
          u.error[a] < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": non-finite or negative bits/error"));
      }
    }
    for (float f : u.features) {
      if (!std::isfinite(f))
        return absl::InvalidArgumentError(absl::StrCat(where, ": non-finite feature"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<UnitTable> UnitTable::Merge(std::vector<UnitTable> stages) {
  if (stages.empty()) return absl::InvalidArgumentError("unit table: nothing to merge");
  std::sort(stages.begin(), stages.end(),
            [](const UnitTable& a, const UnitTable& b) { return a.first_layer < b.first_layer; });
  UnitTable out = stages.front();
  out.units.clear();
  int32_t next_layer = 0;
  for (const UnitTable& s : stages) {
    if (s.fingerprint != out.fingerprint) {
      return absl::InvalidArgumentError(absl::StrCat("unit table: stage [", s.first_layer, ", ",
                                                     s.end_layer,
                                                     ") has another model fingerprint"));
    }
    if (s.first_layer != next_layer) {
      return absl::InvalidArgumentError(absl::StrCat("unit table: layers from ", next_layer, " to ",
                                                     s.first_layer, " are missing or overlap"));
    }
    out.units.insert(out.units.end(), s.units.begin(), s.units.end());
    next_layer = s.end_layer;
  }
  if (next_layer != out.num_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("unit table: stages end at layer ", next_layer, " of ", out.num_layers));
  }
  out.first_layer = 0;
  out.end_layer = out.num_layers;
  WQ_RETURN_IF_ERROR(out.Validate());
  return out;
}

void UnitTable::ToProto(v1::UnitTable* out) const {
  out->Clear();
  out->set_model_fingerprint(fingerprint);
  out->set_first_layer(first_layer);
  out->set_end_layer(end_layer);
  out->set_num_layers(num_layers);
  out->set_chunk_size(chunk_size);
  out->set_salient_fraction(salient_fraction);
  out->set_fixed_fp16_params(fixed_fp16_params);
  out->set_fixed_param_bits(fixed_param_bits);
  for (const Unit& u : units) {
    v1::UnitInfo* p = out->add_units();
    p->set_id(u.id);
    p->set_layer(u.layer);
    p->set_matrix(u.matrix);
    p->set_chunk(u.chunk);
    p->set_rows(static_cast<int32_t>(u.rows));
    p->set_cols(static_cast<int32_t>(u.cols));
    p->set_col_begin(static_cast<int32_t>(u.col_begin));
    p->set_salient_count(static_cast<int32_t>(u.salient_count));
    for (float f : u.features) p->add_features(f);
    for (double b : u.bits) p->add_bits(b);
    for (double e : u.error) p->add_error(e);
  }
}

absl::StatusOr<UnitTable> UnitTable::FromProto(const v1::UnitTable& proto) {
  UnitTable t;
  t.fingerprint = proto.model_fingerprint();
  t.first_layer = proto.first_layer();
  t.end_layer = proto.end_layer();
  t.num_layers = proto.num_layers();
  t.chunk_size = proto.chunk_size();
  t.salient_fraction = proto.salient_fraction();
  t.fixed_fp16_params = proto.fixed_fp16_params();
  // 0: a table from before the field, which counted them at 16 bits.
  t.fixed_param_bits = proto.fixed_param_bits() > 0 ? proto.fixed_param_bits() : 16;
  if (t.first_layer < 0 || t.end_layer < t.first_layer || t.end_layer > t.num_layers) {
    return absl::InvalidArgumentError("unit_table: layer range out of bounds");
  }
  t.units.reserve(proto.units_size());
  for (int i = 0; i < proto.units_size(); ++i) {
    const v1::UnitInfo& p = proto.units(i);
    if (p.features_size() != kNumStaticFeatures) {
      return absl::InvalidArgumentError(absl::StrCat("unit_table.units[", i,
                                                     "].features: expected ", kNumStaticFeatures,
                                                     " values, got ", p.features_size()));
    }
    if (p.bits_size() != kNumActions || p.error_size() != kNumActions) {
      return absl::InvalidArgumentError(
          absl::StrCat("unit_table.units[", i, "].bits/error: expected ", kNumActions, " values"));
    }
    Unit u;
    u.id = p.id();
    u.layer = p.layer();
    u.matrix = p.matrix();
    u.chunk = p.chunk();
    u.rows = p.rows();
    u.cols = p.cols();
    u.col_begin = p.col_begin();
    u.salient_count = p.salient_count();
    for (int k = 0; k < kNumStaticFeatures; ++k) u.features[k] = p.features(k);
    for (int a = 0; a < kNumActions; ++a) {
      u.bits[a] = p.bits(a);
      u.error[a] = p.error(a);
    }
    t.units.push_back(u);
  }
  WQ_RETURN_IF_ERROR(t.Validate());
  return t;
}

}  // namespace windquant::plan
