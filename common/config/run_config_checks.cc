#include "common/config/run_config_checks.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/base/status_macros.h"
#include "common/quant/granularity.h"

namespace windquant::config {
namespace {

absl::Status Check(bool ok, const std::string& path, const std::string& what) {
  return ok ? absl::OkStatus() : absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

absl::Status CheckTokenRange(const std::vector<int64_t>& r, const std::string& path) {
  WQ_RETURN_IF_ERROR(Check(r.size() == 2, path, "expected [begin, end] (end 0 = end of text)"));
  return Check(r[0] >= 0 && (r[1] == 0 || r[1] > r[0]), path,
               "expected 0 <= begin < end, or end 0 (= end of text)");
}

// The file a role reads, for the overlap test: the same file under two
// spellings (../x/a.txt, ./a.txt, a symlink) is one file.
std::string SameFileKey(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::absolute(path, ec).lexically_normal();
  if (ec) return std::filesystem::path(path).lexically_normal().string();
  const std::filesystem::path real = std::filesystem::canonical(p, ec);  // resolves links
  return ec ? p.string() : real.string();
}

std::string RangeText(const std::vector<int64_t>& r) {
  return r[1] == 0 ? absl::StrCat("[", r[0], ", end)") : absl::StrCat("[", r[0], ", ", r[1], ")");
}

}  // namespace

absl::Status CheckDisjointTextRoles(const RunConfig& c) {
  struct Role {
    const char* key;
    base::TextRange range;
  };
  const Role roles[] = {{"calibration", CalibrationRange(c.calibration)},
                        {"evaluation.selection", c.evaluation.selection},
                        {"evaluation.heldout", c.evaluation.heldout}};
  constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();
  for (size_t i = 0; i < 3; ++i) {
    for (size_t j = i + 1; j < 3; ++j) {
      const base::TextRange& a = roles[i].range;
      const base::TextRange& b = roles[j].range;
      if (SameFileKey(a.text) != SameFileKey(b.text)) continue;
      const int64_t a_end = a.tokens[1] == 0 ? kEnd : a.tokens[1];
      const int64_t b_end = b.tokens[1] == 0 ? kEnd : b.tokens[1];
      if (std::max(a.tokens[0], b.tokens[0]) < std::min(a_end, b_end)) {
        return absl::InvalidArgumentError(
            absl::StrCat(roles[j].key, ".tokens ", RangeText(b.tokens), " overlaps ", roles[i].key,
                         ".tokens ", RangeText(a.tokens), " of the same text ", a.text,
                         " (calibration, selection and held-out text must be disjoint)"));
      }
    }
  }
  return absl::OkStatus();
}

namespace {

// output.*: a directory, a store URI the store can open, a run id usable as
// an artifact key.
absl::Status ValidateOutput(const OutputConfig& o) {
  WQ_RETURN_IF_ERROR(Check(!o.dir.empty(), "output.dir", "is required"));
  WQ_RETURN_IF_ERROR(
      Check(o.store.find("://") == std::string::npos || absl::StartsWith(o.store, "file:///") ||
                absl::StartsWith(o.store, "s3://"),
            "output.store", "must be file:///abs/path, s3://bucket[/prefix] or a path"));
  const bool id_chars = std::all_of(o.run_id.begin(), o.run_id.end(), [](char ch) {
    return absl::ascii_isalnum(ch) || ch == '.' || ch == '_' || ch == '-';
  });
  return Check(o.run_id.size() <= 100 && o.run_id.find("..") == std::string::npos && id_chars,
               "output.run_id", "must be up to 100 of [A-Za-z0-9._-], no '..'");
}

}  // namespace

bool IsDeviceName(absl::string_view name) {
  if (name == "cpu" || name == "cuda") return true;
  if (!absl::ConsumePrefix(&name, "cuda:") || name.empty() || name.size() > 3) return false;
  return std::all_of(name.begin(), name.end(), [](char ch) { return absl::ascii_isdigit(ch); });
}

namespace {

// model.*, calibration.* and evaluation.*: the model and the texts a run reads.
absl::Status ValidateModelAndText(const RunConfig& c) {
  WQ_RETURN_IF_ERROR(Check(!c.model.dir.empty(), "model.dir", "is required"));
  WQ_RETURN_IF_ERROR(
      Check(IsDeviceName(c.model.compute.device), "model.device", "must be cpu, cuda or cuda:N"));
  WQ_RETURN_IF_ERROR(Check(c.model.threads >= 0, "model.threads", "must be >= 0"));
  WQ_RETURN_IF_ERROR(Check(!c.calibration.text.empty(), "calibration.text", "is required"));
  WQ_RETURN_IF_ERROR(Check(c.calibration.samples > 0, "calibration.samples", "must be > 0"));
  WQ_RETURN_IF_ERROR(Check(c.calibration.seq_len >= 2, "calibration.seq_len", "must be >= 2"));
  WQ_RETURN_IF_ERROR(CheckTokenRange(c.calibration.tokens, "calibration.tokens"));
  WQ_RETURN_IF_ERROR(
      Check(!c.evaluation.selection.text.empty(), "evaluation.selection.text", "is required"));
  WQ_RETURN_IF_ERROR(CheckTokenRange(c.evaluation.selection.tokens, "evaluation.selection.tokens"));
  const int64_t windows = c.evaluation.selection.windows;
  WQ_RETURN_IF_ERROR(Check(windows >= 0, "evaluation.selection.windows", "must be >= 0"));
  WQ_RETURN_IF_ERROR(
      Check(!c.evaluation.heldout.text.empty(), "evaluation.heldout.text", "is required"));
  WQ_RETURN_IF_ERROR(CheckTokenRange(c.evaluation.heldout.tokens, "evaluation.heldout.tokens"));
  WQ_RETURN_IF_ERROR(Check(c.evaluation.context >= 2, "evaluation.context", "must be >= 2"));
  const std::vector<int64_t>& selection = c.evaluation.selection.tokens;
  const int64_t window = c.evaluation.context - 1;
  if (windows > 0 && selection[1] != 0) {  // to the end of the text: checked when it is read
    WQ_RETURN_IF_ERROR(Check(windows <= (selection[1] - selection[0]) / window,
                             "evaluation.selection.windows",
                             absl::StrCat(windows, " windows of ", window,
                                          " tokens (evaluation.context - 1) do not fit in "
                                          "evaluation.selection.tokens ",
                                          RangeText(selection))));
  }
  WQ_RETURN_IF_ERROR(
      Check(c.evaluation.calib_slice_tokens > 0, "evaluation.calib_slice_tokens", "must be > 0"));
  WQ_RETURN_IF_ERROR(Check(c.evaluation.batch > 0, "evaluation.batch", "must be > 0"));
  return absl::OkStatus();
}

// The quality-target mode (lagrange.prices: target, docs/lagrange.md): epsilon is
// the maximum relative PPL increase and the target bits are a cap, so the
// budget is the hard mask's.
absl::Status ValidateQualityTarget(const RunConfig& c) {
  if (!c.lagrange.quality_target()) return absl::OkStatus();
  WQ_RETURN_IF_ERROR(Check(c.lagrange.epsilon > 0 && c.lagrange.epsilon <= 100, "lagrange.epsilon",
                           "the maximum relative perplexity increase must be in (0, 100] "
                           "(0.02 = 2 %) with prices: target"));
  WQ_RETURN_IF_ERROR(Check(c.env.budget_mode == "hard", "env.budget_mode",
                           "must be hard with lagrange.prices: target (the target bits are a "
                           "cap)"));
  return absl::OkStatus();
}

// quant.*, env.* and lagrange.*: the quantizer, the reward and the prices.
absl::Status ValidateQuantEnvLagrange(const RunConfig& c) {
  WQ_RETURN_IF_ERROR(Check(c.quant.chunk_size >= 1 && c.quant.chunk_size <= quant::kTensorChunkSize,
                           "quant.chunk_size",
                           absl::StrCat("must be in [1, ", quant::kTensorChunkSize,
                                        "] (quant.granularity: tensor for one unit per linear)")));
  WQ_RETURN_IF_ERROR(Check(c.quant.salient_fraction >= 0 && c.quant.salient_fraction < 0.5,
                           "quant.salient_fraction", "must be in [0, 0.5)"));
  WQ_RETURN_IF_ERROR(Check(
      c.env.budget_mode == "hard" || c.env.budget_mode == "soft" || c.env.budget_mode == "repair",
      "env.budget_mode", "must be hard, soft or repair"));
  WQ_RETURN_IF_ERROR(Check(c.env.repair_order == "proxy" || c.env.repair_order == "walk",
                           "env.repair_order", "must be proxy or walk"));
  for (double w :
       {c.env.step_saving_weight, c.env.skip_penalty, c.env.bit_reduction_weight,
        c.env.loss_penalty_weight, c.env.violation_penalty_weight, c.env.ppl_penalty_weight}) {
    WQ_RETURN_IF_ERROR(
        Check(w >= 0 && std::isfinite(w), "env", "reward weights must be finite and >= 0"));
  }
  WQ_RETURN_IF_ERROR(Check(c.lagrange.prices == "quality" || c.lagrange.prices == "budget" ||
                               c.lagrange.prices == "target",
                           "lagrange.prices", "must be quality, budget or target"));
  WQ_RETURN_IF_ERROR(ValidateQualityTarget(c));
  WQ_RETURN_IF_ERROR(Check(c.lagrange.prices != "budget" || c.env.budget_mode != "hard",
                           "lagrange.prices",
                           "budget needs env.budget_mode soft or repair (hard never exceeds the "
                           "budget)"));
  WQ_RETURN_IF_ERROR(Check(c.lagrange.eta >= 0, "lagrange.eta", "must be >= 0"));
  WQ_RETURN_IF_ERROR(Check(c.lagrange.lambda_max > 0, "lagrange.lambda_max", "must be > 0"));
  WQ_RETURN_IF_ERROR(
      Check(c.lagrange.lambda_init >= 0 && c.lagrange.lambda_init <= c.lagrange.lambda_max,
            "lagrange.lambda_init", "must be in [0, lambda_max]"));
  return absl::OkStatus();
}

// curriculum.* and training.*: the schedule of updates.
absl::Status ValidateSchedule(const RunConfig& c) {
  WQ_RETURN_IF_ERROR(
      Check(!c.curriculum.target_bits.empty(), "curriculum.target_bits", "must not be empty"));
  for (size_t i = 0; i < c.curriculum.target_bits.size(); ++i) {
    const double b = c.curriculum.target_bits[i];
    WQ_RETURN_IF_ERROR(Check(b >= 1.0 && b <= 16.0, absl::StrCat("curriculum.target_bits[", i, "]"),
                             "must be in [1, 16]"));
  }
  WQ_RETURN_IF_ERROR(
      Check(c.curriculum.min_updates >= 0, "curriculum.min_updates", "must be >= 0"));
  WQ_RETURN_IF_ERROR(
      Check(c.curriculum.max_updates >= c.curriculum.min_updates && c.curriculum.max_updates > 0,
            "curriculum.max_updates", "must be > 0 and >= min_updates"));
  WQ_RETURN_IF_ERROR(
      Check(c.training.episodes_per_update > 0, "training.episodes_per_update", "must be > 0"));
  WQ_RETURN_IF_ERROR(Check(c.training.warm_start == "none" || c.training.warm_start == "lagrange",
                           "training.warm_start", "must be none or lagrange"));
  WQ_RETURN_IF_ERROR(Check(c.training.self_imitation_prob > 0 && c.training.self_imitation_prob < 1,
                           "training.self_imitation_prob", "must be in (0, 1)"));
  WQ_RETURN_IF_ERROR(Check(c.training.screen_samples >= 0 && c.training.screen_samples <= 1024,
                           "training.screen_samples", "must be in [0, 1024]"));
  WQ_RETURN_IF_ERROR(Check(c.training.checkpoint_every_updates > 0,
                           "training.checkpoint_every_updates", "must be > 0"));
  return absl::OkStatus();
}

// service.*: the stage x replica layout, addresses, limits and TLS.
absl::Status ValidateService(const RunConfig& c) {
  WQ_RETURN_IF_ERROR(Check(c.service.stages >= 1, "service.stages", "must be >= 1"));
  WQ_RETURN_IF_ERROR(Check(c.service.replicas >= 1, "service.replicas", "must be >= 1"));
  WQ_RETURN_IF_ERROR(Check(c.service.stage >= -1 && c.service.stage < c.service.stages,
                           "service.stage", "must be -1 (from pod ordinal) or in [0, stages)"));
  WQ_RETURN_IF_ERROR(Check(c.service.replica >= -1 && c.service.replica < c.service.replicas,
                           "service.replica", "must be -1 (from pod ordinal) or in [0, replicas)"));
  WQ_RETURN_IF_ERROR(Check(
      c.service.actor_addresses.empty() || static_cast<int>(c.service.actor_addresses.size()) ==
                                               c.service.stages * c.service.replicas,
      "service.actor_addresses", "must list stages*replicas addresses (stage-major)"));
  WQ_RETURN_IF_ERROR(
      Check(c.service.max_message_bytes >= 1024, "service.max_message_bytes", "must be >= 1024"));
  WQ_RETURN_IF_ERROR(
      Check(c.service.rpc_deadline_ms > 0, "service.rpc_deadline_ms", "must be > 0"));
  WQ_RETURN_IF_ERROR(
      Check(c.service.evaluation_timeout_ms > 0, "service.evaluation_timeout_ms", "must be > 0"));
  WQ_RETURN_IF_ERROR(Check(c.service.hidden_states == "grpc" || c.service.hidden_states == "nccl",
                           "service.hidden_states",
                           "'" + c.service.hidden_states + "', must be grpc or nccl"));
  WQ_RETURN_IF_ERROR(Check(c.service.tls.cert_file.empty() == c.service.tls.key_file.empty(),
                           "service.tls", "cert_file and key_file go together"));
  return absl::OkStatus();
}

// ppo.*: the PPO learner (rl::PpoOptions).
absl::Status ValidatePpo(const rl::PpoOptions& p) {
  WQ_RETURN_IF_ERROR(Check(!p.hidden.empty(), "ppo.hidden", "must list at least one layer size"));
  for (int h : p.hidden) WQ_RETURN_IF_ERROR(Check(h > 0, "ppo.hidden", "sizes must be > 0"));
  WQ_RETURN_IF_ERROR(Check(p.learning_rate > 0 && std::isfinite(p.learning_rate),
                           "ppo.learning_rate", "must be > 0"));
  WQ_RETURN_IF_ERROR(
      Check(p.clip_ratio > 0 && p.clip_ratio < 1, "ppo.clip_ratio", "must be in (0, 1)"));
  WQ_RETURN_IF_ERROR(Check(p.gamma > 0 && p.gamma <= 1, "ppo.gamma", "must be in (0, 1]"));
  WQ_RETURN_IF_ERROR(
      Check(p.gae_lambda >= 0 && p.gae_lambda <= 1, "ppo.gae_lambda", "must be in [0, 1]"));
  WQ_RETURN_IF_ERROR(
      Check(p.value_coef >= 0 && std::isfinite(p.value_coef), "ppo.value_coef", "must be >= 0"));
  WQ_RETURN_IF_ERROR(Check(p.entropy_coef >= 0 && std::isfinite(p.entropy_coef), "ppo.entropy_coef",
                           "must be >= 0"));
  WQ_RETURN_IF_ERROR(
      Check(!std::isnan(p.max_grad_norm), "ppo.max_grad_norm", "must be a number (<= 0: off)"));
  WQ_RETURN_IF_ERROR(Check(p.epochs > 0, "ppo.epochs", "must be > 0"));
  WQ_RETURN_IF_ERROR(Check(p.minibatch_size > 0, "ppo.minibatch_size", "must be > 0"));
  WQ_RETURN_IF_ERROR(Check(p.max_policy_lag >= 0, "ppo.max_policy_lag", "must be >= 0"));
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateRunConfig(const RunConfig& c) {
  WQ_RETURN_IF_ERROR(ValidateModelAndText(c));
  WQ_RETURN_IF_ERROR(ValidateQuantEnvLagrange(c));
  WQ_RETURN_IF_ERROR(ValidatePpo(c.ppo));
  WQ_RETURN_IF_ERROR(ValidateSchedule(c));
  WQ_RETURN_IF_ERROR(ValidateOutput(c.output));
  return ValidateService(c);
}

}  // namespace windquant::config
