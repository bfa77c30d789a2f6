// `windquant plans list|show|pull|push`: browse and fetch plan artifacts in an
// artifact store (common/store). This is the only layer that reads AWS_*
// environment variables; the store library takes an S3Options struct.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cli/command.h"
#include "common/base/status_macros.h"
#include "common/store/artifact_store.h"
#include "common/store/plan_repository.h"

namespace windquant::cli {
namespace {

constexpr char kUsage[] =
    "usage: windquant plans VERB --store URI [flags]\n"
    "\n"
    "verbs:\n"
    "  list                       ids of complete plans (those with a manifest)\n"
    "  show --plan ID             the plan's manifest: size, sha256 and name per object\n"
    "  pull --plan ID [--out DIR] fetch every object, verify size and sha256, write to DIR\n"
    "                             (default ./<ID>); refuses on any mismatch; all or\n"
    "                             nothing; an existing non-empty DIR needs --force\n"
    "                             (replaced whole)\n"
    "  push --plan ID --dir DIR   upload every file under DIR, manifest last\n"
    "\n"
    "flags:\n"
    "  --store URI     file:///abs/path, a local path, or s3://bucket[/prefix]\n"
    "                  (default ./artifacts)\n"
    "  --endpoint URL  S3-compatible endpoint, e.g. http://127.0.0.1:9000\n"
    "                  (default $AWS_ENDPOINT_URL, else AWS)\n"
    "  --region NAME   (default $AWS_REGION, $AWS_DEFAULT_REGION, else us-east-1)\n"
    "\n"
    "S3 credentials come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and\n"
    "optionally AWS_SESSION_TOKEN.";

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

absl::Status RunPlans(Args& args) {
  const std::string uri = args.Get("store", store::kDefaultStoreUri);
  store::S3Options s3;
  s3.endpoint_url = args.Get("endpoint", Env("AWS_ENDPOINT_URL"));
  s3.region = args.Get("region", Env("AWS_REGION"));
  if (s3.region.empty()) s3.region = Env("AWS_DEFAULT_REGION");
  if (s3.region.empty()) s3.region = "us-east-1";
  s3.access_key_id = Env("AWS_ACCESS_KEY_ID");
  s3.secret_access_key = Env("AWS_SECRET_ACCESS_KEY");
  s3.session_token = Env("AWS_SESSION_TOKEN");
  const std::string plan_id = args.Get("plan");
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
  if (verb != "list" && plan_id.empty())
    return absl::InvalidArgumentError(absl::StrCat(verb, ": --plan is required"));
  if (verb != "list") WQ_RETURN_IF_ERROR(store::ValidatePlanId(plan_id));
  if (verb == "push" && in_dir.empty())
    return absl::InvalidArgumentError("push: --dir is required");

  WQ_ASSIGN_OR_RETURN(std::unique_ptr<store::ArtifactStore> artifact_store,
                      store::OpenArtifactStore(uri, s3));
  store::PlanRepository repo(artifact_store.get());

  if (verb == "list") {
    WQ_ASSIGN_OR_RETURN(std::vector<std::string> ids, repo.ListPlans());
    for (const std::string& id : ids) std::printf("%s\n", id.c_str());
    return absl::OkStatus();
  }
  if (verb == "show") {
    WQ_ASSIGN_OR_RETURN(store::PlanManifest manifest, repo.GetManifest(plan_id));
    std::printf("plan %s in %s (%zu objects)\n", manifest.plan_id.c_str(),
                artifact_store->Describe().c_str(), manifest.objects.size());
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
  std::printf("pulled plan %s (%zu objects, %lld bytes, sha256 verified) to %s\n", plan_id.c_str(),
              manifest.objects.size(), static_cast<long long>(total), dir.c_str());
  return absl::OkStatus();
}

}  // namespace

WQ_REGISTER_COMMAND(plans, "plans", "list, show, pull or push plans in an artifact store", kUsage,
                    RunPlans);

}  // namespace windquant::cli
