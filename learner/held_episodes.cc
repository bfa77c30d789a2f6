#include "learner/held_episodes.h"

#include <utility>

#include "common/base/status_macros.h"
#include "common/rl/transition_codec.h"

namespace windquant::learner {
namespace {

std::unique_ptr<EpisodeJournal> MakeJournal(std::string dir, base::LogSink log) {
  if (dir.empty()) return nullptr;
  EpisodeJournal::Options options;
  options.dir = std::move(dir);
  options.log = std::move(log);
  return std::make_unique<EpisodeJournal>(std::move(options));
}

}  // namespace

HeldEpisodes::HeldEpisodes(std::string journal_dir, base::LogSink log)
    : journal_(MakeJournal(std::move(journal_dir), std::move(log))) {}

absl::Status HeldEpisodes::Journal(const rl::Episode& episode, const plan::UnitTable& table) const {
  if (journal_ == nullptr) return absl::OkStatus();
  v1::TransitionBatch batch;
  rl::EncodeEpisode(episode, table, &batch);
  return journal_->Append(episode.episode_id, batch.SerializeAsString());
}

void HeldEpisodes::Release(uint64_t id) const {
  if (journal_ != nullptr) journal_->Release(id);
}

bool HeldEpisodes::GiveUp(uint64_t id) {
  if (!Take(id).has_value()) return false;
  Release(id);
  return true;
}

absl::StatusOr<std::vector<uint64_t>> HeldEpisodes::Reload(const plan::UnitTable& table) {
  std::vector<uint64_t> ids;
  if (journal_ == nullptr) return ids;
  // Not kept: recorded before the restart, or not an episode of this run.
  auto keep = [&](uint64_t id, const std::string& bytes) {
    v1::TransitionBatch batch;
    if (!batch.ParseFromString(bytes)) return false;
    absl::StatusOr<rl::Episode> e = rl::DecodeEpisode(batch, table);
    if (!e.ok() || e->episode_id != id || !Hold(*std::move(e))) return false;
    ids.push_back(id);
    return true;
  };
  WQ_RETURN_IF_ERROR(journal_->Recover(keep));
  return ids;  // Recover calls keep in id order
}

bool HeldEpisodes::Hold(rl::Episode episode) {
  if (!Reserve(episode.episode_id)) return false;
  HoldReserved(std::move(episode));
  return true;
}

void HeldEpisodes::HoldReserved(rl::Episode episode) {
  const uint64_t id = episode.episode_id;
  held_.emplace(id, std::move(episode));
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
