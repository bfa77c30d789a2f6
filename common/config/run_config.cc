#include "common/config/run_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <type_traits>
#include <utility>

#include <yaml-cpp/yaml.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"

namespace windquant::config {
namespace {

// Every field of RunConfig is listed once, in VisitFields; a visitor either
// reads it from YAML (Reader) or prints it (Printer).
template <typename V>
void VisitFields(V& v, RunConfig& c) {
  v.Field("model.dir", &c.model.dir);
  v.Field("model.device", &c.model.device);
  v.Field("model.threads", &c.model.threads);
  v.Field("calibration.text", &c.calibration.text);
  v.Field("calibration.tokens", &c.calibration.tokens);
  v.Field("calibration.samples", &c.calibration.samples);
  v.Field("calibration.seq_len", &c.calibration.seq_len);
  v.Field("calibration.seed", &c.calibration.seed);
  v.Field("evaluation.selection.text", &c.evaluation.selection.text);
  v.Field("evaluation.selection.tokens", &c.evaluation.selection.tokens);
  v.Field("evaluation.heldout.text", &c.evaluation.heldout.text);
  v.Field("evaluation.heldout.tokens", &c.evaluation.heldout.tokens);
  v.Field("evaluation.context", &c.evaluation.context);
  v.Field("evaluation.calib_slice_tokens", &c.evaluation.calib_slice_tokens);
  v.Field("evaluation.batch", &c.evaluation.batch);
  v.Field("quant.chunk_size", &c.quant.chunk_size);
  v.Field("quant.salient_fraction", &c.quant.salient_fraction);
  v.Field("quant.cache_dir", &c.quant.cache_dir);
  v.Field("quant.compensation", &c.quant.compensation);
  v.Field("env.budget_mode", &c.env.budget_mode);
  v.Field("env.repair_order", &c.env.repair_order);
  v.Field("env.step_saving_weight", &c.env.step_saving_weight);
  v.Field("env.skip_penalty", &c.env.skip_penalty);
  v.Field("env.bit_reduction_weight", &c.env.bit_reduction_weight);
  v.Field("env.loss_penalty_weight", &c.env.loss_penalty_weight);
  v.Field("env.violation_penalty_weight", &c.env.violation_penalty_weight);
  v.Field("env.ppl_penalty_weight", &c.env.ppl_penalty_weight);
  v.Field("lagrange.eta", &c.lagrange.eta);
  v.Field("lagrange.prices", &c.lagrange.prices);
  v.Field("lagrange.epsilon", &c.lagrange.epsilon);
  v.Field("lagrange.lambda_init", &c.lagrange.lambda_init);
  v.Field("lagrange.lambda_max", &c.lagrange.lambda_max);
  v.Field("ppo.hidden", &c.ppo.hidden);
  v.Field("ppo.learning_rate", &c.ppo.learning_rate);
  v.Field("ppo.clip_ratio", &c.ppo.clip_ratio);
  v.Field("ppo.gamma", &c.ppo.gamma);
  v.Field("ppo.gae_lambda", &c.ppo.gae_lambda);
  v.Field("ppo.value_coef", &c.ppo.value_coef);
  v.Field("ppo.entropy_coef", &c.ppo.entropy_coef);
  v.Field("ppo.max_grad_norm", &c.ppo.max_grad_norm);
  v.Field("ppo.epochs", &c.ppo.epochs);
  v.Field("ppo.minibatch_size", &c.ppo.minibatch_size);
  v.Field("ppo.max_policy_lag", &c.ppo.max_policy_lag);
  v.Field("curriculum.target_bits", &c.curriculum.target_bits);
  v.Field("curriculum.min_updates", &c.curriculum.min_updates);
  v.Field("curriculum.max_updates", &c.curriculum.max_updates);
  v.Field("curriculum.advance_ppl_ratio", &c.curriculum.advance_ppl_ratio);
  v.Field("training.episodes_per_update", &c.training.episodes_per_update);
  v.Field("training.seed", &c.training.seed);
  v.Field("training.warm_start", &c.training.warm_start);
  v.Field("training.warm_start_steps", &c.training.warm_start_steps);
  v.Field("training.self_imitation", &c.training.self_imitation);
  v.Field("training.self_imitation_prob", &c.training.self_imitation_prob);
  v.Field("training.screen_samples", &c.training.screen_samples);
  v.Field("training.checkpoint_every_updates", &c.training.checkpoint_every_updates);
  v.Field("output.dir", &c.output.dir);
  v.Field("output.store", &c.output.store);
  v.Field("output.run_id", &c.output.run_id);
  v.Field("output.export", &c.output.export_model);
  v.Field("service.learner_address", &c.service.learner_address);
  v.Field("service.evaluator_address", &c.service.evaluator_address);
  v.Field("service.actor_addresses", &c.service.actor_addresses);
  v.Field("service.stages", &c.service.stages);
  v.Field("service.replicas", &c.service.replicas);
  v.Field("service.stage", &c.service.stage);
  v.Field("service.replica", &c.service.replica);
  v.Field("service.metrics_address", &c.service.metrics_address);
  v.Field("service.max_message_bytes", &c.service.max_message_bytes);
  v.Field("service.rpc_deadline_ms", &c.service.rpc_deadline_ms);
  v.Field("service.evaluation_timeout_ms", &c.service.evaluation_timeout_ms);
  v.Field("service.tls.cert_file", &c.service.tls.cert_file);
  v.Field("service.tls.key_file", &c.service.tls.key_file);
  v.Field("service.tls.ca_file", &c.service.tls.ca_file);
  v.Field("service.tls.require_client_cert", &c.service.tls.require_client_cert);
  v.Field("service.tls.bearer_token_file", &c.service.tls.bearer_token_file);
}

template <typename T>
const char* TypeName() {
  if constexpr (std::is_same_v<T, bool>) return "a boolean";
  if constexpr (std::is_integral_v<T>) return "an integer";
  if constexpr (std::is_floating_point_v<T>) return "a number";
  return "a string";
}

// Reads fields from a YAML tree; remembers the first error and every key it
// consumed, so unknown keys can be reported afterwards.
class Reader {
 public:
  explicit Reader(YAML::Node root) : root_(std::move(root)) {}

  template <typename T>
  void Field(const std::string& path, T* out) {
    known_.insert(path);
    if (!status_.ok()) return;
    YAML::Node node = Lookup(path);
    if (!node.IsDefined() || node.IsNull()) return;  // keep the default
    ReadValue(path, node, out);
  }

  // Walks the tree and reports the first key that no Field() consumed.
  void CheckUnknown(const YAML::Node& node, const std::string& prefix) {
    if (!status_.ok()) return;
    if (!node.IsMap()) {
      if (!prefix.empty() && !known_.count(prefix)) Fail(absl::StrCat("unknown key ", prefix));
      return;
    }
    if (!prefix.empty() && known_.count(prefix)) {
      Fail(absl::StrCat(prefix, ": expected a scalar or list, got a map"));
      return;
    }
    for (const auto& kv : node) {
      const std::string key = kv.first.as<std::string>();
      const std::string path = prefix.empty() ? key : absl::StrCat(prefix, ".", key);
      bool is_prefix = known_.count(path) > 0;
      for (const auto& k : known_) is_prefix = is_prefix || k.rfind(path + ".", 0) == 0;
      if (!is_prefix) return Fail(absl::StrCat("unknown key ", path));
      CheckUnknown(kv.second, path);
    }
  }

  const absl::Status& status() const { return status_; }
  const YAML::Node& root() const { return root_; }

 private:
  YAML::Node Lookup(const std::string& path) {
    YAML::Node node = YAML::Clone(root_);
    for (const auto& part : absl::StrSplit(path, '.')) {
      if (!node.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
      YAML::Node next = node[std::string(part)];
      if (!next.IsDefined()) return YAML::Node(YAML::NodeType::Undefined);
      node.reset(next);
    }
    return node;
  }

  template <typename T>
  void ReadValue(const std::string& path, const YAML::Node& node, T* out) {
    if (!node.IsScalar()) return Fail(absl::StrCat(path, ": expected ", TypeName<T>()));
    try {
      if constexpr (std::is_same_v<T, std::string>) {
        *out = node.as<std::string>();
      } else {
        *out = node.as<T>();
      }
      if constexpr (std::is_floating_point_v<T>) {
        if (!std::isfinite(*out)) {
          return Fail(absl::StrCat(path, ": must be a finite number, got '", node.Scalar(), "'"));
        }
      }
    } catch (const YAML::Exception&) {
      Fail(absl::StrCat(path, ": expected ", TypeName<T>(), ", got '", node.Scalar(), "'"));
    }
  }

  // An enum key, parsed here once; the error names the key and the choices.
  void ReadValue(const std::string& path, const YAML::Node& node, quant::Compensation* out) {
    std::string name;
    ReadValue(path, node, &name);
    const std::optional<quant::Compensation> value = quant::ParseCompensation(name);
    if (value.has_value()) *out = *value;
    if (!value.has_value()) Fail(absl::StrCat(path, ": must be none or gptq, got '", name, "'"));
  }

  template <typename T>
  void ReadValue(const std::string& path, const YAML::Node& node, std::vector<T>* out) {
    if (!node.IsSequence()) return Fail(absl::StrCat(path, ": expected a list"));
    out->clear();
    for (size_t i = 0; i < node.size(); ++i) {
      T value{};
      ReadValue(absl::StrCat(path, "[", i, "]"), node[i], &value);
      out->push_back(value);
    }
  }

  void Fail(const std::string& message) {
    if (status_.ok()) status_ = absl::InvalidArgumentError(message);
  }

  YAML::Node root_;
  std::set<std::string> known_;
  absl::Status status_;
};

class Printer {
 public:
  template <typename T>
  void Field(const std::string& path, T* value) {
    out_ << path << "=" << Format(*value) << "\n";
  }
  std::string str() const { return out_.str(); }

 private:
  template <typename T>
  static std::string Format(const T& v) {
    std::ostringstream s;
    s.precision(17);
    s << v;
    return s.str();
  }
  static std::string Format(quant::Compensation c) {
    return std::string(quant::CompensationName(c));
  }
  template <typename T>
  static std::string Format(const std::vector<T>& v) {
    std::vector<std::string> parts;
    for (const auto& x : v) parts.push_back(Format(x));
    return absl::StrCat("[", absl::StrJoin(parts, ","), "]");
  }
  std::ostringstream out_;
};

// yaml-cpp keeps both entries of a key given twice and reads the first: a
// later value, meant as an override, would be ignored without a word.
absl::Status CheckDuplicateKeys(const YAML::Node& node, const std::string& prefix) {
  if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) {
      WQ_RETURN_IF_ERROR(CheckDuplicateKeys(node[i], absl::StrCat(prefix, "[", i, "]")));
    }
    return absl::OkStatus();
  }
  if (!node.IsMap()) return absl::OkStatus();
  std::set<std::string> seen;
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    const std::string path = prefix.empty() ? key : absl::StrCat(prefix, ".", key);
    if (!seen.insert(key).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("duplicate key ", path, " at line ", kv.first.Mark().line + 1));
    }
    WQ_RETURN_IF_ERROR(CheckDuplicateKeys(kv.second, path));
  }
  return absl::OkStatus();
}

absl::Status ApplyOverride(YAML::Node& root, const std::string& assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--set ", assignment, ": expected key.path=value"));
  }
  // An empty value would read as null, i.e. "keep the default": never what
  // the user meant.
  if (assignment.find_first_not_of(" \t", eq + 1) == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("--set ", assignment, ": empty value"));
  }
  const std::vector<std::string> parts = absl::StrSplit(assignment.substr(0, eq), '.');
  YAML::Node value;
  try {
    value = YAML::Load(assignment.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("--set ", assignment, ": ", e.msg));
  }
  std::vector<YAML::Node> chain = {root};
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node child = chain.back()[parts[i]];
    if (!child.IsDefined() || child.IsNull()) {
      chain.back()[parts[i]] = YAML::Node(YAML::NodeType::Map);
      child = chain.back()[parts[i]];
    }
    if (!child.IsMap()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--set ", assignment, ": ", parts[i], " is not a map"));
    }
    chain.push_back(child);
  }
  chain.back()[parts.back()] = value;
  return absl::OkStatus();
}

absl::Status Check(bool ok, const std::string& path, const std::string& what) {
  return ok ? absl::OkStatus() : absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

absl::Status CheckTokenRange(const std::vector<int64_t>& r, const std::string& path) {
  WQ_RETURN_IF_ERROR(Check(r.size() == 2, path, "expected [begin, end] (end 0 = end of text)"));
  return Check(r[0] >= 0 && (r[1] == 0 || r[1] > r[0]), path,
               "expected 0 <= begin < end, or end 0 (= end of text)");
}

// Retired keys, with what replaced them (an old config fails with the way out).
constexpr std::pair<const char*, const char*> kRetiredKeys[] = {
    {"evaluation.text",
     "replaced by evaluation.selection and evaluation.heldout ({text, tokens} each, disjoint)"},
    {"evaluation.eval_slice_tokens", "replaced by evaluation.selection.tokens ([begin, end])"},
    {"evaluation.final_eval_tokens", "replaced by evaluation.heldout.tokens ([begin, end])"},
};

absl::Status CheckRetiredKeys(const YAML::Node& root) {
  for (const auto& [key, what] : kRetiredKeys) {
    YAML::Node node = YAML::Clone(root);
    bool found = true;
    for (const auto& part : absl::StrSplit(key, '.')) {
      if (!node.IsMap() || !node[std::string(part)].IsDefined()) {
        found = false;
        break;
      }
      node.reset(node[std::string(part)]);
    }
    if (found) return absl::InvalidArgumentError(absl::StrCat(key, ": ", what));
  }
  return absl::OkStatus();
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

// Calibration, selection and held-out text must not share a token.
absl::Status CheckDisjointTextRoles(const RunConfig& c) {
  struct Role {
    const char* key;
    TextRange range;
  };
  const Role roles[] = {{"calibration", CalibrationRange(c.calibration)},
                        {"evaluation.selection", c.evaluation.selection},
                        {"evaluation.heldout", c.evaluation.heldout}};
  constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();
  for (size_t i = 0; i < 3; ++i) {
    for (size_t j = i + 1; j < 3; ++j) {
      const TextRange& a = roles[i].range;
      const TextRange& b = roles[j].range;
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

// model.*, calibration.* and evaluation.*: the model and the texts a run reads.
absl::Status ValidateModelAndText(const RunConfig& c) {
  WQ_RETURN_IF_ERROR(Check(!c.model.dir.empty(), "model.dir", "is required"));
  WQ_RETURN_IF_ERROR(Check(c.model.device == "cpu" || c.model.device == "cuda", "model.device",
                           "must be cpu or cuda"));
  WQ_RETURN_IF_ERROR(Check(c.model.threads >= 0, "model.threads", "must be >= 0"));
  WQ_RETURN_IF_ERROR(Check(!c.calibration.text.empty(), "calibration.text", "is required"));
  WQ_RETURN_IF_ERROR(Check(c.calibration.samples > 0, "calibration.samples", "must be > 0"));
  WQ_RETURN_IF_ERROR(Check(c.calibration.seq_len >= 2, "calibration.seq_len", "must be >= 2"));
  WQ_RETURN_IF_ERROR(CheckTokenRange(c.calibration.tokens, "calibration.tokens"));
  WQ_RETURN_IF_ERROR(
      Check(!c.evaluation.selection.text.empty(), "evaluation.selection.text", "is required"));
  WQ_RETURN_IF_ERROR(CheckTokenRange(c.evaluation.selection.tokens, "evaluation.selection.tokens"));
  WQ_RETURN_IF_ERROR(
      Check(!c.evaluation.heldout.text.empty(), "evaluation.heldout.text", "is required"));
  WQ_RETURN_IF_ERROR(CheckTokenRange(c.evaluation.heldout.tokens, "evaluation.heldout.tokens"));
  WQ_RETURN_IF_ERROR(Check(c.evaluation.context >= 2, "evaluation.context", "must be >= 2"));
  WQ_RETURN_IF_ERROR(
      Check(c.evaluation.calib_slice_tokens > 0, "evaluation.calib_slice_tokens", "must be > 0"));
  WQ_RETURN_IF_ERROR(Check(c.evaluation.batch > 0, "evaluation.batch", "must be > 0"));
  return absl::OkStatus();
}

// quant.*, env.* and lagrange.*: the quantizer, the reward and the prices.
absl::Status ValidateQuantEnvLagrange(const RunConfig& c) {
  WQ_RETURN_IF_ERROR(Check(c.quant.chunk_size >= 1, "quant.chunk_size", "must be >= 1"));
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
  WQ_RETURN_IF_ERROR(Check(c.lagrange.prices == "quality" || c.lagrange.prices == "budget",
                           "lagrange.prices", "must be quality or budget"));
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

absl::Status Validate(const RunConfig& c) {
  WQ_RETURN_IF_ERROR(ValidateModelAndText(c));
  WQ_RETURN_IF_ERROR(ValidateQuantEnvLagrange(c));
  WQ_RETURN_IF_ERROR(ValidatePpo(c.ppo));
  WQ_RETURN_IF_ERROR(ValidateSchedule(c));
  WQ_RETURN_IF_ERROR(ValidateOutput(c.output));
  return ValidateService(c);
}

std::string Resolve(const std::string& base_dir, const std::string& path) {
  if (base_dir.empty() || path.empty() || path.front() == '/') return path;
  return (std::filesystem::path(base_dir) / path).lexically_normal().string();
}

}  // namespace

absl::StatusOr<RunConfig> ParseRunConfig(const std::string& yaml_text, const std::string& source,
                                         const std::vector<std::string>& overrides,
                                         const std::string& base_dir) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": invalid YAML at line ", e.mark.line + 1, ": ", e.msg));
  }
  if (absl::Status s = CheckDuplicateKeys(root, ""); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", s.message()));
  }
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap())
    return absl::InvalidArgumentError(absl::StrCat(source, ": top level must be a map"));
  for (const auto& o : overrides) WQ_RETURN_IF_ERROR(ApplyOverride(root, o));
  if (absl::Status s = CheckRetiredKeys(root); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", s.message()));
  }
  RunConfig config;
  Reader reader(root);
  VisitFields(reader, config);
  reader.CheckUnknown(reader.root(), "");
  if (!reader.status().ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", reader.status().message()));
  }
  if (absl::Status s = Validate(config); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", s.message()));
  }
  config.model.dir = Resolve(base_dir, config.model.dir);
  config.calibration.text = Resolve(base_dir, config.calibration.text);
  config.evaluation.selection.text = Resolve(base_dir, config.evaluation.selection.text);
  config.evaluation.heldout.text = Resolve(base_dir, config.evaluation.heldout.text);
  if (absl::Status s = CheckDisjointTextRoles(config); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", s.message()));
  }
  config.source = source;
  return config;
}

absl::StatusOr<RunConfig> LoadRunConfig(const std::string& path,
                                        const std::vector<std::string>& overrides) {
  WQ_ASSIGN_OR_RETURN(std::string text, base::ReadFile(path));
  std::error_code ec;
  const std::string base_dir = std::filesystem::absolute(path, ec).parent_path().string();
  return ParseRunConfig(text, path, overrides, base_dir);
}

bool ScreeningOn(const TrainingConfig& training) { return training.screen_samples > 1; }

int ScreenSamplesPerEpisode(const TrainingConfig& training) {
  return ScreeningOn(training) ? training.screen_samples : 1;
}

TextRange CalibrationRange(const CalibrationConfig& calibration) {
  return TextRange{calibration.text, calibration.tokens};
}

std::string CanonicalText(const RunConfig& config) {
  RunConfig copy = config;
  Printer printer;
  VisitFields(printer, copy);
  return printer.str();
}

}  // namespace windquant::config
