// FakeArtifactStore: an in-memory ArtifactStore for tests, with failure
// injection (fail the Nth Put) and direct access to the stored bytes so a test
// can tamper with objects. Thread-safe (one mutex).
#ifndef WINDQUANT_COMMON_STORE_FAKE_ARTIFACT_STORE_H_
#define WINDQUANT_COMMON_STORE_FAKE_ARTIFACT_STORE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/store/artifact_store.h"

namespace windquant::store {

class FakeArtifactStore : public ArtifactStore {
 public:
  absl::Status Put(absl::string_view key, absl::string_view bytes) override;
  absl::StatusOr<std::string> Get(absl::string_view key) override;
  absl::StatusOr<std::vector<std::string>> List(absl::string_view prefix) override;
  absl::StatusOr<bool> Exists(absl::string_view key) override;
  absl::Status Delete(absl::string_view key) override;
  std::string Describe() const override { return "fake://"; }

  // The `n`-th Put from now (1-based) and every later one fail with
  // UNAVAILABLE, as if the server had gone away. 0 disables.
  void FailPutsFrom(int n);
  // Direct access for tests (no validation).
  void SetRaw(const std::string& key, std::string bytes);
  std::map<std::string, std::string> Objects() const;
  int put_calls() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::string> objects_ ABSL_GUARDED_BY(mu_);
  int fail_from_ ABSL_GUARDED_BY(mu_) = 0;
  int put_calls_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace windquant::store

#endif  // WINDQUANT_COMMON_STORE_FAKE_ARTIFACT_STORE_H_
