#include "job/node_options.h"

#include "gtest/gtest.h"

namespace windquant::job {
namespace {

// A config whose every key the builders read differs from the Options' defaults.
config::RunConfig Distinct() {
  config::RunConfig c;
  c.model.dir = "/m";
  c.model.compute.device = "cuda";
  c.calibration.text = "/c.txt";
  c.calibration.tokens = {3, 900};
  c.calibration.samples = 7;
  c.calibration.seq_len = 96;
  c.calibration.seed = 9;
  c.evaluation.selection = {"/s.txt", {1, 2}};
  c.evaluation.heldout = {"/h.txt", {4, 0}};
  c.evaluation.context = 64;
  c.evaluation.batch = 5;
  c.evaluation.calib_slice_tokens = 1234;
  c.quant.chunk_size = 32;
  c.quant.salient_fraction = 0.02;
  c.quant.cache_dir = "/cache";
  c.lagrange.eta = 0.5;
  c.service.stages = 3;
  c.service.replicas = 2;
  c.service.max_message_bytes = 4096;
  c.service.rpc_deadline_ms = 777;
  c.service.evaluation_timeout_ms = 888;
  c.service.tls.ca_file = "/ca.pem";
  c.training.episodes_per_update = 12;
  c.training.seed = 42;
  c.training.screen_samples = 8;
  c.ppo.hidden = {16, 8};
  c.env.skip_penalty = 0.25;
  c.output.dir = "/out";
  return c;
}

TEST(NodeOptionsTest, SessionReadsModelCalibrationQuantAndHeldout) {
  const quant::SessionOptions o = SessionOptionsFrom(Distinct());
  EXPECT_EQ(o.model_dir, "/m");
  EXPECT_EQ(o.compute.device, "cuda");
  EXPECT_EQ(o.calibration.text, "/c.txt");
  EXPECT_EQ(o.calibration.tokens, (std::vector<int64_t>{3, 900}));
  EXPECT_EQ(o.calibration.samples, 7);
  EXPECT_EQ(o.calibration.seq_len, 96);
  EXPECT_EQ(o.calibration.seed, 9u);
  EXPECT_EQ(o.units.chunk_size, 32);
  EXPECT_EQ(o.units.salient_fraction, 0.02);
  EXPECT_EQ(o.cache_dir, "/cache");
  EXPECT_EQ(o.heldout.text, "/h.txt");
  EXPECT_EQ(o.heldout.tokens, (std::vector<int64_t>{4, 0}));
  EXPECT_EQ(o.context, 64);
  EXPECT_EQ(o.batch, 5);
}

TEST(NodeOptionsTest, ActorReadsWorkerServiceAndRollouts) {
  const actor::ActorNodeOptions o = ActorNodeOptionsFrom(Distinct());
  EXPECT_EQ(o.worker.model_dir, "/m");
  EXPECT_EQ(o.worker.compute.device, "cuda");
  EXPECT_EQ(o.worker.units.chunk_size, 32);
  EXPECT_EQ(o.worker.units.salient_fraction, 0.02);
  EXPECT_EQ(o.worker.cache_dir, "/cache");
  EXPECT_EQ(o.stages, 3);
  EXPECT_EQ(o.replicas, 2);
  EXPECT_EQ(o.peer.max_message_bytes, 4096);
  EXPECT_EQ(o.peer.rpc_deadline_ms, 777);
  EXPECT_EQ(o.peer.tls.ca_file, "/ca.pem");
  EXPECT_EQ(o.evaluation_timeout_ms, 888);
  EXPECT_EQ(o.episodes_per_update, 12);
  EXPECT_EQ(o.rollouts.seed, 42u);
  EXPECT_EQ(o.rollouts.screen_samples, 8);
  EXPECT_EQ(o.rollouts.policy.hidden_sizes, (std::vector<int64_t>{16, 8}));
  EXPECT_EQ(o.rollouts.env.skip_penalty, 0.25);
  config::RunConfig off = Distinct();
  off.training.screen_samples = 0;  // off: one sample per episode sent
  EXPECT_EQ(ActorNodeOptionsFrom(off).rollouts.screen_samples, 1);
}

TEST(NodeOptionsTest, EvaluatorReadsTextsEvaluationLagrangeAndService) {
  const evaluator::EvaluatorNodeOptions o = EvaluatorNodeOptionsFrom(Distinct());
  EXPECT_EQ(o.model_dir, "/m");
  EXPECT_EQ(o.compute.device, "cuda");
  EXPECT_EQ(o.calibration.seed, 9u);
  EXPECT_EQ(o.selection.text, "/s.txt");
  EXPECT_EQ(o.context, 64);
  EXPECT_EQ(o.batch, 5);
  EXPECT_EQ(o.calib_slice_tokens, 1234);
  EXPECT_EQ(o.lagrange.eta, 0.5);
  EXPECT_EQ(o.stages, 3);
  EXPECT_EQ(o.replicas, 2);
  EXPECT_EQ(o.peer.rpc_deadline_ms, 777);
  EXPECT_EQ(o.queue_dir, "/out/evaluator-queue");
}

}  // namespace
}  // namespace windquant::job
