// libFuzzer-style target: the Learner gRPC service over a real loopback
// server. Byte 0 picks the method (RegisterUnitTable, ReportEvaluation,
// StreamTransitions with one batch, GetUnitTable, GetRunStatus), the rest is
// parsed as its request; inputs that do not parse are skipped. Seeds are valid
// requests of a two-stage run over a synthetic 14-unit table, so mutations
// reach deep into validation. After every call:
//   - an error is one line;
//   - a failed call changed nothing: the run status (episodes, updates,
//     table completeness, lambda, ...) and unit_table.pb are as before;
//   - unit_table.pb, once written, reads back as a table the learner accepts.
// Driven by common/testing/fuzz_driver.cc (or libFuzzer's main under clang).
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <google/protobuf/stubs/logging.h>
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/net/server.h"
#include "common/rl/environment.h"
#include "common/rl/transition_codec.h"
#include "common/testing/fuzz_driver.h"
#include "common/testing/synthetic_table.h"
#include "learner/learner_core.h"
#include "learner/learner_service.h"
#include "windquant/v1/learner.grpc.pb.h"

namespace windquant::learner {
namespace {

using testing::CheckRefusedCall;
using testing::FuzzFail;

enum Method : uint8_t { kRegister, kReport, kStream, kGetTable, kStatus, kNumMethods };

plan::UnitTable WholeTable() {
  plan::UnitTable t = windquant::testing::SyntheticTable(14, 3);
  t.num_layers = 2;
  t.end_layer = 2;
  t.chunk_size = 16;
  return t;
}

LearnerCore::Options Config(const std::string& dir) {
  LearnerCore::Options c;
  c.dir = dir;
  c.stages = 2;
  c.replicas = 1;
  c.chunk_size = 16;
  c.curriculum.target_bits = {3.0};
  c.curriculum.min_updates = 1;
  c.curriculum.max_updates = 1000000;
  c.episodes_per_update = 2;
  c.checkpoint_every_updates = 1000000;
  c.policy.ppo.hidden = {8};
  c.policy.ppo.minibatch_size = 8;
  c.policy.ppo.epochs = 1;
  c.policy.ppo.max_policy_lag = 1000000;
  return c;
}

// The learner under test, its server and a client, made once per process.
struct Harness {
  std::string dir;
  std::unique_ptr<LearnerCore> core;
  std::unique_ptr<LearnerService> service;
  std::unique_ptr<net::GrpcServer> server;
  std::unique_ptr<v1::Learner::Stub> stub;

  Harness() {
    dir = absl::StrCat(std::filesystem::temp_directory_path().string(), "/wq-learner-fuzz-",
                       getpid());
    std::filesystem::remove_all(dir);
    auto c = LearnerCore::Create(Config(dir), nullptr);
    if (!c.ok()) FuzzFail(std::string(c.status().message()));
    core = *std::move(c);
    service = std::make_unique<LearnerService>(core.get());
    net::ServerOptions so;
    so.address = "127.0.0.1:0";
    server = std::make_unique<net::GrpcServer>(so);
    server->AddService(service.get(), v1::Learner::service_full_name());
    if (!server->Start().ok()) FuzzFail("cannot start the server");
    stub = v1::Learner::NewStub(
        grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  }
  ~Harness() {
    server->Shutdown(absl::Now());
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }

  // What a failed call must not change.
  std::string Snapshot() {
    v1::RunStatus s;
    grpc::ClientContext ctx;
    if (!stub->GetRunStatus(&ctx, v1::RunStatusRequest(), &s).ok()) FuzzFail("GetRunStatus");
    s.clear_connected_actors();
    absl::StatusOr<std::string> table = base::ReadFile(dir + "/unit_table.pb");
    return s.SerializeAsString() + "|" + (table.ok() ? *table : "(none)");
  }
};

Harness& TheHarness() {
  static Harness* h = new Harness();  // lives until exit: the server's threads use it
  return *h;
}

template <typename Req>
bool Parse(const uint8_t* data, size_t size, Req* req) {
  return req->ParseFromArray(data, static_cast<int>(size));
}

grpc::Status Call(Harness& h, Method m, const uint8_t* data, size_t size, bool* parsed) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  *parsed = true;
  switch (m) {
    case kRegister: {
      v1::RegisterUnitTableRequest req;
      v1::RegisterUnitTableReply reply;
      if (!(*parsed = Parse(data, size, &req))) return grpc::Status::OK;
      return h.stub->RegisterUnitTable(&ctx, req, &reply);
    }
    case kReport: {
      v1::EvaluationReport req;
      v1::ReportEvaluationReply reply;
      if (!(*parsed = Parse(data, size, &req))) return grpc::Status::OK;
      return h.stub->ReportEvaluation(&ctx, req, &reply);
    }
    case kStream: {
      v1::TransitionBatch batch;
      if (!(*parsed = Parse(data, size, &batch))) return grpc::Status::OK;
      auto stream = h.stub->StreamTransitions(&ctx);
      stream->Write(batch);
      stream->WritesDone();
      v1::TransitionAck ack;
      while (stream->Read(&ack)) {
      }
      return stream->Finish();
    }
    case kGetTable: {
      v1::GetUnitTableRequest req;
      v1::UnitTable reply;
      if (!(*parsed = Parse(data, size, &req))) return grpc::Status::OK;
      return h.stub->GetUnitTable(&ctx, req, &reply);
    }
    default: {
      v1::RunStatusRequest req;
      v1::RunStatus reply;
      if (!(*parsed = Parse(data, size, &req))) return grpc::Status::OK;
      return h.stub->GetRunStatus(&ctx, req, &reply);
    }
  }
}

std::string WithMethod(Method m, const google::protobuf::Message& msg) {
  return std::string(1, static_cast<char>(m)) + msg.SerializeAsString();
}

}  // namespace
}  // namespace windquant::learner

namespace windquant::testing {

std::vector<std::string> WqFuzzSeeds() {
  using namespace windquant::learner;  // NOLINT: the target's own names
  const plan::UnitTable whole = WholeTable();
  // Mutated strings are often invalid UTF-8: protobuf refuses them (the
  // input is skipped) and would log each one.
  google::protobuf::SetLogHandler(nullptr);
  std::vector<std::string> seeds;
  for (int s = 0; s < 2; ++s) {
    plan::UnitTable part = whole;
    part.first_layer = s;
    part.end_layer = s + 1;
    part.units.clear();
    for (const auto& u : whole.units) {
      if (u.layer == s) part.units.push_back(u);
    }
    v1::RegisterUnitTableRequest req;
    req.set_stage(s);
    part.ToProto(req.mutable_table());
    seeds.push_back(WithMethod(kRegister, req));
  }
  auto costs = rl::UnitCosts::Create(whole).value();
  rl::EnvOptions eo;
  eo.target_bits = 3.0;
  std::vector<int> plan;
  for (int64_t u = 0; u < costs->num_units(); ++u) plan.push_back(costs->cheapest_action(u));
  for (uint64_t id = 1; id <= 3; ++id) {
    rl::Episode e;
    e.actor_id = "a";
    e.episode_id = id;
    e.steps = rl::ReplayPlan(costs, eo, plan).value();
    e.plan.plan_id = absl::StrCat("p", id);
    e.plan.model_fingerprint = whole.fingerprint;
    e.plan.actions = plan;
    e.plan.target_bits = 3.0;
    e.plan.episode_id = id;
    v1::TransitionBatch batch;
    rl::EncodeEpisode(e, whole, &batch);
    seeds.push_back(WithMethod(kStream, batch));
    v1::EvaluationReport r;
    r.set_episode_id(id);
    r.set_plan_id(e.plan.plan_id);
    r.set_perplexity(3.0 + static_cast<double>(id));
    r.set_loss(1.1);
    r.set_loss_increase(0.1);
    r.set_relative_ppl_increase(0.2);
    r.set_effective_bits(2.9);
    r.set_lambda(0.5);
    r.set_reward(0.25);
    r.set_lambda_after(0.5);
    r.set_tokens(512);
    seeds.push_back(WithMethod(kReport, r));
  }
  v1::GetUnitTableRequest get;
  get.set_model_fingerprint(whole.fingerprint);
  seeds.push_back(WithMethod(kGetTable, get));
  seeds.push_back(WithMethod(kStatus, v1::RunStatusRequest()));
  return seeds;
}

}  // namespace windquant::testing

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace windquant::learner;  // NOLINT
  if (size == 0) return 0;
  Harness& h = TheHarness();
  const Method m = static_cast<Method>(data[0] % kNumMethods);
  const std::string before = h.Snapshot();
  bool parsed = false;
  const grpc::Status s = Call(h, m, data + 1, size - 1, &parsed);
  if (!parsed || s.ok()) {
    if (parsed && windquant::base::PathExists(h.dir + "/unit_table.pb")) {
      // Whatever was accepted and written is a table a restarted learner takes.
      windquant::v1::UnitTable proto;
      auto bytes = windquant::base::ReadFile(h.dir + "/unit_table.pb");
      if (!bytes.ok() || !proto.ParseFromString(*bytes) ||
          !windquant::plan::UnitTable::FromProto(proto).ok()) {
        FuzzFail("unit_table.pb does not read back as a valid table");
      }
    }
    return 0;
  }
  CheckRefusedCall(static_cast<int>(m), s, h.Snapshot() != before, "the run's state");
  return 0;
}
