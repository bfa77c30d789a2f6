#include "common/search/search_result.h"

#include <cmath>

#include <nlohmann/json.hpp>

namespace windquant::search {

nlohmann::json SearchRowJson(const SearchResult& r, int64_t rl_evaluations, uint64_t seed) {
  auto num = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(); };
  return {{"evaluations", r.evaluations},
          {"rl_evaluations", rl_evaluations},
          {"accepted", r.accepted},
          {"restarts", r.restarts},
          {"repeats", r.repeats},
          {"proposals", r.proposals},
          {"screened", r.screened},
          {"start_selection_ppl", num(r.start_ppl)},
          {"selection_ppl", num(r.selection_ppl)},
          {"seed", seed}};
}

std::string SearchRowKey(const std::string& row_name) {
  std::string key = row_name;
  for (char& c : key) {
    if (c == '-') c = '_';
  }
  return key;
}

}  // namespace windquant::search
