// quant.granularity: tensor (issue 37 way (b), docs/gguf.md) through the GGUF export: one
// unit per linear, so the exact mapping holds the plan itself.
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/config/run_config.h"
#include "common/export/gguf_exporter.h"
#include "common/export/gguf_exporter_test_fixture.h"
#include "common/export/gguf_format.h"
#include "common/export/gguf_llama.h"
#include "common/plan/action.h"
#include "common/plan/plan.h"
#include "common/testing/scoped_test_dir.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace windquant::exporter {
namespace {

using gguf::TensorType;
using test_fixture::BuildFixture;
using test_fixture::Fixture;
using test_fixture::Inputs;
using test_fixture::PythonCheck;
using ::windquant::testing::IsOk;

// The same shape at `quant.granularity: tensor`, the chunk size the run config resolves
// it to: one unit per linear.
const Fixture& Tensor256() {
  static const Fixture* f = [] {
    constexpr char kYaml[] =
        "model: {dir: m}\ncalibration: {text: c.txt}\n"
        "evaluation: {selection: {text: s.txt}, heldout: {text: h.txt}}\n";
    auto c = config::ParseRunConfig(kYaml, "tensor.yaml", {"quant.granularity=tensor"});
    if (!c.ok()) std::abort();
    return BuildFixture(256, 512, 1, 64, c->quant.chunk_size, "gguf_test_model_tensor");
  }();
  return *f;
}

// quant.granularity: tensor (issue 37 way (b)): every linear is one unit spanning all its
// columns, so a plan takes one action per tensor and the exact mapping holds each in the
// action's own type: the file's bits per weight of a linear are that type's, within the
// type's block overhead of the plan's bits (Q2_K's 0.625 over its 2 code bits is the
// largest; the plan counts row scales and salient entries instead), and nothing ruled a
// smaller type out for its blocks (`why` names only grids that do not nest; none for TQ1_0).
TEST(GgufExporterTest, TensorGranularPlansAreHeldExactlyOneTypePerTensor) {
  const Fixture& f = Tensor256();
  testing::ScopedTestDir dir("gguf_export_tensor");
  const plan::UnitTable& t = f.fits.table();
  ASSERT_EQ(t.units.size(), static_cast<size_t>(model::kNumMatrices));
  for (const plan::Unit& u : t.units) {
    EXPECT_EQ(u.col_begin, 0);
    EXPECT_EQ(u.cols, u.matrix == static_cast<int>(model::Matrix::kDown) ? 512 : 256);
  }
  // q k v o gate up down: 3, 2, 1.58, 4, 8, 16, 2 bit.
  const int by_matrix[7] = {3, 4, 5, 2, 1, 0, 4};
  const TensorType want[7] = {TensorType::kQ3_K, TensorType::kQ2_K, TensorType::kTQ1_0,
                              TensorType::kQ4_0, TensorType::kQ8_0, TensorType::kF16,
                              TensorType::kQ2_K};
  std::vector<int> a(t.units.size());
  for (const plan::Unit& u : t.units) a[u.id] = by_matrix[u.matrix];
  const plan::Plan plan = plan::Plan::Make(t, a, "tensor", 0);
  const ExportInputs in = Inputs(f.weights, f.fits, &plan, f.model_dir);
  const std::string path = dir.path() + "/t.gguf";
  auto report = WriteGguf(in, path);
  ASSERT_THAT(report.status(), IsOk());
  ASSERT_THAT(VerifyGguf(in, path, "t", &*report), IsOk());
  constexpr double kLargestBlockOverheadBits = 0.625;  // Q2_K: 2.625 bits for 2-bit codes
  int linears = 0;
  for (const GgufTensorReport& r : report->tensors) {
    if (!r.linear) continue;
    int m = 0;
    while (m < model::kNumMatrices && r.name != gguf::LinearName(0, m)) ++m;
    ASSERT_LT(m, model::kNumMatrices) << r.name;
    ++linears;
    EXPECT_EQ(r.type, want[m]) << r.name << " " << gguf::TensorTypeName(r.type);
    EXPECT_EQ(r.actions,
              absl::StrCat(std::string(plan::ActionName(plan::kAllActions[by_matrix[m]])), " x1"))
        << r.name;
    const double file_bits = static_cast<double>(r.bytes) * 8 / static_cast<double>(r.weights);
    EXPECT_EQ(file_bits, gguf::TypeBits(want[m])) << r.name;
    EXPECT_NEAR(file_bits, r.plan_bits / static_cast<double>(r.weights), kLargestBlockOverheadBits)
        << r.name;
    EXPECT_EQ(r.why.find("block"), std::string::npos) << r.name << ": " << r.why;
    EXPECT_EQ(r.why.find("multiple"), std::string::npos) << r.name << ": " << r.why;
    if (want[m] == TensorType::kTQ1_0) EXPECT_EQ(r.why, "") << r.name;
  }
  EXPECT_EQ(linears, model::kNumMatrices);
  std::printf("tensor-granular: GGUF bits of the linears %.4f, the plan's %.4f\n",
              report->LinearBits(), report->PlanBits());
  EXPECT_NEAR(report->LinearBits(), report->PlanBits(), kLargestBlockOverheadBits);
  const nlohmann::json py = PythonCheck(in, path, dir.path());
  EXPECT_EQ(py.value("linears", -1), model::kNumMatrices);
  EXPECT_EQ(py["types"].value("Q2_K", 0), 2);
  EXPECT_EQ(py["types"].value("TQ1_0", 0), 1);
  EXPECT_EQ(py.value("salient_changed", int64_t{-1}), report->salient_changed);
}

}  // namespace
}  // namespace windquant::exporter
