// WordSplitter on inline normalizer / pre-tokenizer configs: the LLaMA-2 style
// (Prepend + Replace), Metaspace's schemes and split flag, ByteLevel, the Split
// regexes in a Sequence, and the errors.
#include "common/model/tokenizer_splitter.h"

#include <string>
#include <vector>

#include "common/model/tokenizer_pretokenizer.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace windquant::model {
namespace {

using ::testing::ElementsAre;
using ::windquant::testing::StatusIs;
using Json = nlohmann::json;

std::vector<std::string> Words(const WordSplitter& s, const std::string& text, bool at_start) {
  std::vector<std::string> words;
  s.Split(text, at_start, &words);
  return words;
}

TEST(WordSplitterTest, WithoutStepsTheSegmentIsOneWord) {
  const WordSplitter s;
  EXPECT_THAT(Words(s, "a b", true), ElementsAre("a b"));
  EXPECT_TRUE(Words(s, "", true).empty());
}

TEST(WordSplitterTest, Llama2NormalizerPrependsAndReplacesSpaces) {
  WordSplitter s;
  ASSERT_TRUE(s.LoadNormalizer(Json::parse(R"({"type": "Sequence", "normalizers": [
      {"type": "Prepend", "prepend": "\u2581"},
      {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]})"),
                               "x: normalizer")
                  .ok());
  EXPECT_THAT(Words(s, "a b", true), ElementsAre("\xE2\x96\x81"
                                                 "a\xE2\x96\x81"
                                                 "b"));
  EXPECT_TRUE(Words(s, "", true).empty());  // nothing prepended to nothing
}

TEST(WordSplitterTest, MetaspaceSplitsBeforeEachReplacement) {
  WordSplitter first;
  ASSERT_TRUE(
      first
          .LoadPreTokenizer(Json::parse(R"({"type": "Metaspace", "prepend_scheme": "first"})"),
                            "x: pre_tokenizer")
          .ok());
  EXPECT_THAT(Words(first, "a b", true), ElementsAre("\xE2\x96\x81"
                                                     "a",
                                                     "\xE2\x96\x81"
                                                     "b"));
  EXPECT_THAT(Words(first, "a b", false), ElementsAre("a",
                                                      "\xE2\x96\x81"
                                                      "b"));
  WordSplitter whole;
  ASSERT_TRUE(
      whole.LoadPreTokenizer(Json::parse(R"({"type": "Metaspace", "split": false})"), "x").ok());
  EXPECT_THAT(Words(whole, "a b", false), ElementsAre("\xE2\x96\x81"
                                                      "a\xE2\x96\x81"
                                                      "b"));
}

TEST(WordSplitterTest, Llama3SplitThenByteLevel) {
  WordSplitter s;
  const Json j = {{"type", "Sequence"},
                  {"pretokenizers",
                   {{{"type", "Split"},
                     {"pattern", {{"Regex", std::string(kLlama3SplitPattern)}}},
                     {"behavior", "Isolated"},
                     {"invert", false}},
                    {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  ASSERT_TRUE(s.LoadPreTokenizer(j, "x: pre_tokenizer").ok());
  EXPECT_THAT(Words(s, "Hi there 123", true),
              ElementsAre("Hi", "\xC4\xA0there", "\xC4\xA0", "123"));
}

TEST(WordSplitterTest, UnsupportedStepsNameTheirPlace) {
  WordSplitter s;
  EXPECT_THAT(s.LoadNormalizer(Json::parse(R"({"type": "NFKC"})"), "x: normalizer"),
              StatusIs(absl::StatusCode::kInvalidArgument, "x: normalizer.type NFKC unsupported"));
  EXPECT_THAT(s.LoadPreTokenizer(Json::parse(R"({"type": "Sequence", "pretokenizers": [
                  {"type": "Whitespace"}]})"),
                                 "x: pre_tokenizer"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "x: pre_tokenizer.pretokenizers[0].type Whitespace unsupported"));
  EXPECT_THAT(
      s.LoadPreTokenizer(Json::parse(R"({"type": "Split", "pattern": {"Regex": "a"},
                  "behavior": "Isolated"})"),
                         "x: pre_tokenizer"),
      StatusIs(absl::StatusCode::kInvalidArgument, "only the LLaMA-3 and GPT-2 split regexes"));
  EXPECT_THAT(s.LoadPreTokenizer(Json::parse(R"({"type": "Split", "behavior": "Removed"})"),
                                 "x: pre_tokenizer"),
              StatusIs(absl::StatusCode::kInvalidArgument, "only behavior Isolated"));
}

}  // namespace
}  // namespace windquant::model
