// libFuzzer-style target: the Evaluator gRPC service over a real loopback
// server, evaluating plans of a tiny random LLaMA (hidden 16, 2 layers, two
// in-process stages, no files) whose unit table is calibrated at start-up.
// Byte 0 picks SubmitPlan or EvaluatePlan, the rest is parsed as its request;
// inputs that do not parse are skipped. Seeds are valid plans. After every
// call: an error is one line and not INTERNAL/UNKNOWN, a failed call leaves
// the queue (its depth and its folder of persisted plans) and lambda as they
// were, and a perplexity that comes back is finite.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <google/protobuf/stubs/logging.h>
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/net/server.h"
#include "common/stage/stage_worker.h"
#include "common/testing/fuzz_driver.h"
#include "common/transport/local_activation_transport.h"
#include "evaluator/evaluation_queue.h"
#include "evaluator/evaluator_service.h"
#include "evaluator/pipeline_evaluator.h"
#include "windquant/v1/evaluator.grpc.pb.h"

namespace windquant::evaluator {
namespace {

using testing::CheckRefusedCall;
using testing::FuzzFail;

enum Method : uint8_t { kSubmit, kEvaluate, kNumMethods };

model::LlamaWeights TinyWeights(int64_t first, int64_t end, bool head) {
  model::LlamaConfig c;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 4;
  c.vocab_size = 32;
  c.max_position_embeddings = 64;
  c.bos_token_id = 1;
  at::manual_seed(11);
  const int64_t h = 16, in = 24;
  const std::vector<std::vector<int64_t>> shapes = {{16, h}, {8, h},  {8, h}, {h, 16},
                                                    {in, h}, {in, h}, {h, in}};
  model::LlamaWeights all;
  all.config = c;
  for (int l = 0; l < 2; ++l) {
    model::LayerWeights lw;
    for (int m = 0; m < model::kNumMatrices; ++m) lw.linear[m] = at::randn(shapes[m]) * 0.2;
    lw.input_layernorm = at::ones({h});
    lw.post_attention_layernorm = at::ones({h});
    all.layers.push_back(std::move(lw));
  }
  all.embed_tokens = at::randn({c.vocab_size, h});
  all.final_norm = at::ones({h});
  all.lm_head = all.embed_tokens;
  model::LlamaWeights w;
  w.config = c;
  w.first_layer = first;
  w.layers.assign(all.layers.begin() + first, all.layers.begin() + end);
  if (head) {
    w.embed_tokens = all.embed_tokens;
    w.final_norm = all.final_norm;
    w.lm_head = all.lm_head;
  }
  return w;
}

std::vector<int32_t> Ids(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = static_cast<int32_t>(2 + rng() % 30);
  return ids;
}

struct Harness {
  std::string queue_dir;
  std::vector<std::unique_ptr<stage::StageWorker>> workers;
  std::vector<std::unique_ptr<transport::LocalActivationTransport>> transports;
  std::vector<transport::ActivationTransport*> stages;
  std::unique_ptr<PipelineEvaluator> pipeline;
  plan::UnitTable table;
  std::unique_ptr<EvaluationQueue> queue;
  std::unique_ptr<EvaluatorService> service;
  std::unique_ptr<net::GrpcServer> server;
  std::unique_ptr<v1::Evaluator::Stub> stub;

  Harness() {
    queue_dir = absl::StrCat(std::filesystem::temp_directory_path().string(), "/wq-evaluator-fuzz-",
                             getpid());
    std::filesystem::remove_all(queue_dir);
    stage::StageWorkerOptions so;
    so.units.chunk_size = 8;
    for (int s = 0; s < 2; ++s) {
      auto w = stage::StageWorker::FromWeights(TinyWeights(s, s + 1, false), so);
      if (!w.ok()) FuzzFail(std::string(w.status().message()));
      workers.push_back(*std::move(w));
      transports.push_back(std::make_unique<transport::LocalActivationTransport>(
          workers.back().get(), absl::StrCat("stage ", s)));
      stages.push_back(transports.back().get());
    }
    PipelineEvaluatorOptions po;
    po.context = 16;
    po.batch_size = 4;
    po.calib_slice_tokens = 60;
    po.eval_slice_tokens = 60;
    po.calibration_samples = 4;
    po.calibration_seq_len = 16;
    po.calibration_batch = 2;
    auto p = PipelineEvaluator::FromWeights(TinyWeights(0, 0, true), po, Ids(200, 1), Ids(200, 2));
    if (!p.ok()) FuzzFail(std::string(p.status().message()));
    pipeline = *std::move(p);
    auto tables = pipeline->Calibrate(stages, pipeline->CalibrationFingerprint());
    if (!tables.ok()) FuzzFail(std::string(tables.status().message()));
    table = plan::UnitTable::Merge(*tables).value();
    rl::LagrangeOptions lagrange;
    queue = std::make_unique<EvaluationQueue>(
        pipeline.get(), std::vector<std::vector<transport::ActivationTransport*>>{stages},
        rl::EnvironmentOptions(), lagrange, queue_dir, 8,
        [](const Report&) -> absl::StatusOr<ReportAnswer> { return ReportAnswer(); });
    service = std::make_unique<EvaluatorService>(
        queue.get(), [this]() -> absl::StatusOr<plan::UnitTable> { return table; });
    net::ServerOptions o;
    o.address = "127.0.0.1:0";
    server = std::make_unique<net::GrpcServer>(o);
    server->AddService(service.get(), v1::Evaluator::service_full_name());
    if (!server->Start().ok()) FuzzFail("cannot start the server");
    stub = v1::Evaluator::NewStub(
        grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  }

  std::string Snapshot() const {
    std::vector<std::string> files;
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator(queue_dir, ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
      files.push_back(it->path().filename().string());
    }
    std::sort(files.begin(), files.end());
    std::string out = absl::StrCat(queue->depth(), "|", queue->lambda());
    for (const auto& f : files) absl::StrAppend(&out, "|", f);
    return out;
  }
};

Harness& TheHarness() {
  static Harness* h = new Harness();  // lives until exit: the server's threads use it
  return *h;
}

std::string WithMethod(Method m, const google::protobuf::Message& msg) {
  return std::string(1, static_cast<char>(m)) + msg.SerializeAsString();
}

}  // namespace
}  // namespace windquant::evaluator

namespace windquant::testing {

std::vector<std::string> WqFuzzSeeds() {
  using namespace windquant::evaluator;  // NOLINT: the target's own names
  const plan::UnitTable& table = TheHarness().table;
  // Mutated strings are often invalid UTF-8: protobuf refuses them (the
  // input is skipped) and would log each one.
  google::protobuf::SetLogHandler(nullptr);
  std::vector<std::string> seeds;
  for (int a : {1, 2, 4}) {
    v1::Plan plan;
    plan.set_plan_id(absl::StrCat("plan-", a));
    plan.set_model_fingerprint(table.fingerprint);
    for (size_t u = 0; u < table.units.size(); ++u) plan.add_actions(a);
    v1::SubmitPlanRequest submit;
    *submit.mutable_plan() = plan;
    submit.set_actor_id("actor-s0-r0");
    submit.set_episode_id(a);
    seeds.push_back(WithMethod(kSubmit, submit));
    v1::EvaluatePlanRequest evaluate;
    *evaluate.mutable_plan() = plan;
    seeds.push_back(WithMethod(kEvaluate, evaluate));
  }
  return seeds;
}

}  // namespace windquant::testing

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace windquant;             // NOLINT
  using namespace windquant::evaluator;  // NOLINT
  if (size == 0) return 0;
  Harness& h = TheHarness();
  const Method m = static_cast<Method>(data[0] % kNumMethods);
  const std::string before = h.Snapshot();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  const int n = static_cast<int>(size - 1);
  grpc::Status s;
  if (m == kSubmit) {
    v1::SubmitPlanRequest req;
    v1::SubmitPlanReply reply;
    if (!req.ParseFromArray(data + 1, n)) return 0;
    s = h.stub->SubmitPlan(&ctx, req, &reply);
  } else {
    v1::EvaluatePlanRequest req;
    v1::EvaluationReport reply;
    if (!req.ParseFromArray(data + 1, n)) return 0;
    s = h.stub->EvaluatePlan(&ctx, req, &reply);
    if (s.ok() && !std::isfinite(reply.perplexity())) FuzzFail("non-finite perplexity returned");
  }
  if (s.ok()) return 0;
  CheckRefusedCall(static_cast<int>(m), s, h.Snapshot() != before, "the queue");
  return 0;
}
