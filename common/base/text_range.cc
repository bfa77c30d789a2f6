#include "common/base/text_range.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"

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

absl::StatusOr<std::vector<int32_t>> ReadWindows(const TextRange& range, const std::string& key,
                                                 const TextEncoder& encode, int64_t window) {
  WQ_ASSIGN_OR_RETURN(std::vector<int32_t> ids, ReadTextRange(range, key, encode));
  const int64_t k = range.windows;
  if (k == 0) return ids;
  const auto n = static_cast<int64_t>(ids.size());
  if (k < 0 || window < 1 || k > n / window) {
    return absl::InvalidArgumentError(absl::StrCat(
        key, ".windows: ", k, " windows of ", window, " tokens do not fit in the range's ", n,
        " tokens (at most ", window < 1 ? 0 : n / window, ")"));
  }
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(k * window));
  for (int64_t i = 0; i < k; ++i) {
    const int64_t begin = k == 1 ? 0 : i * (n - window) / (k - 1);  // k * window <= n: disjoint
    out.insert(out.end(), ids.begin() + begin, ids.begin() + begin + window);
  }
  return out;
}

}  // namespace windquant::base
