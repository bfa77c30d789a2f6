#include "common/rl/run_checkpoint.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"

namespace windquant::rl {
namespace {

using nlohmann::json;

constexpr char kMagic[] = "WQRUNCKPT1\n";
constexpr size_t kLengthDigits = 20;
constexpr char kFileName[] = "run.ckpt";

json Num(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }
double Num(const json& j) {
  return j.is_null() ? std::numeric_limits<double>::infinity() : j.get<double>();
}

json ToJson(const PlanEvaluation& e) {
  return {{"effective_bits", Num(e.effective_bits)},
          {"calib_nll", Num(e.calib_nll)},
          {"loss_increase", Num(e.loss_increase)},
          {"eval_nll", Num(e.eval_nll)},
          {"eval_ppl", Num(e.eval_ppl)},
          {"relative_ppl_increase", Num(e.relative_ppl_increase)}};
}
PlanEvaluation EvalFromJson(const json& j) {
  PlanEvaluation e;
  e.effective_bits = Num(j.at("effective_bits"));
  e.calib_nll = Num(j.at("calib_nll"));
  e.loss_increase = Num(j.at("loss_increase"));
  e.eval_nll = Num(j.at("eval_nll"));
  e.eval_ppl = Num(j.at("eval_ppl"));
  e.relative_ppl_increase = Num(j.at("relative_ppl_increase"));
  return e;
}

json ToJson(const CandidatePlan& c) {
  return {{"actions", c.actions},         {"evaluation", ToJson(c.evaluation)},
          {"target_bits", c.target_bits}, {"source", c.source},
          {"update", c.update},           {"policy_version", c.policy_version}};
}
CandidatePlan CandidateFromJson(const json& j) {
  CandidatePlan c;
  c.actions = j.at("actions").get<std::vector<int>>();
  c.evaluation = EvalFromJson(j.at("evaluation"));
  c.target_bits = j.at("target_bits").get<double>();
  c.source = j.at("source").get<std::string>();
  c.update = j.at("update").get<int64_t>();
  c.policy_version = j.at("policy_version").get<int64_t>();
  return c;
}

json ToJson(const UpdateRecord& r) {
  return {{"update", r.update},
          {"stage", r.stage},
          {"target_bits", r.target_bits},
          {"mean_reward", Num(r.mean_reward)},
          {"mean_ppl", Num(r.mean_ppl)},
          {"mean_bits", Num(r.mean_bits)},
          {"best_ppl", Num(r.best_ppl)},
          {"best_bits", Num(r.best_bits)},
          {"lambda", r.lambda},
          {"policy_loss", Num(r.policy_loss)},
          {"value_loss", Num(r.value_loss)},
          {"entropy", Num(r.entropy)},
          {"evaluations", r.evaluations},
          {"seconds", r.seconds}};
}
UpdateRecord RecordFromJson(const json& j) {
  UpdateRecord r;
  r.update = j.at("update").get<int64_t>();
  r.stage = j.at("stage").get<int>();
  r.target_bits = j.at("target_bits").get<double>();
  r.mean_reward = Num(j.at("mean_reward"));
  r.mean_ppl = Num(j.at("mean_ppl"));
  r.mean_bits = Num(j.at("mean_bits"));
  r.best_ppl = Num(j.at("best_ppl"));
  r.best_bits = Num(j.at("best_bits"));
  r.lambda = j.at("lambda").get<double>();
  r.policy_loss = Num(j.at("policy_loss"));
  r.value_loss = Num(j.at("value_loss"));
  r.entropy = Num(j.at("entropy"));
  r.evaluations = j.at("evaluations").get<int64_t>();
  r.seconds = j.at("seconds").get<double>();
  return r;
}

std::string QualityTargetText(double max_ppl_increase) {
  return max_ppl_increase > 0
             ? absl::StrCat("a quality-target run (lagrange.epsilon ", max_ppl_increase, ")")
             : std::string("a fixed-budget run (no lagrange.epsilon target)");
}

}  // namespace

std::string RunCheckpointPath(const std::string& dir) {
  return (std::filesystem::path(dir) / kFileName).string();
}

absl::Status WriteRunCheckpoint(const std::string& dir, const RunCheckpoint& c) {
  json stages = json::array();
  for (const auto& s : c.stages) {
    stages.push_back({{"stage", s.stage},
                      {"target_bits", s.target_bits},
                      {"update", s.update},
                      {"reason", s.reason}});
  }
  json curve = json::array();
  for (const auto& r : c.curve) curve.push_back(ToJson(r));
  json header = {{"fingerprint", c.fingerprint},
                 {"update", c.update},
                 {"stage", c.stage},
                 {"updates_in_stage", c.updates_in_stage},
                 {"curriculum_finished", c.curriculum_finished},
                 {"warm_started_stage", c.warm_started_stage},
                 {"lambda", c.lambda},
                 {"rng_seed", c.rng_seed},
                 {"next_episode_id", c.next_episode_id},
                 {"learner_sha256", base::Sha256Hex(c.learner_state)},
                 {"learner_bytes", c.learner_state.size()},
                 {"best", ToJson(c.best)},
                 {"best_stage", ToJson(c.best_stage)},
                 {"stage_reference_ppl", Num(c.stage_reference_ppl)},
                 {"curve", curve},
                 {"stages", stages}};
  if (c.max_ppl_increase > 0) header["max_ppl_increase"] = c.max_ppl_increase;
  const std::string text = header.dump();
  std::string bytes = kMagic;
  absl::StrAppend(&bytes, absl::StrFormat("%0*d", static_cast<int>(kLengthDigits), text.size()),
                  "\n", text, c.learner_state);
  return base::WriteFileAtomic(RunCheckpointPath(dir), bytes);
}

absl::StatusOr<RunCheckpoint> ReadRunCheckpoint(const std::string& dir,
                                                const std::string& expected_fingerprint,
                                                double expected_max_ppl_increase) {
  const std::string path = RunCheckpointPath(dir);
  if (!base::PathExists(path)) return absl::NotFoundError(absl::StrCat(path, ": no checkpoint"));
  WQ_ASSIGN_OR_RETURN(std::string bytes, base::ReadFile(path));
  const size_t magic = sizeof(kMagic) - 1;
  if (bytes.size() < magic + kLengthDigits + 1 || bytes.compare(0, magic, kMagic) != 0) {
    return absl::DataLossError(absl::StrCat(path, ": not a windquant run checkpoint"));
  }
  size_t length = 0;
  for (size_t i = 0; i < kLengthDigits; ++i) {
    const char ch = bytes[magic + i];
    if (ch < '0' || ch > '9')
      return absl::DataLossError(absl::StrCat(path, ": corrupt header length"));
    length = length * 10 + static_cast<size_t>(ch - '0');
  }
  const size_t start = magic + kLengthDigits + 1;
  if (length > bytes.size() - start) return absl::DataLossError(absl::StrCat(path, ": truncated"));
  RunCheckpoint c;
  try {
    const json h = json::parse(bytes.substr(start, length));
    c.fingerprint = h.at("fingerprint").get<std::string>();
    c.max_ppl_increase = h.value("max_ppl_increase", 0.0);
    if (c.max_ppl_increase != expected_max_ppl_increase) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": checkpoint is of ", QualityTargetText(c.max_ppl_increase),
                       ", this run is ", QualityTargetText(expected_max_ppl_increase),
                       "; resume with the same --max-ppl-increase, or delete it or use "
                       "another output.dir"));
    }
    if (c.fingerprint != expected_fingerprint) {
      return absl::FailedPreconditionError(absl::StrCat(
          path,
          ": checkpoint belongs to a different run (model, data or config changed: fingerprint ",
          c.fingerprint.substr(0, 12), " != ", expected_fingerprint.substr(0, 12),
          "); delete it or use another output.dir"));
    }
    c.learner_state = bytes.substr(start + length);
    if (c.learner_state.size() != h.at("learner_bytes").get<size_t>() ||
        base::Sha256Hex(c.learner_state) != h.at("learner_sha256").get<std::string>()) {
      return absl::DataLossError(absl::StrCat(path, ": learner state checksum mismatch"));
    }
    c.update = h.at("update").get<int64_t>();
    c.stage = h.at("stage").get<int>();
    c.updates_in_stage = h.at("updates_in_stage").get<int>();
    c.curriculum_finished = h.at("curriculum_finished").get<bool>();
    c.warm_started_stage = h.at("warm_started_stage").get<int>();
    c.lambda = h.at("lambda").get<double>();
    c.rng_seed = h.at("rng_seed").get<uint64_t>();
    c.next_episode_id = h.at("next_episode_id").get<int64_t>();
    c.best = CandidateFromJson(h.at("best"));
    c.best_stage = CandidateFromJson(h.at("best_stage"));
    c.stage_reference_ppl = Num(h.at("stage_reference_ppl"));
    for (const auto& r : h.at("curve")) c.curve.push_back(RecordFromJson(r));
    for (const auto& s : h.at("stages")) {
      c.stages.push_back({s.at("stage").get<int>(), s.at("target_bits").get<double>(),
                          s.at("update").get<int64_t>(), s.at("reason").get<std::string>()});
    }
  } catch (const json::exception& e) {
    return absl::DataLossError(absl::StrCat(path, ": corrupt header: ", e.what()));
  }
  return c;
}

}  // namespace windquant::rl
