#include "common/store/plan_repository.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/base/files.h"
#include "common/base/output_dir.h"
#include "common/base/status_macros.h"

namespace windquant::store {
namespace {

bool IsSha256Hex(absl::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f');
         });
}

absl::Status ValidateObjectName(absl::string_view plan_id, absl::string_view name) {
  absl::Status st = ValidateArtifactKey(name);
  if (!st.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan '", plan_id, "': object name: ", st.message()));
  }
  if (name == kPlanManifestName) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan '", plan_id, "': object name '", name, "' is reserved"));
  }
  return absl::OkStatus();
}

// DATA_LOSS naming the plan, the object and `where` it is stored unless
// `size` and `sha256` match the manifest's entry.
absl::Status CheckObject(absl::string_view plan_id, const PlanManifestEntry& e,
                         const std::string& where, int64_t size, const std::string& sha256) {
  if (size != e.size_bytes) {
    return absl::DataLossError(absl::StrCat("plan '", plan_id, "': object '", e.name, "': size ",
                                            size, " bytes, manifest says ", e.size_bytes, " (",
                                            where, ")"));
  }
  if (sha256 != e.sha256) {
    return absl::DataLossError(absl::StrCat("plan '", plan_id, "': object '", e.name, "': sha256 ",
                                            sha256, " does not match manifest ", e.sha256, " (",
                                            where, ")"));
  }
  return absl::OkStatus();
}

absl::Status ObjectReadError(absl::string_view plan_id, absl::string_view name,
                             const absl::Status& st) {
  return absl::Status(absl::IsNotFound(st) ? absl::StatusCode::kDataLoss : st.code(),
                      absl::StrCat("plan '", plan_id, "': object '", name, "': ", st.message()));
}

}  // namespace

absl::Status ValidatePlanId(absl::string_view plan_id) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan id '", absl::CHexEscape(plan_id), "': ", why));
  };
  if (plan_id.empty()) return bad("empty");
  if (plan_id.size() > kMaxPlanIdBytes) return bad(absl::StrCat("longer than ", kMaxPlanIdBytes));
  for (char c : plan_id) {
    if (!(absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-')) {
      return bad("only [A-Za-z0-9._-] allowed");
    }
  }
  if (plan_id == "." || absl::StrContains(plan_id, "..")) return bad("'.' / '..' not allowed");
  return absl::OkStatus();
}

PlanRepository::PlanRepository(ArtifactStore* store, std::string prefix)
    : store_(store), prefix_(std::move(prefix)) {
  // A programmer error: prefixes are constants or built by RunRepository.
  if (!ValidateArtifactPrefix(prefix_).ok() || prefix_.empty() || prefix_.back() != '/') {
    std::fprintf(stderr, "PlanRepository: bad prefix '%s'\n", prefix_.c_str());
    std::abort();
  }
}

std::string PlanRepository::ObjectKey(absl::string_view plan_id, absl::string_view name) const {
  return absl::StrCat(prefix_, plan_id, "/", name);
}

std::string PlanRepository::ManifestToJson(const PlanManifest& manifest) {
  nlohmann::json objects = nlohmann::json::array();
  for (const PlanManifestEntry& e : manifest.objects) {
    objects.push_back({{"name", e.name}, {"size_bytes", e.size_bytes}, {"sha256", e.sha256}});
  }
  nlohmann::json j = {
      {"format", kPlanManifestFormat}, {"plan_id", manifest.plan_id}, {"objects", objects}};
  if (!manifest.metadata.empty()) j["metadata"] = manifest.metadata;
  return j.dump(2) + "\n";
}

absl::StatusOr<PlanManifest> PlanRepository::ParseManifest(absl::string_view json,
                                                           absl::string_view expected_plan_id) {
  const std::string where = absl::StrCat("plan '", expected_plan_id, "': ", kPlanManifestName);
  nlohmann::json j =
      nlohmann::json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return absl::DataLossError(absl::StrCat(where, ": not a JSON object"));
  auto str_field = [&](const nlohmann::json& o, const char* name,
                       const std::string& at) -> absl::StatusOr<std::string> {
    auto it = o.find(name);
    if (it == o.end() || !it->is_string()) {
      return absl::DataLossError(absl::StrCat(where, ": ", at, name, ": missing or not a string"));
    }
    return it->get<std::string>();
  };
  WQ_ASSIGN_OR_RETURN(std::string format, str_field(j, "format", ""));
  if (format != kPlanManifestFormat) {
    return absl::DataLossError(absl::StrCat(where, ": format: unsupported '", format, "'"));
  }
  PlanManifest m;
  WQ_ASSIGN_OR_RETURN(m.plan_id, str_field(j, "plan_id", ""));
  if (m.plan_id != expected_plan_id) {
    return absl::DataLossError(absl::StrCat(where, ": plan_id: is '", m.plan_id, "'"));
  }
  auto objects = j.find("objects");
  if (objects == j.end() || !objects->is_array()) {
    return absl::DataLossError(absl::StrCat(where, ": objects: missing or not an array"));
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < objects->size(); ++i) {
    const nlohmann::json& o = (*objects)[i];
    const std::string at = absl::StrCat("objects[", i, "].");
    if (!o.is_object())
      return absl::DataLossError(absl::StrCat(where, ": objects[", i, "]: not an object"));
    PlanManifestEntry e;
    WQ_ASSIGN_OR_RETURN(e.name, str_field(o, "name", at));
    WQ_ASSIGN_OR_RETURN(e.sha256, str_field(o, "sha256", at));
    auto size = o.find("size_bytes");
    if (size == o.end() || !size->is_number_integer() || size->get<int64_t>() < 0) {
      return absl::DataLossError(
          absl::StrCat(where, ": ", at, "size_bytes: missing or not a size"));
    }
    e.size_bytes = size->get<int64_t>();
    absl::Status name_ok = ValidateObjectName(expected_plan_id, e.name);
    if (!name_ok.ok())
      return absl::DataLossError(absl::StrCat(where, ": ", at, "name: ", name_ok.message()));
    if (!IsSha256Hex(e.sha256)) {
      return absl::DataLossError(
          absl::StrCat(where, ": ", at, "sha256: not 64 lowercase hex digits"));
    }
    if (!seen.insert(e.name).second) {
      return absl::DataLossError(absl::StrCat(where, ": ", at, "name: duplicate '", e.name, "'"));
    }
    m.objects.push_back(std::move(e));
  }
  if (auto meta = j.find("metadata"); meta != j.end()) {
    if (!meta->is_object()) {
      return absl::DataLossError(absl::StrCat(where, ": metadata: not an object"));
    }
    for (auto it = meta->begin(); it != meta->end(); ++it) {
      if (!it->is_string()) {
        return absl::DataLossError(absl::StrCat(where, ": metadata.", it.key(), ": not a string"));
      }
      m.metadata[it.key()] = it->get<std::string>();
    }
  }
  return m;
}

absl::Status PlanRepository::Push(absl::string_view plan_id, const std::vector<PlanObject>& objects,
                                  const std::map<std::string, std::string>& metadata) {
  WQ_RETURN_IF_ERROR(ValidatePlanId(plan_id));
  if (objects.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("plan '", plan_id, "': no objects to push"));
  }
  std::set<std::string> names;
  for (const PlanObject& o : objects) {
    WQ_RETURN_IF_ERROR(ValidateObjectName(plan_id, o.name));
    if (!names.insert(o.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan '", plan_id, "': duplicate object '", o.name, "'"));
    }
  }
  const std::string manifest_key = ObjectKey(plan_id, kPlanManifestName);
  WQ_ASSIGN_OR_RETURN(bool exists, store_->Exists(manifest_key));
  if (exists) {
    return absl::AlreadyExistsError(
        absl::StrCat("plan '", plan_id, "' already exists in ", store_->Describe()));
  }
  PlanManifest manifest;
  manifest.plan_id = std::string(plan_id);
  manifest.metadata = metadata;
  std::vector<std::string> written;
  auto fail = [&](const absl::Status& st) {
    for (const std::string& key : written) store_->Delete(key).IgnoreError();  // best effort
    return absl::Status(st.code(),
                        absl::StrCat("push of plan '", plan_id, "' failed: ", st.message()));
  };
  for (const PlanObject& o : objects) {
    const std::string key = ObjectKey(plan_id, o.name);
    written.push_back(key);  // a failed PutFile may have left a part of it: delete it too
    if (o.path.empty()) {
      absl::Status st = store_->Put(key, o.bytes);
      if (!st.ok()) return fail(st);
      manifest.objects.push_back(
          {o.name, static_cast<int64_t>(o.bytes.size()), base::Sha256Hex(o.bytes)});
      continue;
    }
    absl::StatusOr<base::FileDigest> digest = store_->PutFile(key, o.path);
    if (!digest.ok()) return fail(digest.status());
    manifest.objects.push_back({o.name, digest->size_bytes, digest->sha256_hex});
  }
  std::sort(manifest.objects.begin(), manifest.objects.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  absl::Status st = store_->Put(manifest_key, ManifestToJson(manifest));  // last: commits the plan
  if (!st.ok()) return fail(st);
  return absl::OkStatus();
}

absl::Status PlanRepository::PushDirectory(absl::string_view plan_id, const std::string& dir,
                                           const std::map<std::string, std::string>& metadata) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return absl::NotFoundError(absl::StrCat(dir, ": not a directory"));
  std::vector<PlanObject> objects;
  for (fs::recursive_directory_iterator it(dir, ec), end; it != end; it.increment(ec)) {
    if (ec) return absl::InternalError(absl::StrCat(dir, ": cannot list: ", ec.message()));
    if (!it->is_regular_file(ec)) continue;
    PlanObject o;
    o.name = fs::relative(it->path(), dir, ec).generic_string();
    o.path = it->path().string();  // streamed by Push, never read whole
    objects.push_back(std::move(o));
  }
  if (ec) return absl::InternalError(absl::StrCat(dir, ": cannot list: ", ec.message()));
  if (objects.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(dir, ": no files to push"));
  }
  return Push(plan_id, objects, metadata);
}

absl::Status PlanRepository::Delete(absl::string_view plan_id) {
  WQ_RETURN_IF_ERROR(ValidatePlanId(plan_id));
  absl::StatusOr<PlanManifest> manifest = GetManifest(plan_id);
  if (absl::IsNotFound(manifest.status())) return absl::OkStatus();
  WQ_RETURN_IF_ERROR(store_->Delete(ObjectKey(plan_id, kPlanManifestName)));
  if (!manifest.ok()) return absl::OkStatus();  // unreadable: its objects stay (invisible)
  for (const PlanManifestEntry& e : manifest->objects) {
    store_->Delete(ObjectKey(plan_id, e.name)).IgnoreError();  // best effort: invisible now
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> PlanRepository::ListPlans() {
  WQ_ASSIGN_OR_RETURN(std::vector<std::string> keys, store_->List(prefix_));
  std::vector<std::string> ids;
  const std::string suffix = absl::StrCat("/", kPlanManifestName);
  for (const std::string& key : keys) {
    absl::string_view rest = key;
    if (!absl::ConsumePrefix(&rest, prefix_) || !absl::ConsumeSuffix(&rest, suffix)) continue;
    if (ValidatePlanId(rest).ok()) ids.emplace_back(rest);  // also skips nested "a/b"
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

absl::StatusOr<PlanManifest> PlanRepository::GetManifest(absl::string_view plan_id) {
  WQ_RETURN_IF_ERROR(ValidatePlanId(plan_id));
  absl::StatusOr<std::string> json = store_->Get(ObjectKey(plan_id, kPlanManifestName));
  if (absl::IsNotFound(json.status())) {
    return absl::NotFoundError(absl::StrCat("plan '", plan_id, "' not found in ",
                                            store_->Describe(),
                                            " (no complete plan with a manifest)"));
  }
  if (!json.ok()) return json.status();
  return ParseManifest(*json, plan_id);
}

absl::StatusOr<std::vector<PlanObject>> PlanRepository::Pull(absl::string_view plan_id) {
  WQ_ASSIGN_OR_RETURN(PlanManifest manifest, GetManifest(plan_id));
  std::vector<PlanObject> out;
  for (const PlanManifestEntry& e : manifest.objects) {
    const std::string key = ObjectKey(plan_id, e.name);
    absl::StatusOr<std::string> bytes = store_->Get(key);
    if (!bytes.ok()) return ObjectReadError(plan_id, e.name, bytes.status());
    WQ_RETURN_IF_ERROR(CheckObject(plan_id, e, absl::StrCat(store_->Describe(), "/", key),
                                   static_cast<int64_t>(bytes->size()), base::Sha256Hex(*bytes)));
    out.emplace_back(e.name, std::move(*bytes));
  }
  return out;
}

absl::Status PlanRepository::PullToDirectory(absl::string_view plan_id, const std::string& out_dir,
                                             bool replace) {
  WQ_ASSIGN_OR_RETURN(PlanManifest manifest, GetManifest(plan_id));
  // All verified objects land in `out_dir` at once, or nothing does.
  return base::WriteDirAtomic(out_dir, replace, [&](const std::string& tmp) -> absl::Status {
    for (const PlanManifestEntry& e : manifest.objects) {
      const std::string key = ObjectKey(plan_id, e.name);
      absl::StatusOr<base::FileDigest> got = store_->GetToFile(key, absl::StrCat(tmp, "/", e.name));
      if (!got.ok()) return ObjectReadError(plan_id, e.name, got.status());
      WQ_RETURN_IF_ERROR(CheckObject(plan_id, e, absl::StrCat(store_->Describe(), "/", key),
                                     got->size_bytes, got->sha256_hex));
    }
    return base::WriteFileAtomic(absl::StrCat(tmp, "/", kPlanManifestName),
                                 ManifestToJson(manifest));
  });
}

}  // namespace windquant::store
