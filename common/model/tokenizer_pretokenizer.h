// Pre-tokenization helpers shared by Tokenizer and BpeTrainer: Unicode
// general-category tests for UTF-8 text, hand-written equivalents of the
// LLaMA-3 and GPT-2 pre-tokenizer regexes (std::regex has no \p{L} and no
// lookahead), and GPT-2's bytes_to_unicode mapping. Stateless; thread-safe.
//
// Coverage: letters (\p{L}) and numbers (\p{N}) come from range tables
// generated from Python 3.11's unicodedata (Unicode 14.0, all planes);
// whitespace (\s) is the Unicode White_Space property that Rust's regex crate
// (HF tokenizers) uses. Code points added in Unicode 15+ count as "other".
// ASCII case folding only for the (?i:'s|...) contractions.
#ifndef WINDQUANT_COMMON_MODEL_TOKENIZER_PRETOKENIZER_H_
#define WINDQUANT_COMMON_MODEL_TOKENIZER_PRETOKENIZER_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace windquant::model {

// The Split regexes we implement by hand, exactly as they appear in
// tokenizer.json files.
extern const char kLlama3SplitPattern[];
extern const char kGpt2SplitPattern[];

bool IsUnicodeLetter(char32_t c);
bool IsUnicodeNumber(char32_t c);
bool IsUnicodeWhiteSpace(char32_t c);

// Decodes one code point at text[pos]; sets *len to its byte length. An
// invalid or truncated sequence decodes as one byte, code point 0xFFFFFFFF
// (classified as "other").
char32_t DecodeUtf8(std::string_view text, size_t pos, size_t* len);
// Appends the UTF-8 encoding of c.
void AppendUtf8(char32_t c, std::string* out);
// Replaces invalid UTF-8 sequences by U+FFFD (like String::from_utf8_lossy).
std::string Utf8Lossy(std::string_view bytes);
bool IsValidUtf8(std::string_view bytes);

// Pieces of `text` as the LLaMA-3 Split regex (kLlama3SplitPattern,
// behavior Isolated) finds them. Views point into `text`; the concatenation
// of the pieces is `text`.
std::vector<std::string_view> SplitLlama3(std::string_view text);
// Same for GPT-2's ByteLevel regex (kGpt2SplitPattern).
std::vector<std::string_view> SplitGpt2(std::string_view text);

// GPT-2 bytes_to_unicode: byte -> UTF-8 string of its stand-in character.
const std::array<std::string, 256>& ByteLevelAlphabet();
// Maps bytes to the byte-level alphabet ("hi there" -> "hiĠthere").
std::string ByteLevelEncode(std::string_view bytes);
// Inverse; returns false if some character is not in the alphabet.
bool ByteLevelDecode(std::string_view text, std::string* bytes);

}  // namespace windquant::model

#endif  // WINDQUANT_COMMON_MODEL_TOKENIZER_PRETOKENIZER_H_
