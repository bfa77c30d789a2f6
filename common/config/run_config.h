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
#include "common/rl/curriculum_options.h"
#include "common/rl/environment_options.h"
#include "common/rl/lagrange_options.h"
#include "common/rl/ppo_options.h"

namespace windquant::config {

struct ModelConfig {
  std::string dir;             // Hugging Face checkpoint directory
  std::string device = "cpu";  // "cpu" or "cuda"
  int threads = 0;             // intra-op threads; 0 = all cores
};

// A part of a text file, in the model's token ids: the file encoded without
// BOS, ids [tokens[0], tokens[1]); tokens[1] = 0 means to the end of the text.
// The three text roles of a run (calibration, selection, held-out) are each
// one TextRange, and the config loader refuses two that overlap (same file,
// intersecting ranges): no plan is chosen on, and no activation statistic
// comes from, the text its final numbers are measured on.
struct TextRange {
  std::string text;                      // UTF-8 text file
  std::vector<int64_t> tokens = {0, 0};  // [begin, end); end 0 = end of text
};

// Calibration pass (DESIGN.md section 3): activation statistics per linear input.
// Its windows and the loss slice of the episode-end reward come from `text`'s
// range `tokens` only.
struct CalibrationConfig {
  std::string text;                      // UTF-8 text file
  std::vector<int64_t> tokens = {0, 0};  // the part of `text` calibration reads (TextRange)
  int samples = 32;                      // sequences
  int seq_len = 256;                     // tokens per sequence (incl. BOS)
  uint64_t seed = 0;                     // which windows of the text are sampled
};

// Episode-end evaluation of a plan (DESIGN.md section 4) and the final numbers.
struct EvaluationConfig {
  // The selection slice: the perplexity of the episode-end reward and the
  // choice of the returned plan (RL and the search baseline alike).
  TextRange selection;
  // Held-out text: only final numbers (report, `baseline`, `eval --config`).
  TextRange heldout;
  int context = 256;                  // window length N (BOS + N-1 tokens)
  int64_t calib_slice_tokens = 8192;  // loss-increase term: first N ids of the calibration range
  int batch = 16;                     // windows per forward
};

struct QuantConfig {
  int chunk_size = 256;
  double salient_fraction = 0.005;
  std::string cache_dir = ".cache/unit-tables";
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
  // evaluations go to the most promising samples; 0 or 1 = off.
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

struct TlsConfig {
  std::string cert_file, key_file, ca_file;  // empty = plaintext
  bool require_client_cert = false;
  std::string bearer_token_file;  // empty = no token check
};

struct ServiceConfig {
  std::string learner_address = "127.0.0.1:50051";
  std::string evaluator_address = "127.0.0.1:50052";
  std::vector<std::string> actor_addresses;  // stage-major: s*replicas + r
  int stages = 1;
  int replicas = 1;
  int stage = -1;  // this actor's stage; -1 = from pod ordinal
  int replica = -1;
  std::string metrics_address = "127.0.0.1:0";
  int64_t max_message_bytes = 64 << 20;
  // Deadline of control calls; calls whose work follows the model (calibration,
  // forward passes, unit-table registration) derive theirs from the work
  // (common/transport/work_deadline.h).
  int64_t rpc_deadline_ms = 30000;
  // Allowance A added to the learner's derived evaluation wait (learner/evaluation_clock.h:
  // plans expire after A + 3 x the measured per-plan evaluation time of quiet, not after A).
  int64_t evaluation_timeout_ms = 120000;
  TlsConfig tls;
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

// The calibration range as a TextRange (calibration.text, calibration.tokens).
TextRange CalibrationRange(const CalibrationConfig& calibration);

// A canonical text of every field (for fingerprints and logs).
std::string CanonicalText(const RunConfig& config);

}  // namespace windquant::config

#endif  // WINDQUANT_COMMON_CONFIG_RUN_CONFIG_H_
