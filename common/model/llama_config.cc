// config.json parsing for LlamaForCausalLM. Keys that Hugging Face always
// writes (sizes, layer/head counts, vocab, rms_norm_eps) are required; the
// others default as transformers' LlamaConfig does. `null` counts as absent.
#include "common/model/llama_config.h"

#include <cmath>
#include <limits>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"

namespace windquant::model {
namespace {

using Json = nlohmann::json;

std::string Show(const Json& j) {
  std::string s = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

// Reads JSON object members with errors "<source>: <key>: ...".
class Reader {
 public:
  Reader(const Json& object, std::string source, std::string prefix = "")
      : object_(object), source_(std::move(source)), prefix_(std::move(prefix)) {}

  absl::Status Error(const std::string& key, const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": ", prefix_, key, ": ", what));
  }
  // nullptr when absent or null.
  const Json* Find(const std::string& key) const {
    auto it = object_.find(key);
    if (it == object_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  absl::StatusOr<const Json*> Require(const std::string& key) const {
    const Json* j = Find(key);
    if (j == nullptr) return Error(key, "missing required key");
    return j;
  }
  absl::StatusOr<int64_t> Int(const std::string& key, const Json& j, int64_t min) const {
    if (!j.is_number_integer())
      return Error(key, absl::StrCat("expected an integer, got ", Show(j)));
    if (j.is_number_unsigned() &&
        j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Error(key, "integer out of range");
    }
    int64_t v = j.get<int64_t>();
    if (v < min) return Error(key, absl::StrCat("must be >= ", min, ", got ", v));
    return v;
  }
  absl::Status RequiredInt(const std::string& key, int64_t min, int64_t* out) const {
    WQ_ASSIGN_OR_RETURN(const Json* j, Require(key));
    WQ_ASSIGN_OR_RETURN(*out, Int(key, *j, min));
    return absl::OkStatus();
  }
  absl::Status OptionalInt(const std::string& key, int64_t min, int64_t* out) const {
    const Json* j = Find(key);
    if (j == nullptr) return absl::OkStatus();
    WQ_ASSIGN_OR_RETURN(*out, Int(key, *j, min));
    return absl::OkStatus();
  }
  absl::StatusOr<double> Number(const std::string& key, const Json& j) const {
    if (!j.is_number()) return Error(key, absl::StrCat("expected a number, got ", Show(j)));
    return j.get<double>();
  }
  absl::Status PositiveNumber(const std::string& key, bool required, double* out) const {
    const Json* j = Find(key);
    if (j == nullptr) return required ? Error(key, "missing required key") : absl::OkStatus();
    WQ_ASSIGN_OR_RETURN(double v, Number(key, *j));
    if (!(v > 0) || !std::isfinite(v)) {
      return Error(key, absl::StrCat("must be a finite number > 0, got ", Show(*j)));
    }
    *out = v;
    return absl::OkStatus();
  }
  absl::Status OptionalBool(const std::string& key, bool* out) const {
    const Json* j = Find(key);
    if (j == nullptr) return absl::OkStatus();
    if (!j->is_boolean()) return Error(key, absl::StrCat("expected true or false, got ", Show(*j)));
    *out = j->get<bool>();
    return absl::OkStatus();
  }
  absl::Status OptionalString(const std::string& key, std::string* out) const {
    const Json* j = Find(key);
    if (j == nullptr) return absl::OkStatus();
    if (!j->is_string()) return Error(key, absl::StrCat("expected a string, got ", Show(*j)));
    *out = j->get<std::string>();
    return absl::OkStatus();
  }

 private:
  const Json& object_;
  std::string source_;
  std::string prefix_;
};

absl::Status ParseRopeScaling(const Reader& top, const Json& j, const std::string& source,
                              std::optional<RopeScaling>* out) {
  if (!j.is_object()) {
    return top.Error("rope_scaling", absl::StrCat("expected an object or null, got ", Show(j)));
  }
  Reader r(j, source, "rope_scaling.");
  std::string type;
  // transformers accepts the legacy key "type" too.
  const char* type_key = r.Find("rope_type") ? "rope_type" : "type";
  WQ_RETURN_IF_ERROR(r.OptionalString(type_key, &type));
  if (type.empty()) return r.Error("rope_type", "missing required key");
  if (type == "default") return absl::OkStatus();  // no scaling
  if (type != "llama3") {
    return r.Error(type_key, absl::StrCat("unsupported rope type \"", type,
                                          "\" (supported: \"llama3\", \"default\")"));
  }
  RopeScaling s;
  s.rope_type = type;
  WQ_RETURN_IF_ERROR(r.PositiveNumber("factor", true, &s.factor));
  WQ_RETURN_IF_ERROR(r.PositiveNumber("low_freq_factor", true, &s.low_freq_factor));
  WQ_RETURN_IF_ERROR(r.PositiveNumber("high_freq_factor", true, &s.high_freq_factor));
  WQ_RETURN_IF_ERROR(
      r.RequiredInt("original_max_position_embeddings", 1, &s.original_max_position_embeddings));
  if (!(s.high_freq_factor > s.low_freq_factor)) {
    return r.Error("high_freq_factor", "must be greater than low_freq_factor");
  }
  *out = s;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LlamaConfig> LlamaConfig::FromJson(const std::string& json_text,
                                                  const std::string& source) {
  Json root;
  try {
    root = Json::parse(json_text);
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": invalid JSON: ", e.what()));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": expected a JSON object, got ", Show(root)));
  }
  Reader r(root, source);
  LlamaConfig c;
  // Only the LLaMA architecture is implemented: another one would run as a
  // LLaMA and give wrong numbers.
  std::string model_type = "llama", hidden_act = "silu";
  WQ_RETURN_IF_ERROR(r.OptionalString("model_type", &model_type));
  if (model_type != "llama") {
    return r.Error("model_type", absl::StrCat("unsupported \"", model_type, "\" (only \"llama\")"));
  }
  WQ_RETURN_IF_ERROR(r.OptionalString("hidden_act", &hidden_act));
  if (hidden_act != "silu") {
    return r.Error("hidden_act", absl::StrCat("unsupported \"", hidden_act, "\" (only \"silu\")"));
  }
  WQ_RETURN_IF_ERROR(r.RequiredInt("hidden_size", 1, &c.hidden_size));
  WQ_RETURN_IF_ERROR(r.RequiredInt("intermediate_size", 1, &c.intermediate_size));
  WQ_RETURN_IF_ERROR(r.RequiredInt("num_hidden_layers", 1, &c.num_hidden_layers));
  WQ_RETURN_IF_ERROR(r.RequiredInt("num_attention_heads", 1, &c.num_attention_heads));
  c.num_key_value_heads = c.num_attention_heads;
  WQ_RETURN_IF_ERROR(r.OptionalInt("num_key_value_heads", 1, &c.num_key_value_heads));
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    return r.Error("num_key_value_heads",
                   absl::StrCat(c.num_key_value_heads, " does not divide num_attention_heads ",
                                c.num_attention_heads));
  }
  if (r.Find("head_dim") != nullptr) {
    WQ_RETURN_IF_ERROR(r.OptionalInt("head_dim", 1, &c.head_dim));
  } else {
    if (c.hidden_size % c.num_attention_heads != 0) {
      return r.Error("num_attention_heads",
                     absl::StrCat(c.num_attention_heads, " does not divide hidden_size ",
                                  c.hidden_size, " and head_dim is absent"));
    }
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim % 2 != 0) return r.Error("head_dim", "must be even for RoPE");
  WQ_RETURN_IF_ERROR(r.PositiveNumber("rms_norm_eps", true, &c.rms_norm_eps));
  WQ_RETURN_IF_ERROR(r.PositiveNumber("rope_theta", false, &c.rope_theta));
  if (const Json* rs = r.Find("rope_scaling")) {
    WQ_RETURN_IF_ERROR(ParseRopeScaling(r, *rs, source, &c.rope_scaling));
  }
  WQ_RETURN_IF_ERROR(r.OptionalBool("tie_word_embeddings", &c.tie_word_embeddings));
  WQ_RETURN_IF_ERROR(r.RequiredInt("vocab_size", 1, &c.vocab_size));
  WQ_RETURN_IF_ERROR(r.OptionalInt("bos_token_id", 0, &c.bos_token_id));
  c.eos_token_ids = {2};
  if (root.contains("eos_token_id") && root["eos_token_id"].is_null()) c.eos_token_ids.clear();
  if (const Json* eos = r.Find("eos_token_id")) {
    c.eos_token_ids.clear();
    if (eos->is_array()) {
      for (const Json& e : *eos) {
        WQ_ASSIGN_OR_RETURN(int64_t id, r.Int("eos_token_id", e, 0));
        c.eos_token_ids.push_back(id);
      }
    } else {
      WQ_ASSIGN_OR_RETURN(int64_t id, r.Int("eos_token_id", *eos, 0));
      c.eos_token_ids.push_back(id);
    }
  }
  WQ_RETURN_IF_ERROR(r.OptionalInt("max_position_embeddings", 1, &c.max_position_embeddings));
  WQ_RETURN_IF_ERROR(r.OptionalString("torch_dtype", &c.torch_dtype));
  return c;
}

absl::StatusOr<LlamaConfig> LlamaConfig::FromDirectory(const std::string& dir) {
  const std::string path = dir + "/config.json";
  WQ_ASSIGN_OR_RETURN(std::string text, base::ReadFile(path));
  return FromJson(text, path);
}

std::string LlamaConfig::ToJson() const {
  Json j = Json::object();
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = "llama";
  j["hidden_size"] = hidden_size;
  j["intermediate_size"] = intermediate_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["num_key_value_heads"] = num_key_value_heads;
  j["head_dim"] = head_dim;
  j["vocab_size"] = vocab_size;
  j["max_position_embeddings"] = max_position_embeddings;
  j["rms_norm_eps"] = rms_norm_eps;
  j["rope_theta"] = rope_theta;
  if (rope_scaling.has_value()) {
    j["rope_scaling"] = {
        {"rope_type", rope_scaling->rope_type},
        {"factor", rope_scaling->factor},
        {"low_freq_factor", rope_scaling->low_freq_factor},
        {"high_freq_factor", rope_scaling->high_freq_factor},
        {"original_max_position_embeddings", rope_scaling->original_max_position_embeddings}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  j["hidden_act"] = "silu";
  j["attention_bias"] = false;
  j["mlp_bias"] = false;
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["bos_token_id"] = bos_token_id;
  if (eos_token_ids.size() == 1) {
    j["eos_token_id"] = eos_token_ids[0];
  } else {
    j["eos_token_id"] = eos_token_ids;
  }
  if (!torch_dtype.empty()) j["torch_dtype"] = torch_dtype;
  return j.dump(2) + "\n";
}

}  // namespace windquant::model
