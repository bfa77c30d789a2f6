// TokenDecoder on inline decoder configs: each step kind, their order in a
// Sequence, the space-joined fallback without a decoder, and the errors.
#include "common/model/tokenizer_decoder.h"

#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace windquant::model {
namespace {

using ::windquant::testing::StatusIs;
using Json = nlohmann::json;

TokenDecoder Loaded(const std::string& json) {
  TokenDecoder d;
  const absl::Status s = d.Load(Json::parse(json), "x: decoder");
  EXPECT_TRUE(s.ok()) << s;
  return d;
}

TEST(TokenDecoderTest, WithoutDecoderTokensAreJoinedWithSpaces) {
  EXPECT_EQ(TokenDecoder().Decode({"a", "b"}), "a b");
  EXPECT_EQ(Loaded("null").Decode({"a", "b"}), "a b");
  EXPECT_EQ(Loaded(R"({"type": "Sequence", "decoders": []})").Decode({"a", "b"}), "ab");
}

TEST(TokenDecoderTest, SentencePieceStyleSequence) {
  const TokenDecoder d = Loaded(R"({"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
      {"type": "ByteFallback"}, {"type": "Fuse"},
      {"type": "Strip", "content": " ", "start": 1, "stop": 0}]})");
  EXPECT_EQ(d.Decode({"\xE2\x96\x81Hello", "\xE2\x96\x81wor", "ld", "<0x21>"}), "Hello world!");
  // Bytes that are not valid UTF-8: one U+FFFD per byte.
  EXPECT_EQ(d.Decode({"a", "<0xC3>", "<0x28>"}), "a\xEF\xBF\xBD\xEF\xBF\xBD");
  // Valid multi-byte UTF-8 from byte tokens.
  EXPECT_EQ(d.Decode({"<0xC3>", "<0xA9>"}), "\xC3\xA9");
}

TEST(TokenDecoderTest, MetaspaceDropsTheFirstPrependedSpaceUnlessNever) {
  EXPECT_EQ(Loaded(R"({"type": "Metaspace"})")
                .Decode({"\xE2\x96\x81"
                         "a",
                         "\xE2\x96\x81"
                         "b"}),
            "a b");
  EXPECT_EQ(Loaded(R"({"type": "Metaspace", "prepend_scheme": "never"})")
                .Decode({"\xE2\x96\x81"
                         "a",
                         "\xE2\x96\x81"
                         "b"}),
            " a b");
}

TEST(TokenDecoderTest, ByteLevelMapsTheAlphabetBackToBytes) {
  const TokenDecoder d = Loaded(R"({"type": "ByteLevel"})");
  EXPECT_EQ(d.Decode({"hi", "\xC4\xA0there"}), "hi there");
  // Not in the alphabet (like an added token with U+2581): kept verbatim.
  EXPECT_EQ(d.Decode({"\xE2\x96\x81",
                      "\xC4\xA0"
                      "a"}),
            "\xE2\x96\x81 a");
}

TEST(TokenDecoderTest, UnsupportedOrMalformedStepsNameTheirPlace) {
  TokenDecoder d;
  EXPECT_THAT(
      d.Load(Json::parse(R"({"type": "WordPiece"})"), "x: decoder"),
      StatusIs(absl::StatusCode::kInvalidArgument, "x: decoder.type WordPiece unsupported"));
  EXPECT_THAT(
      d.Load(Json::parse(R"({"type": "Sequence", "decoders": [{"type": "Nope"}]})"), "x: decoder"),
      StatusIs(absl::StatusCode::kInvalidArgument, "x: decoder.decoders[0].type Nope"));
  EXPECT_THAT(d.Load(Json::parse(R"({"type": "Sequence"})"), "x: decoder"),
              StatusIs(absl::StatusCode::kInvalidArgument, "x: decoder.decoders missing"));
  EXPECT_THAT(
      d.Load(Json::parse(R"({"type": "Replace", "pattern": {"Regex": " +"}})"), "x: decoder"),
      StatusIs(absl::StatusCode::kInvalidArgument, "x: decoder.pattern: only {\"String\""));
  EXPECT_THAT(
      d.Load(Json::parse(R"({"type": "Metaspace", "prepend_scheme": "sometimes"})"), "x: decoder"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "x: decoder.prepend_scheme: unknown value sometimes"));
}

}  // namespace
}  // namespace windquant::model
