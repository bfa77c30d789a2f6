#include "common/store/run_repository.h"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/base/status_macros.h"

namespace windquant::store {
namespace {

std::string InfoKey(absl::string_view run_id) {
  return absl::StrCat(RunRepository::RunPrefix(run_id), kRunInfoName);
}

// The ids of runs/<id>/<suffix> keys among `keys`.
std::set<std::string> RunIdsOf(const std::vector<std::string>& keys, absl::string_view suffix) {
  std::set<std::string> ids;
  for (const std::string& key : keys) {
    absl::string_view rest = key;
    if (!absl::ConsumePrefix(&rest, kRunsPrefix)) continue;
    const size_t slash = rest.find('/');
    if (slash == absl::string_view::npos || rest.substr(slash + 1) != suffix) continue;
    if (ValidatePlanId(rest.substr(0, slash)).ok()) ids.emplace(rest.substr(0, slash));
  }
  return ids;
}

bool Newer(const RunInfo& a, const RunInfo& b) {
  return a.created != b.created ? a.created > b.created : a.run_id > b.run_id;
}

}  // namespace

std::string RunRepository::RunPrefix(absl::string_view run_id) {
  return absl::StrCat(kRunsPrefix, run_id, "/");
}

PlanRepository RunRepository::Plans(absl::string_view run_id) const {
  return PlanRepository(store_, absl::StrCat(RunPrefix(run_id), "plans/"));
}

PlanRepository RunRepository::Checkpoints(absl::string_view run_id) const {
  return PlanRepository(store_, absl::StrCat(RunPrefix(run_id), "checkpoints/"));
}

std::string RunRepository::CheckpointId(int64_t update, absl::Time time) {
  return absl::StrFormat("u%08d-%013d", update, absl::ToUnixMillis(time));
}

std::string RunRepository::FormatTime(absl::Time time) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", time, absl::UTCTimeZone());
}

std::string RunRepository::RunInfoToJson(const RunInfo& r) {
  nlohmann::json j = {{"format", kRunInfoFormat},
                      {"run_id", r.run_id},
                      {"model", r.model},
                      {"config_digest", r.config_digest},
                      {"target_bits", r.target_bits},
                      {"created", r.created},
                      {"updated", r.updated},
                      {"state", r.state},
                      {"updates", r.updates},
                      {"best_plan", r.best_plan},
                      {"best_bits", r.best_bits},
                      {"best_perplexity", r.best_perplexity}};
  return j.dump(2) + "\n";
}

absl::StatusOr<RunInfo> RunRepository::ParseRunInfo(absl::string_view json,
                                                    absl::string_view run_id) {
  const std::string where = absl::StrCat("run '", run_id, "': ", kRunInfoName);
  nlohmann::json j = nlohmann::json::parse(json.begin(), json.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::DataLossError(absl::StrCat(where, ": not a JSON object"));
  }
  if (j.value("format", std::string()) != kRunInfoFormat) {
    return absl::DataLossError(absl::StrCat(where, ": format: not ", kRunInfoFormat));
  }
  RunInfo r;
  try {
    r.run_id = j.at("run_id").get<std::string>();
    r.model = j.value("model", std::string());
    r.config_digest = j.value("config_digest", std::string());
    r.target_bits = j.value("target_bits", 0.0);
    r.created = j.at("created").get<std::string>();
    r.updated = j.value("updated", r.created);
    r.state = j.value("state", std::string("running"));
    r.updates = j.value("updates", int64_t{0});
    r.best_plan = j.value("best_plan", std::string());
    r.best_bits = j.value("best_bits", 0.0);
    r.best_perplexity = j.value("best_perplexity", 0.0);
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat(where, ": ", e.what()));
  }
  if (r.run_id != run_id)
    return absl::DataLossError(absl::StrCat(where, ": run_id: is '", r.run_id, "'"));
  return r;
}

absl::Status RunRepository::PutRunInfo(const RunInfo& info) {
  WQ_RETURN_IF_ERROR(ValidatePlanId(info.run_id));
  return store_->Put(InfoKey(info.run_id), RunInfoToJson(info));
}

absl::StatusOr<RunInfo> RunRepository::GetRunInfo(absl::string_view run_id) {
  WQ_RETURN_IF_ERROR(ValidatePlanId(run_id));
  absl::StatusOr<std::string> json = store_->Get(InfoKey(run_id));
  if (absl::IsNotFound(json.status())) {
    return absl::NotFoundError(
        absl::StrCat("run '", run_id, "' not found in ", store_->Describe()));
  }
  if (!json.ok()) return json.status();
  return ParseRunInfo(*json, run_id);
}

absl::StatusOr<std::vector<RunInfo>> RunRepository::ListRuns() {
  WQ_ASSIGN_OR_RETURN(std::vector<std::string> keys, store_->List(kRunsPrefix));
  std::vector<RunInfo> runs;
  for (const std::string& id : RunIdsOf(keys, kRunInfoName)) {
    WQ_ASSIGN_OR_RETURN(RunInfo info, GetRunInfo(id));
    runs.push_back(std::move(info));
  }
  std::sort(runs.begin(), runs.end(), Newer);
  return runs;
}

absl::StatusOr<std::string> RunRepository::LatestRun(absl::string_view id_prefix) {
  WQ_ASSIGN_OR_RETURN(std::vector<std::string> keys,
                      store_->List(absl::StrCat(kRunsPrefix, id_prefix)));
  std::vector<RunInfo> runs;
  for (const std::string& id : RunIdsOf(keys, kRunInfoName)) {
    absl::StatusOr<RunInfo> info = GetRunInfo(id);
    if (info.ok()) runs.push_back(*std::move(info));
  }
  if (runs.empty()) {
    return absl::NotFoundError(absl::StrCat("no run '", id_prefix, "*' in ", store_->Describe()));
  }
  return std::min_element(runs.begin(), runs.end(), Newer)->run_id;
}

absl::StatusOr<std::vector<RunPlan>> RunRepository::ListPlans(absl::string_view run_id) {
  PlanRepository plans = Plans(run_id);
  WQ_ASSIGN_OR_RETURN(std::vector<std::string> ids, plans.ListPlans());
  std::vector<RunPlan> out;
  for (const std::string& id : ids) {
    WQ_ASSIGN_OR_RETURN(PlanManifest m, plans.GetManifest(id));
    RunPlan p{id, m.metadata, 0};
    for (const PlanManifestEntry& e : m.objects) p.size_bytes += e.size_bytes;
    out.push_back(std::move(p));
  }
  std::sort(out.begin(), out.end(), [](const RunPlan& a, const RunPlan& b) {
    const std::string ca = a.metadata.count("created") ? a.metadata.at("created") : "";
    const std::string cb = b.metadata.count("created") ? b.metadata.at("created") : "";
    return ca != cb ? ca > cb : a.plan_id > b.plan_id;
  });
  return out;
}

absl::StatusOr<std::string> RunRepository::LatestCheckpoint(absl::string_view run_id) {
  WQ_ASSIGN_OR_RETURN(std::vector<std::string> ids, Checkpoints(run_id).ListPlans());
  if (ids.empty()) {
    return absl::NotFoundError(
        absl::StrCat("run '", run_id, "' has no checkpoint in ", store_->Describe()));
  }
  return ids.back();  // sorted; ids sort by update, then time
}

absl::Status RunRepository::PruneCheckpoints(absl::string_view run_id, int keep) {
  PlanRepository checkpoints = Checkpoints(run_id);
  WQ_ASSIGN_OR_RETURN(std::vector<std::string> ids, checkpoints.ListPlans());
  const int n = static_cast<int>(ids.size()) - std::max(1, keep);
  for (int i = 0; i < n; ++i) WQ_RETURN_IF_ERROR(checkpoints.Delete(ids[i]));
  return absl::OkStatus();
}

}  // namespace windquant::store
