#include "common/base/text_range.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace windquant::base {
namespace {

using ::windquant::testing::StatusIs;

// One id per byte: easy to count.
std::vector<int32_t> Bytes(std::string_view text) {
  return std::vector<int32_t>(text.begin(), text.end());
}

TEST(TextRangeTest, CutsBeginToEndAndZeroMeansTheEnd) {
  const std::vector<int32_t> ids = {0, 1, 2, 3, 4, 5};
  auto a = CutTokenRange(ids, {1, 3}, "k");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, (std::vector<int32_t>{1, 2}));
  auto b = CutTokenRange(ids, {4, 0}, "k");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, (std::vector<int32_t>{4, 5}));
  auto all = CutTokenRange(ids, {0, 0}, "k");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, ids);
}

TEST(TextRangeTest, RangeBeyondTheTextNamesTheKey) {
  const std::vector<int32_t> ids(10, 7);
  EXPECT_THAT(CutTokenRange(ids, {5, 11}, "evaluation.heldout.tokens"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "evaluation.heldout.tokens: [5, 11) is not within the text's 10 tokens"));
  EXPECT_THAT(CutTokenRange(ids, {10, 0}, "calibration.tokens"),
              StatusIs(absl::StatusCode::kInvalidArgument, "calibration.tokens: [10, 0)"));
}

TEST(TextRangeTest, ReadsTheFileAndNamesTheRoleOnErrors) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "wq_text_range_test.txt").string();
  std::ofstream(path) << "abcdefgh";
  std::string sha;
  auto ids = ReadTextRange(TextRange{path, {2, 5}}, "evaluation.selection", Bytes, &sha);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(*ids, Bytes("cde"));
  EXPECT_EQ(sha.size(), 64u);
  EXPECT_THAT(ReadTextRange(TextRange{path, {2, 50}}, "evaluation.selection", Bytes),
              StatusIs(absl::StatusCode::kInvalidArgument, "evaluation.selection.tokens: [2, 50)"));
  EXPECT_THAT(ReadTextRange(TextRange{path + ".missing", {0, 0}}, "calibration", Bytes),
              StatusIs(absl::StatusCode::kInvalidArgument, "calibration.text: "));
  std::remove(path.c_str());
}

// windows: k windows of `window` ids, the first at the range's start, the last at
// its end, evenly spaced between; 0 keeps the whole range.
TEST(TextRangeTest, WindowsAreSpreadEvenlyOverTheRange) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "wq_text_range_windows_test.txt").string();
  std::ofstream(path) << "0123456789abcdefghijklmnopqrstuvwxyz";
  auto read = [&](int64_t windows, int64_t window) {
    return ReadWindows(TextRange{path, {2, 22}, windows}, "evaluation.selection", Bytes, window);
  };
  auto whole = read(0, 3);  // [2, 22): "23456789abcdefghijkl"
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(*whole, Bytes("23456789abcdefghijkl"));
  auto four = read(4, 3);  // starts 0, 5, 11, 17 of 20 ids
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_EQ(*four, Bytes("234789defjkl"));
  auto one = read(1, 5);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, Bytes("23456"));
  auto packed = read(5, 4);  // 5 x 4 = 20: the whole range, consecutive
  ASSERT_TRUE(packed.ok());
  EXPECT_EQ(*packed, *whole);
  EXPECT_THAT(read(6, 4), StatusIs(absl::StatusCode::kInvalidArgument,
                                   "evaluation.selection.windows: 6 windows of 4 tokens do not "
                                   "fit in the range's 20 tokens (at most 5)"));
  EXPECT_THAT(read(-1, 4), StatusIs(absl::StatusCode::kInvalidArgument,
                                    "evaluation.selection.windows: -1 windows"));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace windquant::base
