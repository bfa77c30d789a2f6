// libFuzzer-style target: the Actor gRPC service over a real loopback server,
// serving both layers of a tiny random LLaMA (hidden 16, 2 layers, no files).
// Byte 0 picks the method (Forward or Calibrate with one message, or
// FinishCalibration, GetStageInfo), the rest is parsed as its request; inputs
// that do not parse are skipped. Seeds are valid requests (hidden states of
// the right shape, a plan for the stage's table once fitted). After every
// call: an error is one line and not INTERNAL/UNKNOWN (bad input is the
// caller's error, named), and a failed call leaves the stage info (fitted,
// fingerprint) as it was.
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <google/protobuf/stubs/logging.h>
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "actor/actor_service.h"
#include "common/net/server.h"
#include "common/quant/table_fingerprint.h"
#include "common/stage/stage_worker.h"
#include "common/testing/fuzz_driver.h"
#include "common/transport/hidden_states_codec.h"
#include "windquant/v1/actor.grpc.pb.h"

namespace windquant::actor {
namespace {

using testing::CheckRefusedCall;
using testing::FuzzFail;

enum Method : uint8_t { kForward, kCalibrate, kFinish, kInfo, kNumMethods };

constexpr int64_t kHidden = 16;

model::LlamaWeights TinyWeights() {
  model::LlamaConfig c;
  c.hidden_size = kHidden;
  c.intermediate_size = 24;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 4;
  c.vocab_size = 32;
  c.max_position_embeddings = 64;
  at::manual_seed(11);
  const int64_t h = c.hidden_size, q = 16, kv = 8, in = c.intermediate_size;
  const std::vector<std::vector<int64_t>> shapes = {{q, h},  {kv, h}, {kv, h}, {h, q},
                                                    {in, h}, {in, h}, {h, in}};
  model::LlamaWeights w;
  w.config = c;
  for (int l = 0; l < 2; ++l) {
    model::LayerWeights lw;
    for (int m = 0; m < model::kNumMatrices; ++m) lw.linear[m] = at::randn(shapes[m]) * 0.2;
    lw.input_layernorm = at::ones({h});
    lw.post_attention_layernorm = at::ones({h});
    w.layers.push_back(std::move(lw));
  }
  return w;
}

struct Harness {
  std::unique_ptr<stage::StageWorker> worker;
  std::unique_ptr<ActorService> service;
  std::unique_ptr<net::GrpcServer> server;
  std::unique_ptr<v1::Actor::Stub> stub;

  Harness() {
    stage::StageWorkerOptions o;
    o.units.chunk_size = 8;
    auto w = stage::StageWorker::FromWeights(TinyWeights(), o);
    if (!w.ok()) FuzzFail(std::string(w.status().message()));
    worker = *std::move(w);
    ActorIdentity id;
    id.actor_id = "actor-s0-r0";
    id.model_key = "fuzz";
    service = std::make_unique<ActorService>(worker.get(), id, nullptr, nullptr);
    net::ServerOptions so;
    so.address = "127.0.0.1:0";
    server = std::make_unique<net::GrpcServer>(so);
    server->AddService(service.get(), v1::Actor::service_full_name());
    if (!server->Start().ok()) FuzzFail("cannot start the server");
    stub = v1::Actor::NewStub(
        grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  }

  std::string Snapshot() {
    grpc::ClientContext ctx;
    v1::StageInfo info;
    if (!stub->GetStageInfo(&ctx, v1::StageInfoRequest(), &info).ok()) FuzzFail("GetStageInfo");
    return info.SerializeAsString();
  }
};

Harness& TheHarness() {
  static Harness* h = new Harness();  // lives until exit: the server's threads use it
  return *h;
}

template <typename Req, typename Resp, typename Stream>
grpc::Status OneMessage(Stream stream, const Req& req) {
  stream->Write(req);
  stream->WritesDone();
  Resp resp;
  while (stream->Read(&resp)) {
  }
  return stream->Finish();
}

grpc::Status Call(Harness& h, Method m, const uint8_t* data, size_t size, bool* parsed) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  const int n = static_cast<int>(size);
  switch (m) {
    case kForward: {
      v1::ForwardRequest req;
      if (!(*parsed = req.ParseFromArray(data, n))) return grpc::Status::OK;
      return OneMessage<v1::ForwardRequest, v1::ForwardResponse>(h.stub->Forward(&ctx), req);
    }
    case kCalibrate: {
      v1::CalibrateRequest req;
      if (!(*parsed = req.ParseFromArray(data, n))) return grpc::Status::OK;
      return OneMessage<v1::CalibrateRequest, v1::CalibrateResponse>(h.stub->Calibrate(&ctx), req);
    }
    case kFinish: {
      v1::FinishCalibrationRequest req;
      v1::FinishCalibrationReply reply;
      if (!(*parsed = req.ParseFromArray(data, n))) return grpc::Status::OK;
      return h.stub->FinishCalibration(&ctx, req, &reply);
    }
    default: {
      v1::StageInfoRequest req;
      v1::StageInfo reply;
      if (!(*parsed = req.ParseFromArray(data, n))) return grpc::Status::OK;
      return h.stub->GetStageInfo(&ctx, req, &reply);
    }
  }
}

std::string WithMethod(Method m, const google::protobuf::Message& msg) {
  return std::string(1, static_cast<char>(m)) + msg.SerializeAsString();
}

}  // namespace
}  // namespace windquant::actor

namespace windquant::testing {

std::vector<std::string> WqFuzzSeeds() {
  using namespace windquant::actor;  // NOLINT: the target's own names
  // Mutated strings are often invalid UTF-8: protobuf refuses them (the
  // input is skipped) and would log each one.
  google::protobuf::SetLogHandler(nullptr);
  std::vector<std::string> seeds;
  at::manual_seed(5);
  v1::HiddenStates hidden;
  transport::EncodeHiddenStates(at::randn({1, 4, kHidden}), 0, &hidden);
  v1::CalibrateRequest calib;
  *calib.mutable_hidden() = hidden;
  seeds.push_back(WithMethod(kCalibrate, calib));
  v1::FinishCalibrationRequest finish;
  finish.set_calibration_fingerprint("calib");
  seeds.push_back(WithMethod(kFinish, finish));
  v1::ForwardRequest fp;
  *fp.mutable_hidden() = hidden;
  seeds.push_back(WithMethod(kForward, fp));
  // A plan for the fitted table: every unit at action 2 (4 bits). The table
  // exists once the Calibrate and FinishCalibration seeds ran (seeds run in order).
  v1::ForwardRequest planned = fp;
  planned.set_plan_id("plan-1");
  v1::Plan* plan = planned.mutable_plan();
  plan->set_plan_id("plan-1");
  plan->set_model_fingerprint(quant::TableFingerprint("fuzz", "calib"));
  const int units = 2 * (5 * 2 + 2 + 3);  // per layer: q,k,v,gate,up and o read 16, down 24
  for (int u = 0; u < units; ++u) plan->add_actions(2);
  seeds.push_back(WithMethod(kForward, planned));
  seeds.push_back(WithMethod(kInfo, v1::StageInfoRequest()));
  return seeds;
}

}  // namespace windquant::testing

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace windquant::actor;  // NOLINT
  if (size == 0) return 0;
  Harness& h = TheHarness();
  const Method m = static_cast<Method>(data[0] % kNumMethods);
  const std::string before = h.Snapshot();
  bool parsed = false;
  const grpc::Status s = Call(h, m, data + 1, size - 1, &parsed);
  if (!parsed || s.ok()) return 0;
  CheckRefusedCall(static_cast<int>(m), s, h.Snapshot() != before, "the stage");
  return 0;
}
