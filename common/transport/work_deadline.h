// Deadlines of calls whose work grows with the model (a pass of hidden states
// through a stage, fitting a stage): the configured base deadline
// (service.rpc_deadline_ms: a round trip and a small model's work) plus the
// time the work takes at a floor rate far below what this project's smallest
// machine (2 CPU cores) does, so that a call on a large model runs out of time
// only when a stage stopped making progress, never because the model is large.
//
// Floors, against what 2 cores do with the LLaMA-3.2-1B layer shapes:
//   pass   1e9 weight x tokens per second (every token meets every weight of
//          the stage once; a calibration pass of 1024 tokens through 2 layers,
//          1.2e11 weight x tokens, takes a few seconds: ~3e10)
//   fit    1e6 weights per second (fit_bench: 1.4e7 with 2 threads); also
//          charged once per pass, for the plan's layers dequantized in it
//   table  100 units per second for registering a stage's unit table with
//          the learner (the last one completes the table: the Lagrangian
//          reference plan and the warm start's behaviour cloning over every
//          unit run in the call; 320 units take well under a second)
// Calls whose work does not grow with the model (status, a plan submitted to
// the evaluator's queue, a report) keep the base deadline alone.
// Sanitizer builds run the same work many times slower (ThreadSanitizer 5-15x,
// AddressSanitizer 2-3x, measured on in_process_job_test): their deadlines are
// these times kSanitizerSlowdown, as gRPC's own tests scale theirs.
#ifndef WINDQUANT_COMMON_TRANSPORT_WORK_DEADLINE_H_
#define WINDQUANT_COMMON_TRANSPORT_WORK_DEADLINE_H_

#include <cstdint>

#include "absl/time/time.h"
#include "common/model/llama_config.h"

namespace windquant::transport {

inline constexpr double kPassFloorWeightTokensPerSecond = 1e9;
inline constexpr double kFitFloorWeightsPerSecond = 1e6;
inline constexpr double kTableFloorUnitsPerSecond = 100;
#if defined(__SANITIZE_THREAD__)
inline constexpr int64_t kSanitizerSlowdown = 20;
#elif defined(__SANITIZE_ADDRESS__)
inline constexpr int64_t kSanitizerSlowdown = 5;
#else
inline constexpr int64_t kSanitizerSlowdown = 1;
#endif

// Decoder linear weights of one layer of `config` (q, k, v, o, gate, up, down).
int64_t LayerLinearWeights(const model::LlamaConfig& config);

// All three times kSanitizerSlowdown.
// base + weights * tokens / the pass floor + weights / the fit floor (a plan's
// layers are dequantized when the pass first reaches them). `weights`: of the
// stages the pass waits on; `tokens`: all the pass carries.
absl::Duration PassDeadline(absl::Duration base, int64_t weights, int64_t tokens);

// base + weights / the fit floor.
absl::Duration FitDeadline(absl::Duration base, int64_t weights);

// base + units / the table floor.
absl::Duration RegisterTableDeadline(absl::Duration base, int64_t units);

}  // namespace windquant::transport

#endif  // WINDQUANT_COMMON_TRANSPORT_WORK_DEADLINE_H_
