#include "common/quant/stage_fitter.h"

#include <memory>
#include <vector>

#include <ATen/ATen.h>

#include "common/testing/scoped_test_dir.h"
#include "common/testing/status_matchers.h"
#include "common/testing/tiny_weights.h"
#include "gtest/gtest.h"

namespace windquant::quant {
namespace {

using ::windquant::testing::StatusIs;

model::LlamaWeights TinyWeights(int64_t layers) { return testing::TinyLayerWeights(layers); }

// The model of layers [first, end) of `w` (sharing its tensors), as a stage holds them.
std::shared_ptr<const model::LlamaModel> Stage(const model::LlamaWeights& w, int64_t first,
                                               int64_t end) {
  model::LlamaWeights part;
  part.config = w.config;
  part.first_layer = first;
  part.layers.assign(w.layers.begin() + first, w.layers.begin() + end);
  return std::make_shared<const model::LlamaModel>(std::move(part));
}

std::shared_ptr<const model::LlamaModel> TinyModel(int64_t layers) {
  return Stage(TinyWeights(layers), 0, layers);
}

std::vector<at::Tensor> Batches() {
  at::manual_seed(9);
  return {at::randn({2, 8, 16}), at::randn({3, 5, 16})};
}

StageFitterOptions Options(Compensation compensation, const std::string& cache_dir) {
  StageFitterOptions o;
  o.units.chunk_size = 8;
  o.compensation = compensation;
  o.cache_dir = cache_dir;
  return o;
}

// Runs a pass of `fitter` over `batches`, returning what leaves the range per batch.
std::vector<at::Tensor> Pass(StageFitter& fitter, const std::vector<at::Tensor>& batches) {
  fitter.StartPass();
  std::vector<at::Tensor> out;
  for (const at::Tensor& b : batches) {
    absl::StatusOr<at::Tensor> o = fitter.Calibrate(b);
    EXPECT_TRUE(o.ok()) << o.status();
    out.push_back(o.ok() ? *o : b);
  }
  return out;
}

void ExpectSameUnits(const plan::UnitTable& got, const plan::UnitTable& want, size_t want_begin) {
  for (size_t i = 0; i < got.units.size(); ++i) {
    const plan::Unit& g = got.units[i];
    const plan::Unit& w = want.units[want_begin + i];
    EXPECT_EQ(g.layer, w.layer);
    EXPECT_EQ(g.error, w.error) << "unit " << i;
    EXPECT_EQ(g.bits, w.bits) << "unit " << i;
  }
}

// One path for every range: two stages fitted one after the other (the second fed the
// first's output) fit their layers exactly as one fitter over both does, factors too.
TEST(StageFitterTest, StagesFitTheirLayersAsTheWholeRangeDoes) {
  const model::LlamaWeights w = TinyWeights(3);
  StageFitter whole(Stage(w, 0, 3), Options(Compensation::kGptq, ""));
  Pass(whole, Batches());
  absl::StatusOr<StageQuantization> all = whole.FinishPass("table-fp", "id");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->fits.table().fingerprint, "table-fp");
  ASSERT_NE(all->fits.compensation(), nullptr);

  StageFitter first(Stage(w, 0, 1), Options(Compensation::kGptq, ""));
  StageFitter second(Stage(w, 1, 3), Options(Compensation::kGptq, ""));
  const std::vector<at::Tensor> mid = Pass(first, Batches());
  Pass(second, mid);
  absl::StatusOr<StageQuantization> a = first.FinishPass("table-fp", "id");
  absl::StatusOr<StageQuantization> b = second.FinishPass("table-fp", "id");
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << " " << b.status();
  ASSERT_EQ(a->fits.table().units.size() + b->fits.table().units.size(),
            all->fits.table().units.size());
  ExpectSameUnits(a->fits.table(), all->fits.table(), 0);
  ExpectSameUnits(b->fits.table(), all->fits.table(), a->fits.table().units.size());
  for (int m = 0; m < model::kNumMatrices; ++m) {
    const auto mat = static_cast<model::Matrix>(m);
    EXPECT_TRUE(at::equal(b->stats.at(2, mat).mean_abs, all->stats.at(2, mat).mean_abs));
  }
  absl::StatusOr<LayerFactors> got = b->fits.compensation()->Layer(2);
  absl::StatusOr<LayerFactors> want = all->fits.compensation()->Layer(2);
  ASSERT_TRUE(got.ok() && want.ok());
  for (int k = 0; k < kNumInputKinds; ++k) {
    EXPECT_TRUE(at::equal(got->kinds[k].data(), want->kinds[k].data())) << "kind " << k;
  }
}

TEST(StageFitterTest, NeedsAPassWithTokens) {
  StageFitter fitter(TinyModel(1), Options(Compensation::kNone, ""));
  EXPECT_THAT(fitter.Calibrate(Batches()[0]).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "not started"));
  EXPECT_THAT(fitter.FinishPass("t", "id").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "not started"));
  fitter.StartPass();
  EXPECT_THAT(fitter.FinishPass("t", "id").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "no tokens"));
}

// The fit cache: one entry per (identity, layer range), with the pass's statistics; the
// factors are not cached, and Factors() rebuilds them from the same batches.
TEST(StageFitterTest, CachesTheFitsOfItsRangeAndRebuildsFactors) {
  const ::windquant::testing::ScopedTestDir dir("wq-stage-fitter");
  const model::LlamaWeights w = TinyWeights(2);
  StageFitter fitter(Stage(w, 0, 2), Options(Compensation::kGptq, dir.path()));
  EXPECT_THAT(fitter.LoadCached("id").status(), StatusIs(absl::StatusCode::kNotFound));
  Pass(fitter, Batches());
  absl::StatusOr<StageQuantization> fitted = fitter.FinishPass("table-fp", "id");
  ASSERT_TRUE(fitted.ok()) << fitted.status();
  ASSERT_TRUE(fitted->cache_write.ok()) << fitted->cache_write;

  absl::StatusOr<CachedQuantization> hit = fitter.LoadCached("id");
  ASSERT_TRUE(hit.ok()) << hit.status();
  EXPECT_EQ(hit->fits.table().fingerprint, "table-fp");
  EXPECT_EQ(hit->fits.compensation(), nullptr);
  ExpectSameUnits(hit->fits.table(), fitted->fits.table(), 0);
  EXPECT_TRUE(at::equal(hit->stats.at(1, model::Matrix::kDown).mean_abs,
                        fitted->stats.at(1, model::Matrix::kDown).mean_abs));
  EXPECT_THAT(fitter.LoadCached("other").status(), StatusIs(absl::StatusCode::kNotFound));
  StageFitter stage(Stage(w, 1, 2), Options(Compensation::kGptq, dir.path()));
  EXPECT_THAT(stage.LoadCached("id").status(), StatusIs(absl::StatusCode::kNotFound));

  absl::StatusOr<std::shared_ptr<const GptqFactors>> factors = fitter.Factors(Batches());
  ASSERT_TRUE(factors.ok()) << factors.status();
  for (int64_t l = 0; l < 2; ++l) {
    absl::StatusOr<LayerFactors> got = (*factors)->Layer(l);
    absl::StatusOr<LayerFactors> want = fitted->fits.compensation()->Layer(l);
    ASSERT_TRUE(got.ok() && want.ok());
    for (int k = 0; k < kNumInputKinds; ++k) {
      EXPECT_TRUE(at::equal(got->kinds[k].data(), want->kinds[k].data()));
    }
  }

  StageFitterOptions off = Options(Compensation::kNone, dir.path());
  off.use_cache = false;
  StageFitter uncached(Stage(w, 0, 2), off);
  EXPECT_FALSE(uncached.caches());
  EXPECT_THAT(uncached.LoadCached("id").status(), StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace windquant::quant
