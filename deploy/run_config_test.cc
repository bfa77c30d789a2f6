// The run configs shipped in deploy/k8s (mounted as /etc/windquant/run.yaml) must load
// with the same parser the services use, and describe the topology the manifests deploy.
// The manifest side (StatefulSet replicas = stages * replicas, actor DNS names) is
// checked by deploy/k8s/check_manifests.py.
#include <cstdlib>
#include <string>

#include "common/base/files.h"
#include "common/config/run_config.h"
#include "gtest/gtest.h"

namespace windquant::config {
namespace {

std::string SourceDir() {
  const char* dir = std::getenv("WQ_SOURCE_DIR");
  return dir != nullptr ? dir : ".";
}

RunConfig Load(const std::string& relative) {
  const std::string path = SourceDir() + "/deploy/k8s/" + relative;
  auto text = base::ReadFile(path);
  EXPECT_TRUE(text.ok()) << text.status();
  if (!text.ok()) return {};
  auto config = ParseRunConfig(*text, path);
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : RunConfig{};
}

TEST(DeployRunConfigTest, BaseIsOneCpuStage) {
  RunConfig c = Load("base/run.yaml");
  EXPECT_EQ(c.model.compute.device, "cpu");
  EXPECT_EQ(c.service.stages, 1);
  EXPECT_EQ(c.service.replicas, 1);
  EXPECT_EQ(c.service.stage, -1);
  EXPECT_EQ(c.service.replica, -1);
  EXPECT_EQ(c.service.metrics_address, "0.0.0.0:9464");
}

TEST(DeployRunConfigTest, CpuSmallIsTwoCpuStages) {
  RunConfig c = Load("overlays/cpu-small/run.yaml");
  EXPECT_EQ(c.model.compute.device, "cpu");
  EXPECT_EQ(c.service.stages, 2);
  EXPECT_EQ(c.service.replicas, 1);
  EXPECT_EQ(c.service.actor_addresses.size(), 2u);
}

// The GPU overlays deploy configs/llama3-70b.yaml and configs/llama3-8b.yaml
// (deploy/k8s/generate_overlays.py; tests/cluster_configs_test.cc compares them).
TEST(DeployRunConfigTest, Llama70bIsThreeStagesTwoReplicasOnCuda) {
  RunConfig c = Load("overlays/llama3-70b-gpu/run.yaml");
  EXPECT_EQ(c.model.compute.device, "cuda");
  EXPECT_EQ(c.service.stages, 3);
  EXPECT_EQ(c.service.replicas, 2);
  EXPECT_EQ(c.service.stage, -1);
  EXPECT_EQ(c.quant.chunk_size, 256);
  // Stage-major: entry s*replicas + r is pod ordinal r*stages + s.
  ASSERT_EQ(c.service.actor_addresses.size(), 6u);
  EXPECT_EQ(c.service.actor_addresses[1], "windquant-actors-3.windquant-actors:50053");
  EXPECT_EQ(c.service.actor_addresses[2], "windquant-actors-1.windquant-actors:50053");
}

TEST(DeployRunConfigTest, Llama8bIsOneStageSevenReplicasOnCuda) {
  RunConfig c = Load("overlays/llama3-8b-gpu/run.yaml");
  EXPECT_EQ(c.model.compute.device, "cuda");
  EXPECT_EQ(c.service.stages, 1);
  EXPECT_EQ(c.service.replicas, 7);
  ASSERT_EQ(c.service.actor_addresses.size(), 7u);
  EXPECT_EQ(c.service.actor_addresses[6], "windquant-actors-6.windquant-actors:50053");
}

}  // namespace
}  // namespace windquant::config
