#include "common/search/baselines.h"

#include <algorithm>

#include <ATen/ATen.h>

#include "common/plan/effective_bits.h"
#include "common/quant/unit_table_builder.h"
#include "common/testing/synthetic_table.h"
#include "gtest/gtest.h"

namespace windquant::search {
namespace {

constexpr double kBudgetSlack = 1e-9;

// A real unit table: random LLaMA-shaped weights (3 layers, chunk 16) with random
// activation scales, fitted by the real operators.
const plan::UnitTable& RealTable() {
  static const plan::UnitTable* table = [] {
    at::manual_seed(11);
    model::LlamaWeights w;
    auto& c = w.config;
    c.hidden_size = 32;
    c.intermediate_size = 48;
    c.num_hidden_layers = 3;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.head_dim = 8;
    c.vocab_size = 50;
    c.tie_word_embeddings = true;
    quant::ActivationStats stats;
    stats.layers.resize(3);
    const int64_t out[7] = {32, 16, 16, 32, 48, 48, 32};
    const int64_t in[7] = {32, 32, 32, 32, 32, 32, 48};
    for (int l = 0; l < 3; ++l) {
      model::LayerWeights lw;
      for (int m = 0; m < 7; ++m) {
        // Heavy-tailed rows of different scale, so that units differ.
        lw.linear[m] =
            at::randn({out[m], in[m]}) * (0.05 + 0.1 * m) * at::rand({out[m], 1}).add(0.2);
        stats.layers[l][m].mean_abs = at::rand({in[m]}).pow(3).add(0.01);
      }
      w.layers.push_back(lw);
    }
    quant::UnitTableOptions o;
    o.chunk_size = 16;
    o.salient_fraction = 0.01;
    auto sq = quant::BuildStageFits(w, stats, o, "fp-test");
    if (!sq.ok()) std::abort();
    return new plan::UnitTable(sq->table());
  }();
  return *table;
}

// Bits recomputed from the formula, not from the table.
double RecountBits(const plan::UnitTable& t, const std::vector<int>& actions) {
  double bits = 0, n = 0;
  for (size_t i = 0; i < t.units.size(); ++i) {
    const plan::Unit& u = t.units[i];
    bits += plan::UnitEffectiveBits(u.rows, u.cols, u.salient_count, plan::kAllActions[actions[i]]);
    n += static_cast<double>(u.n());
  }
  return bits / n;
}

TEST(BaselinesTest, UniformReportsItsActualBits) {
  const plan::UnitTable& t = RealTable();
  for (plan::Action a : plan::kAllActions) {
    plan::Plan p = UniformPlan(t, a);
    EXPECT_NEAR(p.target_bits, RecountBits(t, p.actions), 1e-12);
    // Salient entries and scales make every action except 16 cost more than b_a.
    if (a != plan::Action::k16) {
      EXPECT_GT(p.target_bits, plan::BitsOf(a)) << plan::ActionName(a);
    }
  }
}

TEST(BaselinesTest, EveryBudgetedPlanFits) {
  const plan::UnitTable& t = RealTable();
  // Per-row FP16 scales cost 16/16 bits per weight here: the floor is ~2.8 bits.
  const double lo = MinEffectiveBits(t);
  for (double b : {lo, lo + 0.1, lo + 0.5, 4.0, 6.0, 16.5}) {
    for (const char* m : {"greedy", "lagrange", "random"}) {
      absl::StatusOr<plan::Plan> p = std::string(m) == "greedy"     ? GreedyPlan(t, b)
                                     : std::string(m) == "lagrange" ? LagrangePlan(t, b)
                                                                    : RandomPlan(t, b, 5);
      ASSERT_TRUE(p.ok()) << m << " " << b << ": " << p.status();
      ASSERT_TRUE(p->Validate(t).ok());
      EXPECT_LE(RecountBits(t, p->actions), b + kBudgetSlack) << m << " at " << b;
      EXPECT_EQ(p->source, m);
    }
  }
}

TEST(BaselinesTest, GreedyAndLagrangeBeatRandomOnTheProxy) {
  const plan::UnitTable& t = RealTable();
  const double lo = MinEffectiveBits(t);
  for (double b : {lo + 0.2, 3.5, 4.5}) {
    auto g = GreedyPlan(t, b), l = LagrangePlan(t, b);
    ASSERT_TRUE(g.ok() && l.ok());
    for (uint64_t seed = 0; seed < 5; ++seed) {
      auto r = RandomPlan(t, b, seed);
      ASSERT_TRUE(r.ok());
      EXPECT_LE(ProxyError(t, g->actions), ProxyError(t, r->actions)) << b << " seed " << seed;
      EXPECT_LE(ProxyError(t, l->actions), ProxyError(t, r->actions)) << b << " seed " << seed;
    }
    // Greedy and Lagrange spend the budget: within one unit's largest step of it.
    EXPECT_GT(RecountBits(t, l->actions), b - 0.5) << b;
  }
}

TEST(BaselinesTest, LagrangeAtUniformBitsIsNoWorseThanUniform) {
  const plan::UnitTable& t = RealTable();
  for (plan::Action a : {plan::Action::k8, plan::Action::k4, plan::Action::k3, plan::Action::k2}) {
    const plan::Plan u = UniformPlan(t, a);
    auto l = LagrangePlan(t, u.target_bits);
    ASSERT_TRUE(l.ok()) << l.status();
    EXPECT_LE(RecountBits(t, l->actions), u.target_bits + kBudgetSlack);
    EXPECT_LE(ProxyError(t, l->actions), ProxyError(t, u.actions)) << plan::ActionName(a);
  }
}

TEST(BaselinesTest, RandomIsSeeded) {
  const plan::UnitTable& t = RealTable();
  auto a = RandomPlan(t, 3.0, 9), b = RandomPlan(t, 3.0, 9), c = RandomPlan(t, 3.0, 10);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->actions, b->actions);
  EXPECT_NE(a->actions, c->actions);
}

TEST(BaselinesTest, RejectsUnreachableBudget) {
  const plan::UnitTable& t = RealTable();
  const double lowest = MinEffectiveBits(t);
  EXPECT_GT(lowest, 1.0);
  EXPECT_FALSE(GreedyPlan(t, lowest - 0.01).ok());
  EXPECT_FALSE(LagrangePlan(t, lowest - 0.01).ok());
  EXPECT_FALSE(RandomPlan(t, lowest - 0.01, 1).ok());
  auto p = GreedyPlan(t, lowest);
  ASSERT_TRUE(p.ok());
  EXPECT_LE(RecountBits(t, p->actions), lowest + kBudgetSlack);
}

TEST(BaselinesTest, RepairBringsAPlanWithinTheBudgetByStepsDown) {
  const plan::UnitTable& t = RealTable();
  const plan::Plan eight = UniformPlan(t, plan::Action::k8);
  const double lo = MinEffectiveBits(t);
  // Within the budget: unchanged.
  EXPECT_EQ(RepairToBudget(t, eight.actions, eight.target_bits + 0.1), eight.actions);
  for (double b : {lo + 0.1, 3.5, 4.5}) {
    const std::vector<int> r = RepairToBudget(t, eight.actions, b);
    const double bits = RecountBits(t, r);
    EXPECT_LE(bits, b + kBudgetSlack) << b;
    double largest_step = 0;  // it stops as soon as the plan fits
    for (size_t i = 0; i < t.units.size(); ++i) {
      const plan::Unit& u = t.units[i];
      EXPECT_LE(u.bits[r[i]], u.bits[eight.actions[i]]) << "unit " << i << " moved up";
      largest_step = std::max(largest_step, u.bits[eight.actions[i]] - u.bits[r[i]]);
    }
    EXPECT_GT(bits, b - largest_step / static_cast<double>(t.TotalWeights())) << b;
    // Cheapest error per bit first: better on the proxy than random feasible
    // plans, away from the floor (next to it every plan is nearly forced).
    if (b < lo + 0.5) continue;
    for (uint64_t seed = 0; seed < 5; ++seed) {
      auto rnd = RandomPlan(t, b, seed);
      ASSERT_TRUE(rnd.ok());
      EXPECT_LT(ProxyError(t, r), ProxyError(t, rnd->actions)) << b << " seed " << seed;
    }
  }
  // Below the cheapest plan: every unit at its cheapest action.
  const std::vector<int> floor = RepairToBudget(t, eight.actions, lo - 0.5);
  EXPECT_NEAR(RecountBits(t, floor), lo, 1e-12);
}

// The walk order: the last units step down first, each to its cheapest before
// the one before it moves; nothing moves once the plan fits.
TEST(BaselinesTest, RepairInWalkOrderCutsTheEndOfTheWalk) {
  const plan::UnitTable& t = RealTable();
  const plan::Plan eight = UniformPlan(t, plan::Action::k8);
  const double lo = MinEffectiveBits(t);
  EXPECT_EQ(RepairToBudget(t, eight.actions, eight.target_bits + 0.1, RepairOrder::kWalk),
            eight.actions);
  for (double b : {lo + 0.1, 3.5, 4.5}) {
    const std::vector<int> r = RepairToBudget(t, eight.actions, b, RepairOrder::kWalk);
    EXPECT_LE(RecountBits(t, r), b + kBudgetSlack) << b;
    size_t first_moved = t.units.size();
    for (size_t i = 0; i < t.units.size(); ++i) {
      if (r[i] != eight.actions[i] && first_moved == t.units.size()) first_moved = i;
    }
    ASSERT_LT(first_moved, t.units.size()) << b;
    for (size_t i = first_moved + 1; i < t.units.size(); ++i) {
      const plan::Unit& u = t.units[i];
      EXPECT_EQ(u.bits[r[i]], *std::min_element(u.bits.begin(), u.bits.end())) << b << " " << i;
    }
    // One step less on the first unit moved would not fit.
    std::vector<int> less = r;
    less[first_moved] = eight.actions[first_moved];
    EXPECT_GT(RecountBits(t, less), b) << b;
    EXPECT_NE(r, RepairToBudget(t, eight.actions, b)) << b;  // not the proxy's choice
  }
}

TEST(BaselinesTest, ProxyErrorIsWeightShareWeighted) {
  const plan::UnitTable& t = RealTable();
  std::vector<int> a(t.units.size(), plan::ActionIndex(plan::Action::k2));
  double expect = 0, n = static_cast<double>(t.TotalWeights());
  for (const plan::Unit& u : t.units)
    expect += u.error[plan::ActionIndex(plan::Action::k2)] * static_cast<double>(u.n()) / n;
  EXPECT_NEAR(ProxyError(t, a), expect, 1e-15);
}

// The Lagrangian plan fits within the uniform plan's bits (up to its builder's slack).
constexpr double kAnchorBitsTolerance = 1e-9;

// UniformAnchors: uniform 4, 3 and 2-bit at their own bits, each followed by the
// Lagrangian plan at those same bits (within them, and not the uniform plan itself on a
// table whose units differ).
TEST(UniformAnchorsTest, PairEachUniformPlanWithTheLagrangianAtItsBits) {
  const plan::UnitTable t = testing::SyntheticTable(30, 3);
  auto anchors = UniformAnchors(t);
  ASSERT_TRUE(anchors.ok()) << anchors.status();
  ASSERT_EQ(anchors->size(), 6u);
  const char* names[] = {"uniform-4",          "lagrange@uniform-4", "uniform-3",
                         "lagrange@uniform-3", "uniform-2",          "lagrange@uniform-2"};
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ((*anchors)[i].first, names[i]);
  for (size_t i = 0; i < 6; i += 2) {
    const plan::Plan& u = (*anchors)[i].second;
    const plan::Plan& l = (*anchors)[i + 1].second;
    const plan::Action a = kAnchorActions[i / 2];
    EXPECT_EQ(u.actions, UniformPlan(t, a).actions);
    EXPECT_LE(t.EffectiveBits(l.actions), t.EffectiveBits(u.actions) + kAnchorBitsTolerance);
    EXPECT_NE(l.actions, u.actions) << names[i + 1];
  }
}

}  // namespace
}  // namespace windquant::search
