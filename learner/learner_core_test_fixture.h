// The fixture of the LearnerCore tests (learner_core_test.cc,
// learner_core_resume_test.cc): a two-stage run over a synthetic table of 14
// units, episodes of a policy-free walk and their evaluations, reported as the
// evaluator (λ's owner, rl::EpisodeRewarder) reports them, the log lines and
// the rewards plans.jsonl recorded.
#ifndef WINDQUANT_LEARNER_LEARNER_CORE_TEST_FIXTURE_H_
#define WINDQUANT_LEARNER_LEARNER_CORE_TEST_FIXTURE_H_

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/statusor.h"
#include "common/base/log.h"
#include "common/rl/environment.h"
#include "common/rl/episode.h"
#include "common/rl/episode_rewarder.h"
#include "common/testing/scoped_test_dir.h"
#include "common/testing/synthetic_table.h"
#include "learner/learner_core.h"

namespace windquant::learner::testing {

inline LearnerCore::Options TestOptions(const std::string& dir) {
  LearnerCore::Options c;
  c.dir = dir;
  c.stages = 2;
  c.replicas = 1;
  c.chunk_size = 16;
  c.curriculum.target_bits = {3.0};
  c.curriculum.min_updates = 1;
  c.curriculum.max_updates = 3;
  c.episodes_per_update = 2;
  c.checkpoint_every_updates = 1;
  c.policy.ppo.hidden = {16, 16};
  c.policy.ppo.minibatch_size = 8;
  c.policy.ppo.epochs = 1;
  c.policy.ppo.max_policy_lag = 1;
  return c;
}

// The synthetic table split into two stages: layer 0 and layer 1.
inline std::vector<plan::UnitTable> Stages(const plan::UnitTable& whole) {
  std::vector<plan::UnitTable> out(2, whole);
  for (int s = 0; s < 2; ++s) {
    out[s].first_layer = s;
    out[s].end_layer = s + 1;
    out[s].units.clear();
    for (const auto& u : whole.units) {
      if (u.layer == s) out[s].units.push_back(u);
    }
  }
  return out;
}

class LearnerCoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_.path();
    whole_ = windquant::testing::SyntheticTable(14, 3);
    whole_.num_layers = 2;
    whole_.chunk_size = 16;  // the run config's quant.chunk_size
    auto core = LearnerCore::Create(TestOptions(dir_), nullptr);
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = *std::move(core);
  }

  // One episode of `version` from a policy-free walk (cheapest actions).
  rl::Episode MakeEpisode(uint64_t id, int64_t version) {
    auto costs = rl::UnitCosts::Create(whole_).value();
    rl::EnvOptions eo;
    eo.target_bits = 3.0;
    std::vector<int> plan;
    for (int64_t u = 0; u < costs->num_units(); ++u) plan.push_back(costs->cheapest_action(u));
    rl::Episode e;
    e.actor_id = "a";
    e.episode_id = id;
    e.policy_version = version;
    e.steps = rl::ReplayPlan(costs, eo, plan).value();
    for (auto& t : e.steps) {
      t.policy_version = version;
      t.episode_id = static_cast<int64_t>(id);
    }
    e.plan.plan_id = "p" + std::to_string(id);
    e.plan.model_fingerprint = whole_.fingerprint;
    e.plan.actions = plan;
    e.plan.target_bits = 3.0;
    e.plan.episode_id = id;
    return e;
  }
  // The candidate plans of `core`'s outbox (its episodes' plans left out).
  static std::vector<plan::Plan> TakeCandidates(LearnerCore& core) {
    std::vector<plan::Plan> out;
    for (OutgoingPlan& p : core.TakeOutbox(absl::ZeroDuration())) {
      if (p.kind == rl::PlanKind::kCandidate) out.push_back(std::move(p.plan));
    }
    return out;
  }
  // The report of candidate `p` at `ppl`.
  EvaluationInput CandidateEval(const plan::Plan& p, double ppl) {
    EvaluationInput in = Eval(p.episode_id, ppl);
    in.kind = rl::PlanKind::kCandidate;
    in.plan_id = p.plan_id;
    return in;
  }
  EvaluationInput Eval(uint64_t id, double ppl) {
    EvaluationInput in;
    in.episode_id = id;
    in.plan_id = "p" + std::to_string(id);
    in.evaluation.eval_ppl = ppl;
    in.evaluation.effective_bits = 1.2;
    in.evaluation.relative_ppl_increase = 0.5;
    return in;
  }
  // `in` as the evaluator reports it to `core`: an episode's with its reward
  // and its PPO batch's λ (episodes of MakeEpisode: target 3 bits; charged
  // for `charged_bits` when > 0, v1::Plan.charged_bits), resent rewarded for
  // the learner's batch when it is at another; a candidate's as is.
  absl::StatusOr<bool> Report(LearnerCore& core, EvaluationInput in, double charged_bits = 0) {
    const bool episode = in.kind == rl::PlanKind::kEpisode;
    for (int attempt = 0; attempt < 3; ++attempt) {
      rl::EpisodeRewardGrant g;
      if (episode) {
        rl::PlanEvaluation charged = in.evaluation;
        if (charged_bits > 0) charged.effective_bits = charged_bits;
        g = evaluator_.Reward(charged, 3.0);
        in.reward = g.reward;
        in.lambda_after = g.lambda_after;
        in.batch = g.batch;
      }
      in.lambda = evaluator_.lambda().batch_lambda();
      absl::StatusOr<bool> accepted = core.ReportEvaluation(in);
      if (!accepted.ok()) return accepted;
      const LearnerStatus s = core.Status();
      if (!evaluator_.Settle(episode ? &g : nullptr, *accepted, s.updates, s.lambda)) {
        return accepted;
      }
    }
    return false;
  }

  ::windquant::testing::ScopedTestDir temp_{"wq-learner-core"};
  std::string dir_;
  plan::UnitTable whole_;
  std::unique_ptr<LearnerCore> core_;
  // The evaluator's side: λ and the rewards (the options of TestOptions).
  rl::EpisodeRewarder evaluator_{TestOptions("").policy.env, TestOptions("").lagrange};
};

// plans.jsonl's reward (episode return incl. the episode-end reward) by episode id.
inline std::map<uint64_t, double> RecordedRewards(const std::string& dir) {
  std::map<uint64_t, double> out;
  std::ifstream in(dir + "/plans.jsonl");
  std::string line;
  const std::string id_key = "{\"episode_id\":", reward_key = "\"reward\":";
  while (std::getline(in, line)) {
    const size_t r = line.find(reward_key);
    if (line.rfind(id_key, 0) != 0 || r == std::string::npos) continue;
    out[std::strtoull(line.c_str() + id_key.size(), nullptr, 10)] =
        std::strtod(line.c_str() + r + reward_key.size(), nullptr);
  }
  return out;
}

// Log lines of a LearnerCore (its log callback).
struct LogLines {
  std::shared_ptr<std::vector<std::string>> lines = std::make_shared<std::vector<std::string>>();
  base::LogSink fn() const {
    auto l = lines;
    return [l](const std::string& line) { l->push_back(line); };
  }
  bool Has(const std::string& line) const {
    return std::find(lines->begin(), lines->end(), line) != lines->end();
  }
  int Count(const std::string& prefix) const {
    int n = 0;
    for (const auto& l : *lines) n += l.rfind(prefix, 0) == 0;
    return n;
  }
};

}  // namespace windquant::learner::testing

#endif  // WINDQUANT_LEARNER_LEARNER_CORE_TEST_FIXTURE_H_
