// The Evaluator gRPC service on a real server (127.0.0.1:0) over a small real pipeline
// (the real test model in two in-process stages): what it refuses, with which code and
// which culprit, and what it answers for a valid plan.
#include "evaluator/evaluator_service.h"

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/net/channel.h"
#include "common/net/server.h"
#include "common/net/status_convert.h"
#include "common/plan/action.h"
#include "common/testing/scoped_test_dir.h"
#include "common/testing/stage_test_util.h"
#include "common/testing/status_matchers.h"
#include "evaluator/pipeline_evaluator.h"
#include "gtest/gtest.h"

namespace windquant::evaluator {
namespace {

using ::windquant::testing::IsOk;
using ::windquant::testing::StatusIs;
constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
constexpr size_t kMaxQueue = 2;
constexpr int kContext = 16;
constexpr size_t kHeldOutTokens = 300;

// The pipeline and its stages are built once for the suite (loading the model and the
// calibration pass take most of the test's time).
struct Pipeline {
  std::unique_ptr<PipelineEvaluator> evaluator;
  testing::LocalStages local;
  plan::UnitTable table;  // the run's global table
};

Pipeline* BuildPipeline() {
  auto p = std::make_unique<Pipeline>();
  const std::string dir = testing::RealModelDir();
  PipelineEvaluatorOptions o;
  o.context = kContext;
  o.batch_size = 4;
  o.calib_slice_tokens = 200;
  o.eval_slice_tokens = 200;
  o.calibration_samples = 4;
  o.calibration_seq_len = 16;
  o.calibration_batch = 2;
  auto ev =
      PipelineEvaluator::Create(dir, o, testing::RandomIds(600, 1), testing::RandomIds(600, 2));
  EXPECT_THAT(ev.status(), IsOk());
  if (!ev.ok()) return nullptr;
  p->evaluator = *std::move(ev);
  EXPECT_THAT(p->evaluator->SetHeldOut(testing::RandomIds(kHeldOutTokens, 3)), IsOk());
  const int64_t layers = p->evaluator->config().num_hidden_layers;
  EXPECT_THAT(p->local.Add(dir, 0, layers / 2, 64), IsOk());
  EXPECT_THAT(p->local.Add(dir, layers / 2, layers, 64), IsOk());
  auto tables = p->evaluator->Calibrate(p->local.stages, p->evaluator->CalibrationFingerprint());
  EXPECT_THAT(tables.status(), IsOk());
  if (!tables.ok()) return nullptr;
  auto merged = plan::UnitTable::Merge(*std::move(tables));
  EXPECT_THAT(merged.status(), IsOk());
  if (!merged.ok()) return nullptr;
  p->table = *std::move(merged);
  return p.release();
}

class EvaluatorServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { pipeline_ = BuildPipeline(); }
  static void TearDownTestSuite() { delete pipeline_; }

  void SetUp() override {
    ASSERT_NE(pipeline_, nullptr);
    queue_dir_ = temp_.path() + "/queue";
    rl::LagrangeOptions lagrange;
    lagrange.lambda_init = 0.375;
    // Never started: submitted plans stay queued (and on disk), so depth is observable.
    queue_ = std::make_unique<EvaluationQueue>(
        pipeline_->evaluator.get(),
        std::vector<std::vector<transport::ActivationTransport*>>{pipeline_->local.stages},
        rl::EnvironmentOptions(), lagrange, queue_dir_, kMaxQueue,
        [](const Report&) -> absl::StatusOr<ReportAnswer> { return ReportAnswer(); });
    service_ = std::make_unique<EvaluatorService>(
        queue_.get(), [this]() -> absl::StatusOr<plan::UnitTable> {
          absl::MutexLock lock(&mu_);
          if (!table_ready_) return absl::UnavailableError("unit table: not complete yet");
          return pipeline_->table;
        });
    server_ = std::make_unique<net::GrpcServer>(net::ServerOptions{});
    server_->AddService(service_.get(), v1::Evaluator::service_full_name());
    ASSERT_THAT(server_->Start(), IsOk());
    net::ChannelOptions c;
    c.target = server_->address();
    auto channel = net::MakeChannel(c);
    ASSERT_THAT(channel.status(), IsOk());
    stub_ = v1::Evaluator::NewStub(*channel);
  }
  void TearDown() override {
    if (server_) server_->Shutdown(absl::Now() + absl::Seconds(5));
  }

  // A valid plan: every unit at 4 bits.
  v1::Plan WirePlan(const std::string& plan_id = "plan-1") const {
    v1::Plan p;
    p.set_plan_id(plan_id);
    p.set_model_fingerprint(pipeline_->table.fingerprint);
    for (size_t i = 0; i < pipeline_->table.units.size(); ++i) {
      p.add_actions(static_cast<uint32_t>(plan::Action::k4));
    }
    return p;
  }
  absl::Status Submit(const v1::SubmitPlanRequest& req, v1::SubmitPlanReply* reply = nullptr) {
    v1::SubmitPlanReply ignored;
    grpc::ClientContext ctx;
    net::ConfigureContext(ctx, absl::Seconds(30));
    return net::FromGrpcStatus(stub_->SubmitPlan(&ctx, req, reply ? reply : &ignored));
  }
  absl::Status SubmitPlan(const v1::Plan& plan, const std::string& actor_id = "actor-0") {
    v1::SubmitPlanRequest req;
    *req.mutable_plan() = plan;
    req.set_actor_id(actor_id);
    req.set_episode_id(11);
    return Submit(req);
  }
  absl::Status Evaluate(const v1::EvaluatePlanRequest& req, v1::EvaluationReport* report) {
    grpc::ClientContext ctx;
    net::ConfigureContext(ctx, absl::Seconds(120));
    return net::FromGrpcStatus(stub_->EvaluatePlan(&ctx, req, report));
  }
  void SetTableReady(bool ready) {
    absl::MutexLock lock(&mu_);
    table_ready_ = ready;
  }

  static Pipeline* pipeline_;
  ::windquant::testing::ScopedTestDir temp_{"wq-evaluator-service"};
  std::string queue_dir_;
  absl::Mutex mu_;
  bool table_ready_ ABSL_GUARDED_BY(mu_) = true;
  std::unique_ptr<EvaluationQueue> queue_;
  std::unique_ptr<EvaluatorService> service_;
  std::unique_ptr<net::GrpcServer> server_;
  std::unique_ptr<v1::Evaluator::Stub> stub_;
};
Pipeline* EvaluatorServiceTest::pipeline_ = nullptr;

TEST_F(EvaluatorServiceTest, SubmitQueuesUnderTheRequestsKindAndEpisodeUntilTheQueueIsFull) {
  v1::SubmitPlanRequest req;
  *req.mutable_plan() = WirePlan();
  req.mutable_plan()->set_episode_id(3);  // the request's episode id wins
  req.set_episode_id(21);
  req.set_actor_id("actor-0");
  v1::SubmitPlanReply reply;
  ASSERT_THAT(Submit(req, &reply), IsOk());
  EXPECT_TRUE(reply.accepted());
  EXPECT_EQ(reply.queue_depth(), 1);
  EXPECT_FALSE(reply.evaluator_id().empty());
  EXPECT_EQ(reply.evaluator_id(), queue_->evaluator_id());
  EXPECT_TRUE(std::filesystem::exists(queue_dir_ + "/episode-21.plan.pb"));
  EXPECT_FALSE(std::filesystem::exists(queue_dir_ + "/episode-3.plan.pb"));
  // Sent again (its answer was lost): accepted, not queued twice.
  ASSERT_THAT(Submit(req, &reply), IsOk());
  EXPECT_EQ(reply.queue_depth(), 1);

  req.set_kind(v1::PLAN_KIND_CANDIDATE);  // ids are per kind
  req.clear_actor_id();                   // optional
  ASSERT_THAT(Submit(req, &reply), IsOk());
  EXPECT_EQ(reply.queue_depth(), 2);
  EXPECT_TRUE(std::filesystem::exists(queue_dir_ + "/candidate-21.plan.pb"));
  grpc::ClientContext ctx;
  v1::QueueStatus status;
  ASSERT_THAT(net::FromGrpcStatus(stub_->GetQueueStatus(&ctx, v1::QueueStatusRequest(), &status)),
              IsOk());
  EXPECT_EQ(status.evaluator_id(), reply.evaluator_id());
  EXPECT_EQ(status.queue_depth(), 2);
  EXPECT_EQ(status.evaluated(), 0);
  req.set_episode_id(23);
  EXPECT_THAT(Submit(req, &reply), StatusIs(absl::StatusCode::kResourceExhausted, "queue full"));
  EXPECT_EQ(queue_->depth(), 2);
}

TEST_F(EvaluatorServiceTest, SubmitRefusesAMissingPlanAndBadIdentifiers) {
  EXPECT_THAT(Submit(v1::SubmitPlanRequest()), StatusIs(kInvalid, "plan: missing"));
  EXPECT_THAT(SubmitPlan(WirePlan(), "actor/0"),
              StatusIs(kInvalid, "actor_id: only [A-Za-z0-9._-]"));
  EXPECT_THAT(SubmitPlan(WirePlan("")), StatusIs(kInvalid, "plan.plan_id: must be 1..128"));
  EXPECT_THAT(SubmitPlan(WirePlan("..")), StatusIs(kInvalid, "plan.plan_id: must not be"));
  v1::SubmitPlanRequest req;
  *req.mutable_plan() = WirePlan();
  req.set_kind(static_cast<v1::PlanKind>(5));
  EXPECT_THAT(Submit(req), StatusIs(kInvalid, "kind: 5 is not a PlanKind"));
  EXPECT_EQ(queue_->depth(), 0);
}

TEST_F(EvaluatorServiceTest, SubmitRefusesAPlanThatDoesNotFitTheRunsTable) {
  const size_t units = pipeline_->table.units.size();
  v1::Plan other = WirePlan();
  other.set_model_fingerprint("0123456789abcdef-other");
  EXPECT_THAT(SubmitPlan(other), StatusIs(kInvalid, "plan.model_fingerprint: 0123456789ab"));
  v1::Plan longer = WirePlan();
  longer.add_actions(0);
  EXPECT_THAT(SubmitPlan(longer),
              StatusIs(kInvalid, "plan.actions: " + std::to_string(units + 1) + " entries"));
  v1::Plan out_of_range = WirePlan();
  out_of_range.set_actions(units - 1, plan::kNumActions);
  EXPECT_THAT(SubmitPlan(out_of_range),
              StatusIs(kInvalid, "plan.actions[" + std::to_string(units - 1) + "]: 7 is not"));
  EXPECT_EQ(queue_->depth(), 0);
}

TEST_F(EvaluatorServiceTest, WithoutTheUnitTableBothCallsAreUnavailable) {
  SetTableReady(false);
  EXPECT_THAT(SubmitPlan(WirePlan()),
              StatusIs(absl::StatusCode::kUnavailable, "unit table: not complete yet"));
  v1::EvaluatePlanRequest req;
  *req.mutable_plan() = WirePlan();
  v1::EvaluationReport report;
  EXPECT_THAT(Evaluate(req, &report),
              StatusIs(absl::StatusCode::kUnavailable, "unit table: not complete yet"));
  SetTableReady(true);
  EXPECT_THAT(SubmitPlan(WirePlan()), IsOk());
}

TEST_F(EvaluatorServiceTest, EvaluateRefusesAMissingPlanOtherTokenCountsAndABadPlan) {
  v1::EvaluationReport report;
  EXPECT_THAT(Evaluate(v1::EvaluatePlanRequest(), &report), StatusIs(kInvalid, "plan: missing"));
  v1::EvaluatePlanRequest req;
  *req.mutable_plan() = WirePlan();
  for (int64_t tokens : {-1, 100}) {
    req.set_tokens(tokens);
    EXPECT_THAT(Evaluate(req, &report), StatusIs(kInvalid, "tokens: only 0"));
  }
  req.set_tokens(0);
  req.mutable_plan()->set_actions(0, 99);
  EXPECT_THAT(Evaluate(req, &report), StatusIs(kInvalid, "plan.actions[0]: 99 is not"));
}

TEST_F(EvaluatorServiceTest, EvaluateAnswersThePipelinesReportThenTheCachedOne) {
  v1::EvaluatePlanRequest req;
  *req.mutable_plan() = WirePlan("plan-eval");
  req.mutable_plan()->set_episode_id(5);
  req.mutable_plan()->set_actions(0, static_cast<uint32_t>(plan::Action::k2));
  v1::EvaluationReport first;
  ASSERT_THAT(Evaluate(req, &first), IsOk());
  const plan::Plan plan = plan::Plan::FromProto(req.plan());
  EXPECT_EQ(first.plan_id(), "plan-eval");
  EXPECT_EQ(first.episode_id(), 5u);
  EXPECT_DOUBLE_EQ(first.effective_bits(), pipeline_->table.EffectiveBits(plan.actions));
  const std::vector<int> all4(plan.actions.size(), static_cast<int>(plan::Action::k4));
  EXPECT_LT(first.effective_bits(), pipeline_->table.EffectiveBits(all4));  // one unit at 2 bits
  EXPECT_GT(first.perplexity(), 1.0);
  EXPECT_TRUE(std::isfinite(first.loss()));
  EXPECT_TRUE(std::isfinite(first.loss_increase()));
  EXPECT_DOUBLE_EQ(first.lambda(), 0.375);  // the queue's λ, not updated by EvaluatePlan
  EXPECT_GT(first.tokens(), 0);
  EXPECT_FALSE(first.cached());
  EXPECT_EQ(queue_->depth(), 0);  // not queued

  v1::EvaluationReport second;
  ASSERT_THAT(Evaluate(req, &second), IsOk());
  EXPECT_TRUE(second.cached());
  EXPECT_EQ(second.perplexity(), first.perplexity());  // the same stored number
  EXPECT_EQ(second.effective_bits(), first.effective_bits());
}

TEST_F(EvaluatorServiceTest, EvaluateOnTheHeldOutTextMeasuresItsWindowsEveryTime) {
  v1::EvaluatePlanRequest req;
  *req.mutable_plan() = WirePlan("plan-heldout");
  req.mutable_plan()->set_actions(0, static_cast<uint32_t>(plan::Action::k2));
  v1::EvaluationReport selection;
  ASSERT_THAT(Evaluate(req, &selection), IsOk());
  req.set_text(v1::EVALUATION_TEXT_HELDOUT);
  v1::EvaluationReport first, second;
  ASSERT_THAT(Evaluate(req, &first), IsOk());
  ASSERT_THAT(Evaluate(req, &second), IsOk());
  // Every whole window of the held-out text, none of the selection slice's.
  EXPECT_EQ(first.tokens(), static_cast<int64_t>(kHeldOutTokens / (kContext - 1)) * (kContext - 1));
  EXPECT_GT(first.perplexity(), 1.0);
  EXPECT_NE(first.perplexity(), selection.perplexity());
  EXPECT_FALSE(first.cached());
  EXPECT_FALSE(second.cached());
  EXPECT_NEAR(second.perplexity(), first.perplexity(), 1e-9 * first.perplexity());
  EXPECT_DOUBLE_EQ(first.effective_bits(), selection.effective_bits());
  EXPECT_EQ(first.plan_id(), "plan-heldout");

  req.set_text(static_cast<v1::EvaluationText>(7));
  EXPECT_THAT(Evaluate(req, &first), StatusIs(kInvalid, "text: 7 is not"));
}

TEST_F(EvaluatorServiceTest, AnEvaluatorWithoutHeldOutTextRefusesItNamingTheKey) {
  PipelineEvaluatorOptions o = pipeline_->evaluator->options();
  auto bare = PipelineEvaluator::Create(testing::RealModelDir(), o, testing::RandomIds(600, 1),
                                        testing::RandomIds(600, 2));
  ASSERT_THAT(bare.status(), IsOk());
  EXPECT_FALSE((*bare)->has_heldout());
  EXPECT_THAT((*bare)->SetHeldOut(testing::RandomIds(kContext - 1, 3)),
              StatusIs(kInvalid, "evaluation.heldout: 15 tokens, shorter than one window"));
  EXPECT_FALSE((*bare)->has_heldout());
  const plan::Plan plan = plan::Plan::FromProto(WirePlan());
  EXPECT_THAT((*bare)->HeldOutPerplexity(pipeline_->local.stages, plan).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "evaluation.heldout: the evaluator"));
}

}  // namespace
}  // namespace windquant::evaluator
