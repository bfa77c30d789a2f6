// PlanRepository: a run's plan artifacts (plan JSON, plan binary, report, ...)
// on an ArtifactStore, laid out under a collection prefix (default "plans/";
// a run's plans and checkpoints use "runs/<run_id>/plans/" and
// ".../checkpoints/", run_repository.h) as
//   <prefix><plan_id>/<name>          one object per file
//   <prefix><plan_id>/manifest.json   name, size and sha256 of every object,
//                                     and the plan's metadata (strings)
// The manifest is written LAST, so a plan exists (ListPlans, Pull) only once
// all its objects are stored: an interrupted push leaves no visible plan.
// Pull re-hashes every object and refuses on any size/sha256 mismatch.
// Plans are immutable: pushing an existing plan id is ALREADY_EXISTS.
// Thread-compatible; does not own the store.
#ifndef WINDQUANT_COMMON_STORE_PLAN_REPOSITORY_H_
#define WINDQUANT_COMMON_STORE_PLAN_REPOSITORY_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/store/artifact_store.h"

namespace windquant::store {

inline constexpr char kPlansPrefix[] = "plans/";
inline constexpr char kPlanManifestName[] = "manifest.json";
inline constexpr char kPlanManifestFormat[] = "windquant.plan_manifest.v1";
inline constexpr size_t kMaxPlanIdBytes = 128;

// OK for 1..kMaxPlanIdBytes chars of [A-Za-z0-9._-], not "." / ".." and not
// containing ".."; otherwise INVALID_ARGUMENT naming the id.
absl::Status ValidatePlanId(absl::string_view plan_id);

struct PlanObject {
  PlanObject() = default;
  PlanObject(std::string name, std::string bytes)
      : name(std::move(name)), bytes(std::move(bytes)) {}
  // An object streamed from the local file `path`.
  static PlanObject File(std::string name, std::string path) {
    PlanObject o(std::move(name), "");
    o.path = std::move(path);
    return o;
  }

  std::string name;  // relative key under the plan ("plan.json", "report/bits.png")
  std::string bytes;
  // When non-empty, the object is this local file instead of `bytes`: it is
  // streamed to the store (ArtifactStore::PutFile) and hashed on the way,
  // never read whole, so checkpoints of any size cost ~a chunk of memory.
  std::string path;
};

struct PlanManifestEntry {
  std::string name;
  int64_t size_bytes = 0;
  std::string sha256;  // lowercase hex
};

struct PlanManifest {
  std::string plan_id;
  std::vector<PlanManifestEntry> objects;  // sorted by name
  // Free-form facts about the plan ("effective_bits", "perplexity", ...),
  // shown by `windquant plans list`; optional in the file.
  std::map<std::string, std::string> metadata;
};

class PlanRepository {
 public:
  // `prefix`: a valid artifact prefix ending in '/' (CHECKed: callers pass
  // constants or RunRepository's prefixes).
  explicit PlanRepository(ArtifactStore* store, std::string prefix = kPlansPrefix);

  // Stores `objects` then the manifest. Names are validated artifact keys,
  // unique, and not "manifest.json". File objects (PlanObject::path) are
  // streamed; their manifest size and sha256 are those of the bytes the
  // store received, computed while streaming. On failure the manifest is not
  // written and the objects already written are deleted (best effort).
  absl::Status Push(absl::string_view plan_id, const std::vector<PlanObject>& objects,
                    const std::map<std::string, std::string>& metadata = {});
  // Push of every regular file under `dir` (names relative to it), streamed:
  // memory stays bounded whatever the files' sizes.
  absl::Status PushDirectory(absl::string_view plan_id, const std::string& dir,
                             const std::map<std::string, std::string>& metadata = {});
  // Removes a plan: its manifest first (it is no longer visible), then its
  // objects (best effort). OK when it does not exist.
  absl::Status Delete(absl::string_view plan_id);

  // Ids of complete plans (those with a manifest), sorted.
  absl::StatusOr<std::vector<std::string>> ListPlans();
  // NOT_FOUND when the plan has no manifest; DATA_LOSS for a bad manifest.
  absl::StatusOr<PlanManifest> GetManifest(absl::string_view plan_id);
  // All objects of the manifest, each checked against its size and sha256
  // (DATA_LOSS naming the plan, the object and its key on mismatch). Holds
  // every object in memory: for small plans; PullToDirectory streams.
  absl::StatusOr<std::vector<PlanObject>> Pull(absl::string_view plan_id);
  // Streams every object (ArtifactStore::GetToFile, sha256 computed on the
  // way) and manifest.json into a temporary folder renamed to `out_dir`
  // (base::WriteDirAtomic): nothing is written unless all objects verify
  // (DATA_LOSS as Pull) and all writes succeed. Memory: ~a chunk per object. An existing non-empty
  // `out_dir` is refused (ALREADY_EXISTS) unless `replace` (replaced whole).
  absl::Status PullToDirectory(absl::string_view plan_id, const std::string& out_dir,
                               bool replace = false);

  static std::string ManifestToJson(const PlanManifest& manifest);
  static absl::StatusOr<PlanManifest> ParseManifest(absl::string_view json,
                                                    absl::string_view expected_plan_id);
  // "<prefix><plan_id>/<name>".
  std::string ObjectKey(absl::string_view plan_id, absl::string_view name) const;
  const std::string& prefix() const { return prefix_; }
  ArtifactStore* store() const { return store_; }

 private:
  ArtifactStore* store_;
  std::string prefix_;
};

}  // namespace windquant::store

#endif  // WINDQUANT_COMMON_STORE_PLAN_REPOSITORY_H_
