// RunConfig: the one YAML file of a windquant run, mapped to typed structs and
// validated once at start. Every error names the key path
// (`ppo.clip_ratio: must be in (0, 1)`, `unknown key quant.chunk_sise`).
// Libraries take these structs; nothing below reads flags or the environment.
#ifndef WINDQUANT_COMMON_CONFIG_RUN_CONFIG_H_
#define WINDQUANT_COMMON_CONFIG_RUN_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/base/text_range.h"
#include "common/model/compute_options.h"
#include "common/net/peer_options.h"
#include "common/quant/calibration_options.h"
#include "common/quant/compensation.h"
#include "common/quant/unit_table_options.h"
#include "common/rl/curriculum_options.h"
#include "common/rl/environment_options.h"
#include "common/rl/lagrange_options.h"
#include "common/rl/ppo_options.h"

namespace windquant::config {

struct ModelConfig {
  std::string dir;                // Hugging Face checkpoint directory
  model::ComputeOptions compute;  // model.device, model.compute_dtype (dtype by device)
  int threads = 0;                // intra-op threads; 0 = all cores
};

// The calibration section is quant::CalibrationOptions (calibration_options.h):
// the calibration.* keys, read by the quantization session and the evaluator.
using CalibrationConfig = quant::CalibrationOptions;

// Episode-end evaluation of a plan (DESIGN.md section 4) and the final numbers.
struct EvaluationConfig {
  // The selection slice: the perplexity of the episode-end reward and the
  // choice of the returned plan (RL and the search baseline alike). With
  // selection.windows k > 0, k windows of context - 1 tokens spread evenly over
  // selection.tokens (base::ReadWindows), so that a text ordered by document is
  // sampled whole.
  base::TextRange selection;
  // Held-out text: only final numbers (report, `baseline`, `eval --config`).
  base::TextRange heldout;
  int context = 256;                  // window length N (BOS + N-1 tokens)
  int64_t calib_slice_tokens = 8192;  // loss-increase term: first N ids of the calibration range
  int batch = 16;                     // windows per forward
};

// quant.chunk_size and quant.salient_fraction are the unit table's own options
// (quant::UnitTableOptions, embedded), quant.cache_dir where fitted tables are kept.
struct QuantConfig : quant::UnitTableOptions {
  std::string cache_dir = ".cache/unit-tables";
  // Applying a plan: none (every unit rounded on its own) | gptq (each linear quantized
  // column by column in unit order, the rounding error carried into the columns not yet
  // quantized through the calibration Hessian of its input; common/quant/gptq.h).
  // Parsed here, once (quant/compensation.h).
  quant::Compensation compensation = quant::Compensation::kNone;
};

struct TrainingConfig {
  int episodes_per_update = 16;  // vectorised episodes per PPO batch
  uint64_t seed = 0;
  std::string warm_start = "lagrange";  // none | lagrange: behaviour-clone the baseline first
  int warm_start_steps = 200;
  // After each PPO update, behaviour-clone the policy on the best plan measured
  // so far when it changed (self-imitation: sampling then explores around the
  // incumbent, as the search baseline does); false = only the warm start.
  bool self_imitation = false;
  // The mean probability of the best plan's actions self-imitation clones to:
  // higher = samples nearer the incumbent (fewer units changed per episode).
  double self_imitation_prob = 0.9;
  // Reward-model screening: an actor samples this many episodes for every one
  // it sends and sends those the learner's model of the selection perplexity
  // (rl::RewardModel, fitted on every plan measured so far) ranks best, so real
  // evaluations go to the most promising samples; 0 or 1 = off. PPO learns
  // from every sample drawn (those sent for measurement with their measured
  // reward, the others with the reward the model predicts), so the episodes it
  // learns from are samples of the policy, not only its best-predicted few.
  int screen_samples = 0;
  int checkpoint_every_updates = 5;
};

struct OutputConfig {
  std::string dir = "runs/default";
  // Artifact store of the run's results (common/store/run_repository.h):
  // "file:///abs/dir", a local path or "s3://bucket[/prefix]"; empty = none.
  std::string store;
  // The run's id in the store; empty = "<model>-<config digest>-<UTC start>",
  // found again by a learner restarted with the same config.
  std::string run_id;
  // Write the quantized and fake-quant checkpoints at the end of a run
  // (`quantize --no-export` turns it off too).
  bool export_model = true;
};

// service.tls.* (net::TlsOptions).
using TlsConfig = net::TlsOptions;

// The service section: the transport keys every channel and server reads
// (net::PeerOptions, embedded: service.max_message_bytes, service.rpc_deadline_ms,
// service.tls.*), then the addresses and the topology.
struct ServiceConfig : net::PeerOptions {
  std::string learner_address = "127.0.0.1:50051";
  std::string evaluator_address = "127.0.0.1:50052";
  std::vector<std::string> actor_addresses;  // stage-major: s*replicas + r
  int stages = 1;
  int replicas = 1;
  int stage = -1;  // this actor's stage; -1 = from pod ordinal
  int replica = -1;
  std::string metrics_address = "127.0.0.1:0";
  // Allowance A added to the learner's derived evaluation wait (learner/evaluation_clock.h:
  // plans expire after A + 3 x the measured per-plan evaluation time of quiet, not after A).
  int64_t evaluation_timeout_ms = 120000;
  // How hidden states go between the evaluator and the actors: "grpc" (in the Forward
  // messages) or "nccl" (a pipe between GPUs of one node beside them,
  // common/transport/tensor_pipes.h; the CUDA build, model.device cuda).
  std::string hidden_states = "grpc";
};

struct RunConfig {
  ModelConfig model;
  CalibrationConfig calibration;
  EvaluationConfig evaluation;
  QuantConfig quant;
  // The sections that are exactly one component's options are that
  // component's Options struct (its defaults, once).
  rl::EnvironmentOptions env;
  rl::LagrangeOptions lagrange;
  rl::PpoOptions ppo;
  rl::CurriculumOptions curriculum;
  TrainingConfig training;
  OutputConfig output;
  ServiceConfig service;
  std::string source;  // file the config came from (for messages)
};

// Parses YAML text. `overrides` are "a.b.c=value" strings (from --set) applied
// on top before validation. Relative paths in model.dir, calibration.text,
// evaluation.selection.text and evaluation.heldout.text are resolved against
// `base_dir` when it is not empty. Text roles that overlap (TextRange) are
// INVALID_ARGUMENT naming both keys.
absl::StatusOr<RunConfig> ParseRunConfig(const std::string& yaml_text, const std::string& source,
                                         const std::vector<std::string>& overrides = {},
                                         const std::string& base_dir = "");
// Reads and parses a file; relative data/model paths resolve against the file's directory.
absl::StatusOr<RunConfig> LoadRunConfig(const std::string& path,
                                        const std::vector<std::string>& overrides = {});

// Reward-model screening (training.screen_samples): the one definition of whether it
// is on (K > 1), for the learner's reward model and the actors' sampling alike.
bool ScreeningOn(const TrainingConfig& training);
// Samples an actor draws for each episode it sends: K when screening is on, else 1
// (actor::RolloutLoopOptions::screen_samples).
int ScreenSamplesPerEpisode(const TrainingConfig& training);

// The calibration range as a TextRange (calibration.text, calibration.tokens).
base::TextRange CalibrationRange(const CalibrationConfig& calibration);

// A canonical text of every field (for fingerprints and logs).
std::string CanonicalText(const RunConfig& config);

// "cpu", "cuda" or "cuda:N" (N a device index): the names model.device and `--device` take.
bool IsDeviceName(absl::string_view name);

}  // namespace windquant::config

#endif  // WINDQUANT_COMMON_CONFIG_RUN_CONFIG_H_
