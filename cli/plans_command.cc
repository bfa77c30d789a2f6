// `windquant plans list|show|pull|push`: browse and fetch plan artifacts in an
// artifact store (common/store): the runs (runs/<run id>/, written by
// `quantize` and the learner with output.store) and plans outside runs
// (plans/<id>/, `plans push`). AWS_* variables are read here (the process
// edge, store::S3OptionsFromEnvironment); the store library takes S3Options.
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/command.h"
#include "common/base/location_check.h"
#include "common/base/status_macros.h"
#include "common/store/artifact_store.h"
#include "common/store/plan_repository.h"
#include "common/store/run_listing.h"
#include "common/store/run_repository.h"
#include "common/store/s3_environment.h"

namespace windquant::cli {
namespace {

constexpr char kUsage[] =
    "usage: windquant plans VERB --store URI [flags]\n"
    "\n"
    "verbs:\n"
    "  list                       runs, newest first, each with its plans newest first\n"
    "                             (bits and perplexity); then plans outside runs\n"
    "  show --plan ID             the plan's manifest: size, sha256 and name per object\n"
    "  pull --plan ID [--out DIR] fetch every object, verify size and sha256, write to DIR\n"
    "                             (default ./<ID>); refuses on any mismatch; all or\n"
    "                             nothing; an existing non-empty DIR needs --force\n"
    "                             (replaced whole)\n"
    "  push --plan ID --dir DIR   upload every file under DIR (outside runs), manifest last\n"
    "\n"
    "A plan of a run is RUN/PLAN (as `list` prints it), e.g.\n"
    "  windquant plans pull --store s3://b/p --plan "
    "stories260k-1a2b3c4d-20250131T120000.000Z/final\n"
    "or --run RUN --plan PLAN; --run RUN alone means RUN/final.\n"
    "\n"
    "flags:\n"
    "  --store URI     file:///abs/path, a local path, or s3://bucket[/prefix]\n"
    "                  (default ./artifacts)\n"
    "  --run RUN       the run of --plan\n"
    "  --endpoint URL  S3-compatible endpoint, e.g. http://127.0.0.1:9000\n"
    "                  (default $AWS_ENDPOINT_URL, else AWS)\n"
    "  --region NAME   (default $AWS_REGION, $AWS_DEFAULT_REGION, else us-east-1)\n"
    "\n"
    "S3 credentials come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and\n"
    "optionally AWS_SESSION_TOKEN.";

// "RUN/PLAN" in --plan, --run RUN alone (RUN/final), and their checks.
absl::Status ResolvePlan(const std::string& verb, std::string* run_id, std::string* plan_id) {
  if (const size_t slash = plan_id->find('/'); slash != std::string::npos && run_id->empty()) {
    *run_id = plan_id->substr(0, slash);
    *plan_id = plan_id->substr(slash + 1);
  }
  if (!run_id->empty() && plan_id->empty()) *plan_id = store::kFinalPlanId;
  if (verb != "list" && plan_id->empty())
    return absl::InvalidArgumentError(absl::StrCat(verb, ": --plan is required"));
  if (verb != "list") WQ_RETURN_IF_ERROR(store::ValidatePlanId(*plan_id));
  if (run_id->empty()) return absl::OkStatus();
  absl::Status st = store::ValidatePlanId(*run_id);
  if (!st.ok()) return absl::InvalidArgumentError(absl::StrCat("--run: ", st.message()));
  if (verb == "push") {
    return absl::InvalidArgumentError("push: --run: runs are written by quantize and the learner");
  }
  return absl::OkStatus();
}

absl::Status RunPlans(Args& args) {
  const std::string uri = args.Get("store", store::kDefaultStoreUri);
  store::S3Options s3 = store::S3OptionsFromEnvironment();
  s3.endpoint_url = args.Get("endpoint", s3.endpoint_url);
  s3.region = args.Get("region", s3.region);
  std::string plan_id = args.Get("plan");
  std::string run_id = args.Get("run");
  const std::string out_dir = args.Get("out");
  const std::string in_dir = args.Get("dir");
  const bool force = args.Has("force");

  // The verb is the one positional argument.
  const auto& positional = args.positional();
  if (positional.empty())
    return absl::InvalidArgumentError("missing verb: list, show, pull or push (see --help)");
  WQ_RETURN_IF_ERROR(args.Finish(/*max_positionals=*/1));

  const std::string& verb = positional[0];
  if (verb != "list" && verb != "show" && verb != "pull" && verb != "push") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown verb '", verb, "' (list, show, pull, push)"));
  }
  WQ_RETURN_IF_ERROR(ResolvePlan(verb, &run_id, &plan_id));
  if (verb == "push" && in_dir.empty())
    return absl::InvalidArgumentError("push: --dir is required");
  if (verb == "push") WQ_RETURN_IF_ERROR(base::CheckInputDir(in_dir, "--dir"));
  if (verb == "pull" && !out_dir.empty()) {
    WQ_RETURN_IF_ERROR(base::CheckOutputParent(out_dir, "--out"));
  }

  WQ_ASSIGN_OR_RETURN(std::unique_ptr<store::ArtifactStore> artifact_store,
                      store::OpenArtifactStore(uri, s3));
  // Reading a store that is not there is an error, never an empty answer.
  if (verb != "push") WQ_RETURN_IF_ERROR(artifact_store->CheckExists());
  if (verb == "list") {
    WQ_ASSIGN_OR_RETURN(const std::string listing, store::FormatRunListing(*artifact_store));
    std::fputs(listing.c_str(), stdout);
    return absl::OkStatus();
  }
  store::RunRepository runs(artifact_store.get());
  store::PlanRepository repo =
      run_id.empty() ? store::PlanRepository(artifact_store.get()) : runs.Plans(run_id);
  const std::string name = run_id.empty() ? plan_id : absl::StrCat(run_id, "/", plan_id);

  if (verb == "show") {
    WQ_ASSIGN_OR_RETURN(store::PlanManifest manifest, repo.GetManifest(plan_id));
    std::printf("plan %s in %s (%zu objects)\n", name.c_str(), artifact_store->Describe().c_str(),
                manifest.objects.size());
    for (const auto& [key, value] : manifest.metadata) {
      std::printf("  %s: %s\n", key.c_str(), value.c_str());
    }
    for (const auto& e : manifest.objects) {
      std::printf("%12lld  %s  %s\n", static_cast<long long>(e.size_bytes), e.sha256.c_str(),
                  e.name.c_str());
    }
    return absl::OkStatus();
  }
  if (verb == "push") {
    WQ_RETURN_IF_ERROR(repo.PushDirectory(plan_id, in_dir));
    std::printf("pushed plan %s from %s to %s\n", plan_id.c_str(), in_dir.c_str(),
                artifact_store->Describe().c_str());
    return absl::OkStatus();
  }
  const std::string dir = out_dir.empty() ? absl::StrCat("./", plan_id) : out_dir;
  WQ_RETURN_IF_ERROR(repo.PullToDirectory(plan_id, dir, force));
  WQ_ASSIGN_OR_RETURN(store::PlanManifest manifest, repo.GetManifest(plan_id));
  int64_t total = 0;
  for (const auto& e : manifest.objects) total += e.size_bytes;
  std::printf("pulled plan %s (%zu objects, %lld bytes, sha256 verified) to %s\n", name.c_str(),
              manifest.objects.size(), static_cast<long long>(total), dir.c_str());
  return absl::OkStatus();
}

}  // namespace

WQ_REGISTER_COMMAND(plans, "plans", "list, show, pull or push plans in an artifact store", kUsage,
                    RunPlans);

}  // namespace windquant::cli
