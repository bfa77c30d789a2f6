#include "common/plan/plan_io.h"

#include <filesystem>
#include <string>

#include "common/base/files.h"
#include "common/plan/effective_bits.h"
#include "common/testing/scoped_test_dir.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace windquant::plan {
namespace {

// A hand-made table: 2 layers x 7 matrices x 2 chunks, uneven shapes, bits from the
// formula, errors decreasing with precision.
UnitTable TestTable(const std::string& fingerprint = "fp-A", int layers = 2) {
  UnitTable t;
  t.fingerprint = fingerprint;
  t.first_layer = 0;
  t.end_layer = layers;
  t.num_layers = layers;
  t.chunk_size = 16;
  t.salient_fraction = 0.01;
  t.fixed_fp16_params = 1000;
  for (int l = 0; l < layers; ++l) {
    for (int m = 0; m < 7; ++m) {
      for (int c = 0; c < 2; ++c) {
        Unit u;
        u.id = static_cast<uint32_t>(t.units.size());
        u.layer = l;
        u.matrix = m;
        u.chunk = c;
        u.rows = 8 + 4 * m;
        u.cols = c == 0 ? 16 : 9;
        u.col_begin = 16 * c;
        u.salient_count = SalientCount(u.n(), t.salient_fraction);
        for (int a = 0; a < kNumActions; ++a) {
          u.bits[a] = UnitEffectiveBits(u.rows, u.cols, u.salient_count, kAllActions[a]);
          u.error[a] = a == 0 ? 1e-7 : std::pow(4.0, a) * 1e-4 * (1 + 0.1 * m);
        }
        t.units.push_back(u);
      }
    }
  }
  return t;
}

Plan MixedPlan(const UnitTable& t) {
  std::vector<int> a(t.units.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int>((i * 5 + 3) % kNumActions);
  Plan p = Plan::Make(t, a, "rl", 3.0);
  p.policy_version = 42;
  p.episode_id = 7;
  return p;
}

TEST(PlanTest, TotalsMatchAnIndependentRecount) {
  const UnitTable t = TestTable();
  const Plan p = MixedPlan(t);
  double bits = 0;
  int64_t n = 0;
  std::array<int64_t, kNumActions> counts{};
  for (size_t i = 0; i < t.units.size(); ++i) {
    const Unit& u = t.units[i];
    bits += UnitEffectiveBits(u.rows, u.cols, SalientCount(u.rows * u.cols, 0.01),
                              kAllActions[p.actions[i]]);
    n += u.rows * u.cols;
    counts[p.actions[i]]++;
  }
  const PlanTotals tot = p.Totals(t);
  EXPECT_NEAR(tot.effective_bits, bits / n, 1e-12);
  EXPECT_NEAR(tot.whole_model_bits, (bits + 16.0 * 1000) / (n + 1000), 1e-12);
  EXPECT_EQ(tot.quantized_weights, n);
  EXPECT_EQ(tot.action_counts, counts);
  EXPECT_NEAR(tot.whole_model_bits, t.WholeModelBits(p.actions), 1e-12);
}

TEST(PlanIoTest, JsonAndBinaryRoundTrip) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-plan-io");
  const UnitTable t = TestTable();
  const Plan p = MixedPlan(t);
  const std::string dir = test_dir.path();
  ASSERT_TRUE(WritePlanFiles(p, t, dir).ok());
  for (const char* f : {"plan.json", "plan.bin"}) {
    auto q = ReadPlanFile(dir + "/" + f, t);
    ASSERT_TRUE(q.ok()) << f << ": " << q.status();
    EXPECT_EQ(q->actions, p.actions) << f;
    EXPECT_EQ(q->plan_id, p.plan_id);
    EXPECT_EQ(q->source, "rl");
    EXPECT_EQ(q->policy_version, 42);
    EXPECT_EQ(q->episode_id, 7u);
    EXPECT_EQ(q->target_bits, 3.0);
  }
  // The JSON carries readable per-unit rows and the totals.
  auto text = base::ReadFile(dir + "/plan.json");
  ASSERT_TRUE(text.ok());
  auto j = nlohmann::json::parse(*text);
  EXPECT_EQ(j["units"][3]["matrix"], "k_proj");
  EXPECT_EQ(j["units"][3]["action"], std::string(ActionName(kAllActions[p.actions[3]])));
  EXPECT_NEAR(j["totals"]["effective_bits"].get<double>(), p.Totals(t).effective_bits, 1e-12);
}

TEST(PlanIoTest, BinaryStartsWithMagicAndEndsWithChecksum) {
  const UnitTable t = TestTable();
  const std::string bin = PlanToBinary(MixedPlan(t), t);
  EXPECT_EQ(bin.substr(0, 8), std::string("WQPLAN1\0", 8));
  EXPECT_EQ(static_cast<uint8_t>(bin[8]), kPlanBinaryVersion);
  EXPECT_GT(bin.size(), 8u + 4 + 8 + 32);
}

TEST(PlanIoTest, RejectsCorruptedBinary) {
  const UnitTable t = TestTable();
  std::string bin = PlanToBinary(MixedPlan(t), t);
  for (size_t pos : {size_t{25}, bin.size() / 2, bin.size() - 1}) {
    std::string bad = bin;
    bad[pos] ^= 0x10;
    auto r = PlanFromBinary(bad, t, "x/plan.bin");
    ASSERT_FALSE(r.ok()) << pos;
    EXPECT_NE(std::string(r.status().message()).find("x/plan.bin"), std::string::npos);
  }
  auto r = PlanFromBinary(bin, t, "x/plan.bin");
  EXPECT_TRUE(r.ok()) << r.status();
}

TEST(PlanIoTest, RejectsTruncatedBinary) {
  const UnitTable t = TestTable();
  const std::string bin = PlanToBinary(MixedPlan(t), t);
  for (size_t len : {size_t{0}, size_t{7}, size_t{30}, bin.size() - 1}) {
    auto r = PlanFromBinary(bin.substr(0, len), t, "p.bin");
    ASSERT_FALSE(r.ok()) << len;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
  }
}

TEST(PlanIoTest, RejectsPlanForAnotherModel) {
  const UnitTable a = TestTable("fp-A"), b = TestTable("fp-B");
  const Plan p = MixedPlan(a);
  for (int form = 0; form < 2; ++form) {
    auto r = form == 0 ? PlanFromBinary(PlanToBinary(p, a), b, "p.bin")
                       : PlanFromJson(PlanToJson(p, a), b, "p.json");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(std::string(r.status().message()).find("another model"), std::string::npos)
        << r.status();
  }
}

TEST(PlanIoTest, RejectsWrongUnitCount) {
  const UnitTable big = TestTable("fp-A", 2), small = TestTable("fp-A", 1);
  const Plan p = MixedPlan(big);
  auto r1 = PlanFromBinary(PlanToBinary(p, big), small, "p.bin");
  ASSERT_FALSE(r1.ok());
  EXPECT_NE(std::string(r1.status().message()).find("28 units"), std::string::npos) << r1.status();
  auto r2 = PlanFromJson(PlanToJson(p, big), small, "p.json");
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(std::string(r2.status().message()).find("14"), std::string::npos) << r2.status();
}

TEST(PlanIoTest, RejectsUnknownActionNamingTheUnit) {
  const UnitTable t = TestTable();
  Plan p = MixedPlan(t);
  p.actions[9] = 7;  // out of range
  auto r = PlanFromBinary(PlanToBinary(p, t), t, "p.bin");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("unit 9 (layer 0 gate_proj chunk 1)"),
            std::string::npos)
      << r.status();

  auto j = nlohmann::json::parse(PlanToJson(MixedPlan(t), t));
  j["units"][5]["action"] = "2.5";
  auto r2 = PlanFromJson(j.dump(), t, "p.json");
  ASSERT_FALSE(r2.ok());
  const std::string msg(r2.status().message());
  EXPECT_NE(msg.find("p.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unit 5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"2.5\""), std::string::npos) << msg;
}

TEST(PlanIoTest, RejectsMalformedJson) {
  const UnitTable t = TestTable();
  EXPECT_FALSE(PlanFromJson("{not json", t, "p.json").ok());
  EXPECT_FALSE(PlanFromJson("[]", t, "p.json").ok());
  auto j = nlohmann::json::parse(PlanToJson(MixedPlan(t), t));
  j["units"][2]["layer"] = 1;  // disagrees with the table
  auto r = PlanFromJson(j.dump(), t, "p.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("units[2]"), std::string::npos) << r.status();
  j = nlohmann::json::parse(PlanToJson(MixedPlan(t), t));
  j["units"][2]["action"] = 4;  // a number, not a name
  EXPECT_FALSE(PlanFromJson(j.dump(), t, "p.json").ok());
}

TEST(PlanIoTest, MissingFileIsAnError) {
  const UnitTable t = TestTable();
  auto r = ReadPlanFile("/nonexistent/plan.bin", t);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("/nonexistent/plan.bin"), std::string::npos);
}

}  // namespace
}  // namespace windquant::plan
