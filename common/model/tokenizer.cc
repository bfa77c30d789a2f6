// Tokenizer: HF tokenizer.json BPE (see tokenizer.h). The pipeline follows
// HF tokenizers: added tokens are split out of the raw text, every other
// segment is normalized, pre-tokenized into words, and each word is BPE
// encoded by merge rank; decoding runs the decoder steps over token strings.
#include "common/model/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <queue>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/model/tokenizer_pretokenizer.h"
#include "nlohmann/json.hpp"

namespace windquant::model {
namespace {

using Json = nlohmann::json;

// Words up to this many bytes are memoized (LLaMA-2 style files have one
// word per text segment, which is never worth caching).
constexpr size_t kMaxCachedWordBytes = 128;
constexpr size_t kMaxCacheEntries = 1 << 18;

enum class PrependScheme { kAlways, kFirst, kNever };

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

std::string GetString(const Json& j, const char* key, const std::string& def = "") {
  auto it = j.find(key);
  return (it != j.end() && it->is_string()) ? it->get<std::string>() : def;
}
bool GetBool(const Json& j, const char* key, bool def) {
  auto it = j.find(key);
  return (it != j.end() && it->is_boolean()) ? it->get<bool>() : def;
}

// The "String" of a {"String": s} / {"Regex": r} pattern; error for Regex.
absl::StatusOr<std::string> StringPattern(const Json& j, const std::string& where) {
  if (j.is_object() && j.contains("String") && j["String"].is_string()) {
    return j["String"].get<std::string>();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(where, ".pattern: only {\"String\": ...} patterns are supported"));
}

}  // namespace

class TokenizerImpl {
 public:
  struct AddedToken {
    std::string content;
    int32_t id = -1;
    bool special = false;
    bool lstrip = false;
    bool rstrip = false;
  };
  enum class NormKind { kPrepend, kReplace };
  struct NormStep {
    NormKind kind;
    std::string a, b;
  };
  enum class PreKind { kMetaspace, kByteLevel, kSplitLlama3, kSplitGpt2 };
  struct PreStep {
    PreKind kind;
    std::string replacement;
    PrependScheme scheme = PrependScheme::kAlways;
    bool split = true;
    bool add_prefix_space = false;
    bool use_regex = true;
  };
  enum class DecKind { kReplace, kByteFallback, kFuse, kStrip, kMetaspace, kByteLevel };
  struct DecStep {
    DecKind kind;
    std::string a, b;
    int start = 0, stop = 0;
    PrependScheme scheme = PrependScheme::kAlways;
  };

  absl::Status Load(const Json& root, const std::string& src);
  std::vector<int32_t> Encode(std::string_view text, bool add_bos, bool add_eos) const;
  std::string Decode(const std::vector<int32_t>& ids, bool skip_special) const;

  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  std::vector<std::string> id_to_token_;
  absl::flat_hash_map<std::string, int32_t> token_to_id_;

 private:
  absl::Status LoadModel(const Json& model, const std::string& src);
  absl::Status LoadNormalizer(const Json& j, const std::string& where);
  absl::Status LoadPreTokenizer(const Json& j, const std::string& where);
  absl::Status LoadDecoder(const Json& j, const std::string& where);
  void FindBosEos(const Json& root);

  int32_t Lookup(std::string_view token) const {
    // Debian's Abseil has its own absl::string_view type.
    auto it = token_to_id_.find(absl::string_view(token.data(), token.size()));
    return it == token_to_id_.end() ? -1 : it->second;
  }
  // Finds the leftmost-longest added token at or after `from`; returns false
  // if none. [*match_begin, *match_end) includes stripped whitespace.
  bool FindAdded(std::string_view text, size_t from, size_t* match_begin, size_t* match_end,
                 int32_t* id) const;
  void PreTokenize(std::string segment, bool at_start, std::vector<std::string>* words) const;
  void EncodeWord(std::string_view word, std::vector<int32_t>* out) const;
  void BpeWord(std::string_view word, std::vector<int32_t>* out) const;

  static uint64_t PairKey(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  // Model.
  absl::flat_hash_map<uint64_t, std::pair<int32_t, int32_t>> merges_;  // -> (rank, new id)
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  int32_t unk_id_ = -1;
  std::array<int32_t, 256> byte_ids_{};
  // Pipeline.
  std::vector<AddedToken> added_;
  std::array<std::vector<size_t>, 256> added_by_first_byte_;  // longest first
  absl::flat_hash_set<int32_t> special_ids_;
  std::vector<NormStep> normalizer_;
  std::vector<PreStep> pre_tokenizer_;
  std::vector<DecStep> decoder_;
  bool has_decoder_ = false;

  mutable std::mutex cache_mu_;
  mutable absl::flat_hash_map<std::string, std::vector<int32_t>> cache_;
};

absl::Status TokenizerImpl::Load(const Json& root, const std::string& src) {
  if (!root.is_object()) return absl::InvalidArgumentError(src + ": not a JSON object");
  if (!root.contains("model") || !root["model"].is_object()) {
    return absl::InvalidArgumentError(src + ": missing field model");
  }
  WQ_RETURN_IF_ERROR(LoadModel(root["model"], src));
  if (root.contains("added_tokens") && root["added_tokens"].is_array()) {
    const Json& arr = root["added_tokens"];
    for (size_t i = 0; i < arr.size(); ++i) {
      const Json& t = arr[i];
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
          !t.contains("content") || !t["content"].is_string() ||
          t["content"].get<std::string>().empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(src, ": added_tokens[", i, "]: needs integer id and non-empty content"));
      }
      AddedToken a;
      a.content = t["content"].get<std::string>();
      a.id = t["id"].get<int32_t>();
      if (a.id < 0) {
        return absl::InvalidArgumentError(absl::StrCat(src, ": added_tokens[", i, "].id < 0"));
      }
      a.special = GetBool(t, "special", false);
      a.lstrip = GetBool(t, "lstrip", false);
      a.rstrip = GetBool(t, "rstrip", false);
      if (static_cast<size_t>(a.id) >= id_to_token_.size()) id_to_token_.resize(a.id + 1);
      id_to_token_[a.id] = a.content;
      token_to_id_[a.content] = a.id;
      if (a.special) special_ids_.insert(a.id);
      added_.push_back(std::move(a));
    }
  }
  for (size_t i = 0; i < added_.size(); ++i) {
    added_by_first_byte_[static_cast<unsigned char>(added_[i].content[0])].push_back(i);
  }
  for (auto& v : added_by_first_byte_) {
    std::stable_sort(v.begin(), v.end(), [&](size_t a, size_t b) {
      return added_[a].content.size() > added_[b].content.size();
    });
  }
  if (root.contains("normalizer")) {
    WQ_RETURN_IF_ERROR(LoadNormalizer(root["normalizer"], src + ": normalizer"));
  }
  if (root.contains("pre_tokenizer")) {
    WQ_RETURN_IF_ERROR(LoadPreTokenizer(root["pre_tokenizer"], src + ": pre_tokenizer"));
  }
  if (root.contains("decoder")) {
    WQ_RETURN_IF_ERROR(LoadDecoder(root["decoder"], src + ": decoder"));
    has_decoder_ = !root["decoder"].is_null();
  }
  FindBosEos(root);
  return absl::OkStatus();
}

absl::Status TokenizerImpl::LoadModel(const Json& m, const std::string& src) {
  const std::string type = GetString(m, "type", "BPE");
  if (type != "BPE") {
    return absl::InvalidArgumentError(
        absl::StrCat(src, ": model.type ", type, " unsupported (only BPE)"));
  }
  if (!GetString(m, "continuing_subword_prefix").empty() ||
      !GetString(m, "end_of_word_suffix").empty()) {
    return absl::InvalidArgumentError(
        src + ": model.continuing_subword_prefix/end_of_word_suffix unsupported");
  }
  if (m.contains("dropout") && m["dropout"].is_number() && m["dropout"].get<double>() > 0) {
    return absl::InvalidArgumentError(src + ": model.dropout > 0 unsupported");
  }
  if (!m.contains("vocab") || !m["vocab"].is_object()) {
    return absl::InvalidArgumentError(src + ": model.vocab missing or not an object");
  }
  int32_t max_id = -1;
  for (auto it = m["vocab"].begin(); it != m["vocab"].end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(src, ": model.vocab[\"", it.key(),
                                                     "\"]: id must be a non-negative integer"));
    }
    max_id = std::max(max_id, it.value().get<int32_t>());
  }
  id_to_token_.assign(max_id + 1, "");
  token_to_id_.reserve(m["vocab"].size());
  for (auto it = m["vocab"].begin(); it != m["vocab"].end(); ++it) {
    int32_t id = it.value().get<int32_t>();
    id_to_token_[id] = it.key();
    token_to_id_[it.key()] = id;
  }
  byte_fallback_ = GetBool(m, "byte_fallback", false);
  fuse_unk_ = GetBool(m, "fuse_unk", false);
  ignore_merges_ = GetBool(m, "ignore_merges", false);
  std::string unk = GetString(m, "unk_token");
  unk_id_ = unk.empty() ? -1 : Lookup(unk);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    byte_ids_[b] = Lookup(name);
  }
  if (m.contains("merges")) {
    const Json& arr = m["merges"];
    if (!arr.is_array()) return absl::InvalidArgumentError(src + ": model.merges not an array");
    merges_.reserve(arr.size());
    for (size_t r = 0; r < arr.size(); ++r) {
      std::string a, b;
      const Json& e = arr[r];
      if (e.is_string()) {
        const std::string s = e.get<std::string>();
        size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
          return absl::InvalidArgumentError(
              absl::StrCat(src, ": model.merges[", r, "]: expected \"a b\""));
        }
        a = s.substr(0, sp);
        b = s.substr(sp + 1);
      } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
        a = e[0].get<std::string>();
        b = e[1].get<std::string>();
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat(src, ": model.merges[", r, "]: expected \"a b\" or [a, b]"));
      }
      int32_t ia = Lookup(a), ib = Lookup(b), iab = Lookup(a + b);
      if (ia < 0 || ib < 0 || iab < 0) {
        return absl::InvalidArgumentError(absl::StrCat(src, ": model.merges[", r, "]: token \"",
                                                       ia < 0 ? a : (ib < 0 ? b : a + b),
                                                       "\" is not in the vocab"));
      }
      merges_.try_emplace(PairKey(ia, ib), static_cast<int32_t>(r), iab);
    }
  }
  return absl::OkStatus();
}

absl::Status TokenizerImpl::LoadNormalizer(const Json& j, const std::string& where) {
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
    WQ_ASSIGN_OR_RETURN(std::string pattern, StringPattern(j.value("pattern", Json()), where));
    normalizer_.push_back({NormKind::kReplace, pattern, GetString(j, "content")});
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ".type ", type, " unsupported (Sequence, Prepend, Replace)"));
  }
  return absl::OkStatus();
}

absl::Status TokenizerImpl::LoadPreTokenizer(const Json& j, const std::string& where) {
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
    WQ_ASSIGN_OR_RETURN(step.scheme, ParsePrependScheme(j, where));
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

absl::Status TokenizerImpl::LoadDecoder(const Json& j, const std::string& where) {
  if (j.is_null()) return absl::OkStatus();
  const std::string type = GetString(j, "type");
  DecStep step;
  if (type == "Sequence") {
    if (!j.contains("decoders") || !j["decoders"].is_array()) {
      return absl::InvalidArgumentError(where + ".decoders missing");
    }
    for (size_t i = 0; i < j["decoders"].size(); ++i) {
      WQ_RETURN_IF_ERROR(LoadDecoder(j["decoders"][i], absl::StrCat(where, ".decoders[", i, "]")));
    }
    return absl::OkStatus();
  } else if (type == "Replace") {
    step.kind = DecKind::kReplace;
    WQ_ASSIGN_OR_RETURN(step.a, StringPattern(j.value("pattern", Json()), where));
    step.b = GetString(j, "content");
  } else if (type == "ByteFallback") {
    step.kind = DecKind::kByteFallback;
  } else if (type == "Fuse") {
    step.kind = DecKind::kFuse;
  } else if (type == "Strip") {
    step.kind = DecKind::kStrip;
    step.a = GetString(j, "content", " ");
    step.start = j.value("start", 0);
    step.stop = j.value("stop", 0);
  } else if (type == "Metaspace") {
    step.kind = DecKind::kMetaspace;
    step.a = GetString(j, "replacement", "\xE2\x96\x81");
    WQ_ASSIGN_OR_RETURN(step.scheme, ParsePrependScheme(j, where));
  } else if (type == "ByteLevel") {
    step.kind = DecKind::kByteLevel;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ".type ", type,
        " unsupported (Sequence, Replace, ByteFallback, Fuse, Strip, Metaspace, ByteLevel)"));
  }
  decoder_.push_back(step);
  return absl::OkStatus();
}

void TokenizerImpl::FindBosEos(const Json& root) {
  // Preferred: the special tokens around $A in TemplateProcessing.single.
  const Json pp = root.value("post_processor", Json());
  auto template_single = [](const Json& p) -> Json {
    if (p.is_object() && GetString(p, "type") == "TemplateProcessing") {
      return p.value("single", Json());
    }
    if (p.is_object() && GetString(p, "type") == "Sequence" && p.contains("processors")) {
      for (const Json& q : p["processors"]) {
        if (GetString(q, "type") == "TemplateProcessing") return q.value("single", Json());
      }
    }
    return Json();
  };
  Json single = template_single(pp);
  if (single.is_array()) {
    bool seen_sequence = false;
    for (const Json& e : single) {
      if (e.contains("Sequence")) {
        seen_sequence = true;
      } else if (e.contains("SpecialToken")) {
        int32_t id = Lookup(GetString(e["SpecialToken"], "id"));
        if (!seen_sequence && bos_id_ < 0) bos_id_ = id;
        if (seen_sequence && eos_id_ < 0) eos_id_ = id;
      }
    }
  }
  // Conventional names otherwise.
  for (const char* name : {"<s>", "<|begin_of_text|>", "<bos>", "<|startoftext|>"}) {
    if (bos_id_ < 0) bos_id_ = Lookup(name);
  }
  for (const char* name : {"</s>", "<|end_of_text|>", "<eos>", "<|endoftext|>"}) {
    if (eos_id_ < 0) eos_id_ = Lookup(name);
  }
}

bool TokenizerImpl::FindAdded(std::string_view text, size_t from, size_t* match_begin,
                              size_t* match_end, int32_t* id) const {
  if (added_.empty()) return false;
  for (size_t i = from; i < text.size(); ++i) {
    const auto& candidates = added_by_first_byte_[static_cast<unsigned char>(text[i])];
    for (size_t k : candidates) {
      const AddedToken& t = added_[k];
      if (text.compare(i, t.content.size(), t.content) != 0) continue;
      size_t b = i, e = i + t.content.size();
      auto is_space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
      if (t.lstrip) {
        while (b > from && is_space(text[b - 1])) --b;
      }
      if (t.rstrip) {
        while (e < text.size() && is_space(text[e])) ++e;
      }
      *match_begin = b;
      *match_end = e;
      *id = t.id;
      return true;
    }
  }
  return false;
}

void TokenizerImpl::PreTokenize(std::string segment, bool at_start,
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

void TokenizerImpl::EncodeWord(std::string_view word, std::vector<int32_t>* out) const {
  if (ignore_merges_) {
    int32_t id = Lookup(word);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
  }
  if (word.size() > kMaxCachedWordBytes) {
    BpeWord(word, out);
    return;
  }
  std::string key(word);
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  BpeWord(word, &ids);
  out->insert(out->end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cache_mu_);
  if (cache_.size() >= kMaxCacheEntries) cache_.clear();
  cache_.emplace(std::move(key), std::move(ids));
}

void TokenizerImpl::BpeWord(std::string_view word, std::vector<int32_t>* out) const {
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    bool alive;
  };
  std::vector<Symbol> sym;
  sym.reserve(word.size());
  bool last_unk = false;
  size_t pos = 0;
  while (pos < word.size()) {
    size_t len = 1;
    DecodeUtf8(word, pos, &len);
    std::string_view ch = word.substr(pos, len);
    pos += len;
    int32_t id = Lookup(ch);
    if (id >= 0) {
      sym.push_back({id, 0, 0, true});
      last_unk = false;
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (unsigned char b : ch) all = all && byte_ids_[b] >= 0;
      if (all) {
        for (unsigned char b : ch) sym.push_back({byte_ids_[b], 0, 0, true});
        last_unk = false;
        continue;
      }
    }
    if (unk_id_ < 0) continue;  // HF would fail; we drop the character
    if (!(fuse_unk_ && last_unk)) sym.push_back({unk_id_, 0, 0, true});
    last_unk = true;
  }
  const int32_t n = static_cast<int32_t>(sym.size());
  for (int32_t i = 0; i < n; ++i) {
    sym[i].prev = i - 1;
    sym[i].next = i + 1 < n ? i + 1 : -1;
  }
  // Min-heap of (rank, position, merged id): lowest rank first, then leftmost,
  // as HF's Word::merge_all.
  using Merge = std::tuple<int32_t, int32_t, int32_t>;
  std::priority_queue<Merge, std::vector<Merge>, std::greater<Merge>> heap;
  auto push_pair = [&](int32_t i) {
    if (i < 0 || sym[i].next < 0) return;
    auto it = merges_.find(PairKey(sym[i].id, sym[sym[i].next].id));
    if (it != merges_.end()) heap.emplace(it->second.first, i, it->second.second);
  };
  for (int32_t i = 0; i + 1 < n; ++i) push_pair(i);
  while (!heap.empty()) {
    auto [rank, i, new_id] = heap.top();
    heap.pop();
    if (!sym[i].alive || sym[i].next < 0) continue;
    int32_t j = sym[i].next;
    auto it = merges_.find(PairKey(sym[i].id, sym[j].id));
    if (it == merges_.end() || it->second.second != new_id) continue;
    sym[i].id = new_id;
    sym[i].next = sym[j].next;
    if (sym[j].next >= 0) sym[sym[j].next].prev = i;
    sym[j].alive = false;
    push_pair(sym[i].prev);
    push_pair(i);
  }
  for (int32_t i = 0; i < n && n > 0; i = sym[i].next) {
    out->push_back(sym[i].id);
    if (sym[i].next < 0) break;
  }
}

std::vector<int32_t> TokenizerImpl::Encode(std::string_view text, bool add_bos,
                                           bool add_eos) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 2);
  if (add_bos && bos_id_ >= 0) ids.push_back(bos_id_);
  std::vector<std::string> words;
  size_t pos = 0;
  auto encode_segment = [&](size_t begin, size_t end) {
    if (begin >= end) return;
    words.clear();
    PreTokenize(std::string(text.substr(begin, end - begin)), begin == 0, &words);
    for (const std::string& w : words) EncodeWord(w, &ids);
  };
  while (pos < text.size()) {
    size_t b = 0, e = 0;
    int32_t id = -1;
    if (!FindAdded(text, pos, &b, &e, &id)) break;
    encode_segment(pos, b);
    ids.push_back(id);
    pos = e;
  }
  encode_segment(pos, text.size());
  if (add_eos && eos_id_ >= 0) ids.push_back(eos_id_);
  return ids;
}

std::string TokenizerImpl::Decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::vector<std::string> toks;
  toks.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size()) continue;
    if (skip_special && special_ids_.contains(id)) continue;
    toks.push_back(id_to_token_[id]);
  }
  for (const DecStep& d : decoder_) {
    switch (d.kind) {
      case DecKind::kReplace:
        for (auto& t : toks) t = absl::StrReplaceAll(t, {{d.a, d.b}});
        break;
      case DecKind::kByteFallback: {
        std::vector<std::string> out;
        std::string bytes;
        size_t count = 0;
        auto flush = [&] {
          if (count == 0) return;
          if (IsValidUtf8(bytes)) {
            out.push_back(bytes);
          } else {
            std::string r;
            for (size_t k = 0; k < count; ++k) r += "\xEF\xBF\xBD";
            out.push_back(r);
          }
          bytes.clear();
          count = 0;
        };
        for (auto& t : toks) {
          unsigned int b = 0;
          if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' &&
              std::sscanf(t.c_str() + 3, "%2x", &b) == 1) {
            bytes.push_back(static_cast<char>(b));
            ++count;
          } else {
            flush();
            out.push_back(std::move(t));
          }
        }
        flush();
        toks = std::move(out);
        break;
      }
      case DecKind::kFuse: {
        std::string all;
        for (auto& t : toks) all += t;
        toks.assign(1, std::move(all));
        break;
      }
      case DecKind::kStrip:
        for (auto& t : toks) {
          size_t b = 0, e = t.size();
          for (int k = 0; k < d.start && b < e && t.compare(b, d.a.size(), d.a) == 0; ++k) {
            b += d.a.size();
          }
          for (int k = 0;
               k < d.stop && e >= b + d.a.size() && t.compare(e - d.a.size(), d.a.size(), d.a) == 0;
               ++k) {
            e -= d.a.size();
          }
          t = t.substr(b, e - b);
        }
        break;
      case DecKind::kMetaspace:
        for (size_t k = 0; k < toks.size(); ++k) {
          toks[k] = absl::StrReplaceAll(toks[k], {{d.a, " "}});
          if (k == 0 && d.scheme != PrependScheme::kNever && !toks[k].empty() &&
              toks[k][0] == ' ') {
            toks[k].erase(0, 1);
          }
        }
        break;
      case DecKind::kByteLevel: {
        std::string bytes;
        for (const auto& t : toks) {
          std::string b;
          if (ByteLevelDecode(t, &b)) {
            bytes += b;
          } else {
            bytes += t;  // e.g. an added token: kept verbatim, as HF does
          }
        }
        toks.assign(1, Utf8Lossy(bytes));
        break;
      }
    }
  }
  std::string text;
  for (size_t k = 0; k < toks.size(); ++k) {
    if (k > 0 && !has_decoder_) text += ' ';
    text += toks[k];
  }
  return text;
}

// ---------------------------------------------------------------------------

Tokenizer::Tokenizer(std::unique_ptr<TokenizerImpl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromFile(
    const std::string& tokenizer_json_path) {
  WQ_ASSIGN_OR_RETURN(std::string text, base::ReadFile(tokenizer_json_path));
  return FromJson(text, tokenizer_json_path);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(std::string_view json_text,
                                                               const std::string& source) {
  Json root = Json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return absl::InvalidArgumentError(source + ": invalid JSON");
  auto impl = std::make_unique<TokenizerImpl>();
  try {
    WQ_RETURN_IF_ERROR(impl->Load(root, source));
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": unexpected JSON type: ", e.what()));
  }
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_bos, bool add_eos) const {
  return impl_->Encode(text, add_bos, add_eos);
}
std::string Tokenizer::Decode(const std::vector<int32_t>& ids, bool skip_special) const {
  return impl_->Decode(ids, skip_special);
}
int32_t Tokenizer::bos_id() const { return impl_->bos_id_; }
int32_t Tokenizer::eos_id() const { return impl_->eos_id_; }
int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->id_to_token_.size()); }
std::string Tokenizer::IdToToken(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->id_to_token_.size()) return "";
  return impl_->id_to_token_[id];
}
int32_t Tokenizer::TokenToId(std::string_view token) const {
  auto it = impl_->token_to_id_.find(absl::string_view(token.data(), token.size()));
  return it == impl_->token_to_id_.end() ? -1 : it->second;
}

}  // namespace windquant::model
