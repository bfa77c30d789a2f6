// Tests of Tokenizer on a LLaMA-2-style (SentencePiece BPE with byte fallback)
// tokenizer.json against independent implementations: stories260k's against
// SentencePiece itself (PyPI's, on its tokenizer.model) and its published
// whole-file checksums when ../shared has them; else a tokenizer that
// SentencePiece (PyPI, tests/py/tokenizer_ref.py) trains here on the project's
// text, written as a tokenizer.json in LLaMA-2's layout, against SentencePiece on
// its .model and Hugging Face tokenizers on its .json; plus small inline files
// for each feature.
#include "common/model/tokenizer.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/base/files.h"
#include "common/testing/py_reference.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_paths.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace windquant::model {
namespace {

using ::windquant::testing::Reference;
using ::windquant::testing::StatusIs;

using ::testing::ElementsAre;

// Vocab size of the LLaMA-2-style tokenizer trained without ../shared: 3 specials,
// 256 bytes and 765 learned pieces; well under a second to train.
constexpr int kTrainedVocabSize = 1024;

// A scratch folder of this test in the build tree.
std::string WorkDir() {
  const std::string dir = testing::BinaryDir() + "/tokenizer_test_work";
  std::filesystem::create_directories(dir);
  return dir;
}

// The LLaMA-2-style tokenizer of a fresh clone: SentencePiece BPE with byte
// fallback trained (seeded) on the project's text into dir/tokenizer.model, and
// its tokenizer.json; trained once per process.
struct TrainedLlama2 {
  absl::Status status;
  std::string dir;
};

const TrainedLlama2& TrainLlama2Once() {
  static const TrainedLlama2 trained = [] {
    TrainedLlama2 t;
    t.dir = WorkDir() + "/llama2";
    std::filesystem::create_directories(t.dir);
    t.status = testing::RunTokenizerReference(
                   {"train-llama2", "--text", testing::TextPaths().front(), "--vocab-size",
                    std::to_string(kTrainedVocabSize), "--out-dir", t.dir},
                   t.dir)
                   .status();
    return t;
  }();
  return trained;
}

// The start of a line for a failure message (KJV lines are whole chapters).
std::string Excerpt(const std::string& line) {
  return line.size() <= 160 ? line : line.substr(0, 160) + "...";
}

std::string IdsSha256(const std::vector<int32_t>& ids) {
  std::string bytes;
  bytes.reserve(ids.size() * 4);
  for (int32_t id : ids) {
    uint32_t u = static_cast<uint32_t>(id);
    for (int k = 0; k < 4; ++k) bytes.push_back(static_cast<char>((u >> (8 * k)) & 0xFF));
  }
  return base::Sha256Hex(bytes);
}

// SentencePiece's remove_extra_whitespaces: strip the ends, collapse runs of
// spaces.
std::string SpmNormalize(const std::string& line) {
  std::string out;
  bool space = false;
  for (char c : line) {
    if (c == ' ') {
      space = true;
      continue;
    }
    if (space && !out.empty()) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  return out;
}

// One reference implementation of the tokenizer under test and the file it reads.
struct ReferenceFile {
  const char* name;
  Reference kind;
  std::string path;
};

// The LLaMA-2-style tokenizer under test and its references: stories260k with
// SentencePiece on its tokenizer.model (../shared), or the tokenizer trained here
// with SentencePiece (.model) and Hugging Face tokenizers (.json). SentencePiece
// runs in tests/py/tokenizer_ref.py (PyPI's build of Google's library): Debian's
// libsentencepiece embeds its own protobuf, which clashes with libtorch's in one
// process, and cannot be loaded apart (RTLD_DEEPBIND) under the sanitizers.
class SentencePieceStyleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string shared = testing::SharedDir();
    stories_ = !shared.empty() && base::PathExists(shared + "/models/stories260k/tokenizer.json") &&
               base::PathExists(shared + "/models/stories260k/tokenizer.model");
    if (stories_) {
      json_path_ = shared + "/models/stories260k/tokenizer.json";
      spm_model_path_ = shared + "/models/stories260k/tokenizer.model";
    } else {
      const TrainedLlama2& trained = TrainLlama2Once();
      ASSERT_TRUE(trained.status.ok()) << "LLaMA-2-style reference unavailable: " << trained.status;
      json_path_ = trained.dir + "/tokenizer.json";
      spm_model_path_ = trained.dir + "/tokenizer.model";
    }
    auto tok = Tokenizer::FromFile(json_path_);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tok_ = std::move(tok).value();
    auto json = base::ReadFile(json_path_);
    ASSERT_TRUE(json.ok()) << json.status();
    json_vocab_size_ = nlohmann::json::parse(*json)["model"]["vocab"].size();
  }
  // The references: SentencePiece, and HF tokenizers for the trained tokenizer.
  std::vector<ReferenceFile> References() const {
    if (stories_) return {{"SentencePiece", Reference::kSentencePiece, spm_model_path_}};
    return {{"SentencePiece", Reference::kSentencePiece, spm_model_path_},
            {"HF tokenizers", Reference::kHfTokenizers, json_path_}};
  }
  // Our ids of `text` (as one text) equal each reference's.
  void ExpectReferenceIds(const std::vector<int32_t>& ids, const std::string& text,
                          const std::string& what) {
    for (const ReferenceFile& ref : References()) {
      auto expected = testing::ReferenceIds(ref.kind, ref.path, text, WorkDir());
      ASSERT_TRUE(expected.ok()) << expected.status();
      EXPECT_EQ(ids.size(), expected->size()) << what << " vs " << ref.name;
      EXPECT_TRUE(ids == *expected) << what << ": ids differ from " << ref.name;
    }
  }

  bool stories_ = false;
  std::string json_path_, spm_model_path_;
  size_t json_vocab_size_ = 0;
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(SentencePieceStyleTest, SpecialIds) {
  EXPECT_EQ(tok_->bos_id(), 1);
  EXPECT_EQ(tok_->eos_id(), 2);
  EXPECT_EQ(static_cast<size_t>(tok_->vocab_size()), json_vocab_size_);
  EXPECT_EQ(tok_->vocab_size(), stories_ ? 512 : kTrainedVocabSize);
  EXPECT_EQ(tok_->IdToToken(3), "<0x00>");
  EXPECT_EQ(tok_->TokenToId("<unk>"), 0);
  EXPECT_EQ(tok_->TokenToId("no such piece"), -1);
}

TEST_F(SentencePieceStyleTest, BosEosAndAddedTokensInText) {
  std::vector<int32_t> plain = tok_->Encode("Once upon a time");
  std::vector<int32_t> with = tok_->Encode("Once upon a time", true, true);
  ASSERT_EQ(with.size(), plain.size() + 2);
  EXPECT_EQ(with.front(), 1);
  EXPECT_EQ(with.back(), 2);
  // "<s>" in the text is the special token, not the characters < s >.
  std::vector<int32_t> ids = tok_->Encode("<s>Once upon a time</s>");
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(ids.back(), 2);
  EXPECT_EQ(tok_->Decode(ids, /*skip_special=*/true), "Once upon a time");
  EXPECT_EQ(tok_->Decode(with, /*skip_special=*/false).rfind("<s>", 0), 0u);
}

TEST_F(SentencePieceStyleTest, ByteFallbackRoundTrip) {
  const std::string text = "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x99\x82 x\ty";
  std::vector<int32_t> ids = tok_->Encode(text);
  bool has_byte_token = false;
  for (int32_t id : ids) has_byte_token = has_byte_token || (id >= 3 && id <= 258);
  EXPECT_TRUE(has_byte_token);
  EXPECT_EQ(tok_->Decode(ids), text);
  ExpectReferenceIds(ids, text, "byte fallback text");
}

// Every line of the real texts, as SentencePiece sees them after its whitespace
// normalization, gives the same ids as the references (SentencePiece for
// stories260k; SentencePiece and HF tokenizers for the trained tokenizer).
TEST_F(SentencePieceStyleTest, MatchesReferenceLineByLine) {
  for (const std::string& file : testing::TextPaths()) {
    auto text = base::ReadFile(file);
    ASSERT_TRUE(text.ok()) << text.status();
    std::vector<std::string> lines;
    size_t line_bytes = 0;
    for (absl::string_view raw : absl::StrSplit(*text, '\n')) {
      std::string line = SpmNormalize(std::string(raw));
      line_bytes += line.size();
      if (!line.empty()) lines.push_back(line);
    }
    // (reference name, its ids of each line)
    std::vector<std::pair<std::string, std::vector<std::vector<int32_t>>>> expected;
    for (const ReferenceFile& ref : References()) {
      auto ids = testing::ReferenceLineIds(ref.kind, ref.path, lines, WorkDir());
      ASSERT_TRUE(ids.ok()) << ids.status();
      expected.emplace_back(ref.name, *std::move(ids));
    }
    std::vector<std::vector<int32_t>> ours(lines.size());
    for (size_t i = 0; i < lines.size(); ++i) ours[i] = tok_->Encode(lines[i]);
    for (const auto& [reference, ref_ids] : expected) {
      int mismatches = 0;
      for (size_t i = 0; i < lines.size(); ++i) {
        if (ours[i] != ref_ids[i] && ++mismatches <= 5) {
          ADD_FAILURE() << file << ": differs from " << reference << " on line " << i << ": "
                        << Excerpt(lines[i]);
        }
      }
      EXPECT_EQ(mismatches, 0) << file << " vs " << reference;
      std::printf("%s: %zu non-empty lines, identical to %s: %zu\n", file.c_str(), lines.size(),
                  reference.c_str(), lines.size() - mismatches);
    }
    // Most of a real file, not a sample: KJV chapters or TinyStories/WikiText lines.
    EXPECT_GT(text->size(), size_t{100'000}) << file;
    EXPECT_GT(line_bytes, text->size() * 9 / 10) << file;
    EXPECT_GE(lines.size(), 50u) << file;
  }
}

struct FileCase {
  const char* file;
  size_t tokens;
  const char* sha256;
};

// Whole files: stories260k's published token counts and checksums, or the trained
// tokenizer's ids of the whole project text from SentencePiece and HF tokenizers;
// both decode back byte for byte.
TEST_F(SentencePieceStyleTest, WholeFileChecksumsAndRoundTrip) {
  const FileCase stories_cases[] = {
      {"data/tinystories-valid-sample.txt", 393018,
       "2da76ff0e7286c67790d8b7ce7f969a160101f1df817112861f9bd47b92913b9"},
      {"data/wikitext2-test.txt", 809289,
       "361291d3bf24dbb495a949f274fbb0e48a4fe2b933a75b09e44216f22c26be88"},
  };
  std::vector<std::string> files;
  if (stories_) {
    for (const FileCase& c : stories_cases) files.push_back(testing::SharedDir() + "/" + c.file);
  } else {
    files = testing::TextPaths();
  }
  for (size_t f = 0; f < files.size(); ++f) {
    auto text = base::ReadFile(files[f]);
    ASSERT_TRUE(text.ok()) << text.status();
    auto t0 = std::chrono::steady_clock::now();
    std::vector<int32_t> ids = tok_->Encode(*text);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s: %zu bytes -> %zu tokens in %.3f s (%.1f MB/s)\n", files[f].c_str(),
                text->size(), ids.size(), s, text->size() / s / 1e6);
    if (stories_) {
      EXPECT_EQ(ids.size(), stories_cases[f].tokens) << files[f];
      EXPECT_EQ(IdsSha256(ids), stories_cases[f].sha256) << files[f];
    } else {
      ExpectReferenceIds(ids, *text, files[f]);
    }
    EXPECT_EQ(tok_->Decode(ids), *text) << files[f];
    EXPECT_LT(s, 5.0) << "encoding is too slow";
  }
}

// --- Small inline files: one feature each. ---------------------------------

// Vocab a b c ab abc with merges (a b) then (ab c), byte-level alphabet.
constexpr char kTinyByteLevel[] = R"({
  "added_tokens": [{"id": 5, "content": "<|bos|>", "special": true}],
  "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<|bos|>", "type_id": 0}},
               {"Sequence": {"id": "A", "type_id": 0}}]},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4, "Ġ": 6,
                                     "Ġa": 7},
            "merges": ["a b", ["ab", "c"], "Ġ a"]}
})";

TEST(TokenizerTest, MergesByRank) {
  auto tok = Tokenizer::FromJson(kTinyByteLevel, "tiny");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_THAT((*tok)->Encode("abc"), ElementsAre(4));
  EXPECT_THAT((*tok)->Encode("abcab"), ElementsAre(4, 3));
  // " abc": (a b) rank 0 beats (Ġ a) rank 2, so Ġa never forms.
  EXPECT_THAT((*tok)->Encode("cab abc"), ElementsAre(2, 3, 6, 4));
  EXPECT_THAT((*tok)->Encode("ab<|bos|>a", true), ElementsAre(5, 3, 5, 0));
  EXPECT_EQ((*tok)->bos_id(), 5);
  EXPECT_EQ((*tok)->eos_id(), -1);
  EXPECT_EQ((*tok)->vocab_size(), 8);
  EXPECT_EQ((*tok)->Decode({2, 3, 6, 4}), "cab abc");
  EXPECT_EQ((*tok)->Decode({7, 1}), " ab");
  EXPECT_EQ((*tok)->Decode({5, 3}, false), "<|bos|>ab");
}

TEST(TokenizerTest, RejectsBadFiles) {
  EXPECT_THAT(Tokenizer::FromJson("{", "x"),
              StatusIs(absl::StatusCode::kInvalidArgument, "x: invalid JSON"));
  EXPECT_THAT(Tokenizer::FromFile("/nonexistent/tokenizer.json"),
              StatusIs(absl::StatusCode::kNotFound, "/nonexistent/tokenizer.json"));
  auto wordpiece = Tokenizer::FromJson(R"({"model": {"type": "WordPiece", "vocab": {}}})", "wp");
  EXPECT_THAT(wordpiece, StatusIs(absl::StatusCode::kInvalidArgument, "model.type"));
  auto bad_merge = Tokenizer::FromJson(
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})", "bm");
  EXPECT_THAT(bad_merge, StatusIs(absl::StatusCode::kInvalidArgument, "merges[0]"));
  auto bad_regex = Tokenizer::FromJson(
      R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\w+"},
          "behavior": "Isolated", "invert": false},
          "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})",
      "re");
  EXPECT_THAT(bad_regex, StatusIs(absl::StatusCode::kInvalidArgument, "pre_tokenizer"));
}

// Metaspace pre-tokenizer (prepend_scheme first, split true) with byte
// fallback and fuse_unk.
TEST(TokenizerTest, MetaspaceSplitAndUnk) {
  constexpr char kJson[] = R"({
    "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first",
                      "split": true},
    "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first"},
    "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": false,
              "vocab": {"<unk>": 0, "▁": 1, "h": 2, "i": 3, "▁h": 4, "▁hi": 5},
              "merges": ["▁ h", "▁h i"]}
  })";
  auto tok = Tokenizer::FromJson(kJson, "meta");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_THAT((*tok)->Encode("hi hi"), ElementsAre(5, 5));
  EXPECT_THAT((*tok)->Encode("hi xyz"), ElementsAre(5, 1, 0));  // fused unk
  EXPECT_EQ((*tok)->Decode({5, 5}), "hi hi");
}

}  // namespace
}  // namespace windquant::model
