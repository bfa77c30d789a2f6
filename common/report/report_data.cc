#include "common/report/report_data.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "nlohmann/json.hpp"

namespace windquant::report {
namespace {

using Json = nlohmann::ordered_json;

// NaN / inf are not JSON: written as null, read back as NaN.
Json Number(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }

// A reader that remembers the path of the field it is looking at, so every error
// names it ("units[2].bits: expected a number").
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  absl::Status Error(const std::string& path, const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": ", path, ": ", what));
  }

  absl::StatusOr<const Json*> Field(const Json& obj, const std::string& path, const char* key,
                                    bool optional) const {
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (optional) return nullptr;
      return Error(Join(path, key), "missing");
    }
    return &*it;
  }

  absl::Status Double(const Json& obj, const std::string& path, const char* key, bool optional,
                      double* out) const {
    absl::StatusOr<const Json*> v = Field(obj, path, key, optional);
    if (!v.ok()) return v.status();
    if (*v == nullptr) return absl::OkStatus();
    if ((*v)->is_null()) {
      *out = std::numeric_limits<double>::quiet_NaN();
      return absl::OkStatus();
    }
    if (!(*v)->is_number()) return Error(Join(path, key), "expected a number");
    *out = (*v)->get<double>();
    return absl::OkStatus();
  }

  template <typename Int>
  absl::Status Integer(const Json& obj, const std::string& path, const char* key, Int* out) const {
    absl::StatusOr<const Json*> v = Field(obj, path, key, false);
    if (!v.ok()) return v.status();
    if (!(*v)->is_number_integer()) return Error(Join(path, key), "expected an integer");
    const int64_t x = (*v)->get<int64_t>();
    if (x < std::numeric_limits<Int>::min() || x > std::numeric_limits<Int>::max()) {
      return Error(Join(path, key), "out of range");
    }
    *out = static_cast<Int>(x);
    return absl::OkStatus();
  }

  absl::Status String(const Json& obj, const std::string& path, const char* key,
                      std::string* out) const {
    absl::StatusOr<const Json*> v = Field(obj, path, key, false);
    if (!v.ok()) return v.status();
    if (!(*v)->is_string()) return Error(Join(path, key), "expected a string");
    *out = (*v)->get<std::string>();
    return absl::OkStatus();
  }

  // The array at obj[key] (nullptr when optional and absent).
  absl::StatusOr<const Json*> Array(const Json& obj, const char* key, bool optional) const {
    absl::StatusOr<const Json*> v = Field(obj, "", key, optional);
    if (!v.ok() || *v == nullptr) return v;
    if (!(*v)->is_array()) return Error(key, "expected an array");
    return v;
  }

  absl::Status Object(const Json& v, const std::string& path) const {
    return v.is_object() ? absl::OkStatus() : Error(path, "expected an object");
  }

 private:
  static std::string Join(const std::string& path, const char* key) {
    return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
  }
  std::string source_;
};

}  // namespace

absl::Status ValidateReportData(const ReportData& data) {
  auto bad = [](const std::string& field, const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
  };
  if (!(data.target_bits >= 0.0) || !std::isfinite(data.target_bits)) {
    return bad("target_bits", absl::StrCat(data.target_bits, " must be finite and >= 0"));
  }
  for (size_t i = 0; i < data.units.size(); ++i) {
    const ReportUnit& u = data.units[i];
    const std::string f = absl::StrCat("units[", i, "]");
    if (u.layer < 0) return bad(f + ".layer", absl::StrCat(u.layer, " < 0"));
    if (u.matrix < 0 || u.matrix >= kNumMatrixTypes) {
      return bad(f + ".matrix", absl::StrCat(u.matrix, " not in 0..6"));
    }
    if (u.n_weights <= 0) return bad(f + ".n_weights", absl::StrCat(u.n_weights, " <= 0"));
    if (!std::isfinite(u.bits) || u.bits < 0.0) {
      return bad(f + ".bits", absl::StrCat(u.bits, " must be finite and >= 0"));
    }
  }
  if (!(data.max_ppl_increase >= 0.0) || !std::isfinite(data.max_ppl_increase)) {
    return bad("max_ppl_increase", absl::StrCat(data.max_ppl_increase, " must be finite and >= 0"));
  }
  for (size_t i = 0; i < data.measured.size(); ++i) {
    if (!std::isfinite(data.measured[i].effective_bits) || data.measured[i].effective_bits < 0) {
      return bad(absl::StrCat("measured[", i, "].effective_bits"), "must be finite and >= 0");
    }
  }
  for (size_t i = 0; i < data.points.size(); ++i) {
    const ReportPoint& p = data.points[i];
    const std::string f = absl::StrCat("points[", i, "]");
    if (p.label.empty()) return bad(f + ".label", "empty");
    if (!std::isfinite(p.effective_bits) || p.effective_bits < 0.0) {
      return bad(f + ".effective_bits", absl::StrCat(p.effective_bits, " must be finite and >= 0"));
    }
    if (std::isinf(p.perplexity) || p.perplexity < 0.0) {
      return bad(f + ".perplexity", absl::StrCat(p.perplexity, " must be >= 0 or unknown"));
    }
  }
  return absl::OkStatus();
}

std::string ToJson(const ReportData& data) {
  Json j;
  j["model_name"] = data.model_name;
  j["fingerprint"] = data.fingerprint;
  j["fp_perplexity"] = Number(data.fp_perplexity);
  j["target_bits"] = Number(data.target_bits);
  j["winner"] = data.winner;
  j["wall_time_s"] = Number(data.wall_time_s);
  j["notes"] = data.notes;
  Json units = Json::array();
  for (const ReportUnit& u : data.units) {
    units.push_back(Json{{"layer", u.layer},
                         {"matrix", u.matrix},
                         {"n_weights", u.n_weights},
                         {"bits", Number(u.bits)}});
  }
  j["units"] = std::move(units);
  Json points = Json::array();
  for (const ReportPoint& p : data.points) {
    points.push_back(Json{{"label", p.label},
                          {"effective_bits", Number(p.effective_bits)},
                          {"perplexity", Number(p.perplexity)}});
  }
  j["points"] = std::move(points);
  Json curve = Json::array();
  for (const TrainingRow& r : data.curve) {
    curve.push_back(Json{{"update", r.update},
                         {"mean_reward", Number(r.mean_reward)},
                         {"best_perplexity", Number(r.best_perplexity)},
                         {"bits", Number(r.bits)},
                         {"lambda", Number(r.lambda)},
                         {"target_bits", Number(r.target_bits)},
                         {"mean_perplexity", Number(r.mean_perplexity)}});
  }
  j["curve"] = std::move(curve);
  if (data.max_ppl_increase > 0) {
    j["max_ppl_increase"] = Number(data.max_ppl_increase);
    Json measured = Json::array();
    for (const DegradationPoint& m : data.measured) {
      Json point = {{"effective_bits", Number(m.effective_bits)},
                    {"degradation", Number(m.degradation)}};
      if (!m.label.empty()) point["label"] = m.label;
      measured.push_back(std::move(point));
    }
    j["measured"] = std::move(measured);
  }
  return j.dump(1) + "\n";
}

namespace {

// The quality-target keys (max_ppl_increase, measured), both optional.
absl::Status ReadQualityTarget(const Json& j, Reader& r, ReportData* d) {
  WQ_RETURN_IF_ERROR(r.Double(j, "", "max_ppl_increase", true, &d->max_ppl_increase));
  absl::StatusOr<const Json*> measured = r.Array(j, "measured", true);
  if (!measured.ok()) return measured.status();
  if (*measured == nullptr) return absl::OkStatus();
  for (size_t i = 0; i < (*measured)->size(); ++i) {
    const Json& e = (**measured)[i];
    const std::string p = absl::StrCat("measured[", i, "]");
    WQ_RETURN_IF_ERROR(r.Object(e, p));
    DegradationPoint m;
    WQ_RETURN_IF_ERROR(r.Double(e, p, "effective_bits", false, &m.effective_bits));
    WQ_RETURN_IF_ERROR(r.Double(e, p, "degradation", false, &m.degradation));
    if (e.contains("label")) WQ_RETURN_IF_ERROR(r.String(e, p, "label", &m.label));
    d->measured.push_back(m);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ReportData> FromJson(std::string_view text, const std::string& source) {
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(source, ": not valid JSON"));
  Reader r(source);
  if (!j.is_object()) return r.Error("(top level)", "expected an object");
  ReportData d;
  WQ_RETURN_IF_ERROR(r.String(j, "", "model_name", &d.model_name));
  WQ_RETURN_IF_ERROR(r.String(j, "", "fingerprint", &d.fingerprint));
  WQ_RETURN_IF_ERROR(r.Double(j, "", "fp_perplexity", false, &d.fp_perplexity));
  WQ_RETURN_IF_ERROR(r.Double(j, "", "target_bits", false, &d.target_bits));
  WQ_RETURN_IF_ERROR(r.String(j, "", "winner", &d.winner));
  // A number, or an object with "total" (the report.json of `windquant quantize`).
  const auto wall = j.find("wall_time_s");
  if (wall != j.end() && wall->is_object()) {
    WQ_RETURN_IF_ERROR(r.Double(*wall, "wall_time_s", "total", false, &d.wall_time_s));
  } else {
    WQ_RETURN_IF_ERROR(r.Double(j, "", "wall_time_s", true, &d.wall_time_s));
  }

  absl::StatusOr<const Json*> notes = r.Array(j, "notes", true);
  if (!notes.ok()) return notes.status();
  if (*notes != nullptr) {
    for (size_t i = 0; i < (*notes)->size(); ++i) {
      const Json& n = (**notes)[i];
      if (!n.is_string()) return r.Error(absl::StrCat("notes[", i, "]"), "expected a string");
      d.notes.push_back(n.get<std::string>());
    }
  }

  absl::StatusOr<const Json*> units = r.Array(j, "units", false);
  if (!units.ok()) return units.status();
  for (size_t i = 0; i < (*units)->size(); ++i) {
    const Json& e = (**units)[i];
    const std::string p = absl::StrCat("units[", i, "]");
    WQ_RETURN_IF_ERROR(r.Object(e, p));
    ReportUnit u;
    WQ_RETURN_IF_ERROR(r.Integer(e, p, "layer", &u.layer));
    WQ_RETURN_IF_ERROR(r.Integer(e, p, "matrix", &u.matrix));
    WQ_RETURN_IF_ERROR(r.Integer(e, p, "n_weights", &u.n_weights));
    WQ_RETURN_IF_ERROR(r.Double(e, p, "bits", false, &u.bits));
    d.units.push_back(u);
  }

  absl::StatusOr<const Json*> points = r.Array(j, "points", false);
  if (!points.ok()) return points.status();
  for (size_t i = 0; i < (*points)->size(); ++i) {
    const Json& e = (**points)[i];
    const std::string p = absl::StrCat("points[", i, "]");
    WQ_RETURN_IF_ERROR(r.Object(e, p));
    ReportPoint pt;
    WQ_RETURN_IF_ERROR(r.String(e, p, "label", &pt.label));
    WQ_RETURN_IF_ERROR(r.Double(e, p, "effective_bits", false, &pt.effective_bits));
    WQ_RETURN_IF_ERROR(r.Double(e, p, "perplexity", false, &pt.perplexity));
    d.points.push_back(std::move(pt));
  }

  absl::StatusOr<const Json*> curve = r.Array(j, "curve", true);
  if (!curve.ok()) return curve.status();
  if (*curve != nullptr) {
    for (size_t i = 0; i < (*curve)->size(); ++i) {
      const Json& e = (**curve)[i];
      const std::string p = absl::StrCat("curve[", i, "]");
      WQ_RETURN_IF_ERROR(r.Object(e, p));
      TrainingRow row;
      WQ_RETURN_IF_ERROR(r.Integer(e, p, "update", &row.update));
      WQ_RETURN_IF_ERROR(r.Double(e, p, "mean_reward", false, &row.mean_reward));
      WQ_RETURN_IF_ERROR(r.Double(e, p, "best_perplexity", false, &row.best_perplexity));
      WQ_RETURN_IF_ERROR(r.Double(e, p, "bits", false, &row.bits));
      WQ_RETURN_IF_ERROR(r.Double(e, p, "lambda", false, &row.lambda));
      WQ_RETURN_IF_ERROR(r.Double(e, p, "target_bits", false, &row.target_bits));
      WQ_RETURN_IF_ERROR(r.Double(e, p, "mean_perplexity", true, &row.mean_perplexity));
      d.curve.push_back(row);
    }
  }
  WQ_RETURN_IF_ERROR(ReadQualityTarget(j, r, &d));
  absl::Status valid = ValidateReportData(d);
  if (!valid.ok()) return absl::InvalidArgumentError(absl::StrCat(source, ": ", valid.message()));
  return d;
}

absl::StatusOr<ReportData> ReadReportJson(const std::string& path) {
  absl::StatusOr<std::string> text = base::ReadFile(path);
  if (!text.ok()) return text.status();
  return FromJson(*text, path);
}

absl::Status WriteReportJson(const ReportData& data, const std::string& path) {
  absl::Status valid = ValidateReportData(data);
  if (!valid.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", valid.message()));
  return base::WriteFileAtomic(path, ToJson(data));
}

}  // namespace windquant::report
