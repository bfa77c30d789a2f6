#include "learner/held_episodes.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/base/files.h"
#include "common/rl/transition_codec.h"

namespace windquant::learner {
namespace {

constexpr char kSuffix[] = ".episode.pb";

}  // namespace

std::string HeldEpisodes::PathOf(uint64_t id) const { return absl::StrCat(dir_, "/", id, kSuffix); }

absl::Status HeldEpisodes::Journal(const rl::Episode& episode, const plan::UnitTable& table) const {
  if (dir_.empty()) return absl::OkStatus();
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  v1::TransitionBatch batch;
  rl::EncodeEpisode(episode, table, &batch);
  absl::Status s = base::WriteFileAtomic(PathOf(episode.episode_id), batch.SerializeAsString());
  if (!s.ok()) return absl::UnavailableError(absl::StrCat("held episodes journal: ", s.message()));
  return absl::OkStatus();
}

void HeldEpisodes::Release(uint64_t id) const {
  if (dir_.empty()) return;
  std::error_code ec;
  std::filesystem::remove(PathOf(id), ec);
}

bool HeldEpisodes::GiveUp(uint64_t id) {
  if (!Take(id).has_value()) return false;
  Release(id);
  return true;
}

std::vector<uint64_t> HeldEpisodes::Reload(const plan::UnitTable& table) {
  std::vector<uint64_t> ids;
  if (dir_.empty()) return ids;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string file = entry.path().filename().string();
    absl::string_view name = file;
    uint64_t id = 0;
    if (!absl::ConsumeSuffix(&name, kSuffix) || !absl::SimpleAtoi(name, &id)) continue;
    absl::StatusOr<std::string> bytes = base::ReadFile(entry.path().string());
    v1::TransitionBatch batch;
    absl::StatusOr<rl::Episode> e = absl::DataLossError("unreadable");
    if (bytes.ok() && batch.ParseFromString(*bytes)) e = rl::DecodeEpisode(batch, table);
    if (!e.ok() || e->episode_id != id || !Hold(*std::move(e))) {
      Release(id);  // recorded before the restart, or not an episode of this run
      continue;
    }
    ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

bool HeldEpisodes::Hold(rl::Episode episode) {
  const uint64_t id = episode.episode_id;
  if (!seen_.insert(id).second) return false;
  held_.emplace(id, std::move(episode));
  return true;
}

std::optional<rl::Episode> HeldEpisodes::Take(uint64_t id) {
  auto it = held_.find(id);
  if (it == held_.end()) return std::nullopt;
  std::optional<rl::Episode> e(std::move(it->second));
  held_.erase(it);
  return e;
}

const rl::Episode* HeldEpisodes::Find(uint64_t id) const {
  auto it = held_.find(id);
  return it == held_.end() ? nullptr : &it->second;
}

}  // namespace windquant::learner
