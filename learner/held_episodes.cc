#include "learner/held_episodes.h"

#include <utility>

namespace windquant::learner {

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
