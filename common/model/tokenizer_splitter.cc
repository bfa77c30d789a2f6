#include "common/model/tokenizer_splitter.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/base/status_macros.h"
#include "common/model/tokenizer_pretokenizer.h"
#include "nlohmann/json.hpp"

namespace windquant::model {
namespace {

using tokenizer_json::GetBool;
using tokenizer_json::GetString;
using tokenizer_json::Json;
using tokenizer_json::PrependScheme;

}  // namespace

absl::Status WordSplitter::LoadNormalizer(const Json& j, const std::string& where) {
  if (j.is_null()) return absl::OkStatus();
  const std::string type = GetString(j, "type");
  if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array()) {
      return absl::InvalidArgumentError(where + ".normalizers missing");
    }
    for (size_t i = 0; i < j["normalizers"].size(); ++i) {
      WQ_RETURN_IF_ERROR(
          LoadNormalizer(j["normalizers"][i], absl::StrCat(where, ".normalizers[", i, "]")));
    }
  } else if (type == "Prepend") {
    normalizer_.push_back({NormKind::kPrepend, GetString(j, "prepend"), ""});
  } else if (type == "Replace") {
    WQ_ASSIGN_OR_RETURN(std::string pattern,
                        tokenizer_json::StringPattern(j.value("pattern", Json()), where));
    normalizer_.push_back({NormKind::kReplace, pattern, GetString(j, "content")});
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ".type ", type, " unsupported (Sequence, Prepend, Replace)"));
  }
  return absl::OkStatus();
}

absl::Status WordSplitter::LoadPreTokenizer(const Json& j, const std::string& where) {
  if (j.is_null()) return absl::OkStatus();
  const std::string type = GetString(j, "type");
  PreStep step;
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array()) {
      return absl::InvalidArgumentError(where + ".pretokenizers missing");
    }
    for (size_t i = 0; i < j["pretokenizers"].size(); ++i) {
      WQ_RETURN_IF_ERROR(
          LoadPreTokenizer(j["pretokenizers"][i], absl::StrCat(where, ".pretokenizers[", i, "]")));
    }
    return absl::OkStatus();
  } else if (type == "Metaspace") {
    step.kind = PreKind::kMetaspace;
    step.replacement = GetString(j, "replacement", "\xE2\x96\x81");
    WQ_ASSIGN_OR_RETURN(step.scheme, tokenizer_json::ParsePrependScheme(j, where));
    step.split = GetBool(j, "split", true);
  } else if (type == "ByteLevel") {
    step.kind = PreKind::kByteLevel;
    step.add_prefix_space = GetBool(j, "add_prefix_space", true);
    step.use_regex = GetBool(j, "use_regex", true);
  } else if (type == "Split") {
    const Json pattern = j.value("pattern", Json());
    std::string regex = pattern.is_object() ? GetString(pattern, "Regex") : "";
    if (GetString(j, "behavior") != "Isolated" || GetBool(j, "invert", false)) {
      return absl::InvalidArgumentError(where + ": only behavior Isolated, invert false");
    }
    if (regex == kLlama3SplitPattern) {
      step.kind = PreKind::kSplitLlama3;
    } else if (regex == kGpt2SplitPattern) {
      step.kind = PreKind::kSplitGpt2;
    } else {
      return absl::InvalidArgumentError(
          where + ".pattern: only the LLaMA-3 and GPT-2 split regexes are supported");
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ".type ", type, " unsupported (Sequence, Metaspace, ByteLevel, Split)"));
  }
  pre_tokenizer_.push_back(step);
  return absl::OkStatus();
}

void WordSplitter::Split(std::string segment, bool at_start,
                         std::vector<std::string>* words) const {
  for (const NormStep& n : normalizer_) {
    if (n.kind == NormKind::kPrepend) {
      if (!segment.empty()) segment.insert(0, n.a);
    } else if (!n.a.empty()) {
      segment = absl::StrReplaceAll(segment, {{n.a, n.b}});
    }
  }
  std::vector<std::string> pieces;
  pieces.push_back(std::move(segment));
  for (const PreStep& step : pre_tokenizer_) {
    std::vector<std::string> next;
    for (size_t p = 0; p < pieces.size(); ++p) {
      std::string& s = pieces[p];
      switch (step.kind) {
        case PreKind::kMetaspace: {
          s = absl::StrReplaceAll(s, {{" ", step.replacement}});
          bool first = at_start && p == 0;
          bool prepend = step.scheme == PrependScheme::kAlways ||
                         (step.scheme == PrependScheme::kFirst && first);
          if (prepend && s.compare(0, step.replacement.size(), step.replacement) != 0) {
            s.insert(0, step.replacement);
          }
          if (!step.split) {
            next.push_back(std::move(s));
            break;
          }
          size_t start = 0;
          while (start < s.size()) {  // split before each replacement (MergedWithNext)
            size_t pos = s.find(step.replacement, start + 1);
            if (pos == std::string::npos) pos = s.size();
            next.push_back(s.substr(start, pos - start));
            start = pos;
          }
          break;
        }
        case PreKind::kByteLevel: {
          if (step.add_prefix_space && !s.empty() && s[0] != ' ') s.insert(0, " ");
          if (step.use_regex) {
            for (std::string_view v : SplitGpt2(s)) next.push_back(ByteLevelEncode(v));
          } else {
            next.push_back(ByteLevelEncode(s));
          }
          break;
        }
        case PreKind::kSplitLlama3:
          for (std::string_view v : SplitLlama3(s)) next.emplace_back(v);
          break;
        case PreKind::kSplitGpt2:
          for (std::string_view v : SplitGpt2(s)) next.emplace_back(v);
          break;
      }
    }
    pieces = std::move(next);
  }
  for (auto& w : pieces) {
    if (!w.empty()) words->push_back(std::move(w));
  }
}

}  // namespace windquant::model
