// Reading one text role of a run (base::TextRange: a file and a token range
// of it) as token ids, the one way every part of windquant does it: the
// quantization session (calibration), the evaluator (calibration and
// selection), the quantize job and `baseline` / `eval --config` (held-out).
// Thread-safe (pure functions; `encode` must be).
#ifndef WINDQUANT_COMMON_BASE_TEXT_RANGE_H_
#define WINDQUANT_COMMON_BASE_TEXT_RANGE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace windquant::base {

// A part of a text file, in the model's token ids: the file encoded without
// BOS, ids [tokens[0], tokens[1]); tokens[1] = 0 means to the end of the text.
// The three text roles of a run (calibration, selection, held-out) are each
// one TextRange, and the config loader refuses two that overlap (same file,
// intersecting ranges): no plan is chosen on, and no activation statistic
// comes from, the text its final numbers are measured on.
struct TextRange {
  std::string text;                      // UTF-8 text file
  std::vector<int64_t> tokens = {0, 0};  // [begin, end); end 0 = end of text
  // > 0: only this many evaluation windows, spread evenly over [begin, end)
  // (ReadWindows); 0: the whole range, consecutive.
  int64_t windows = 0;
};

// Text to ids without BOS (model::Tokenizer::Encode(text, false)).
using TextEncoder = std::function<std::vector<int32_t>(std::string_view)>;

// ids[begin, end) of `tokens` ([begin, end), end 0 = the end). INVALID_ARGUMENT
// naming `key` (e.g. "evaluation.heldout.tokens") when the range starts at or
// ends beyond the end of `ids`.
absl::StatusOr<std::vector<int32_t>> CutTokenRange(std::vector<int32_t> ids,
                                                   const std::vector<int64_t>& tokens,
                                                   const std::string& key);

// Reads `range.text`, encodes it and cuts `range.tokens`. `key` names the role
// in errors ("calibration", "evaluation.selection", ...): an unreadable file is
// "<key>.text: <why>", a range beyond the text "<key>.tokens: ...". When
// `text_sha256` is given it receives the sha256 of the whole file.
absl::StatusOr<std::vector<int32_t>> ReadTextRange(const TextRange& range, const std::string& key,
                                                   const TextEncoder& encode,
                                                   std::string* text_sha256 = nullptr);

// ReadTextRange, then with range.windows = k > 0 only k windows of `window` ids
// (an evaluation's context - 1), spread evenly over the range's ids (the first at
// its start, the last at its end) and concatenated: an evaluation that cuts
// consecutive windows of `window` ids reads exactly those. A range ordered by
// document (a book's census list first) is then sampled whole, not by its first
// pages. INVALID_ARGUMENT naming "<key>.windows" when k windows do not fit.
absl::StatusOr<std::vector<int32_t>> ReadWindows(const TextRange& range, const std::string& key,
                                                 const TextEncoder& encode, int64_t window);

}  // namespace windquant::base

#endif  // WINDQUANT_COMMON_BASE_TEXT_RANGE_H_
