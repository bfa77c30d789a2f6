// Readers of tokenizer.json fields shared by the parts of the tokenizer (Tokenizer,
// WordSplitter, TokenDecoder): lenient getters with defaults, the {"String": s}
// pattern, and Metaspace's prepend_scheme. Stateless; thread-safe.
#ifndef WINDQUANT_COMMON_MODEL_TOKENIZER_JSON_H_
#define WINDQUANT_COMMON_MODEL_TOKENIZER_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"

namespace windquant::model::tokenizer_json {

using Json = nlohmann::json;

// j[key] when it is a string, else `def`.
std::string GetString(const Json& j, const char* key, const std::string& def = "");
// j[key] when it is a boolean, else `def`.
bool GetBool(const Json& j, const char* key, bool def);

// The "String" of a {"String": s} / {"Regex": r} pattern; INVALID_ARGUMENT
// "<where>.pattern: ..." for anything else (regexes are not supported).
absl::StatusOr<std::string> StringPattern(const Json& j, const std::string& where);

// Where Metaspace puts its replacement in front of a word: always, only at the
// start of the text, or never.
enum class PrependScheme { kAlways, kFirst, kNever };

// j's "prepend_scheme" ("always", "first", "never"); without one, "never" when
// the older add_prefix_space is false, else "always". INVALID_ARGUMENT naming
// `where` for an unknown value.
absl::StatusOr<PrependScheme> ParsePrependScheme(const Json& j, const std::string& where);

}  // namespace windquant::model::tokenizer_json

#endif  // WINDQUANT_COMMON_MODEL_TOKENIZER_JSON_H_
