// LoopbackActorsTest: the fixture of the tests that drive real Actor services over gRPC
// with the evaluator's pipeline (tests/: it spans two roles). SetUp starts two
// ActorServices of the real test model (layers [0, L-2) and [L-2, L), chunk 32) on
// 127.0.0.1:0, a GrpcActivationTransport to each (stages_), and a PipelineEvaluator
// (context 64, batch 3, 4 calibration windows of 32, slices of 600 seeded random
// tokens) that drives them; TearDown shuts the servers down. Test-only, header-only;
// one per test, not thread-safe.
#ifndef WINDQUANT_TESTS_LOOPBACK_ACTORS_FIXTURE_H_
#define WINDQUANT_TESTS_LOOPBACK_ACTORS_FIXTURE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "actor/actor_service.h"
#include "common/model/llama_config.h"
#include "common/net/channel.h"
#include "common/net/server.h"
#include "common/testing/stage_test_util.h"
#include "common/transport/grpc_activation_transport.h"
#include "evaluator/pipeline_evaluator.h"

namespace windquant::testing {

class LoopbackActorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const int64_t L = model::LlamaConfig::FromDirectory(RealModelDir())->num_hidden_layers;
    for (auto [a, b] : std::vector<std::pair<int64_t, int64_t>>{{0, L - 2}, {L - 2, L}}) {
      stage::StageWorkerOptions o;
      o.model_dir = RealModelDir();
      o.compute = compute_;
      o.first_layer = a;
      o.end_layer = b;
      o.units.chunk_size = 32;
      auto w = stage::StageWorker::Create(o);
      ASSERT_TRUE(w.ok()) << w.status();
      workers_.push_back(*std::move(w));
      actor::ActorIdentity id;
      id.stage = static_cast<int>(services_.size());
      id.stages = 2;
      id.model_key = "key";
      services_.push_back(std::make_unique<actor::ActorService>(
          workers_.back().get(), id,
          [this](const plan::UnitTable& t) { return OnTableRegistered(t); }, nullptr));
      ASSERT_NO_FATAL_FAILURE(AddServer(services_.back().get()));
      transports_.push_back(std::make_unique<transport::GrpcActivationTransport>(
          channels_.back(), "stage " + std::to_string(services_.size() - 1), transport_timeout_));
      stages_.push_back(transports_.back().get());
    }
    evaluator::PipelineEvaluatorOptions po;
    po.compute = compute_;
    po.context = 64;
    po.batch_size = 3;
    po.calibration_samples = 4;
    po.calibration_seq_len = 32;
    po.calibration_batch = 2;
    po.calib_slice_tokens = 600;
    po.eval_slice_tokens = 600;
    auto ev = evaluator::PipelineEvaluator::Create(RealModelDir(), po, RandomIds(2000, 1),
                                                   RandomIds(2000, 2));
    ASSERT_TRUE(ev.ok()) << ev.status();
    evaluator_ = *std::move(ev);
  }
  void TearDown() override {
    for (auto& s : servers_) s->Shutdown(absl::Now());
  }

  // What each ActorService's registration of its unit table returns (the learner's
  // answer); the default accepts it.
  virtual absl::Status OnTableRegistered(const plan::UnitTable&) { return absl::OkStatus(); }

  // Serves `service` as windquant.v1.Actor on 127.0.0.1:0; its channel is channels_.back().
  void AddServer(grpc::Service* service) {
    net::ServerOptions so;
    so.address = "127.0.0.1:0";
    servers_.push_back(std::make_unique<net::GrpcServer>(so));
    servers_.back()->AddService(service, v1::Actor::service_full_name());
    ASSERT_TRUE(servers_.back()->Start().ok());
    net::ChannelOptions co;
    co.target = servers_.back()->address();
    auto channel = net::MakeChannel(co);
    ASSERT_TRUE(channel.ok());
    channels_.push_back(*channel);
  }

  absl::Duration transport_timeout_ = absl::Seconds(60);  // per activation call
  model::ComputeOptions compute_;  // of the stages and the evaluator's head (set before SetUp)
  std::vector<std::unique_ptr<stage::StageWorker>> workers_;
  std::vector<std::unique_ptr<actor::ActorService>> services_;
  std::vector<std::unique_ptr<net::GrpcServer>> servers_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<transport::GrpcActivationTransport>> transports_;
  std::vector<transport::ActivationTransport*> stages_;
  std::unique_ptr<evaluator::PipelineEvaluator> evaluator_;
};

}  // namespace windquant::testing

#endif  // WINDQUANT_TESTS_LOOPBACK_ACTORS_FIXTURE_H_
