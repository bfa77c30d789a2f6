// reward_model_bench: the cost of reward-model screening's model
// (common/rl/reward_model.h) at the unit counts of the models windquant is
// for: what the learner pays per measured plan (RewardModelFitter::Add, O(n U):
// the new plan's agreement with each earlier one) and per refit (Fit:
// O(n^3) for the ridge, O(n U) for the primal form), what an actor pays per
// screened sample (RewardModel::Predict, O(U)), and the model's bytes in each
// policy snapshot. Add's scan is compared with a plain loop that counts equal
// bytes of two buffers of the same size, measured in the same run (the limit
// of a byte-wise comparison on this machine).
// Then an actor's screened rollout (rl::RunScreened, what RolloutLoop runs):
// envs 4 x K 128 samples in batches of at most 2^19 transitions, at the unit
// counts of LLaMA-3.2-1B and LLaMA-3-70B at chunk 256, against an unscreened
// rollout of the 4 episodes; the process's peak resident memory (VmHWM) after.
// Synthetic tables (synthetic_table.h) of 45 (stories260k), 2,560
// (LLaMA-3.2-1B at chunk 128), 24,320 (LLaMA-3-70B at chunk 256) and 97,280
// units (LLaMA-3-70B at chunk 64); plans near one base plan, as in a run.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/base/status_macros.h"
#include "common/config/run_config.h"
#include "common/rl/reward_model.h"
#include "common/rl/run_policy.h"
#include "common/testing/synthetic_table.h"
#include "windquant/v1/types.pb.h"

namespace windquant {
namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

volatile int64_t g_sink = 0;  // keeps the plain loop's result alive

// Equal bytes of two random buffers of `n` bytes counted `reps` times: bytes
// compared per second.
double PlainCompareRate(size_t n, int reps) {
  std::mt19937_64 rng(9);
  std::vector<uint8_t> a(n), b(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = static_cast<uint8_t>(rng() % plan::kNumActions);
    b[i] = static_cast<uint8_t>(rng() % plan::kNumActions);
  }
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) {
    int64_t same = 0;
    for (size_t i = 0; i < n; ++i) same += a[i] == b[i];
    g_sink = g_sink + same;
    b[r % n] ^= 1;  // a different buffer each pass
  }
  return static_cast<double>(n) * reps / Seconds(start);
}

void Run(int units, int plans) {
  const plan::UnitTable table = testing::SyntheticTable(units, 1);
  std::mt19937_64 rng(5);
  std::vector<int> base(units, 4);
  std::vector<std::vector<int>> measured;
  for (int i = 0; i < plans; ++i) {
    std::vector<int> p = base;
    for (int m = 0; m < 4; ++m) {
      p[std::uniform_int_distribution<int>(0, units - 1)(rng)] =
          std::uniform_int_distribution<int>(0, plan::kNumActions - 1)(rng);
    }
    measured.push_back(std::move(p));
  }
  rl::RewardModelFitter fitter(table);
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < plans; ++i) fitter.Add(measured[i], 10.0 + (i % 7));
  const double add_s = Seconds(start);
  start = std::chrono::steady_clock::now();
  const rl::RewardModel model = fitter.Fit();
  const double fit_s = Seconds(start);
  start = std::chrono::steady_clock::now();
  double sink = 0;
  const int predictions = 200;
  for (int i = 0; i < predictions; ++i) sink += model.Predict(table, measured[i % plans]);
  const double predict_s = Seconds(start) / predictions;
  v1::RewardModel proto;
  model.ToProto(&proto);
  // Add compares the new plan with each earlier one: sum_i i * U bytes.
  const double compared = static_cast<double>(plans) * (plans - 1) / 2 * units;
  const double limit = PlainCompareRate(units, std::max(1, 200'000'000 / units));
  std::printf(
      "units %6d plans %4d | add all %8.4f s (%.2f GB/s compared, %.2f x a plain byte compare "
      "%.2f GB/s) | fit %8.4f s | predict %9.6f s | snapshot model %8.1f KB%s\n",
      units, plans, add_s, compared / add_s / 1e9, compared / add_s / limit, limit / 1e9, fit_s,
      predict_s, proto.ByteSizeLong() / 1024.0, sink == 0 ? "" : "");
}

// The process's peak resident memory in MiB (/proc/self/status VmHWM).
double PeakMiB() {
  std::ifstream in("/proc/self/status");
  std::string key;
  double kb = 0;
  while (in >> key) {
    if (key == "VmHWM:") in >> kb;
  }
  return kb / 1024.0;
}

absl::Status ScreenedRollout(int units) {
  constexpr int kEnvs = 4, kScreen = 128;
  constexpr int64_t kBatchSteps = int64_t{1} << 19;  // RolloutLoopOptions' default
  const plan::UnitTable table = testing::SyntheticTable(units, 1);
  config::RunConfig config;
  WQ_ASSIGN_OR_RETURN(std::unique_ptr<rl::Policy> policy,
                      rl::Policy::Create(rl::RunPolicyOptions(config.ppo, config.training.seed)));
  rl::RewardModelFitter fitter(table);
  std::mt19937_64 rng(3);
  for (int i = 0; i < 100; ++i) {
    std::vector<int> p(units);
    for (int& a : p) a = std::uniform_int_distribution<int>(2, 5)(rng);
    fitter.Add(p, 10.0 + i % 7);
  }
  const rl::RewardModel model = fitter.Fit();
  const int64_t batch =
      std::min<int64_t>(kEnvs * kScreen, std::max<int64_t>(kEnvs, kBatchSteps / units));
  WQ_ASSIGN_OR_RETURN(std::unique_ptr<rl::RolloutWorker> one,
                      rl::RolloutWorker::Create(table, config.env, "bench", 0, 0, kEnvs, 1));
  WQ_ASSIGN_OR_RETURN(
      std::unique_ptr<rl::RolloutWorker> screened,
      rl::RolloutWorker::Create(table, config.env, "bench", 0, 0, static_cast<int>(batch), 1));
  auto start = std::chrono::steady_clock::now();
  WQ_RETURN_IF_ERROR(one->Run(*policy, 2.0).status());
  const double plain_s = Seconds(start);
  start = std::chrono::steady_clock::now();
  WQ_ASSIGN_OR_RETURN(std::vector<rl::Episode> kept,
                      rl::RunScreened(*screened, *policy, 2.0, kEnvs * kScreen, kEnvs, model));
  const double screened_s = Seconds(start);
  std::printf(
      "screened rollout: units %6d | %d of %d samples in batches of %lld episodes: %8.2f s, "
      "%.1f x the unscreened rollout of %d (%.3f s) | process peak RSS %.0f MiB\n",
      units, kEnvs, static_cast<int>(kept.size()), static_cast<long long>(batch), screened_s,
      screened_s / plain_s, kEnvs, plain_s, PeakMiB());
  return absl::OkStatus();
}

}  // namespace
}  // namespace windquant

int main(int argc, char** argv) {
  if (argc > 1 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::printf(
        "usage: reward_model_bench\n\n"
        "The reward model of training.screen_samples (common/rl/reward_model.h): the\n"
        "learner's cost per measured plan and per refit, an actor's per screened sample,\n"
        "and the model's bytes per policy snapshot, at 45 to 97,280 units and 100 / 300\n"
        "measured plans; then an actor's screened rollout (4 of 512 samples) at 2,560 and\n"
        "24,320 units with the process's peak memory (synthetic tables).\n");
    return 0;
  }
  for (const int units : {45, 2560, 24320, 97280}) {
    for (const int plans : {100, 300}) windquant::Run(units, plans);
  }
  for (const int units : {2560, 24320}) {
    const absl::Status s = windquant::ScreenedRollout(units);
    if (!s.ok()) {
      std::fprintf(stderr, "reward_model_bench: %s\n", std::string(s.message()).c_str());
      return 1;
    }
  }
  return 0;
}
