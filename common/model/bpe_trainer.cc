// BpeTrainer: the classic incremental BPE training loop (as in HF tokenizers'
// BpeTrainer): pair counts weighted by word frequency, a max-heap of pairs
// with lazy re-validation, and per-pair sets of the words containing them so
// a merge only rewrites the words it touches.
#include "common/model/bpe_trainer.h"

#include <algorithm>
#include <queue>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/model/tokenizer_pretokenizer.h"
#include "nlohmann/json.hpp"

namespace windquant::model {
namespace {

using Json = nlohmann::ordered_json;

uint64_t PairKey(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

// Heap entry: most frequent first, then smallest (left, right) ids.
struct Candidate {
  int64_t count;
  int32_t left;
  int32_t right;
  bool operator<(const Candidate& o) const {
    if (count != o.count) return count < o.count;
    return std::tie(left, right) > std::tie(o.left, o.right);
  }
};

Json TokenizerJson(const std::vector<std::string>& tokens,
                   const std::vector<std::pair<int32_t, int32_t>>& merges,
                   const std::vector<std::string>& specials, int32_t first_special_id) {
  Json added = Json::array();
  for (size_t i = 0; i < specials.size(); ++i) {
    added.push_back({{"id", first_special_id + static_cast<int32_t>(i)},
                     {"content", specials[i]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  Json vocab = Json::object();
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (!vocab.contains(tokens[i])) vocab[tokens[i]] = static_cast<int32_t>(i);
  }
  Json merge_list = Json::array();
  for (const auto& [a, b] : merges) merge_list.push_back(Json::array({tokens[a], tokens[b]}));
  const std::string& bos = specials[0];
  Json bos_token = {{"SpecialToken", Json{{"id", bos}, {"type_id", 0}}}};
  Json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = added;
  j["normalizer"] = nullptr;
  Json split = {{"type", "Split"},
                {"pattern", Json{{"Regex", std::string(kLlama3SplitPattern)}}},
                {"behavior", "Isolated"},
                {"invert", false}};
  Json byte_level = {{"type", "ByteLevel"},
                     {"add_prefix_space", false},
                     {"trim_offsets", true},
                     {"use_regex", false}};
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", Json::array({split, byte_level})}};
  auto sequence = [](const char* id, int type_id) {
    return Json{{"Sequence", Json{{"id", id}, {"type_id", type_id}}}};
  };
  Json bos_token_b = {{"SpecialToken", Json{{"id", bos}, {"type_id", 1}}}};
  Json special = Json::object();
  special[bos] =
      Json{{"id", bos}, {"ids", Json::array({first_special_id})}, {"tokens", Json::array({bos})}};
  j["post_processor"] =
      Json{{"type", "TemplateProcessing"},
           {"single", Json::array({bos_token, sequence("A", 0)})},
           {"pair", Json::array({bos_token, sequence("A", 0), bos_token_b, sequence("B", 1)})},
           {"special_tokens", special}};
  j["decoder"] = {{"type", "ByteLevel"},
                  {"add_prefix_space", true},
                  {"trim_offsets", true},
                  {"use_regex", true}};
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", true},
                {"vocab", vocab},
                {"merges", merge_list}};
  return j;
}

// The words (as token ids, in sorted order so nothing depends on hashing) with their
// counts, and for every adjacent pair its count weighted by word frequency and the words
// holding it.
struct PairIndex {
  std::vector<std::vector<int32_t>> words;
  std::vector<int64_t> counts;
  absl::flat_hash_map<uint64_t, int64_t> pair_count;
  absl::flat_hash_map<uint64_t, absl::flat_hash_set<int32_t>> pair_words;

  void AddWordPairs(int32_t w, int64_t sign) {
    const auto& s = words[w];
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      uint64_t key = PairKey(s[i], s[i + 1]);
      pair_count[key] += sign * counts[w];
      if (sign > 0) pair_words[key].insert(w);
    }
  }

  // Rewrites every word holding (left, right) with new_id in its place and drops the
  // pair; returns the pairs holding new_id whose counts changed, sorted and unique.
  std::vector<uint64_t> Merge(int32_t left, int32_t right, int32_t new_id) {
    const uint64_t key = PairKey(left, right);
    // Sorted for determinism of the caller's heap pushes.
    std::vector<int32_t> affected(pair_words[key].begin(), pair_words[key].end());
    std::sort(affected.begin(), affected.end());
    std::vector<uint64_t> touched;
    for (int32_t w : affected) {
      auto& s = words[w];
      bool has = false;
      for (size_t i = 0; i + 1 < s.size() && !has; ++i) {
        has = s[i] == left && s[i + 1] == right;
      }
      if (!has) continue;  // stale entry
      AddWordPairs(w, -1);
      std::vector<int32_t> out;
      out.reserve(s.size());
      for (size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == left && s[i + 1] == right) {
          out.push_back(new_id);
          ++i;
        } else {
          out.push_back(s[i]);
        }
      }
      s = std::move(out);
      AddWordPairs(w, 1);
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        if (s[i] == new_id || s[i + 1] == new_id) touched.push_back(PairKey(s[i], s[i + 1]));
      }
    }
    pair_count.erase(key);
    pair_words.erase(key);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    return touched;
  }
};

PairIndex IndexWords(const absl::flat_hash_map<std::string, int64_t>& word_counts) {
  // Words in a fixed order (sorted) so the result does not depend on hashing.
  std::vector<std::pair<std::string, int64_t>> sorted(word_counts.begin(), word_counts.end());
  std::sort(sorted.begin(), sorted.end());
  PairIndex index;
  index.words.resize(sorted.size());
  index.counts.resize(sorted.size());
  for (size_t w = 0; w < sorted.size(); ++w) {
    index.counts[w] = sorted[w].second;
    for (unsigned char b : sorted[w].first) index.words[w].push_back(b);
  }
  for (int32_t w = 0; w < static_cast<int32_t>(index.words.size()); ++w) index.AddWordPairs(w, 1);
  return index;
}

// The vocabulary being built: the 256 byte-level tokens, then one per new merged string.
struct Vocabulary {
  std::vector<std::string> tokens;
  absl::flat_hash_map<std::string, int32_t> token_ids;

  Vocabulary() : tokens(256) {
    for (int b = 0; b < 256; ++b) tokens[b] = ByteLevelAlphabet()[b];
    for (int b = 0; b < 256; ++b) token_ids[tokens[b]] = b;
  }

  // The id of left's string followed by right's, added when new.
  int32_t IdOfMerged(int32_t left, int32_t right) {
    const std::string merged = tokens[left] + tokens[right];
    if (auto t = token_ids.find(merged); t != token_ids.end()) return t->second;
    const int32_t new_id = static_cast<int32_t>(tokens.size());
    tokens.push_back(merged);
    token_ids[merged] = new_id;
    return new_id;
  }
};

}  // namespace

BpeTrainer::BpeTrainer(BpeTrainerOptions options) : options_(std::move(options)) {}

void BpeTrainer::AddText(std::string_view text) {
  for (std::string_view w : SplitLlama3(text)) {
    ++word_counts_[absl::string_view(w.data(), w.size())];
  }
}

absl::StatusOr<std::string> BpeTrainer::Train() {
  const int32_t num_specials = static_cast<int32_t>(options_.special_tokens.size());
  if (num_specials == 0) {
    return absl::InvalidArgumentError("bpe_trainer: special_tokens must name at least BOS");
  }
  if (options_.vocab_size < 256 + num_specials) {
    return absl::InvalidArgumentError(absl::StrCat("bpe_trainer: vocab_size ", options_.vocab_size,
                                                   " < 256 bytes + ", num_specials,
                                                   " special tokens"));
  }
  const int32_t target_merges = options_.vocab_size - 256 - num_specials;

  PairIndex index = IndexWords(word_counts_);
  Vocabulary vocab;
  std::priority_queue<Candidate> heap;
  for (const auto& [key, c] : index.pair_count) {
    heap.push({c, static_cast<int32_t>(key >> 32), static_cast<int32_t>(key & 0xFFFFFFFF)});
  }

  std::vector<std::pair<int32_t, int32_t>> merges;
  while (static_cast<int32_t>(merges.size()) < target_merges && !heap.empty()) {
    Candidate top = heap.top();
    heap.pop();
    const uint64_t key = PairKey(top.left, top.right);
    auto it = index.pair_count.find(key);
    const int64_t actual = it == index.pair_count.end() ? 0 : it->second;
    if (actual != top.count) {
      if (actual > 0) heap.push({actual, top.left, top.right});
      continue;
    }
    if (actual < options_.min_frequency) break;
    const int32_t new_id = vocab.IdOfMerged(top.left, top.right);
    merges.emplace_back(top.left, top.right);
    for (uint64_t k : index.Merge(top.left, top.right, new_id)) {
      heap.push({index.pair_count[k], static_cast<int32_t>(k >> 32),
                 static_cast<int32_t>(k & 0xFFFFFFFF)});
    }
  }
  num_merges_ = static_cast<int32_t>(merges.size());
  const int32_t first_special_id = static_cast<int32_t>(vocab.tokens.size());
  return TokenizerJson(vocab.tokens, merges, options_.special_tokens, first_special_id).dump(1);
}

}  // namespace windquant::model
