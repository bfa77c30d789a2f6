#include "learner/run_publisher.h"

#include <filesystem>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/plan/plan.h"
#include "common/plan/plan_io.h"

namespace windquant::learner {
namespace {

namespace fs = std::filesystem;

// Files of a checkpoint in the store -> their place under output.dir.
constexpr std::pair<const char*, const char*> kCheckpointFiles[] = {
    {"run.ckpt", "checkpoint/run.ckpt"},
    {"unit_table.pb", "unit_table.pb"},
    {"plans.jsonl", "plans.jsonl"}};
constexpr int kCheckpointsKept = 2;

bool Retryable(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kAborted:
      return true;
    default:
      return false;
  }
}

// The model directory's name, as run ids allow it.
std::string ModelName(const std::string& model_dir) {
  std::string name = fs::path(model_dir).lexically_normal().filename().string();
  if (name.empty()) name = fs::path(model_dir).lexically_normal().parent_path().filename().string();
  for (char& c : name) {
    if (!(absl::ascii_isalnum(c) || c == '_' || c == '-')) c = '_';
  }
  if (name.empty()) name = "model";
  return name.substr(0, 40);
}

// A pushed plan: ALREADY_EXISTS means an earlier attempt (or process) got it there.
absl::Status PushedOrThere(const absl::Status& s) {
  return absl::IsAlreadyExists(s) ? absl::OkStatus() : s;
}

absl::Status AddObjects(const fs::path& dir, const std::string& entry,
                        std::vector<store::PlanObject>* out) {
  const fs::path path = dir / entry;
  std::error_code ec;
  // Files go as paths: Push streams them (exports are GBs; the learner owns no layers).
  if (fs::is_regular_file(path, ec)) {
    out->push_back(store::PlanObject::File(entry, path.string()));
    return absl::OkStatus();
  }
  if (!fs::is_directory(path, ec))
    return absl::NotFoundError(absl::StrCat(path.string(), ": missing"));
  for (fs::recursive_directory_iterator it(path, ec), end; it != end; it.increment(ec)) {
    if (ec) break;
    if (!it->is_regular_file(ec)) continue;
    out->push_back(store::PlanObject::File(fs::relative(it->path(), dir, ec).generic_string(),
                                           it->path().string()));
  }
  if (ec) return absl::InternalError(absl::StrCat(path.string(), ": cannot list: ", ec.message()));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<RunPublisher>> RunPublisher::Open(RunPublisherOptions options) {
  if (options.store.empty()) {
    return absl::InvalidArgumentError("output.store: empty (no artifact store)");
  }
  std::unique_ptr<RunPublisher> p(new RunPublisher());
  p->options_ = options;
  p->log_ = options.log;
  absl::StatusOr<std::unique_ptr<store::ArtifactStore>> opened =
      store::OpenArtifactStore(options.store, options.s3);
  if (!opened.ok()) {
    return absl::Status(opened.status().code(),
                        absl::StrCat("output.store: ", opened.status().message()));
  }
  p->store_ = *std::move(opened);
  p->runs_ = std::make_unique<store::RunRepository>(p->store_.get());
  // The store may be starting too (or briefly away): retried for a while.
  const absl::Time deadline = absl::Now() + options.restore_timeout;
  absl::Duration backoff = absl::Milliseconds(500);
  while (true) {
    absl::Status st = p->ResolveRunId(options.fresh);
    if (st.ok() && !options.fresh) st = p->RestoreCheckpoint(options.restore_timeout);
    if (st.ok()) break;
    if (!Retryable(st) || absl::Now() + backoff > deadline) {
      return absl::Status(st.code(), absl::StrCat("output.store ", p->store_->Describe(),
                                                  ": cannot open the run: ", st.message()));
    }
    p->Log(absl::StrCat("store: ", st.message(), "; retrying in ", absl::FormatDuration(backoff)));
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(10));
  }
  store::UploaderOptions uo = options.uploader;
  if (!uo.log) uo.log = options.log;
  p->uploader_ = std::make_unique<store::BackgroundUploader>(std::move(uo));
  {
    absl::MutexLock lock(&p->mu_);
    p->QueueRunInfo();  // the run is visible (and found again) from now on
  }
  p->Log(absl::StrCat("store: run ", p->run_id_, " in ", p->store_->Describe(),
                      p->restored_ ? " (restored from its checkpoint there)" : ""));
  return p;
}

RunPublisher::~RunPublisher() {
  if (uploader_ != nullptr) uploader_->Stop(absl::ZeroDuration());
}

std::string RunPublisher::Describe() const {
  return absl::StrCat(store_->Describe(), " ", store::RunRepository::RunPrefix(run_id_));
}

void RunPublisher::Log(const std::string& line) const {
  if (log_) log_(line);
}

absl::Status RunPublisher::ResolveRunId(bool fresh) {
  const std::string prefix =
      absl::StrCat(ModelName(options_.model_dir), "-", options_.config_digest.substr(0, 8), "-");
  const std::string id_file = options_.dir + "/run_id";
  std::string id = options_.run_id;
  if (id.empty() && !fresh && base::PathExists(id_file)) {
    WQ_ASSIGN_OR_RETURN(std::string text, base::ReadFile(id_file));
    id = std::string(absl::StripAsciiWhitespace(text));
    if (!store::ValidatePlanId(id).ok()) id.clear();  // unusable: resolved afresh
  }
  if (id.empty() && !fresh) {
    absl::StatusOr<std::string> latest = runs_->LatestRun(prefix);
    if (latest.ok()) {
      id = *latest;
    } else if (!absl::IsNotFound(latest.status())) {
      return latest.status();
    }
  }
  const absl::Time now = absl::Now();
  if (id.empty()) {
    id = absl::StrCat(prefix, absl::FormatTime("%Y%m%dT%H%M%E3SZ", now, absl::UTCTimeZone()));
  }
  WQ_RETURN_IF_ERROR(store::ValidatePlanId(id));
  absl::StatusOr<store::RunInfo> info = runs_->GetRunInfo(id);
  if (!info.ok() && !absl::IsNotFound(info.status())) return info.status();
  store::RunInfo r;
  if (info.ok()) {
    r = *std::move(info);
  } else {
    r.run_id = id;
    r.model = ModelName(options_.model_dir);
    r.config_digest = options_.config_digest;
    r.target_bits = options_.target_bits;
    r.created = store::RunRepository::FormatTime(now);
    r.updated = r.created;
  }
  WQ_RETURN_IF_ERROR(base::WriteFileAtomic(id_file, id + "\n"));
  run_id_ = id;
  absl::MutexLock lock(&mu_);
  info_ = std::move(r);
  return absl::OkStatus();
}

absl::Status RunPublisher::RestoreCheckpoint(absl::Duration) {
  const fs::path dir(options_.dir);
  // Files of its own: the local run goes on (a restart on the same disk).
  if (base::PathExists((dir / "checkpoint/run.ckpt").string()) ||
      base::PathExists((dir / "unit_table.pb").string())) {
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> latest = runs_->LatestCheckpoint(run_id_);
  if (absl::IsNotFound(latest.status())) return absl::OkStatus();  // nothing pushed yet
  if (!latest.ok()) return latest.status();
  WQ_ASSIGN_OR_RETURN(std::vector<store::PlanObject> objects,
                      runs_->Checkpoints(run_id_).Pull(*latest));  // sha256-verified
  for (const store::PlanObject& o : objects) {
    for (const auto& [name, path] : kCheckpointFiles) {
      if (o.name == name) WQ_RETURN_IF_ERROR(base::WriteFileAtomic((dir / path).string(), o.bytes));
    }
  }
  restored_ = true;
  Log(absl::StrCat("store: restored checkpoint ", *latest, " of run ", run_id_, " from ",
                   store_->Describe(), " into ", options_.dir));
  return absl::OkStatus();
}

std::string RunPublisher::NextTimestamp() {
  absl::MutexLock lock(&mu_);
  last_time_ = std::max(absl::Now(), last_time_ + absl::Milliseconds(1));
  return store::RunRepository::FormatTime(last_time_);
}

void RunPublisher::QueueRunInfo() {
  info_.updated = store::RunRepository::FormatTime(absl::Now());
  uploader_->Enqueue({"run.json", "run.json", false, [this]() {
                        store::RunInfo info;
                        {
                          absl::MutexLock lock(&mu_);
                          info = info_;
                        }
                        return runs_->PutRunInfo(info);
                      }});
}

void RunPublisher::OnCheckpoint(int64_t update, bool done) {
  // Read now: the files are consistent with this checkpoint only until the
  // learner goes on (plans.jsonl grows).
  std::vector<store::PlanObject> objects;
  const fs::path dir(options_.dir);
  for (const auto& [name, path] : kCheckpointFiles) {
    absl::StatusOr<std::string> bytes = base::ReadFile((dir / path).string());
    if (!bytes.ok()) {
      if (std::string(name) == "plans.jsonl") {
        objects.push_back({name, ""});  // no evaluated plan yet
        continue;
      }
      Log(absl::StrCat("store: checkpoint of update ", update,
                       " not pushed: ", bytes.status().message()));
      return;
    }
    objects.push_back({name, *std::move(bytes)});
  }
  const std::string id = store::RunRepository::CheckpointId(update, absl::Now());
  const std::map<std::string, std::string> metadata = {{"update", absl::StrCat(update)},
                                                       {"done", done ? "true" : "false"},
                                                       {"created", NextTimestamp()}};
  uploader_->Enqueue({absl::StrCat("checkpoint ", id), "checkpoint", false,
                      [this, id, objects = std::move(objects), metadata]() -> absl::Status {
                        WQ_RETURN_IF_ERROR(
                            PushedOrThere(runs_->Checkpoints(run_id_).Push(id, objects, metadata)));
                        absl::Status pruned = runs_->PruneCheckpoints(run_id_, kCheckpointsKept);
                        if (!pruned.ok())
                          Log(absl::StrCat("store: pruning old checkpoints: ", pruned.message()));
                        return absl::OkStatus();
                      }});
  absl::MutexLock lock(&mu_);
  info_.updates = update;
  QueueRunInfo();
}

void RunPublisher::OnBestPlan(const rl::CandidatePlan& best, const plan::UnitTable& table) {
  plan::Plan plan = plan::Plan::Make(table, best.actions, best.source, best.target_bits);
  plan.policy_version = best.policy_version;
  if (!plan.Validate(table).ok()) return;  // not a plan of this table: nothing to push
  // Plan::Make's id ends in 12 hex of sha256(fingerprint, actions): one id per plan.
  const std::string id = absl::StrCat("best-", plan.plan_id.substr(plan.plan_id.size() - 12));
  std::vector<store::PlanObject> objects = {{"plan.json", plan::PlanToJson(plan, table)},
                                            {"plan.bin", plan::PlanToBinary(plan, table)}};
  const std::map<std::string, std::string> metadata = {
      {"effective_bits", absl::StrFormat("%.6f", best.evaluation.effective_bits)},
      {"perplexity", absl::StrFormat("%.6f", best.evaluation.eval_ppl)},
      {"perplexity_on", "evaluation slice"},
      {"source", best.source},
      {"update", absl::StrCat(best.update)},
      {"policy_version", absl::StrCat(best.policy_version)},
      {"target_bits", absl::StrFormat("%g", best.target_bits)},
      {"created", NextTimestamp()}};
  // Essential: a store that is away for minutes delays a best plan, never
  // loses it (each is a few bytes per unit).
  uploader_->Enqueue({absl::StrCat("plan ", id), "", /*essential=*/true,
                      [this, id, objects = std::move(objects), metadata]() {
                        return PushedOrThere(runs_->Plans(run_id_).Push(id, objects, metadata));
                      }});
  absl::MutexLock lock(&mu_);
  info_.best_plan = id;
  info_.best_bits = best.evaluation.effective_bits;
  info_.best_perplexity = best.evaluation.eval_ppl;
  QueueRunInfo();
}

void RunPublisher::PublishFinal(const std::string& dir, const std::vector<std::string>& entries,
                                std::map<std::string, std::string> metadata) {
  metadata["created"] = NextTimestamp();
  uploader_->Enqueue({absl::StrCat("plan ", store::kFinalPlanId), "", /*essential=*/true,
                      [this, dir, entries, metadata]() -> absl::Status {
                        std::vector<store::PlanObject> objects;  // paths, streamed by Push
                        for (const std::string& e : entries) {
                          absl::Status st = AddObjects(dir, e, &objects);
                          // A file that is not there cannot come: give the job up.
                          if (!st.ok()) return absl::InvalidArgumentError(st.message());
                        }
                        WQ_RETURN_IF_ERROR(PushedOrThere(
                            runs_->Plans(run_id_).Push(store::kFinalPlanId, objects, metadata)));
                        store::RunInfo info;
                        {
                          absl::MutexLock lock(&mu_);
                          info_.state = "done";
                          info_.updated = store::RunRepository::FormatTime(absl::Now());
                          info = info_;
                        }
                        return runs_->PutRunInfo(info);
                      }});
}

absl::StatusOr<bool> RunPublisher::HasFinal() {
  absl::StatusOr<store::PlanManifest> m = runs_->Plans(run_id_).GetManifest(store::kFinalPlanId);
  if (absl::IsNotFound(m.status())) return false;
  if (!m.ok()) return m.status();
  return true;
}

}  // namespace windquant::learner
