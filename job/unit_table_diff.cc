#include "job/unit_table_diff.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/plan/plan.h"

namespace windquant::job {
namespace {

using nlohmann::json;

std::string ActionLabel(int a) { return std::string(plan::ActionName(plan::kAllActions[a])); }

double RelDiff(double x, double y) {
  if (x == y) return 0;
  const double scale = std::max(std::abs(x), std::abs(y));
  return std::abs(x - y) / scale;
}

// A is one stage's table: B narrowed to A's layers.
void NarrowToLayersOf(const plan::UnitTable& a, plan::UnitTable* b) {
  if ((a.first_layer == b->first_layer && a.end_layer == b->end_layer) ||
      a.first_layer < b->first_layer || a.end_layer > b->end_layer) {
    return;
  }
  std::vector<plan::Unit> part;
  for (const plan::Unit& u : b->units) {
    if (u.layer >= a.first_layer && u.layer < a.end_layer) part.push_back(u);
  }
  b->units = std::move(part);
  b->first_layer = a.first_layer;
  b->end_layer = a.end_layer;
}

// Compares unit i of both tables (same layout) into `d`.
void CompareUnit(const plan::Unit& x, const plan::Unit& y, TableDiff* d) {
  const TableDiffTolerances& t = d->tolerances;
  const int64_t before = d->error.over + d->bits.over + d->features.over;
  for (int k = 0; k < plan::kNumActions; ++k) {
    const std::string w = absl::StrCat(plan::UnitName(x), " action ", ActionLabel(k));
    const double e = RelDiff(x.error[k], y.error[k]);
    d->error.Add(e, t.error_rtol, w);
    d->error_by_action[k].Add(e, t.error_rtol, w);
    d->bits.Add(RelDiff(x.bits[k], y.bits[k]), t.bits_rtol, w);
  }
  for (int f = 0; f < plan::kNumStaticFeatures; ++f) {
    const double v = std::abs(static_cast<double>(x.features[f]) - y.features[f]);
    const std::string w = absl::StrCat(plan::UnitName(x), " feature ", f);
    d->features.Add(v, t.feature_atol, w);
    d->by_feature[f].Add(v, t.feature_atol, w);
  }
  if (d->error.over + d->bits.over + d->features.over == before) ++d->units_ok;
}

std::string DiffJson(const TableDiff& d) {
  const TableDiffTolerances& t = d.tolerances;
  json j = {{"a", d.path_a},
            {"b", d.path_b},
            {"fingerprint_a", d.fingerprint_a},
            {"fingerprint_b", d.fingerprint_b},
            {"units", d.units_a},
            {"units_within_tolerance", d.units_ok},
            {"layout_differences", d.layout},
            {"ok", d.ok()},
            {"tolerance",
             {{"error_rtol", t.error_rtol},
              {"feature_atol", t.feature_atol},
              {"bits_rtol", t.bits_rtol}}},
            {"error_max_rel", d.error.value},
            {"error_where", d.error.where},
            {"error_over", d.error.over},
            {"bits_max_rel", d.bits.value},
            {"bits_where", d.bits.where},
            {"bits_over", d.bits.over},
            {"feature_max_abs", d.features.value},
            {"feature_where", d.features.where},
            {"feature_over", d.features.over}};
  json per_action = json::object();
  for (int k = 0; k < plan::kNumActions; ++k)
    per_action[ActionLabel(k)] = d.error_by_action[k].value;
  j["error_max_rel_by_action"] = per_action;
  json per_feature = json::array();
  for (const WorstDifference& w : d.by_feature) per_feature.push_back(w.value);
  j["feature_max_abs_by_index"] = per_feature;
  return j.dump() + "\n";
}

std::string DiffText(const TableDiff& d) {
  const TableDiffTolerances& t = d.tolerances;
  std::string s = absl::StrFormat(
      "A %s: %d units, fingerprint %s\nB %s: %d units, fingerprint %s\n", d.path_a, d.units_a,
      d.fingerprint_a.substr(0, 16), d.path_b, d.units_b, d.fingerprint_b.substr(0, 16));
  for (const std::string& l : d.layout) absl::StrAppend(&s, "layout differs: ", l, "\n");
  if (d.layout.empty()) {
    absl::StrAppend(&s,
                    "layout: identical (ids, layers, matrices, chunks, shapes, salient counts)\n");
    absl::StrAppendFormat(&s, "error proxy  max rel diff %.3e (tolerance %.1e, %d over) at %s\n",
                          d.error.value, t.error_rtol, d.error.over, d.error.where);
    for (int k = 0; k < plan::kNumActions; ++k) {
      absl::StrAppendFormat(&s, "  action %-5s max rel diff %.3e\n", ActionLabel(k),
                            d.error_by_action[k].value);
    }
    absl::StrAppendFormat(&s, "bits         max rel diff %.3e (tolerance %.1e, %d over) at %s\n",
                          d.bits.value, t.bits_rtol, d.bits.over, d.bits.where);
    absl::StrAppendFormat(&s, "features     max abs diff %.3e (tolerance %.1e, %d over) at %s\n",
                          d.features.value, t.feature_atol, d.features.over, d.features.where);
    absl::StrAppendFormat(&s, "units within tolerance: %d of %d\n", d.units_ok, d.units_a);
  }
  absl::StrAppend(&s, d.ok() ? "EQUIVALENT" : "DIFFERENT", "\n");
  return s;
}

}  // namespace

std::vector<std::string> LayoutDifferences(const plan::UnitTable& a, const plan::UnitTable& b) {
  std::vector<std::string> out;
  auto header = [&](const char* name, auto x, auto y) {
    if (x != y) out.push_back(absl::StrCat("table.", name, ": ", x, " vs ", y));
  };
  header("first_layer", a.first_layer, b.first_layer);
  header("end_layer", a.end_layer, b.end_layer);
  header("num_layers", a.num_layers, b.num_layers);
  header("chunk_size", a.chunk_size, b.chunk_size);
  header("salient_fraction", a.salient_fraction, b.salient_fraction);
  header("fixed_fp16_params", a.fixed_fp16_params, b.fixed_fp16_params);
  header("units", a.units.size(), b.units.size());
  const size_t n = std::min(a.units.size(), b.units.size());
  for (size_t i = 0; i < n && out.size() < 20; ++i) {
    const plan::Unit& x = a.units[i];
    const plan::Unit& y = b.units[i];
    auto field = [&](const char* name, int64_t u, int64_t v) {
      if (u != v) out.push_back(absl::StrCat(plan::UnitName(x), ".", name, ": ", u, " vs ", v));
    };
    field("id", x.id, y.id);
    field("layer", x.layer, y.layer);
    field("matrix", x.matrix, y.matrix);
    field("chunk", x.chunk, y.chunk);
    field("rows", x.rows, y.rows);
    field("cols", x.cols, y.cols);
    field("col_begin", x.col_begin, y.col_begin);
    field("salient_count", x.salient_count, y.salient_count);
  }
  return out;
}

void WorstDifference::Add(double v, double tolerance, const std::string& w) {
  if (!(v <= tolerance)) ++over;  // NaN counts as out of tolerance
  if (!(v <= value)) {
    value = v;
    where = w;
  }
}

bool TableDiff::ok() const {
  return layout.empty() && error.over == 0 && bits.over == 0 && features.over == 0;
}

TableDiff DiffUnitTables(const plan::UnitTable& a, plan::UnitTable b,
                         const TableDiffTolerances& tolerances) {
  NarrowToLayersOf(a, &b);
  TableDiff d;
  d.fingerprint_a = a.fingerprint;
  d.fingerprint_b = b.fingerprint;
  d.units_a = a.units.size();
  d.units_b = b.units.size();
  d.tolerances = tolerances;
  d.layout = LayoutDifferences(a, b);
  if (d.layout.empty()) {
    for (size_t i = 0; i < a.units.size(); ++i) CompareUnit(a.units[i], b.units[i], &d);
  }
  return d;
}

std::string FormatTableDiff(const TableDiff& diff, bool as_json) {
  return as_json ? DiffJson(diff) : DiffText(diff);
}

}  // namespace windquant::job
