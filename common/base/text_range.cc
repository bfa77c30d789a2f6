#include "common/base/text_range.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/files.h"

namespace windquant::base {

absl::StatusOr<std::vector<int32_t>> CutTokenRange(std::vector<int32_t> ids,
                                                   const std::vector<int64_t>& tokens,
                                                   const std::string& key) {
  if (tokens.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(key, ": expected [begin, end]"));
  }
  const int64_t size = static_cast<int64_t>(ids.size());
  const int64_t begin = tokens[0];
  const int64_t end = tokens[1] == 0 ? size : tokens[1];
  if (begin < 0 || begin >= size || end > size || end <= begin) {
    return absl::InvalidArgumentError(absl::StrCat(key, ": [", tokens[0], ", ", tokens[1],
                                                   ") is not within the text's ", size,
                                                   " tokens (end 0 = end of text)"));
  }
  if (begin == 0 && end == size) return ids;
  return std::vector<int32_t>(ids.begin() + begin, ids.begin() + end);
}

absl::StatusOr<std::vector<int32_t>> ReadTextRange(const TextRange& range, const std::string& key,
                                                   const TextEncoder& encode,
                                                   std::string* text_sha256) {
  if (range.text.empty()) return absl::InvalidArgumentError(absl::StrCat(key, ".text: no file"));
  absl::StatusOr<std::string> text = base::ReadFile(range.text);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(key, ".text: ", text.status().message()));
  }
  if (text_sha256 != nullptr) *text_sha256 = base::Sha256Hex(*text);
  return CutTokenRange(encode(*text), range.tokens, absl::StrCat(key, ".tokens"));
}

}  // namespace windquant::base
