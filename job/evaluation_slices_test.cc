#include "job/evaluation_slices.h"

#include <numeric>

#include "gtest/gtest.h"

namespace windquant::job {
namespace {

std::vector<int32_t> Ids(int n) {
  std::vector<int32_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

config::EvaluationConfig Evaluation(int context, int64_t calib, int64_t slice, int64_t final) {
  config::EvaluationConfig e;
  e.context = context;
  e.calib_slice_tokens = calib;
  e.eval_slice_tokens = slice;
  e.final_eval_tokens = final;
  return e;
}

TEST(EvaluationSlicesTest, SelectionIsWholeWindowsAndHeldOutTheRest) {
  // context 11: windows of 10 ids; a 25-id slice is rounded down to 20.
  auto s = SliceEvaluationText(Evaluation(11, 7, 25, 0), Ids(30), Ids(57));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->calibration, Ids(7));
  EXPECT_EQ(s->selection, Ids(20));
  ASSERT_EQ(s->heldout.size(), 37u);
  EXPECT_EQ(s->heldout.front(), 20);
  EXPECT_EQ(s->heldout.back(), 56);
}

TEST(EvaluationSlicesTest, FinalEvalTokensCutsTheHeldOutPart) {
  auto s = SliceEvaluationText(Evaluation(11, 100, 25, 33), Ids(30), Ids(57));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->calibration.size(), 30u);  // shorter than calib_slice_tokens: all of it
  EXPECT_EQ(s->selection.size(), 20u);
  EXPECT_EQ(s->heldout.size(), 13u);
}

TEST(EvaluationSlicesTest, SliceShorterThanOneWindowNamesTheKey) {
  auto s = SliceEvaluationText(Evaluation(11, 7, 9, 0), Ids(30), Ids(57));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("evaluation.eval_slice_tokens"), std::string::npos)
      << s.status();
}

}  // namespace
}  // namespace windquant::job
