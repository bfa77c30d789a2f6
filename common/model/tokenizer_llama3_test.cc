// Integration test: our Tokenizer on LLaMA-3-style (byte-level BPE) tokenizer.json
// files against the field's own implementation, Hugging Face tokenizers (PyPI;
// tests/py/tokenizer_ref.py drives it through common/testing/py_reference.h):
//  * a tokenizer that HF tokenizers trains here on the project's text with
//    exactly LLaMA-3's pre-tokenizer (Split on LLaMA-3's regex, then ByteLevel
//    without its own regex), ignore_merges, the ByteLevel decoder and LLaMA-3's
//    first special tokens after the vocab;
//  * a tokenizer.json written by our BpeTrainer, which HF tokenizers loads.
// Both sides read the same file, so only the algorithms differ. Needs the
// project's Python venv (scripts/install-deps.sh); fails naming what is missing.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/base/files.h"
#include "common/model/bpe_trainer.h"
#include "common/model/tokenizer.h"
#include "common/testing/py_reference.h"
#include "common/testing/test_paths.h"
#include "gtest/gtest.h"

namespace windquant::model {
namespace {

namespace fs = std::filesystem;

using ::windquant::testing::Reference;

constexpr int kLinesPerFile = 2000;
// The HF-trained tokenizer: ids 0..4095 (256 bytes and merges), then the 10
// special tokens of LLaMA-3's ids 128000..128009 in its order.
constexpr int kTrainedVocabSize = 4096;
constexpr int kSpecialTokens = 10;

// A scratch folder of this test in the build tree.
std::string WorkDir() {
  const fs::path dir = fs::path(testing::BinaryDir()) / "tokenizer_llama3_work";
  fs::create_directories(dir);
  return dir.string();
}

// The start of a line for a failure message (KJV lines are whole chapters).
std::string Excerpt(const std::string& line) {
  return line.size() <= 160 ? line : line.substr(0, 160) + "...";
}

std::vector<std::string> FirstLines(const std::string& path, int n) {
  std::vector<std::string> out;
  auto text = base::ReadFile(path);
  if (!text.ok()) return out;
  for (absl::string_view l : absl::StrSplit(*text, '\n')) {
    if (static_cast<int>(out.size()) >= n) break;
    if (!l.empty()) out.emplace_back(l);
  }
  return out;
}

// Up to 2 x kLinesPerFile real lines: of TinyStories and WikiText-2 (../shared),
// or of the project's held-out text.
void AppendRealLines(std::vector<std::string>* lines) {
  const std::vector<std::string> paths = testing::TextPaths();
  for (const std::string& path : paths) {
    const std::vector<std::string> more =
        FirstLines(path, 2 * kLinesPerFile / static_cast<int>(paths.size()));
    ASSERT_FALSE(more.empty()) << "missing " << path;
    lines->insert(lines->end(), more.begin(), more.end());
  }
}

// Cases the regex splitter and BPE must get right.
std::vector<std::string> EdgeCaseLines() {
  return {
      "Hello, my dog is cute",
      "I'm sure YOU'LL say we'd've DON'T it's 'quoted' 'Tis",
      "   leading and trailing spaces   ",
      "a  b   c    d\t\te",
      "1 12 123 1234 12345678 3.14159 1,000,000 -42",
      "\xD9\xA1\xD9\xA2\xD9\xA3 \xE2\x85\xAB \xC2\xB2\xC2\xB3",  // Arabic digits, Roman XII,
                                                                 // superscripts
      "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE3\x83\x86\xE3\x82\xAD\xE3\x82\xB9\xE3\x83"
      "\x88",
      "emoji \xF0\x9F\x99\x82\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD family "
      "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9",
      "na\xC3\xAFve caf\xC3\xA9 e\xCC\x81t\xC3\xA9 "
      "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82",
      "<|begin_of_text|>Hello<|end_of_text|> <|eot_id|>x",
      "$$$ ... !!! ?!? @user #tag https://example.com/a?b=c&d=e",
      "\xC2\xA0non-breaking\xE2\x80\x83"
      "em space",
      "x = f(y) + g[z] // comment",
  };
}

// Our ids for every line equal HF tokenizers' on `json_path` (the file `tok` was
// loaded from); with `check_decode`, lines without special tokens decode back to
// themselves too. Prints "<label>: N lines, M identical to HF tokenizers".
void ExpectLinesMatchReference(const Tokenizer& tok, const std::string& json_path,
                               const std::vector<std::string>& lines, bool check_decode,
                               const char* label) {
  auto reference = testing::ReferenceLineIds(Reference::kHfTokenizers, json_path, lines, WorkDir());
  ASSERT_TRUE(reference.ok()) << reference.status();
  int mismatches = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::vector<int32_t>& expected = (*reference)[i];
    std::vector<int32_t> got = tok.Encode(lines[i]);
    if (got != expected && ++mismatches <= 5) {
      ADD_FAILURE() << "line " << i << " differs: " << Excerpt(lines[i]);
    }
    if (check_decode && lines[i].find("<|") == std::string::npos) {
      EXPECT_EQ(tok.Decode(got), lines[i]);
    }
  }
  EXPECT_EQ(mismatches, 0);
  std::printf("%s: %zu lines, %zu identical to HF tokenizers\n", label, lines.size(),
              lines.size() - mismatches);
}

// The second half of each real text (from a line start), so that the real lines
// the tests check are partly seen in training and partly not.
std::string SecondHalves() {
  std::string out;
  for (const std::string& path : testing::TextPaths()) {
    auto text = base::ReadFile(path);
    if (!text.ok()) continue;
    const size_t cut = text->find('\n', text->size() / 2);
    if (cut != std::string::npos) out += text->substr(cut + 1);
  }
  return out;
}

TEST(TokenizerLlama3Test, MatchesHfTokenizersOnRealText) {
  const std::string work = WorkDir();
  const std::string train_path = work + "/llama3_train.txt";
  const std::string json_path = work + "/llama3_tokenizer.json";
  const std::string train_text = SecondHalves();
  ASSERT_GT(train_text.size(), size_t{50'000}) << "too little real text in TextPaths()";
  ASSERT_TRUE(base::WriteFileAtomic(train_path, train_text).ok());
  auto trained =
      testing::RunTokenizerReference({"train-llama3", "--text", train_path, "--vocab-size",
                                      std::to_string(kTrainedVocabSize), "--out", json_path},
                                     work);
  ASSERT_TRUE(trained.ok()) << "LLaMA-3-style reference unavailable: " << trained.status();

  std::vector<std::string> lines;
  ASSERT_NO_FATAL_FAILURE(AppendRealLines(&lines));
  const std::vector<std::string> edge = EdgeCaseLines();
  lines.insert(lines.end(), edge.begin(), edge.end());
  std::string input;
  for (const auto& l : lines) input += l + "\n";
  input.pop_back();
  // Whole multi-line text: newlines, blank lines and "\r\n" runs.
  const std::string block =
      "Title\r\n\r\n  Para one.\n\n\n   Indented\tline  \n" + input.substr(0, 60000);

  auto tok = Tokenizer::FromFile(json_path);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->bos_id(), kTrainedVocabSize);      // <|begin_of_text|>
  EXPECT_EQ((*tok)->eos_id(), kTrainedVocabSize + 1);  // <|end_of_text|>
  EXPECT_EQ((*tok)->vocab_size(), kTrainedVocabSize + kSpecialTokens);

  ASSERT_NO_FATAL_FAILURE(
      ExpectLinesMatchReference(**tok, json_path, lines, /*check_decode=*/true, "llama3-style"));

  auto expected = testing::ReferenceIds(Reference::kHfTokenizers, json_path, block, work);
  ASSERT_TRUE(expected.ok()) << expected.status();
  std::vector<int32_t> got = (*tok)->Encode(block);
  EXPECT_EQ(got, *expected) << "multi-line block differs";
  if (block.find("<|") == std::string::npos) {
    EXPECT_EQ((*tok)->Decode(got), block);
  }
  std::printf("llama3-style: multi-line block of %zu bytes -> %zu tokens, identical: %d\n",
              block.size(), got.size(), got == *expected);
}

// A tokenizer.json written by BpeTrainer is a valid HF file: HF tokenizers
// loads it and gives the same ids as our Tokenizer.
TEST(TokenizerLlama3Test, TrainedTokenizerMatchesHfTokenizers) {
  // Trained on TinyStories, checked on WikiText-2 lines (../shared); or trained on
  // the first half of the project's text and checked on lines of the second half.
  const std::vector<std::string> paths = testing::TextPaths();
  auto train_text = base::ReadFile(paths.front());
  ASSERT_TRUE(train_text.ok()) << train_text.status();
  std::vector<std::string> lines;
  if (paths.size() > 1) {
    lines = FirstLines(paths.back(), kLinesPerFile);
  } else {
    const std::string held_out = train_text->substr(train_text->size() / 2);
    train_text->resize(train_text->size() / 2);
    for (absl::string_view l : absl::StrSplit(held_out, '\n', absl::SkipEmpty())) {
      if (static_cast<int>(lines.size()) >= kLinesPerFile) break;
      lines.emplace_back(l);
    }
  }
  ASSERT_FALSE(lines.empty()) << "no held-out lines in " << paths.back();
  BpeTrainerOptions options;
  options.vocab_size = 2048;
  BpeTrainer trainer(options);
  trainer.AddText(*train_text);
  auto json = trainer.Train();
  ASSERT_TRUE(json.ok()) << json.status();
  const std::string json_path = WorkDir() + "/trained_tokenizer.json";
  ASSERT_TRUE(base::WriteFileAtomic(json_path, *json).ok());
  auto tok = Tokenizer::FromJson(*json, json_path);
  ASSERT_TRUE(tok.ok()) << tok.status();
  ASSERT_NO_FATAL_FAILURE(ExpectLinesMatchReference(**tok, json_path, lines,
                                                    /*check_decode=*/false, "trained tokenizer"));
}

}  // namespace
}  // namespace windquant::model
