// rl_bench: throughput of the learning core (common/rl, DESIGN.md section 4),
// each figure with a ratio against a limit of this machine measured in the
// same run:
//  * environment steps/s: BatchedEnvironment::Run, one Policy::Act over N
//    episodes per step plus N environment steps; split into policy inference
//    (Act alone at the same shapes) and the rest. The policy's achieved
//    GFLOP/s is compared with (a) a large square at::matmul (the GEMM peak)
//    and (b) a plain chain of at::mm at exactly the MLP's shapes and rows
//    (what dense math reaches at this tiny size, without bias, activation,
//    masking or sampling).
//  * PPO update samples/s: PpoLearner::Update on the rollout's transitions
//    (whole episodes, at most kMaxPpoSamples samples; GAE, `epochs` passes of
//    minibatches, Adam); GFLOP/s counted as
//    (1 + 3 * epochs) forward passes per sample (the value recompute, then
//    forward + backward ~ 3x forward per epoch), against the same two limits
//    at the minibatch's rows.
//  * plan evaluations/s, through CachingPlanEvaluator as the trainer uses it,
//    on distinct plans (cache misses):
//      stories260k: LocalPlanEvaluator (apply the plan from cached fits,
//        perplexity on the calibration slice and the evaluation slice);
//        evaluation tokens/s against the plain FP forward's tokens/s
//        (ComputePerplexity of the unmodified model on the same ids);
//      synthetic tables: SyntheticEvaluator (no model: effective bits and the
//        proxy loss over the table, plan hash and cache bookkeeping); bytes of
//        table + plan scanned per second against at::sum's read GB/s over a
//        buffer of the same size (cache-resident like the table), with the
//        DRAM copy GB/s printed for reference.
//  * wire sizes: one episode as an actor streams it (windquant.v1.TransitionBatch
//    with its plan) in bytes per transition, and the unit table
//    (windquant.v1.UnitTable) in bytes per unit (docs/capacity.md).
// Tables: stories260k's real unit table (configs/stories260k.yaml, built
// without the cache; skipped with a message when ../shared is absent) and
// synthetic tables the size of LLaMA-3-8B (32 layers x 152 chunks of 256 =
// 4,864 units) and LLaMA-3-70B (80 x 304 = 24,320 units) (synthetic_table.h;
// the step count per episode is real, the unit shapes are synthetic).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/base/files.h"
#include "common/base/text_range.h"
#include "common/config/run_config.h"
#include "common/model/perplexity.h"
#include "common/quant/quantization_session.h"
#include "common/rl/environment.h"
#include "common/rl/local_plan_evaluator.h"
#include "common/rl/policy.h"
#include "common/rl/ppo.h"
#include "common/rl/state_features.h"
#include "common/rl/transition_codec.h"
#include "common/testing/caching_plan_evaluator.h"
#include "common/testing/synthetic_table.h"
#include "job/node_options.h"
#include "windquant/v1/types.pb.h"

namespace {

namespace fs = std::filesystem;
using namespace windquant;  // NOLINT: a benchmark's main file

constexpr char kUsage[] =
    "usage: rl_bench [flags]\n\n"
    "Throughput of the RL core: environment steps/s (policy inference + env step, vectorised\n"
    "over N episodes), PPO update samples/s and plan evaluations/s, on stories260k's unit\n"
    "table and on synthetic tables the size of LLaMA-3-8B (4,864 units) and LLaMA-3-70B\n"
    "(24,320 units); each with a ratio against this machine's limits measured in the same\n"
    "run (at::matmul GFLOP/s, plain FP forward tokens/s, memory copy GB/s).\n\n"
    "flags:\n"
    "  --threads N       intra-op threads (2)\n"
    "  --episodes N      episodes per rollout, stepped together (16 = "
    "training.episodes_per_update)\n"
    "  --hidden A,B      policy MLP hidden sizes (128,128 = ppo.hidden default)\n"
    "  --epochs N        PPO epochs per update (4)\n"
    "  --minibatch N     PPO minibatch size (256)\n"
    "  --eval-plans N    distinct plans evaluated on stories260k (4)\n"
    "  --tables LIST     comma list of stories260k,8b,70b (all)\n"
    "  --config FILE     stories260k config (default: $WQ_SOURCE_DIR/configs/stories260k.yaml,\n"
    "                    else ./configs/..., else ../configs/...)\n"
    "  --help            this text\n";

constexpr double kTargetBits = 2.0;
// Timed loops of the limits run at least this long (seconds).
constexpr double kMinLimitSeconds = 0.4;
// Act alone is timed over this many calls (the table's units, clamped).
constexpr int64_t kMinActCalls = 500, kMaxActCalls = 3000;
// The PPO update is timed on at most this many samples (whole episodes; at
// least one), so the 70B-sized table stays within the run's time budget.
constexpr int64_t kMaxPpoSamples = 131072;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "rl_bench: %s\n", what.c_str());
  std::exit(1);
}

template <typename T>
T OrDie(absl::StatusOr<T> v) {
  if (!v.ok()) Die(std::string(v.status().message()));
  return *std::move(v);
}

struct Options {
  int64_t threads = 2, episodes = 16, epochs = 4, minibatch = 256, eval_plans = 4;
  std::vector<int64_t> hidden = {128, 128};
  std::vector<std::string> tables = {"stories260k", "8b", "70b"};
  std::string config;
};

// ---- limits ---------------------------------------------------------------------------

double GemmGflops(int64_t n) {
  at::manual_seed(0);
  const at::Tensor a = at::randn({n, n}), b = at::randn({n, n});
  at::matmul(a, b);  // warm-up
  int iters = 0;
  const double t0 = Now();
  do {
    at::matmul(a, b);
    ++iters;
  } while (Now() - t0 < kMinLimitSeconds);
  return 2.0 * n * n * n * iters / (Now() - t0) / 1e9;
}

// Layer widths of the actor and the critic: state -> hidden... -> out.
std::vector<std::vector<int64_t>> MlpShapes(const std::vector<int64_t>& hidden) {
  std::vector<std::vector<int64_t>> mlps;
  for (int64_t out : {int64_t{plan::kNumActions}, int64_t{1}}) {
    std::vector<int64_t> dims = {rl::kStateDim};
    dims.insert(dims.end(), hidden.begin(), hidden.end());
    dims.push_back(out);
    mlps.push_back(dims);
  }
  return mlps;
}

// Multiply-adds x2 of one forward pass of actor + critic for one row.
double MlpFlopsPerRow(const std::vector<int64_t>& hidden) {
  double f = 0;
  for (const auto& dims : MlpShapes(hidden)) {
    for (size_t i = 0; i + 1 < dims.size(); ++i) f += 2.0 * dims[i] * dims[i + 1];
  }
  return f;
}

// GFLOP/s of a plain chain of at::mm at the MLP's shapes with `rows` rows.
double ChainGflops(const std::vector<int64_t>& hidden, int64_t rows) {
  at::manual_seed(1);
  std::vector<std::vector<at::Tensor>> ws;
  for (const auto& dims : MlpShapes(hidden)) {
    std::vector<at::Tensor> w;
    for (size_t i = 0; i + 1 < dims.size(); ++i) w.push_back(at::randn({dims[i], dims[i + 1]}));
    ws.push_back(w);
  }
  const at::Tensor x = at::randn({rows, rl::kStateDim});
  auto once = [&] {
    for (const auto& w : ws) {
      at::Tensor h = x;
      for (const at::Tensor& m : w) h = at::mm(h, m);
    }
  };
  once();
  int64_t iters = 0;
  const double t0 = Now();
  do {
    for (int i = 0; i < 50; ++i) once();
    iters += 50;
  } while (Now() - t0 < kMinLimitSeconds);
  return MlpFlopsPerRow(hidden) * rows * iters / (Now() - t0) / 1e9;
}

// Read bandwidth (at::sum) over a buffer of `bytes`: the limit for a scan of a table
// of that size (cache-resident when small).
double ReadGbps(double bytes) {
  const at::Tensor buf =
      at::rand({std::max<int64_t>(1024, static_cast<int64_t>(bytes / sizeof(float)))});
  at::sum(buf);
  int64_t iters = 0;
  const double t0 = Now();
  do {
    for (int i = 0; i < 10; ++i) at::sum(buf);
    iters += 10;
  } while (Now() - t0 < kMinLimitSeconds);
  return static_cast<double>(buf.nbytes()) * iters / (Now() - t0) / 1e9;
}

double CopyGbps() {
  const at::Tensor src = at::rand({int64_t{32} << 20});  // 128 MiB
  at::Tensor dst = at::empty_like(src);
  dst.copy_(src);
  int iters = 0;
  const double t0 = Now();
  do {
    dst.copy_(src);
    ++iters;
  } while (Now() - t0 < kMinLimitSeconds);
  return 2.0 * static_cast<double>(src.nbytes()) * iters / (Now() - t0) / 1e9;  // read + write
}

struct Limits {
  double gemm = 0;         // GFLOP/s, 1024^3 at::matmul
  double chain_act = 0;    // GFLOP/s, at::mm chain at the MLP's shapes, `episodes` rows
  double chain_train = 0;  // same with `minibatch` rows
  double copy = 0;         // GB/s
};

// The repair budget mode's repair (env.repair_order), worst case: every unit at 8 bits
// brought to the target, against one synthetic plan evaluation (`eval_s`).
void BenchRepair(const plan::UnitTable& table, double eval_s) {
  const std::vector<int> eight(table.units.size(), plan::ActionIndex(plan::Action::k8));
  for (const search::RepairOrder order :
       {search::RepairOrder::kProxy, search::RepairOrder::kWalk}) {
    int64_t n = 0;
    const double t0 = Now();
    do n += !search::RepairToBudget(table, eight, kTargetBits, order).empty();
    while (Now() - t0 < kMinLimitSeconds);
    const double s = (Now() - t0) / static_cast<double>(n);
    std::printf("  repair (%s): %8.0f us per plan from 8 bits = %.1f x one synthetic evaluation\n",
                order == search::RepairOrder::kWalk ? "walk " : "proxy", s * 1e6, s / eval_s);
  }
}

// ---- one table ------------------------------------------------------------------------

rl::PpoOptions MakePpoConfig(const Options& o) {
  rl::PpoOptions p;  // the run config's defaults
  p.epochs = static_cast<int>(o.epochs);
  p.minibatch_size = static_cast<int>(o.minibatch);
  return p;
}

// The model-backed evaluator of stories260k and its FP reference.
struct ModelEval {
  rl::PlanEvaluator* evaluator = nullptr;
  int64_t tokens_per_plan = 0;  // predicted tokens: calibration + evaluation slice
  double fp_tokens_per_s = 0;   // plain FP forward on the same ids
};

void BenchTable(const std::string& name, const plan::UnitTable& table, const Options& o,
                const Limits& lim, const ModelEval* model_eval) {
  const int64_t units = static_cast<int64_t>(table.units.size());
  std::printf("\n[%s] %lld units, %lld weights, target %.2f bits, %lld episodes per rollout\n",
              name.c_str(), static_cast<long long>(units),
              static_cast<long long>(table.TotalWeights()), kTargetBits,
              static_cast<long long>(o.episodes));
  std::fflush(stdout);
  const config::RunConfig defaults;
  auto costs = OrDie(rl::UnitCosts::Create(table));
  rl::BatchedEnvironment env(costs, rl::MakeEnvOptions(defaults.env, kTargetBits),
                             static_cast<int>(o.episodes));
  rl::PolicyOptions po;
  po.state_dim = rl::kStateDim;
  po.num_actions = plan::kNumActions;
  po.hidden_sizes = o.hidden;
  auto learner = OrDie(rl::PpoLearner::Create(po, MakePpoConfig(o), /*shuffle_seed=*/0));
  at::Generator gen = rl::MakeGenerator(7);

  // Policy inference alone, at the rollout's shapes (rows = episodes).
  const double flops_row = MlpFlopsPerRow(o.hidden);
  at::manual_seed(3);
  const at::Tensor states = at::rand({o.episodes, rl::kStateDim});
  const at::Tensor masks = at::ones({o.episodes, plan::kNumActions}, at::kBool);
  OrDie(learner->policy().Act(states, masks, gen, false));
  const int64_t act_calls = std::clamp(units, kMinActCalls, kMaxActCalls);
  double t0 = Now();
  for (int64_t i = 0; i < act_calls; ++i) OrDie(learner->policy().Act(states, masks, gen, false));
  const double act_s = (Now() - t0) / static_cast<double>(act_calls);

  // Rollout: `units` steps of `episodes` environments.
  t0 = Now();
  rl::Rollout ro = OrDie(env.Run(learner->policy(), gen, false, 0));
  const double roll_s = Now() - t0;
  const double steps = static_cast<double>(units * o.episodes);
  const double policy_share = std::min(1.0, act_s * units / roll_s);
  const double act_gflops = flops_row * o.episodes / act_s / 1e9;
  std::printf(
      "  env steps:        %10.0f steps/s  (%.0f episodes/s; %.2f s for %.0f steps; policy "
      "inference "
      "%.0f%% of it)\n",
      steps / roll_s, o.episodes / roll_s, roll_s, steps, 100 * policy_share);
  std::printf(
      "    policy Act:     %10.1f us/call of %lld rows, %7.3f GFLOP/s = %6.2f%% of at::matmul "
      "peak, "
      "%5.1f%% of at::mm at the MLP's shapes\n",
      act_s * 1e6, static_cast<long long>(o.episodes), act_gflops, 100 * act_gflops / lim.gemm,
      100 * act_gflops / lim.chain_act);
  const double env_s = roll_s - act_s * units;
  if (env_s > 0.05 * roll_s) {
    std::printf("    env step alone: %10.0f steps/s  (rollout time minus the Act calls)\n",
                steps / env_s);
  } else {
    std::printf(
        "    env step alone: n/a (the Act calls take %.0f%% of the rollout; the rest is in the "
        "noise)\n",
        100 * act_s * units / roll_s);
  }

  // Wire sizes: one finished episode as an actor streams it to the learner
  // (windquant.v1.TransitionBatch with its plan), and the unit table as the
  // learner merges and stores it (windquant.v1.UnitTable).
  {
    rl::Episode e;
    e.actor_id = "actor-s0-r0";
    e.episode_id = (uint64_t{1} << 48) | 1;
    e.steps = ro.episodes[0];
    e.plan = plan::Plan::Make(table, ro.plans[0], "rl", kTargetBits);
    e.plan.plan_id = e.actor_id + "-" + std::to_string(e.episode_id);
    v1::TransitionBatch batch;
    rl::EncodeEpisode(e, table, &batch);
    v1::UnitTable table_proto;
    table.ToProto(&table_proto);
    const double episode_bytes = static_cast<double>(batch.ByteSizeLong());
    const double table_bytes = static_cast<double>(table_proto.ByteSizeLong());
    std::printf(
        "  wire sizes:       %.1f B per transition (TransitionBatch of one episode incl. its "
        "plan: %.0f B for %lld steps); unit table %.1f B per unit (%.2f MB)\n",
        episode_bytes / static_cast<double>(units), episode_bytes, static_cast<long long>(units),
        table_bytes / static_cast<double>(units), table_bytes / 1e6);
  }

  // PPO update on the rollout (an end reward on every episode's last step).
  std::vector<rl::Transition> batch;
  batch.reserve(static_cast<size_t>(steps));
  const size_t ppo_episodes = std::clamp<size_t>(kMaxPpoSamples / units, 1, ro.episodes.size());
  for (size_t e = 0; e < ppo_episodes; ++e) {
    ro.episodes[e].back().reward += static_cast<float>(kTargetBits - ro.effective_bits[e]);
    for (auto& t : ro.episodes[e]) batch.push_back(std::move(t));
  }
  t0 = Now();
  const rl::PpoStats stats = OrDie(learner->Update(batch));
  const double ppo_s = Now() - t0;
  const double samples = static_cast<double>(stats.samples_used);
  const double ppo_gflops = flops_row * samples * (1 + 3.0 * o.epochs) / ppo_s / 1e9;
  std::printf(
      "  PPO update:       %10.0f samples/s (%.0f sample-epochs/s; %.0f samples of %zu episodes, "
      "%lld "
      "minibatches, %.2f s)\n",
      samples / ppo_s, samples * o.epochs / ppo_s, samples, ppo_episodes,
      static_cast<long long>(stats.minibatches), ppo_s);
  std::printf(
      "    PPO math:       %7.3f GFLOP/s = %6.2f%% of at::matmul peak, %5.1f%% of at::mm at the "
      "MLP's shapes "
      "(%lld rows)\n",
      ppo_gflops, 100 * ppo_gflops / lim.gemm, 100 * ppo_gflops / lim.chain_train,
      static_cast<long long>(o.minibatch));

  // Plan evaluations on distinct plans (cache misses), through the trainer's cache.
  if (model_eval != nullptr) {
    testing::CachingPlanEvaluator cache(model_eval->evaluator);
    std::vector<std::vector<int>> plans;
    for (const auto& p : ro.plans) {
      if (static_cast<int64_t>(plans.size()) < o.eval_plans &&
          std::find(plans.begin(), plans.end(), p) == plans.end()) {
        plans.push_back(p);
      }
    }
    t0 = Now();
    for (const auto& p : plans) OrDie(cache.Evaluate(p));
    const double s = (Now() - t0) / static_cast<double>(plans.size());
    const double tps = model_eval->tokens_per_plan / s;
    std::printf(
        "  plan evaluation:  %10.3f plans/s   (%.2f s per plan over %zu distinct plans; %lld "
        "tokens per "
        "plan: %.0f tokens/s = %5.1f%% of the plain FP forward's %.0f tokens/s)\n",
        1.0 / s, s, plans.size(), static_cast<long long>(model_eval->tokens_per_plan), tps,
        100 * tps / model_eval->fp_tokens_per_s, model_eval->fp_tokens_per_s);
  } else {
    testing::SyntheticEvaluator synthetic(&table);
    int64_t evaluated = 0;
    t0 = Now();
    do {  // a fresh cache per round keeps every evaluation a miss
      testing::CachingPlanEvaluator cache(&synthetic);
      for (const auto& p : ro.plans) OrDie(cache.Evaluate(p));
      evaluated += static_cast<int64_t>(ro.plans.size());
    } while (Now() - t0 < kMinLimitSeconds);
    const double s = (Now() - t0) / static_cast<double>(evaluated);
    // Every cache line of a Unit is touched (rows/cols, bits[a], error[a]).
    const double bytes = static_cast<double>(units) * (sizeof(plan::Unit) + sizeof(int));
    const double read = ReadGbps(bytes);
    std::printf(
        "  plan evaluation:  %10.0f plans/s   (synthetic evaluator, no model: bits + proxy loss + "
        "plan hash "
        "and cache)\n",
        1.0 / s);
    std::printf(
        "    scan:           %.2f MB of table + plan per plan, %.2f GB/s = %5.1f%% of at::sum's "
        "%.2f GB/s "
        "over a buffer of that size (memory copy: %.2f GB/s)\n",
        bytes / 1e6, bytes / s / 1e9, 100 * bytes / s / 1e9 / read, read, lim.copy);
    BenchRepair(table, s);
  }
  std::fflush(stdout);
}

// ---- stories260k ----------------------------------------------------------------------

std::string FindConfig(const std::string& flag) {
  if (!flag.empty()) return flag;
  std::vector<std::string> candidates;
  if (const char* src = std::getenv("WQ_SOURCE_DIR"))
    candidates.push_back(std::string(src) + "/configs/stories260k.yaml");
  candidates.push_back("configs/stories260k.yaml");
  candidates.push_back("../configs/stories260k.yaml");
  candidates.push_back("../../configs/stories260k.yaml");
  for (const std::string& c : candidates) {
    if (fs::exists(c)) return c;
  }
  return "";
}

model::LlamaWeights CloneWeights(const model::LlamaWeights& w) {
  model::LlamaWeights c = w;
  for (auto& layer : c.layers) {
    for (auto& t : layer.linear) t = t.clone();
  }
  return c;  // embeddings and head are not modified by plan evaluation
}

void BenchStories(const Options& o, const Limits& lim) {
  const std::string path = FindConfig(o.config);
  if (path.empty()) {
    std::printf(
        "\n[stories260k] skipped: configs/stories260k.yaml not found (pass --config FILE)\n");
    return;
  }
  absl::StatusOr<config::RunConfig> cfg = config::LoadRunConfig(path);
  if (!cfg.ok()) Die(std::string(cfg.status().message()));
  if (!fs::exists(fs::path(cfg->model.dir) / "model.safetensors") ||
      !fs::exists(cfg->evaluation.selection.text) || !fs::exists(cfg->calibration.text)) {
    std::printf(
        "\n[stories260k] skipped: %s or its text is absent (../shared/models, ../shared/data)\n",
        cfg->model.dir.c_str());
    return;
  }
  quant::SessionOptions so = job::SessionOptionsFrom(*cfg);
  so.use_cache = false;  // leave no files behind; the table takes seconds to build
  const double t0 = Now();
  auto session = OrDie(quant::QuantizationSession::Create(so));
  const double build_s = Now() - t0;
  std::printf("\n[stories260k] unit table built in %.1f s (%s)\n", build_s, path.c_str());

  // The slices `windquant quantize` uses (quantize_command.cc).
  const base::TextEncoder encode = [&tok = session->tokenizer()](std::string_view text) {
    return tok.Encode(text, false);
  };
  std::vector<int32_t> calib_ids =
      OrDie(base::ReadTextRange(config::CalibrationRange(cfg->calibration), "calibration", encode));
  if (static_cast<int64_t>(calib_ids.size()) > cfg->evaluation.calib_slice_tokens) {
    calib_ids.resize(cfg->evaluation.calib_slice_tokens);
  }
  std::vector<int32_t> eval_ids = OrDie(base::ReadWindows(
      cfg->evaluation.selection, "evaluation.selection", encode, cfg->evaluation.context - 1));

  // Limit: the plain FP forward over the same ids (best of two passes after a warm-up,
  // so a busy moment on a shared machine does not lower the limit).
  model::PerplexityOptions po;
  po.context = cfg->evaluation.context;
  po.batch_size = cfg->evaluation.batch;
  OrDie(model::ComputePerplexity(session->model(), calib_ids, po));  // warm-up
  double fp_s = 1e300;
  int64_t fp_tokens = 0;
  for (int pass = 0; pass < 2; ++pass) {
    double s = 0;
    fp_tokens = 0;
    for (const auto* ids : {&calib_ids, &eval_ids}) {
      const double t = Now();
      model::PerplexityResult r = OrDie(model::ComputePerplexity(session->model(), *ids, po));
      s += Now() - t;
      fp_tokens += r.tokens;
    }
    fp_s = std::min(fp_s, s);
  }
  model::LlamaModel eval_model(CloneWeights(session->model().weights()),
                               session->model().compute());
  rl::LocalEvaluatorOptions lo;
  lo.context = cfg->evaluation.context;
  lo.batch = cfg->evaluation.batch;
  auto evaluator = OrDie(rl::LocalPlanEvaluator::Create(
      &eval_model, &session->fits(), &session->table(), calib_ids, eval_ids, lo));
  ModelEval me;
  me.evaluator = evaluator.get();
  me.tokens_per_plan = fp_tokens;
  me.fp_tokens_per_s = static_cast<double>(fp_tokens) / fp_s;
  BenchTable("stories260k", session->table(), o, lim, &me);
}

bool ParseList(const std::string& text, std::vector<int64_t>* out) {
  out->clear();
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(part, &v) || v <= 0) return false;
    out->push_back(v);
  }
  return !out->empty();
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "rl_bench: %s: unknown flag or missing value (see --help)\n", a.c_str());
      return 2;
    }
    const std::string v = argv[++i];
    auto positive = [&](int64_t* out) {
      if (!absl::SimpleAtoi(v, out) || *out <= 0) {
        std::fprintf(stderr, "rl_bench: %s: expected a positive integer, got '%s'\n", a.c_str(),
                     v.c_str());
        std::exit(2);
      }
    };
    if (a == "--threads")
      positive(&o.threads);
    else if (a == "--episodes")
      positive(&o.episodes);
    else if (a == "--epochs")
      positive(&o.epochs);
    else if (a == "--minibatch")
      positive(&o.minibatch);
    else if (a == "--eval-plans")
      positive(&o.eval_plans);
    else if (a == "--config")
      o.config = v;
    else if (a == "--hidden") {
      if (!ParseList(v, &o.hidden)) {
        std::fprintf(stderr,
                     "rl_bench: --hidden: expected positive integers like 128,128, got '%s'\n",
                     v.c_str());
        return 2;
      }
    } else if (a == "--tables") {
      o.tables = absl::StrSplit(v, ',');
      for (const std::string& t : o.tables) {
        if (t != "stories260k" && t != "8b" && t != "70b") {
          std::fprintf(stderr, "rl_bench: --tables: unknown table '%s' (stories260k, 8b, 70b)\n",
                       t.c_str());
          return 2;
        }
      }
    } else {
      std::fprintf(stderr, "rl_bench: unknown flag '%s' (see --help)\n", a.c_str());
      return 2;
    }
  }
  at::set_num_threads(static_cast<int>(o.threads));
  const double start = Now();
  std::string hidden;
  for (int64_t h : o.hidden) hidden += std::to_string(h) + "-";
  std::printf(
      "rl_bench: %d threads; policy MLP %lld-%s{7 actor | 1 critic}, %.0f FLOP per row (actor + "
      "critic); "
      "PPO %lld epochs x minibatch %lld\n",
      at::get_num_threads(), static_cast<long long>(rl::kStateDim), hidden.c_str(),
      MlpFlopsPerRow(o.hidden), static_cast<long long>(o.epochs),
      static_cast<long long>(o.minibatch));
  Limits lim;
  lim.gemm = GemmGflops(1024);
  lim.chain_act = ChainGflops(o.hidden, o.episodes);
  lim.chain_train = ChainGflops(o.hidden, o.minibatch);
  lim.copy = CopyGbps();
  std::printf(
      "limits: at::matmul 1024^3 %.2f GFLOP/s; at::mm chain at the MLP's shapes: %.2f GFLOP/s at "
      "%lld rows, "
      "%.2f GFLOP/s at %lld rows; memory copy %.2f GB/s\n",
      lim.gemm, lim.chain_act, static_cast<long long>(o.episodes), lim.chain_train,
      static_cast<long long>(o.minibatch), lim.copy);
  std::fflush(stdout);

  for (const std::string& t : o.tables) {
    if (t == "stories260k") {
      BenchStories(o, lim);
    } else {
      const int units = t == "8b" ? 4864 : 24320;
      const plan::UnitTable table = testing::SyntheticTable(units, 1);
      BenchTable(t == "8b" ? "synthetic LLaMA-3-8B size" : "synthetic LLaMA-3-70B size", table, o,
                 lim, nullptr);
    }
  }
  std::printf("\ntotal %.1f s\n", Now() - start);
  return 0;
}
