#include "learner/run_records.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <utility>

namespace windquant::learner {

RunRecords::RunRecords(std::string dir) : dir_(std::move(dir)) {}

std::set<uint64_t> RunRecords::RecordedEpisodeIds() const {
  std::set<uint64_t> ids;
  std::ifstream plans(plans_path());
  std::string line;
  const std::string key = "{\"episode_id\":";
  while (std::getline(plans, line)) {
    if (line.rfind(key, 0) != 0) continue;
    ids.insert(std::strtoull(line.c_str() + key.size(), nullptr, 10));
  }
  return ids;
}

std::vector<RunRecords::RecordedPlan> RunRecords::RecordedPlans() const {
  std::vector<RecordedPlan> out;
  std::ifstream plans(plans_path());
  std::string line;
  // The lines are written below with operator<< (a broken plan's "inf"), which
  // strtod reads back; a JSON parser would not.
  auto number = [&line](const std::string& key, double* v) {
    const size_t at = line.find(key);
    if (at == std::string::npos) return false;
    const char* begin = line.c_str() + at + key.size();
    char* end = nullptr;
    *v = std::strtod(begin, &end);
    return end != begin;
  };
  while (std::getline(plans, line)) {
    RecordedPlan p;
    if (number(",\"effective_bits\":", &p.effective_bits) &&
        number(",\"perplexity\":", &p.perplexity)) {
      out.push_back(p);
    }
  }
  return out;
}

void RunRecords::RecordEpisode(const rl::Episode& e, const std::string& plan_id,
                               const rl::PlanEvaluation& pe, double episode_return) const {
  std::ofstream out(plans_path(), std::ios::app);
  out << "{\"episode_id\":" << e.episode_id << ",\"plan_id\":\"" << plan_id << "\",\"actor_id\":\""
      << e.actor_id << "\",\"policy_version\":" << e.policy_version
      << ",\"effective_bits\":" << pe.effective_bits << ",\"perplexity\":" << pe.eval_ppl
      << ",\"cached\":" << (pe.cached ? "true" : "false") << ",\"reward\":" << episode_return
      << "}\n";
}

void RunRecords::RecordCandidate(const plan::Plan& plan, const rl::PlanEvaluation& pe) const {
  std::ofstream out(plans_path(), std::ios::app);
  out << "{\"episode_id\":" << plan.episode_id << ",\"plan_id\":\"" << plan.plan_id
      << "\",\"actor_id\":\"learner\",\"source\":\"" << plan.source
      << "\",\"policy_version\":" << plan.policy_version
      << ",\"effective_bits\":" << pe.effective_bits << ",\"perplexity\":" << pe.eval_ppl
      << ",\"cached\":" << (pe.cached ? "true" : "false") << "}\n";
}

void RunRecords::CountEvaluation(bool cached) {
  ++evaluations_;
  if (cached) ++cache_hits_;
}

double RunRecords::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - created_).count();
}

int64_t RunRecords::RecordedRealEvaluations() const {
  std::ifstream plans(plans_path());
  std::string line;
  int64_t n = 0;
  while (std::getline(plans, line)) n += line.find(",\"cached\":false") != std::string::npos;
  return n;
}

void RunRecords::FillResult(rl::RunResult* r) const {
  r->curve = curve_;
  r->stages = steps_;
  r->evaluations = evaluations_;
  r->cache_hits = cache_hits_;
  r->real_evaluations = real_evaluations();
  r->seconds = seconds();
}

void RunRecords::Restore(std::vector<rl::UpdateRecord> curve, std::vector<rl::StageEvent> steps) {
  curve_ = std::move(curve);
  steps_ = std::move(steps);
  // plans.jsonl, not the curve: the evaluations recorded after the last
  // checkpoint (a learner killed between two updates) were spent too. The
  // curve's count for a plans.jsonl written before rows had their cached flag.
  real_before_ =
      std::max(curve_.empty() ? 0 : curve_.back().evaluations, RecordedRealEvaluations());
}

}  // namespace windquant::learner
