#include "job/evaluation_slices.h"

#include <numeric>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace windquant::job {
namespace {

using ::windquant::testing::StatusIs;

std::vector<int32_t> Ids(int n, int first = 0) {
  std::vector<int32_t> ids(n);
  std::iota(ids.begin(), ids.end(), first);
  return ids;
}

config::EvaluationConfig Evaluation(int context, int64_t calib) {
  config::EvaluationConfig e;
  e.context = context;
  e.calib_slice_tokens = calib;
  return e;
}

TEST(EvaluationSlicesTest, EachRoleKeepsItsOwnIds) {
  auto s = SliceEvaluationText(Evaluation(11, 7), Ids(30), Ids(25, 100), Ids(37, 200));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->calibration, Ids(7));  // the loss slice: the start of the calibration range
  EXPECT_EQ(s->selection, Ids(25, 100));
  EXPECT_EQ(s->heldout, Ids(37, 200));
}

TEST(EvaluationSlicesTest, ShortCalibrationRangeIsUsedWhole) {
  auto s = SliceEvaluationText(Evaluation(11, 100), Ids(30), Ids(20), Ids(13));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->calibration.size(), 30u);
}

TEST(EvaluationSlicesTest, SelectionShorterThanOneWindowNamesTheKey) {
  EXPECT_THAT(SliceEvaluationText(Evaluation(11, 7), Ids(30), Ids(9), Ids(57)),
              StatusIs(absl::StatusCode::kInvalidArgument, "evaluation.selection.tokens"));
}

}  // namespace
}  // namespace windquant::job
