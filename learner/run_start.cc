#include "learner/run_start.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"

namespace windquant::learner {

using nlohmann::json;

json RunStartJson(const RunStart& s) {
  return {{"cap_bits", s.cap_bits},
          {"bits", s.bits},
          {"selection_degradation", s.degradation},
          {"within_epsilon", s.within_epsilon},
          {"evaluations", s.evaluations}};
}

absl::Status WriteRunStart(const std::string& path, const std::string& run_fingerprint,
                           const RunStart& start) {
  json j = RunStartJson(start);
  j["run_fingerprint"] = run_fingerprint;
  return base::WriteFileAtomic(path, j.dump(2) + "\n");
}

absl::StatusOr<RunStart> ReadRunStart(const std::string& path, const std::string& run_fingerprint) {
  WQ_ASSIGN_OR_RETURN(const std::string text, base::ReadFile(path));
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  RunStart s;
  try {
    if (j.at("run_fingerprint").get<std::string>() != run_fingerprint) {
      return absl::NotFoundError(absl::StrCat(path, ": the start of another run"));
    }
    s.cap_bits = j.at("cap_bits").get<double>();
    s.bits = j.at("bits").get<double>();
    s.degradation = j.at("selection_degradation").get<double>();
    s.within_epsilon = j.at("within_epsilon").get<bool>();
    s.evaluations = j.at("evaluations").get<int64_t>();
  } catch (const json::exception& e) {
    return absl::DataLossError(absl::StrCat(path, ": not a run start (", e.what(), ")"));
  }
  if (!std::isfinite(s.cap_bits) || s.cap_bits <= 0 || s.evaluations < 0) {
    return absl::DataLossError(absl::StrCat(path, ": cap_bits ", s.cap_bits, ", evaluations ",
                                            s.evaluations, " out of range"));
  }
  return s;
}

}  // namespace windquant::learner
