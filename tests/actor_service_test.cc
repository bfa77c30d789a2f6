// The Actor service with the real stub, in process (127.0.0.1:0), driven by
// the evaluator's PipelineEvaluator over gRPC transports (so it lives in
// tests/: it spans two roles): the pipeline equals the single-process
// perplexity, the calibration pass fits the stages, and bad requests are
// INVALID_ARGUMENT naming the field.
#include "actor/actor_service.h"

#include <cstdlib>
#include <filesystem>
#include <random>

#include <gtest/gtest.h>

#include "common/model/checkpoint.h"
#include "common/model/perplexity.h"
#include "common/net/channel.h"
#include "common/net/server.h"
#include "common/quant/table_fingerprint.h"
#include "common/testing/stage_test_util.h"
#include "common/transport/grpc_activation_transport.h"
#include "common/transport/hidden_states_codec.h"
#include "common/transport/tensor_pipes.h"
#include "evaluator/pipeline_evaluator.h"
#include "tests/loopback_actors_fixture.h"

namespace windquant::actor {
namespace {

constexpr double kPerplexityRelTol = 1e-9;  // float32 bytes travel unchanged

std::string ModelDir() { return testing::RealModelDir(); }

// Shape of the real test model (stories260k: 5 layers of 64; the default model: 4 of 128).
const model::LlamaConfig& RealConfig() {
  static const model::LlamaConfig c = *model::LlamaConfig::FromDirectory(ModelDir());
  return c;
}
using testing::RandomIds;

class ActorServiceTest : public testing::LoopbackActorsTest {
 protected:
  ActorServiceTest() { transport_timeout_ = absl::Seconds(30); }
  absl::Status OnTableRegistered(const plan::UnitTable& t) override {
    registered_.push_back(t);
    return absl::OkStatus();
  }

  // The perplexity of the whole model in this process computing in `compute` (context 64,
  // batch 3): the reference of a pipeline's.
  double WholePerplexity(const std::vector<int32_t>& ids, const model::ComputeOptions& compute) {
    auto checkpoint = model::Checkpoint::Open(ModelDir());
    EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
    auto weights = (*checkpoint)->LoadWeights(model::LoadRequest{});
    EXPECT_TRUE(weights.ok()) << weights.status();
    model::LlamaModel whole(*std::move(weights), compute);
    model::PerplexityOptions po;
    po.context = 64;
    po.batch_size = 3;
    auto ref = model::ComputePerplexity(whole, ids, po);
    EXPECT_TRUE(ref.ok()) << ref.status();
    return ref.ok() ? ref->perplexity : 0;
  }

  std::vector<plan::UnitTable> registered_;
};

TEST_F(ActorServiceTest, PipelineOverGrpcEqualsSingleProcessPerplexity) {
  const std::vector<int32_t> ids = RandomIds(1500, 9);
  auto piped = evaluator_->Perplexity(stages_, transport::PassSpec{}, ids, 0);
  ASSERT_TRUE(piped.ok()) << piped.status();
  const double ref = WholePerplexity(ids, model::ComputeOptions{});
  EXPECT_NEAR(piped->perplexity, ref, kPerplexityRelTol * ref);
}

// model.compute_dtype bfloat16: the hidden states go over gRPC as bf16 (2 bytes each, bit
// for bit), so the pipeline equals the single-process bf16 perplexity.
class ActorServiceBf16Test : public ActorServiceTest {
 protected:
  ActorServiceBf16Test() { compute_.dtype = model::ComputeDtype::kBFloat16; }
};

TEST_F(ActorServiceBf16Test, Bfloat16PipelineOverGrpcEqualsSingleProcessPerplexity) {
  const std::vector<int32_t> ids = RandomIds(1500, 9);
  auto piped = evaluator_->Perplexity(stages_, transport::PassSpec{}, ids, 0);
  ASSERT_TRUE(piped.ok()) << piped.status();
  const double ref = WholePerplexity(ids, compute_);
  EXPECT_NEAR(piped->perplexity, ref, kPerplexityRelTol * ref);
  // It did compute in bf16.
  EXPECT_NE(piped->perplexity, WholePerplexity(ids, model::ComputeOptions{}));
}

TEST_F(ActorServiceTest, CalibrationOverGrpcRegistersTablesAndPlansEvaluate) {
  auto tables = evaluator_->Calibrate(stages_, "calib");
  ASSERT_TRUE(tables.ok()) << tables.status();
  ASSERT_EQ(registered_.size(), 2u);
  EXPECT_EQ((*tables)[0].fingerprint, quant::TableFingerprint("key", "calib"));
  auto merged = plan::UnitTable::Merge(*tables);
  ASSERT_TRUE(merged.ok()) << merged.status();
  auto info = transports_[1]->Info();
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->unit_table_ready());
  EXPECT_EQ(info->first_layer(), RealConfig().num_hidden_layers - 2);

  plan::Plan plan;
  plan.plan_id = "p1";
  plan.model_fingerprint = merged->fingerprint;
  plan.actions.assign(merged->units.size(), 2);  // 4 bit
  auto e = evaluator_->Evaluate(stages_, plan);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_GT(e->eval_ppl, 1.0);
  EXPECT_FALSE(e->cached);

  // Another model's plan: refused by the actor with the field named.
  plan.model_fingerprint = "0000";
  plan.actions[0] = 1;
  auto other = evaluator_->Evaluate(stages_, plan);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(other.status().message().find("plan.model_fingerprint"), std::string::npos)
      << other.status();
}

TEST_F(ActorServiceTest, BadRequestsAreInvalidArgumentNamingTheField) {
  auto stub = v1::Actor::NewStub(channels_[0]);
  auto forward = [&](const v1::ForwardRequest& req) {
    grpc::ClientContext ctx;
    auto stream = stub->Forward(&ctx);
    stream->Write(req);
    stream->WritesDone();
    v1::ForwardResponse resp;
    while (stream->Read(&resp)) {
    }
    return stream->Finish();
  };
  v1::ForwardRequest req;
  req.mutable_hidden()->add_shape(2);
  req.mutable_hidden()->add_shape(4);
  const int64_t H = RealConfig().hidden_size;
  req.mutable_hidden()->add_shape(H);
  req.mutable_hidden()->set_data(std::string(2 * 4 * H * 4 - 4, '\0'));
  grpc::Status s = forward(req);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("hidden.data"), std::string::npos) << s.error_message();

  transport::EncodeHiddenStates(at::randn({2, 4, H - 1}), 0, req.mutable_hidden());
  s = forward(req);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("hidden"), std::string::npos);

  at::Tensor nan = at::randn({1, 4, H});
  nan[0][1][2] = std::nanf("");
  transport::EncodeHiddenStates(nan, 0, req.mutable_hidden());
  s = forward(req);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("NaN"), std::string::npos);

  // bfloat16 hidden states (their dtype in the framing) to a float32 stage.
  transport::EncodeHiddenStates(at::randn({1, 4, H}).to(at::kBFloat16), 0, req.mutable_hidden());
  s = forward(req);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("hidden: bfloat16, but this stage computes in float32"),
            std::string::npos)
      << s.error_message();

  transport::EncodeHiddenStates(at::randn({1, 4, H}), 0, req.mutable_hidden());
  req.set_plan_id("../escape");
  s = forward(req);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("plan_id"), std::string::npos);

  grpc::ClientContext ctx;
  v1::FinishCalibrationReply reply;
  s = stub->FinishCalibration(&ctx, v1::FinishCalibrationRequest(), &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("calibration_fingerprint"), std::string::npos);
}

// service.hidden_states' pipes over the real Actor services: the in-process kind runs the
// protocol NCCL runs (each micro-batch announced on the gRPC stream, its tensor on the
// pipe, the output back the same way), so all of it but NCCL's own calls is tested here.
class ActorServicePipeTest : public ActorServiceTest {
 protected:
  void SetUp() override {
    ActorServiceTest::SetUp();
    for (auto& t : transports_) t->UsePipe(transport::PipeKind::kInProcess, at::kCPU);
    for (size_t i = 0; i < channels_.size(); ++i) {
      grpc_transports_.push_back(std::make_unique<transport::GrpcActivationTransport>(
          channels_[i], "grpc " + std::to_string(i), transport_timeout_));
      grpc_stages_.push_back(grpc_transports_.back().get());
    }
  }
  // The same stages, hidden states in the gRPC messages.
  std::vector<std::unique_ptr<transport::GrpcActivationTransport>> grpc_transports_;
  std::vector<transport::ActivationTransport*> grpc_stages_;
};

// The same tensors arrive whichever way they travel: the pipeline's perplexity over pipes
// equals the one over gRPC messages bit for bit (float32 bytes unchanged both ways, the
// same code computing), and one pipe per stage serves every pass.
TEST_F(ActorServicePipeTest, PipelineOverPipesEqualsGrpcBitForBit) {
  const std::vector<int32_t> ids = RandomIds(1500, 9);
  auto over_grpc = evaluator_->Perplexity(grpc_stages_, transport::PassSpec{}, ids, 0);
  ASSERT_TRUE(over_grpc.ok()) << over_grpc.status();
  for (int pass = 0; pass < 2; ++pass) {
    auto piped = evaluator_->Perplexity(stages_, transport::PassSpec{}, ids, 0);
    ASSERT_TRUE(piped.ok()) << piped.status();
    EXPECT_EQ(piped->perplexity, over_grpc->perplexity);
  }
  for (auto& t : transports_) EXPECT_EQ(t->pipes_connected(), 1) << t->Name();
}

// Calibration (the stages fit and register their tables) and a plan's evaluation over the
// pipes give what they give over gRPC.
TEST_F(ActorServicePipeTest, CalibrationAndPlansOverPipes) {
  auto tables = evaluator_->Calibrate(stages_, "calib");
  ASSERT_TRUE(tables.ok()) << tables.status();
  ASSERT_EQ(registered_.size(), 2u);
  auto merged = plan::UnitTable::Merge(*tables);
  ASSERT_TRUE(merged.ok()) << merged.status();
  transport::PassSpec spec;
  spec.plan_id = "p3";
  spec.model_fingerprint = merged->fingerprint;
  spec.actions = std::make_shared<const std::vector<int>>(merged->units.size(), 3);  // 3 bit
  const std::vector<int32_t> ids = RandomIds(900, 5);
  auto piped = evaluator_->Perplexity(stages_, spec, ids, 0);
  ASSERT_TRUE(piped.ok()) << piped.status();
  auto over_grpc = evaluator_->Perplexity(grpc_stages_, spec, ids, 0);
  ASSERT_TRUE(over_grpc.ok()) << over_grpc.status();
  EXPECT_EQ(piped->perplexity, over_grpc->perplexity);
  auto fp = evaluator_->Perplexity(stages_, transport::PassSpec{}, ids, 0);
  ASSERT_TRUE(fp.ok()) << fp.status();
  EXPECT_NE(piped->perplexity, fp->perplexity);  // the plan was applied
}

// An actor whose pipe is gone (another evaluator connected to it, or it restarted) fails
// the pass that used it with UNAVAILABLE about the pipe; the transport gives that pipe up
// and the next pass connects a new one and succeeds.
TEST_F(ActorServicePipeTest, APassAfterTheActorLostItsPipeReconnects) {
  const std::vector<int32_t> ids = RandomIds(400, 4);
  auto first = evaluator_->Perplexity(stages_, transport::PassSpec{}, ids, 0);
  ASSERT_TRUE(first.ok()) << first.status();
  // Another evaluator's transport connects to actor 0: its pipe replaces ours there.
  transport::GrpcActivationTransport other(channels_[0], "other", transport_timeout_);
  other.UsePipe(transport::PipeKind::kInProcess, at::kCPU);
  ASSERT_TRUE(evaluator_->Perplexity({&other, stages_[1]}, transport::PassSpec{}, ids, 0).ok());
  auto lost = evaluator_->Perplexity(stages_, transport::PassSpec{}, ids, 0);
  // The actor refuses the announcement ("pipe: '...' is not connected to this actor"), or
  // the evaluator's send finds the replaced pipe closed first (in-process: the actor's
  // Close ends both directions).
  EXPECT_EQ(lost.status().code(), absl::StatusCode::kUnavailable) << lost.status();
  EXPECT_NE(lost.status().message().find("pipe"), std::string::npos) << lost.status();
  auto again = evaluator_->Perplexity(stages_, transport::PassSpec{}, ids, 0);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->perplexity, first->perplexity);
  EXPECT_EQ(transports_[0]->pipes_connected(), 2);
  EXPECT_EQ(transports_[1]->pipes_connected(), 1);
}

// error-case: actor.connect-pipe
TEST_F(ActorServicePipeTest, ConnectPipeAndAnnouncedBatchesAreRefusedNamingTheField) {
  auto stub = v1::Actor::NewStub(channels_[0]);
  auto connect = [&](const std::string& id, const std::string& kind) {
    grpc::ClientContext ctx;
    v1::ConnectPipeRequest req;
    req.set_pipe_id(id);
    req.set_kind(kind);
    v1::ConnectPipeReply reply;
    return stub->ConnectPipe(&ctx, req, &reply);
  };
  grpc::Status s = connect("p1", "carrier-pigeon");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "kind: 'carrier-pigeon', must be nccl or in-process");
  s = connect("../p1", "in-process");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("pipe_id"), std::string::npos) << s.error_message();
  s = connect("p1", "in-process");  // nobody in this process offered p1
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("pipe_id: no in-process pipe 'p1'"), std::string::npos);
  if (!transport::NcclBuilt()) {
    s = connect("p1", "nccl");
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_NE(s.error_message().find("kind: nccl, but this build has no NCCL"), std::string::npos)
        << s.error_message();
  }
  // A micro-batch announced on a pipe this actor does not have.
  grpc::ClientContext ctx;
  auto stream = stub->Forward(&ctx);
  v1::ForwardRequest req;
  req.set_pipe("pipe-nope");
  stream->Write(req);
  stream->WritesDone();
  v1::ForwardResponse resp;
  EXPECT_FALSE(stream->Read(&resp));
  s = stream->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(s.error_message().find("pipe: 'pipe-nope' is not connected to this actor"),
            std::string::npos)
      << s.error_message();
}

}  // namespace
}  // namespace windquant::actor
