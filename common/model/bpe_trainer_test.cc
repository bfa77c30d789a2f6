// BpeTrainer: the trained tokenizer.json loads in Tokenizer, round-trips
// text, compresses better than bytes, is deterministic, and is fast enough.
#include "common/model/bpe_trainer.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/base/files.h"
#include "common/model/tokenizer.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_paths.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace windquant::model {
namespace {

using ::windquant::testing::StatusIs;

constexpr char kParagraph[] =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
    "park. One day, she saw a big, red ball. She wanted to play with it, but it was too high.\n\n"
    "Lily's mom said, \"Let's go home, it's 5:30 already!\" They walked 1234 steps home.\n"
    "The end.\n";

TEST(BpeTrainerTest, TrainsLoadableTokenizerThatRoundTrips) {
  BpeTrainerOptions options;
  options.vocab_size = 400;
  BpeTrainer trainer(options);
  for (int i = 0; i < 5; ++i) trainer.AddText(kParagraph);
  auto json = trainer.Train();
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_GT(trainer.num_merges(), 10);
  EXPECT_LE(trainer.num_merges(), 400 - 256 - 2);

  auto tok = Tokenizer::FromJson(*json, "trained");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), 256 + trainer.num_merges() + 2);
  EXPECT_EQ((*tok)->bos_id(), 256 + trainer.num_merges());
  EXPECT_EQ((*tok)->eos_id(), 256 + trainer.num_merges() + 1);
  EXPECT_EQ((*tok)->IdToToken((*tok)->bos_id()), "<|begin_of_text|>");

  const std::string text = kParagraph;
  std::vector<int32_t> ids = (*tok)->Encode(text);
  EXPECT_LT(ids.size() * 2, text.size()) << "no better than 2 bytes per token";
  EXPECT_EQ((*tok)->Decode(ids), text);
  std::vector<int32_t> with_bos = (*tok)->Encode(text, true, true);
  EXPECT_EQ(with_bos.front(), (*tok)->bos_id());
  EXPECT_EQ(with_bos.back(), (*tok)->eos_id());
  EXPECT_EQ((*tok)->Decode(with_bos), text);

  // Unseen text, including bytes no merge covers.
  const std::string unseen = "Zebras \xF0\x9F\xA6\x93 eat 98765 caf\xC3\xA9s\ttogether.\r\n";
  EXPECT_EQ((*tok)->Decode((*tok)->Encode(unseen)), unseen);

  auto parsed = nlohmann::json::parse(*json);
  EXPECT_EQ(parsed["model"]["type"], "BPE");
  EXPECT_EQ(parsed["pre_tokenizer"]["pretokenizers"][0]["type"], "Split");
  EXPECT_EQ(parsed["decoder"]["type"], "ByteLevel");
  EXPECT_EQ(parsed["post_processor"]["single"][0]["SpecialToken"]["id"], "<|begin_of_text|>");
}

TEST(BpeTrainerTest, Deterministic) {
  BpeTrainerOptions options;
  options.vocab_size = 280;
  BpeTrainer a(options), b(options);
  a.AddText(kParagraph);
  b.AddText(kParagraph);
  auto ja = a.Train();
  auto jb = b.Train();
  ASSERT_TRUE(ja.ok() && jb.ok());
  EXPECT_EQ(*ja, *jb);
}

TEST(BpeTrainerTest, StopsAtMinFrequencyAndRejectsTinyVocab) {
  BpeTrainerOptions options;
  options.vocab_size = 100000;
  options.min_frequency = 2;
  BpeTrainer trainer(options);
  trainer.AddText("abcdef");  // every pair occurs once
  ASSERT_TRUE(trainer.Train().ok());
  EXPECT_EQ(trainer.num_merges(), 0);

  options.vocab_size = 200;
  BpeTrainer small(options);
  EXPECT_THAT(small.Train(), StatusIs(absl::StatusCode::kInvalidArgument, "vocab_size 200"));
}

// Speed and quality on real text: tinystories (~0.8 MB), or Moby Dick (~1.2 MB) on a
// fresh clone, at vocab 2048.
TEST(BpeTrainerTest, TrainsOnRealTextQuickly) {
  const std::string path = testing::TextPaths().front();
  auto text = base::ReadFile(path);
  ASSERT_TRUE(text.ok()) << text.status();
  BpeTrainerOptions options;
  options.vocab_size = 2048;
  BpeTrainer trainer(options);
  auto t0 = std::chrono::steady_clock::now();
  trainer.AddText(*text);
  auto json = trainer.Train();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(trainer.num_merges(), 2048 - 256 - 2);
  auto tok = Tokenizer::FromJson(*json, path);
  ASSERT_TRUE(tok.ok()) << tok.status();
  std::vector<int32_t> ids = (*tok)->Encode(*text);
  EXPECT_EQ((*tok)->Decode(ids), *text);
  std::printf("trained vocab 2048 on %zu bytes in %.2f s; %zu tokens (%.2f bytes/token)\n",
              text->size(), s, ids.size(), static_cast<double>(text->size()) / ids.size());
  EXPECT_GT(static_cast<double>(text->size()) / ids.size(), 3.0);
  EXPECT_LT(s, 30.0);
}

}  // namespace
}  // namespace windquant::model
