#include "common/store/fake_artifact_store.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace windquant::store {

absl::Status FakeArtifactStore::Put(absl::string_view key, absl::string_view bytes) {
  WQ_RETURN_IF_ERROR(ValidateArtifactKey(key));
  absl::MutexLock lock(&mu_);
  ++put_calls_;
  if (fail_from_ > 0 && put_calls_ >= fail_from_) {
    return absl::UnavailableError(absl::StrCat("fake store: injected failure of Put '", key, "'"));
  }
  objects_[std::string(key)] = std::string(bytes);
  return absl::OkStatus();
}

absl::StatusOr<std::string> FakeArtifactStore::Get(absl::string_view key) {
  WQ_RETURN_IF_ERROR(ValidateArtifactKey(key));
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(std::string(key));
  if (it == objects_.end())
    return absl::NotFoundError(absl::StrCat("fake store: no artifact '", key, "'"));
  return it->second;
}

absl::StatusOr<std::vector<std::string>> FakeArtifactStore::List(absl::string_view prefix) {
  WQ_RETURN_IF_ERROR(ValidateArtifactPrefix(prefix));
  absl::MutexLock lock(&mu_);
  std::vector<std::string> keys;
  for (const auto& [k, v] : objects_) {
    if (absl::StartsWith(k, prefix)) keys.push_back(k);
  }
  return keys;
}

absl::StatusOr<bool> FakeArtifactStore::Exists(absl::string_view key) {
  WQ_RETURN_IF_ERROR(ValidateArtifactKey(key));
  absl::MutexLock lock(&mu_);
  return objects_.count(std::string(key)) > 0;
}

absl::Status FakeArtifactStore::Delete(absl::string_view key) {
  WQ_RETURN_IF_ERROR(ValidateArtifactKey(key));
  absl::MutexLock lock(&mu_);
  objects_.erase(std::string(key));
  return absl::OkStatus();
}

void FakeArtifactStore::FailPutsFrom(int n) {
  absl::MutexLock lock(&mu_);
  fail_from_ = n <= 0 ? 0 : put_calls_ + n;
}

void FakeArtifactStore::SetRaw(const std::string& key, std::string bytes) {
  absl::MutexLock lock(&mu_);
  objects_[key] = std::move(bytes);
}

std::map<std::string, std::string> FakeArtifactStore::Objects() const {
  absl::MutexLock lock(&mu_);
  return objects_;
}

int FakeArtifactStore::put_calls() const {
  absl::MutexLock lock(&mu_);
  return put_calls_;
}

}  // namespace windquant::store
