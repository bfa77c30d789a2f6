// No host traffic in a stage forward (issue 35 item 3): after a warm-up forward, a
// forward through LlamaModel's decoder layers, and through a QuantizedStage's plan model
// (its layers' codes made by the warm-up, with or without compensation, then decoded on
// the device: plan_codes.h), dispatches no op that brings a value or a tensor back to the
// host.
//
// How: an at::RecordFunction observer (thread-local, with inputs) sees every ATen op
// the forward dispatches on this thread and records
//   - a host sync: aten::_local_scalar_dense (what .item(), a Scalar conversion and
//     `if (tensor)` end in), aten::item, aten::is_nonzero, aten::equal (a bool on the
//     host), aten::nonzero and aten::masked_select (their output size is read on the
//     host);
//   - a copy to the CPU from another device: aten::copy_ into a CPU tensor from a
//     non-CPU one, aten::_to_copy of a non-CPU tensor to the CPU.
// What it cannot see: host code reading a CPU tensor's memory (data_ptr) without an op.
// On the CPU that is no traffic; on a GPU such a tensor would first have come over by a
// copy_, which is caught. On this CPU-only machine a device-to-host copy cannot happen,
// so the copy check is shown to work with a meta tensor, and the sync check with a
// deliberately inserted .item() in a helper the forward calls (a LinearSource).
#include <ATen/record_function.h>
#include <c10/core/GradMode.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "common/model/llama_model.h"
#include "common/quant/calibration.h"
#include "common/quant/gptq.h"
#include "common/quant/gptq_torch.h"
#include "common/quant/quantized_stage.h"
#include "common/quant/unit_table_builder.h"
#include "common/testing/tiny_weights.h"

namespace windquant::quant {
namespace {

// What the observer saw; one recorder at a time (RecordFunction's start callback is a
// plain function pointer).
std::mutex g_mu;
std::vector<std::string>* g_seen = nullptr;

bool IsCpu(const c10::IValue& v) { return v.isTensor() && v.toTensor().device().is_cpu(); }
bool IsOffCpu(const c10::IValue& v) { return v.isTensor() && !v.toTensor().device().is_cpu(); }

std::unique_ptr<at::ObserverContext> OnOp(const at::RecordFunction& fn) {
  const std::string name = fn.name();
  static const char* const kSyncs[] = {
      "aten::_local_scalar_dense", "aten::item", "aten::is_nonzero", "aten::equal", "aten::nonzero",
      "aten::masked_select"};
  std::string hit;
  for (const char* s : kSyncs) {
    if (name == s) hit = name + " (host sync)";
  }
  const auto inputs = fn.inputs();
  if (name == "aten::copy_" && inputs.size() >= 2 && IsCpu(inputs[0]) && IsOffCpu(inputs[1])) {
    hit = name + " (to cpu from " + inputs[1].toTensor().device().str() + ")";
  }
  if (name == "aten::_to_copy" && inputs.size() >= 4 && IsOffCpu(inputs[0]) &&
      inputs[3].isDevice() && inputs[3].toDevice().is_cpu()) {
    hit = name + " (to cpu from " + inputs[0].toTensor().device().str() + ")";
  }
  if (!hit.empty()) {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_seen != nullptr) g_seen->push_back(hit);
  }
  return nullptr;
}

// Records host traffic on this thread while alive.
class HostTrafficRecorder {
 public:
  HostTrafficRecorder() {
    {
      std::lock_guard<std::mutex> lock(g_mu);
      g_seen = &seen_;
    }
    handle_ = at::addThreadLocalCallback(
        at::RecordFunctionCallback(&OnOp).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
  }
  ~HostTrafficRecorder() {
    at::removeCallback(handle_);
    std::lock_guard<std::mutex> lock(g_mu);
    g_seen = nullptr;
  }
  std::vector<std::string> seen() {
    std::lock_guard<std::mutex> lock(g_mu);
    return seen_;
  }

 private:
  std::vector<std::string> seen_;
  at::CallbackHandle handle_;
};

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += s + "; ";
  return out;
}

// A stage's decoder-layer forward after a warm-up, as the observer sees it.
std::vector<std::string> TrafficOfForward(const model::LlamaModel& m, const at::Tensor& hidden) {
  c10::NoGradGuard no_grad;
  m.ForwardLayers(hidden, m.first_layer(), m.end_layer());  // warm-up (one-time work)
  HostTrafficRecorder recorder;
  const at::Tensor out = m.ForwardLayers(hidden, m.first_layer(), m.end_layer());
  EXPECT_EQ(out.sizes(), hidden.sizes());
  return recorder.seen();
}

// The stored weights, with an optional host sync slipped into the helper that hands out
// a layer's linears (what a careless plan source would do).
class SyncingLinears : public model::LinearSource {
 public:
  std::array<at::Tensor, model::kNumMatrices> Linears(
      int64_t, const model::LayerWeights& stored) const override {
    std::array<at::Tensor, model::kNumMatrices> out;
    for (int m = 0; m < model::kNumMatrices; ++m) {
      out[m] = stored.linear[m];
      if (m == 0) {
        // The deliberate host sync: a scale read back to the host.
        const double scale = out[m].abs().max().item<double>();
        out[m] = out[m] * (scale / scale);
      }
    }
    return out;
  }
};

std::shared_ptr<const model::LlamaModel> TinyModel(model::ComputeDtype dtype) {
  model::ComputeOptions compute;
  compute.dtype = dtype;
  return std::make_shared<const model::LlamaModel>(testing::TinyLayerWeights(3), compute);
}

at::Tensor Hidden(const model::LlamaModel& m) {
  at::manual_seed(11);
  return at::randn({2, 9, 16}).to(m.dtype());
}

class ForwardHostTrafficTest : public ::testing::TestWithParam<model::ComputeDtype> {};

TEST_P(ForwardHostTrafficTest, DecoderLayersMakeNoHostTraffic) {
  const auto m = TinyModel(GetParam());
  const std::vector<std::string> seen = TrafficOfForward(*m, Hidden(*m));
  EXPECT_TRUE(seen.empty()) << Join(seen);
}

// A QuantizedStage's plan model (every action, salient entries), without error
// compensation (`gptq` null) or with it (GPTQ on the first forward, with these options).
std::shared_ptr<const model::LlamaModel> PlanModel(model::ComputeDtype dtype,
                                                   const GptqOptions* gptq) {
  const auto fp = TinyModel(dtype);
  Calibrator calibrator(*fp, fp->first_layer(), fp->end_layer());
  {
    c10::NoGradGuard no_grad;
    EXPECT_TRUE(calibrator.RunStage(Hidden(*fp)).ok());
  }
  UnitTableOptions o;
  o.chunk_size = 8;
  o.salient_fraction = 0.02;
  auto fits = BuildStageFits(fp->weights(), calibrator.Finish(), o, "fp");
  EXPECT_TRUE(fits.ok()) << fits.status();
  if (gptq != nullptr) {
    const auto f32 = TinyModel(model::ComputeDtype::kFloat32);
    auto factors = GptqFactors::FromInputs(*f32, 0, f32->end_layer(), {Hidden(*f32)}, *gptq);
    EXPECT_TRUE(factors.ok()) << factors.status();
    fits->set_compensation(std::make_shared<const GptqFactors>(*std::move(factors)));
  }
  auto stage = QuantizedStage::Create(fp, std::make_shared<const StageFits>(*std::move(fits)));
  EXPECT_TRUE(stage.ok()) << stage.status();
  std::vector<int> plan((*stage)->table().units.size());
  for (size_t i = 0; i < plan.size(); ++i)
    plan[i] = static_cast<int>((i * 5 + 2) % plan::kNumActions);
  auto planned = (*stage)->PlanModel(std::make_shared<const std::vector<int>>(plan));
  EXPECT_TRUE(planned.ok()) << planned.status();
  // The plan's linears reach the forward in the compute dtype.
  EXPECT_EQ((*planned)->LayerLinears(0)[0].scalar_type(), fp->dtype());
  return *planned;
}

TEST_P(ForwardHostTrafficTest, PlanModelOfAQuantizedStageMakesNoHostTraffic) {
  const auto m = PlanModel(GetParam(), nullptr);
  const std::vector<std::string> seen = TrafficOfForward(*m, Hidden(*m));
  EXPECT_TRUE(seen.empty()) << Join(seen);
}

TEST_P(ForwardHostTrafficTest, CompensatedPlanModelMakesNoHostTrafficAfterItsFirstForward) {
  for (bool torch_ops : {false, true}) {
    GptqOptions gptq;
    gptq.torch_ops = torch_ops;
    const auto m = PlanModel(GetParam(), &gptq);
    const std::vector<std::string> seen = TrafficOfForward(*m, Hidden(*m));
    EXPECT_TRUE(seen.empty()) << "torch ops " << torch_ops << ": " << Join(seen);
  }
}

// A plan model compensating with torch ops (as on a GPU: StageFits::ApplyToLayer) runs
// the forward of the CPU kernels' compensation (gptq_test states the tolerance per
// linear; here the forward's, float32).
TEST(CompensationWithTorchOpsTest, PlanModelGivesTheCpuKernelsForward) {
  GptqOptions cpu, torch_ops;
  torch_ops.torch_ops = true;
  cpu.block_columns = torch_ops.block_columns = 5;  // the tiny linears in blocks (GEMMs)
  const auto a = PlanModel(model::ComputeDtype::kFloat32, &cpu);
  const auto b = PlanModel(model::ComputeDtype::kFloat32, &torch_ops);
  c10::NoGradGuard no_grad;
  const at::Tensor x = Hidden(*a);
  const at::Tensor ya = a->ForwardLayers(x, 0, a->end_layer());
  const at::Tensor yb = b->ForwardLayers(x, 0, b->end_layer());
  EXPECT_LE((ya - yb).abs().max().item<double>(), 1e-4 * ya.abs().max().item<double>());
  // Not the FP forward: the plan is applied.
  const at::Tensor fp = TinyModel(model::ComputeDtype::kFloat32)->ForwardLayers(x, 0, 3);
  EXPECT_GT((ya - fp).abs().max().item<double>(), 1e-2 * fp.abs().max().item<double>());
}

// Error compensation with torch ops (gptq_torch.h, what a stage on a GPU runs) makes no
// host sync either: every scalar it needs (the factor's diagonal, scales) stays a tensor.
TEST(HostTrafficRecorderTest, CompensationWithTorchOpsMakesNoHostSync) {
  const int64_t rows = 16, in = 48;
  std::vector<float> scales(rows, 0.05f), offsets(rows, 0.01f);
  SalientSet salient;
  salient.index = {3, 40};
  salient.codes = {100, -90};
  salient.scale = 0.002f;
  const std::vector<ColumnUnit> units = {
      {0, 16, plan::Action::k3, scales.data(), nullptr, &salient},
      {16, 16, plan::Action::k1, scales.data(), offsets.data(), &salient},
      {32, 16, plan::Action::k16, nullptr, nullptr, &salient}};
  at::manual_seed(5);
  const at::Tensor a = at::randn({in, in}) * 0.1 + at::eye(in);
  const PackedUpper u = PackedUpper::Pack(at::linalg_cholesky(a.mm(a.t())).t().contiguous());
  at::Tensor w = at::randn({rows, in}) * 0.1, from = at::empty_like(w);
  GptqOptions o;
  o.block_columns = 20;
  HostTrafficRecorder recorder;
  CompensateLinearTorch(units, u, &w, &from, o);
  EXPECT_TRUE(recorder.seen().empty()) << Join(recorder.seen());
}

// Nor does the factorisation with torch ops (gptq_torch.h) that feeds it: from a Hessian
// with dead inputs to the compensated weights, every value stays a tensor; its outcome
// too, until CheckTorchFactors (one copy; on the CPU not even that). Through
// GptqFactors::Create with torch_ops as well.
TEST(HostTrafficRecorderTest, FactorisationWithTorchOpsMakesNoHostSync) {
  const int64_t rows = 16, in = 48;
  std::vector<float> scales(rows, 0.05f);
  const SalientSet none;
  const std::vector<ColumnUnit> units = {{0, 24, plan::Action::k3, scales.data(), nullptr, &none},
                                         {24, 24, plan::Action::k2, scales.data(), nullptr, &none}};
  at::manual_seed(6);
  const at::Tensor x = at::randn({100, in});
  at::Tensor h = x.t().mm(x).to(at::kDouble);
  h[7].zero_();
  h.select(1, 7).zero_();
  at::Tensor w = at::randn({rows, in}) * 0.1;
  GptqOptions o;
  o.block_columns = 20;
  o.torch_ops = true;
  StageHessians stage;
  stage.layers.resize(1);
  for (at::Tensor& k : stage.layers[0]) k = h.clone();
  HostTrafficRecorder recorder;
  absl::StatusOr<TorchFactor> f = InverseHessianFactorTorch(h, 0.01, "t");
  ASSERT_TRUE(f.ok()) << f.status();
  CompensateLinearTorch(units, f->u, &w, nullptr, o);
  EXPECT_TRUE(recorder.seen().empty()) << Join(recorder.seen());
  ASSERT_TRUE(GptqFactors::Create(std::move(stage), o).ok());
  EXPECT_TRUE(recorder.seen().empty()) << Join(recorder.seen());
  EXPECT_EQ(f->failure.item<int64_t>(), 0);  // the outcome was there all along
  EXPECT_FALSE(recorder.seen().empty());     // and reading it is seen
}

// The test above can fail: the same forward with a .item() in its linear source is caught.
TEST_P(ForwardHostTrafficTest, AnItemInTheForwardIsCaught) {
  const auto m = TinyModel(GetParam())->WithLinears(std::make_shared<SyncingLinears>());
  const std::vector<std::string> seen = TrafficOfForward(*m, Hidden(*m));
  ASSERT_FALSE(seen.empty());
  EXPECT_NE(Join(seen).find("aten::_local_scalar_dense"), std::string::npos) << Join(seen);
  // Once per layer of the timed forward (3 layers), whatever else .item() dispatches.
  int syncs = 0;
  for (const auto& s : seen) syncs += s.rfind("aten::_local_scalar_dense", 0) == 0;
  EXPECT_EQ(syncs, 3);
}

INSTANTIATE_TEST_SUITE_P(ComputeDtypes, ForwardHostTrafficTest,
                         ::testing::Values(model::ComputeDtype::kFloat32,
                                           model::ComputeDtype::kBFloat16),
                         [](const auto& info) {
                           return std::string(model::ComputeDtypeName(info.param));
                         });

// The copy check: a tensor brought to the CPU from another device is caught (the meta
// device stands in for a GPU here; the copy itself then fails, as it must).
TEST(HostTrafficRecorderTest, CatchesACopyToTheCpuFromAnotherDevice) {
  std::vector<std::string> seen;
  {
    HostTrafficRecorder recorder;
    const at::Tensor off = at::empty({4}, at::TensorOptions().device(at::kMeta));
    try {
      (void)off.to(at::kCPU);
    } catch (const c10::Error&) {
      // Meta tensors hold no data to copy; the observer saw the attempt first.
    }
    // Copies on the CPU and copies to another device are no host traffic.
    (void)at::ones({4}).to(at::kDouble);
    (void)at::ones({4}).to(at::kMeta);
    seen = recorder.seen();
  }
  ASSERT_FALSE(seen.empty());
  for (const auto& s : seen) EXPECT_NE(s.find("to cpu from meta"), std::string::npos) << s;
}

}  // namespace
}  // namespace windquant::quant
