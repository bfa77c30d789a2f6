#include "job/unit_table_diff.h"

#include "common/plan/plan.h"
#include "common/testing/synthetic_table.h"
#include "gtest/gtest.h"

namespace windquant::job {
namespace {

using testing::SyntheticTable;

TEST(UnitTableDiffTest, SameTableIsEquivalent) {
  const plan::UnitTable t = SyntheticTable(21, 1);
  const TableDiff d = DiffUnitTables(t, t, TableDiffTolerances());
  EXPECT_TRUE(d.ok());
  EXPECT_EQ(d.units_ok, 21);
  EXPECT_EQ(d.error.value, 0);
  const std::string text = FormatTableDiff(d, /*as_json=*/false);
  EXPECT_NE(text.find("units within tolerance: 21 of 21\nEQUIVALENT\n"), std::string::npos) << text;
}

TEST(UnitTableDiffTest, ErrorOutOfToleranceNamesTheUnitAndAction) {
  const plan::UnitTable a = SyntheticTable(21, 1);
  plan::UnitTable b = a;
  b.units[9].error[3] *= 1.01;  // 1 % > the 1e-3 default
  const TableDiff d = DiffUnitTables(a, b, TableDiffTolerances());
  EXPECT_FALSE(d.ok());
  EXPECT_EQ(d.error.over, 1);
  EXPECT_EQ(d.units_ok, 20);
  EXPECT_NEAR(d.error.value, 0.01 / 1.01, 1e-12);
  EXPECT_EQ(d.error.where, plan::UnitName(a.units[9]) + " action 3");
  TableDiffTolerances loose;
  loose.error_rtol = 0.02;
  EXPECT_TRUE(DiffUnitTables(a, b, loose).ok());
  EXPECT_NE(FormatTableDiff(d, /*as_json=*/true).find("\"ok\":false"), std::string::npos);
}

TEST(UnitTableDiffTest, StageTableIsComparedWithTheSameLayersOfTheWhole) {
  const plan::UnitTable whole = SyntheticTable(21, 1);  // layers 0..2, 7 units each
  plan::UnitTable stage = whole;
  stage.first_layer = 1;
  stage.end_layer = 2;
  stage.units.assign(whole.units.begin() + 7, whole.units.begin() + 14);
  const TableDiff d = DiffUnitTables(stage, whole, TableDiffTolerances());
  EXPECT_TRUE(d.ok()) << FormatTableDiff(d, false);
  EXPECT_EQ(d.units_b, 7u);
}

TEST(UnitTableDiffTest, LayoutDifferencesNameTheField) {
  const plan::UnitTable a = SyntheticTable(21, 1);
  plan::UnitTable b = a;
  b.units[4].cols = 128;
  b.chunk_size = 128;
  const std::vector<std::string> layout = LayoutDifferences(a, b);
  ASSERT_EQ(layout.size(), 2u);
  EXPECT_EQ(layout[0], "table.chunk_size: 256 vs 128");
  EXPECT_EQ(layout[1], plan::UnitName(a.units[4]) + ".cols: 256 vs 128");
  EXPECT_FALSE(DiffUnitTables(a, b, TableDiffTolerances()).ok());
}

}  // namespace
}  // namespace windquant::job
