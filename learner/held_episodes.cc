#include "learner/held_episodes.h"

#include <utility>

namespace windquant::learner {

bool HeldEpisodes::Hold(rl::Episode episode, absl::Time now) {
  const uint64_t id = episode.episode_id;
  if (!seen_.insert(id).second) return false;
  held_.Insert(id, std::move(episode), now);
  return true;
}

std::vector<uint64_t> HeldEpisodes::Expire(absl::Time cutoff) {
  std::vector<uint64_t> ids;
  for (auto& [id, episode] : held_.Expire(cutoff)) ids.push_back(id);
  return ids;
}

}  // namespace windquant::learner
