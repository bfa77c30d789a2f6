// Tokenizer: HF tokenizer.json BPE (see tokenizer.h). The pipeline follows
// HF tokenizers: added tokens are split out of the raw text, every other
// segment is normalized, pre-tokenized into words (WordSplitter), and each word
// is BPE encoded by merge rank; decoding runs the decoder steps over token
// strings (TokenDecoder).
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
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/model/tokenizer_decoder.h"
#include "common/model/tokenizer_json.h"
#include "common/model/tokenizer_pretokenizer.h"
#include "common/model/tokenizer_splitter.h"
#include "nlohmann/json.hpp"

namespace windquant::model {
namespace {

using tokenizer_json::GetBool;
using tokenizer_json::GetString;
using tokenizer_json::Json;

// Words up to this many bytes are memoized (LLaMA-2 style files have one
// word per text segment, which is never worth caching).
constexpr size_t kMaxCachedWordBytes = 128;
constexpr size_t kMaxCacheEntries = 1 << 18;

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
  absl::Status Load(const Json& root, const std::string& src);
  std::vector<int32_t> Encode(std::string_view text, bool add_bos, bool add_eos) const;
  std::string Decode(const std::vector<int32_t>& ids, bool skip_special) const;

  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  std::vector<std::string> id_to_token_;
  absl::flat_hash_map<std::string, int32_t> token_to_id_;

 private:
  absl::Status LoadModel(const Json& model, const std::string& src);
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
  WordSplitter splitter_;
  TokenDecoder decoder_;

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
    WQ_RETURN_IF_ERROR(splitter_.LoadNormalizer(root["normalizer"], src + ": normalizer"));
  }
  if (root.contains("pre_tokenizer")) {
    WQ_RETURN_IF_ERROR(splitter_.LoadPreTokenizer(root["pre_tokenizer"], src + ": pre_tokenizer"));
  }
  if (root.contains("decoder")) {
    WQ_RETURN_IF_ERROR(decoder_.Load(root["decoder"], src + ": decoder"));
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
    splitter_.Split(std::string(text.substr(begin, end - begin)), begin == 0, &words);
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
  return decoder_.Decode(std::move(toks));
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
