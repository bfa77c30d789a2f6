#include "common/store/run_listing.h"

#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/status_macros.h"
#include "common/store/plan_repository.h"
#include "common/store/run_repository.h"

namespace windquant::store {
namespace {

std::string Meta(const std::map<std::string, std::string>& m, const std::string& key,
                 const std::string& absent = "-") {
  auto it = m.find(key);
  return it == m.end() ? absent : it->second;
}

std::string PlanLine(const std::string& run_id, const RunPlan& p) {
  const std::string exported = Meta(p.metadata, "exported_perplexity", "");
  return absl::StrFormat("  %s/%s  bits %s  ppl %s (%s)%s  %s  %d bytes  %s\n", run_id, p.plan_id,
                         Meta(p.metadata, "effective_bits"), Meta(p.metadata, "perplexity"),
                         Meta(p.metadata, "perplexity_on", "?"),
                         exported.empty() ? "" : absl::StrCat("  exported ppl ", exported),
                         Meta(p.metadata, "source"), p.size_bytes, Meta(p.metadata, "created"));
}

}  // namespace

absl::StatusOr<std::string> FormatRunListing(ArtifactStore& store) {
  RunRepository runs(&store);
  WQ_ASSIGN_OR_RETURN(std::vector<RunInfo> all, runs.ListRuns());
  std::string out;
  for (const RunInfo& r : all) {
    absl::StrAppendFormat(&out, "run %s  %s  model %s  target %g bits  %d updates  created %s\n",
                          r.run_id, r.state, r.model, r.target_bits, r.updates, r.created);
    WQ_ASSIGN_OR_RETURN(std::vector<RunPlan> plans, runs.ListPlans(r.run_id));
    for (const RunPlan& p : plans) out += PlanLine(r.run_id, p);
  }
  WQ_ASSIGN_OR_RETURN(std::vector<std::string> ids, PlanRepository(&store).ListPlans());
  if (!ids.empty() && !all.empty()) out += "plans outside runs:\n";
  for (const std::string& id : ids) absl::StrAppend(&out, id, "\n");
  return out;
}

}  // namespace windquant::store
