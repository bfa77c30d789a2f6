#include "common/model/tokenizer_json.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace windquant::model::tokenizer_json {

std::string GetString(const Json& j, const char* key, const std::string& def) {
  auto it = j.find(key);
  return (it != j.end() && it->is_string()) ? it->get<std::string>() : def;
}

bool GetBool(const Json& j, const char* key, bool def) {
  auto it = j.find(key);
  return (it != j.end() && it->is_boolean()) ? it->get<bool>() : def;
}

absl::StatusOr<std::string> StringPattern(const Json& j, const std::string& where) {
  if (j.is_object() && j.contains("String") && j["String"].is_string()) {
    return j["String"].get<std::string>();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(where, ".pattern: only {\"String\": ...} patterns are supported"));
}

absl::StatusOr<PrependScheme> ParsePrependScheme(const Json& j, const std::string& where) {
  std::string s = "always";
  if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
    s = j["prepend_scheme"].get<std::string>();
  } else if (j.contains("add_prefix_space") && j["add_prefix_space"].is_boolean() &&
             !j["add_prefix_space"].get<bool>()) {
    s = "never";
  }
  if (s == "always") return PrependScheme::kAlways;
  if (s == "first") return PrependScheme::kFirst;
  if (s == "never") return PrependScheme::kNever;
  return absl::InvalidArgumentError(absl::StrCat(where, ".prepend_scheme: unknown value ", s));
}

}  // namespace windquant::model::tokenizer_json
