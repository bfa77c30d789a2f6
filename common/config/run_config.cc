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
#include "absl/strings/strip.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/config/run_config_checks.h"
#include "common/quant/granularity.h"

namespace windquant::config {
namespace {

// Every field of RunConfig is listed once, in VisitFields; a visitor either
// reads it from YAML (Reader) or prints it (Printer).
template <typename V>
void VisitFields(V& v, RunConfig& c) {
  v.Field("model.dir", &c.model.dir);
  v.Field("model.device", &c.model.compute.device);
  v.Field("model.compute_dtype", &c.model.compute.dtype);
  v.Field("model.threads", &c.model.threads);
  v.Field("calibration.text", &c.calibration.text);
  v.Field("calibration.tokens", &c.calibration.tokens);
  v.Field("calibration.samples", &c.calibration.samples);
  v.Field("calibration.seq_len", &c.calibration.seq_len);
  v.Field("calibration.seed", &c.calibration.seed);
  v.Field("evaluation.selection.text", &c.evaluation.selection.text);
  v.Field("evaluation.selection.tokens", &c.evaluation.selection.tokens);
  v.Field("evaluation.selection.windows", &c.evaluation.selection.windows);
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
  v.Field("service.hidden_states", &c.service.hidden_states);
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
    given_.insert(path);
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
  // Whether the YAML (or an override) gave `path` a value.
  bool Given(const std::string& path) const { return given_.count(path) > 0; }

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

  void ReadValue(const std::string& path, const YAML::Node& node, quant::Granularity* out) {
    std::string name;
    ReadValue(path, node, &name);
    const std::optional<quant::Granularity> value = quant::ParseGranularity(name);
    if (value.has_value()) *out = *value;
    if (!value.has_value()) Fail(absl::StrCat(path, ": must be chunk or tensor, got '", name, "'"));
  }

  void ReadValue(const std::string& path, const YAML::Node& node, model::ComputeDtype* out) {
    std::string name;
    ReadValue(path, node, &name);
    const std::optional<model::ComputeDtype> value = model::ParseComputeDtype(name);
    if (value.has_value()) *out = *value;
    if (!value.has_value()) {
      Fail(absl::StrCat(path, ": must be float32 or bfloat16, got '", name, "'"));
    }
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
  std::set<std::string> given_;
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
  static std::string Format(model::ComputeDtype d) { return model::ComputeDtypeName(d); }
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
  // quant.granularity is resolved here, once, into quant.chunk_size (quant/granularity.h):
  // the config holds, prints and digests the chunk size alone, so `granularity: tensor`
  // and `chunk_size: 1073741824` are one run, and chunk-granular runs keep their digests.
  quant::Granularity granularity = quant::Granularity::kChunk;
  reader.Field("quant.granularity", &granularity);
  if (granularity == quant::Granularity::kTensor) config.quant.chunk_size = quant::kTensorChunkSize;
  reader.CheckUnknown(reader.root(), "");
  // model.compute_dtype's default follows model.device (bfloat16 on CUDA).
  if (!reader.Given("model.compute_dtype")) {
    config.model.compute.dtype = model::DefaultComputeDtype(config.model.compute.device);
  }
  if (!reader.status().ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", reader.status().message()));
  }
  if (absl::Status s = ValidateRunConfig(config); !s.ok()) {
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

base::TextRange CalibrationRange(const CalibrationConfig& calibration) {
  return base::TextRange{calibration.text, calibration.tokens};
}

std::string CanonicalText(const RunConfig& config) {
  RunConfig copy = config;
  Printer printer;
  VisitFields(printer, copy);
  return printer.str();
}

}  // namespace windquant::config
