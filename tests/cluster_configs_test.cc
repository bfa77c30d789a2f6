// The cluster configs of configs/ (LLaMA-3-8B and LLaMA-3-70B on nodes of 8 GPUs with
// 80 GB each, sized in docs/capacity.md) load with the parser the services use, their
// stages cover the model's decoder layers exactly as the actors split them
// (actor::StageLayers over the real layer count of the shape), each stage's memory by
// the document's formula stays within 90 % of one 80 GB GPU, and a micro-batch of hidden
// states fits service.max_message_bytes. The GPU overlays of deploy/k8s deploy these
// configs unchanged, with as many actor pods, and require GPUs whose usable memory holds
// the largest stage.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "actor/actor_node.h"
#include "common/base/files.h"
#include "common/config/run_config.h"
#include "common/model/llama_config.h"
#include "common/model/synth_checkpoint.h"
#include "gtest/gtest.h"

namespace windquant {
namespace {

// An 80 GB GPU less 10 % for the CUDA context, cuBLAS workspaces and the caching
// allocator's fragmentation (docs/capacity.md, "Memory per stage").
constexpr double kUsableGpuBytes = 0.9 * 80e9;
// Fits: FP16 per-row parameters of the six quantized actions + offsets (14 bytes per
// row per unit) and 5 bytes per salient entry (common/quant/stage_fits.h).
constexpr double kFitBytesPerRowOfUnit = 14;
constexpr double kBytesPerSalient = 5;

std::string SourceDir() {
  const char* dir = std::getenv("WQ_SOURCE_DIR");
  return dir != nullptr ? dir : ".";
}

int64_t LayerParams(const model::LlamaConfig& c) {
  const int64_t q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
  return 2 * c.hidden_size * q + 2 * c.hidden_size * kv + 3 * c.hidden_size * c.intermediate_size;
}

// Bytes one actor's GPU holds for a stage of `layers` decoder layers (docs/capacity.md,
// "Memory per stage"): BF16 weights, fits, one layer widened to FP32 for the forward,
// and the FP32 activations of one micro-batch (the larger of the attention phase:
// scores + probabilities [B, heads, T, T], and the MLP phase: gate, up and their product
// [B, T, intermediate]; plus four [B, T, hidden] tensors).
double StageBytes(const model::LlamaConfig& c, int64_t layers, const config::RunConfig& run) {
  const double per_layer = static_cast<double>(LayerParams(c));
  const double weights = per_layer * static_cast<double>(layers);
  const double fits = weights * (kFitBytesPerRowOfUnit / run.quant.chunk_size +
                                 kBytesPerSalient * run.quant.salient_fraction);
  const double b = run.evaluation.batch, t = run.evaluation.context;
  const double attention = 2.0 * b * static_cast<double>(c.num_attention_heads) * t * t * 4;
  const double mlp = 3.0 * b * t * static_cast<double>(c.intermediate_size) * 4;
  const double activations =
      std::max(attention, mlp) + 4.0 * b * t * static_cast<double>(c.hidden_size) * 4;
  return 2 * weights + fits + 4 * per_layer + activations;
}

void CheckClusterConfig(const std::string& file, const std::string& shape, int stages,
                        int replicas) {
  SCOPED_TRACE(file);
  auto run = config::LoadRunConfig(SourceDir() + "/configs/" + file);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->model.compute.device, "cuda");
  EXPECT_EQ(run->service.stages, stages);
  EXPECT_EQ(run->service.replicas, replicas);
  EXPECT_EQ(run->service.actor_addresses.size(), static_cast<size_t>(stages * replicas));

  auto shape_config = model::SynthShapeConfig(shape);
  ASSERT_TRUE(shape_config.ok()) << shape_config.status();
  const int64_t layers = shape_config->num_hidden_layers;
  int64_t next = 0;
  for (int s = 0; s < run->service.stages; ++s) {
    auto range = actor::StageLayers(layers, run->service.stages, s);
    ASSERT_TRUE(range.ok()) << range.status();
    EXPECT_EQ(range->first, next) << "stage " << s;
    EXPECT_GT(range->second, range->first) << "stage " << s;
    next = range->second;
    EXPECT_LE(StageBytes(*shape_config, range->second - range->first, *run), kUsableGpuBytes)
        << "stage " << s << " of layers [" << range->first << ", " << range->second << ")";
  }
  EXPECT_EQ(next, layers) << "the stages end before the model's last layer";

  // One micro-batch of float32 hidden states (the Forward RPC's HiddenStates) plus the
  // plan (about one byte per unit) and the message's headers must pass gRPC's limit.
  const double hidden_bytes = 4.0 * run->evaluation.batch * run->evaluation.context *
                              static_cast<double>(shape_config->hidden_size);
  EXPECT_GT(static_cast<double>(run->service.max_message_bytes), hidden_bytes + (1 << 20));
}

// A GPU overlay of deploy/k8s deploys its config of configs/ unchanged: its run.yaml is the
// config below the header deploy/k8s/generate_overlays.py writes, and its StatefulSet patch
// (topology.yaml) has service.stages x service.replicas actor pods. The rendered objects
// are checked against the same configs by deploy/k8s/check_manifests.py.
// The GPU memory (MiB, the nvidia.com/gpu.memory node label of GPU Feature Discovery) that
// an overlay's actors require: the first `values: ["N"]` of the StatefulSet patch in its
// sizes.yaml. -1 when there is none.
int64_t ActorGpuMemoryMiB(const std::string& sizes) {
  const size_t sts = sizes.find("kind: StatefulSet");
  const size_t values = sizes.find("values: [\"", sts);
  const size_t end = sizes.find("---", sts);
  int64_t mib = -1;
  if (sts == std::string::npos || values == std::string::npos || values > end) return -1;
  const size_t begin = values + std::string("values: [\"").size();
  if (!absl::SimpleAtoi(sizes.substr(begin, sizes.find('"', begin) - begin), &mib)) return -1;
  return mib;
}

// The smallest memory an 80 GB card reports (H100 80GB: 81559 MiB; A100 80GB: 81920).
constexpr int64_t kSmallest80GbCardMiB = 81559;

void CheckOverlay(const std::string& overlay, const std::string& config_file,
                  const std::string& shape) {
  SCOPED_TRACE(overlay);
  const std::string dir = SourceDir() + "/deploy/k8s/overlays/" + overlay;
  auto deployed_text = base::ReadFile(dir + "/run.yaml");
  auto config_text = base::ReadFile(SourceDir() + "/configs/" + config_file);
  auto topology = base::ReadFile(dir + "/topology.yaml");
  ASSERT_TRUE(deployed_text.ok()) << deployed_text.status();
  ASSERT_TRUE(config_text.ok()) << config_text.status();
  ASSERT_TRUE(topology.ok()) << topology.status();
  EXPECT_TRUE(absl::StartsWith(
      *deployed_text,
      "# GENERATED by deploy/k8s/generate_overlays.py from configs/" + config_file + ":"));
  EXPECT_TRUE(absl::EndsWith(*deployed_text, *config_text))
      << "run.yaml is not configs/" << config_file << ": run deploy/k8s/generate_overlays.py";

  auto deployed = config::LoadRunConfig(dir + "/run.yaml");
  auto config = config::LoadRunConfig(SourceDir() + "/configs/" + config_file);
  ASSERT_TRUE(deployed.ok()) << deployed.status();
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(deployed->service.stages, config->service.stages);
  EXPECT_EQ(deployed->service.replicas, config->service.replicas);
  EXPECT_EQ(deployed->service.actor_addresses, config->service.actor_addresses);
  EXPECT_EQ(deployed->evaluation.batch, config->evaluation.batch);
  EXPECT_EQ(deployed->service.max_message_bytes, config->service.max_message_bytes);

  // The StatefulSet's size: the one `replicas:` line of the generated patch.
  int pods = -1;
  for (absl::string_view line : absl::StrSplit(*topology, '\n')) {
    if (absl::ConsumePrefix(&line, "  replicas: ")) {
      ASSERT_EQ(pods, -1) << "two replicas lines";
      ASSERT_TRUE(absl::SimpleAtoi(line, &pods)) << line;
    }
  }
  EXPECT_EQ(pods, config->service.stages * config->service.replicas);

  // The node affinity on GPU memory admits the 80 GB cards the config is sized for, and
  // only cards whose usable 90 % holds the largest stage by the formula above.
  auto shape_config = model::SynthShapeConfig(shape);
  auto sizes = base::ReadFile(dir + "/sizes.yaml");
  ASSERT_TRUE(shape_config.ok()) << shape_config.status();
  ASSERT_TRUE(sizes.ok()) << sizes.status();
  double largest = 0;
  for (int s = 0; s < config->service.stages; ++s) {
    auto range = actor::StageLayers(shape_config->num_hidden_layers, config->service.stages, s);
    ASSERT_TRUE(range.ok()) << range.status();
    largest = std::max(largest, StageBytes(*shape_config, range->second - range->first, *config));
  }
  const int64_t mib = ActorGpuMemoryMiB(*sizes);
  ASSERT_GT(mib, 0) << "no nvidia.com/gpu.memory requirement on the actors in sizes.yaml";
  EXPECT_GE(0.9 * static_cast<double>(mib) * (1 << 20), largest) << mib << " MiB";
  EXPECT_LT(mib, kSmallest80GbCardMiB);
}

TEST(ClusterConfigsTest, Llama3_8bOverlayDeploysItsConfig) {
  CheckOverlay("llama3-8b-gpu", "llama3-8b.yaml", "llama3-8b");
}

TEST(ClusterConfigsTest, Llama3_70bOverlayDeploysItsConfig) {
  CheckOverlay("llama3-70b-gpu", "llama3-70b.yaml", "llama3-70b");
}

TEST(ClusterConfigsTest, Llama3_8bIsOneStageSevenReplicas) {
  CheckClusterConfig("llama3-8b.yaml", "llama3-8b", 1, 7);
}

TEST(ClusterConfigsTest, Llama3_70bIsThreeStagesTwoReplicas) {
  CheckClusterConfig("llama3-70b.yaml", "llama3-70b", 3, 2);
}

// The formula's own check: a 70B model in two stages does not fit 80 GB cards, so the
// 70B config cannot have fewer stages than it has.
TEST(ClusterConfigsTest, Llama3_70bNeedsThreeStages) {
  auto run = config::LoadRunConfig(SourceDir() + "/configs/llama3-70b.yaml");
  ASSERT_TRUE(run.ok()) << run.status();
  auto c = model::SynthShapeConfig("llama3-70b");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_GT(StageBytes(*c, c->num_hidden_layers / 2, *run), kUsableGpuBytes);
}

}  // namespace
}  // namespace windquant
