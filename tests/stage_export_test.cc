// The distributed export (docs/quantized-format.md, "Export in a distributed job"): two
// real Actor services (127.0.0.1:0) fitted by the evaluator's calibration pass over
// gRPC, and the learner's ExportAssembler pulling every part from them. The assembled
// folders must be byte-identical to a one-process export (exporter::WriteQuantizedCheckpoint
// / WriteFakeQuantCheckpoint) of the same plan and fits, and the packed file must decode
// to the weights the plan applies. An actor that refuses or dies mid-export gives one
// line naming it, and nothing is left in the output folder.
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include "actor/actor_service.h"
#include "common/export/export_layout.h"
#include "common/export/exporter.h"
#include "common/model/checkpoint.h"
#include "common/net/channel.h"
#include "common/net/server.h"
#include "common/testing/scoped_test_dir.h"
#include "common/testing/stage_test_util.h"
#include "common/transport/grpc_activation_transport.h"
#include "evaluator/pipeline_evaluator.h"
#include "learner/export_assembler.h"
#include "tests/loopback_actors_fixture.h"

namespace windquant {
namespace {

namespace fs = std::filesystem;

std::string ModelDir() { return testing::RealModelDir(); }

std::string Slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Every file under `dir` (relative path -> bytes).
std::map<std::string, std::string> Files(const fs::path& dir) {
  std::map<std::string, std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = Slurp(e.path());
  }
  return out;
}

// A stage that answers GetStageInfo as stage 1 and dies after the first chunk of any
// export (the actor process going away mid-stream).
class DyingActor final : public v1::Actor::Service {
 public:
  DyingActor(int first, int end) : first_(first), end_(end) {}
  grpc::Status GetStageInfo(grpc::ServerContext*, const v1::StageInfoRequest*,
                            v1::StageInfo* reply) override {
    reply->set_first_layer(first_);
    reply->set_end_layer(end_);
    reply->set_unit_table_ready(true);
    return grpc::Status::OK;
  }
  grpc::Status ExportStage(grpc::ServerContext*, const v1::ExportStageRequest*,
                           grpc::ServerWriter<v1::ExportStageChunk>* writer) override {
    v1::ExportStageChunk chunk;
    chunk.set_data(std::string(16, 'x'));
    chunk.set_part_bytes(expected_part_bytes);
    writer->Write(chunk);
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "actor process exited");
  }
  uint64_t expected_part_bytes = 0;

 private:
  int first_, end_;
};

class StageExportTest : public testing::LoopbackActorsTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(LoopbackActorsTest::SetUp());
    auto tables = evaluator_->Calibrate(stages_, "calib");
    ASSERT_TRUE(tables.ok()) << tables.status();
    auto merged = plan::UnitTable::Merge(*tables);
    ASSERT_TRUE(merged.ok()) << merged.status();
    table_ = *std::move(merged);
    // Every action, seeded, so that each tensor kind of the format is exercised.
    std::mt19937 rng(7);
    std::vector<int> actions(table_.units.size());
    for (int& a : actions) a = static_cast<int>(rng() % plan::kNumActions);
    plan_ = plan::Plan::Make(table_, actions, "test", 4.0);
  }

  // The actors of stage 0 and 1 (channels_[0], channels_[1] unless replaced).
  std::vector<learner::ExportStageActors> Actors(size_t second = 1) const {
    return {{{channels_[0]}, {"actor-s0"}}, {{channels_[second]}, {"actor-s1"}}};
  }

  learner::ExportAssemblerOptions Options() const {
    learner::ExportAssemblerOptions o;
    o.model_dir = ModelDir();
    o.chunk_bytes = 4096;  // many chunks per part
    return o;
  }

  // The stages' fits as one (what `windquant quantize` exports with).
  quant::StageFits MergedFits() const {
    std::vector<quant::StageFits::UnitParams> params;
    for (const auto& w : workers_) {
      const quant::StageFits& f = w->stage()->fits();
      for (size_t i = 0; i < f.table().units.size(); ++i) params.push_back(f.params(i));
    }
    return *quant::StageFits::Create(table_, std::move(params));
  }

  std::unique_ptr<DyingActor> dying_;  // outlives the servers (shut down in TearDown)
  plan::UnitTable table_;
  plan::Plan plan_;
};

TEST_F(StageExportTest, AssembledFromStagesIsByteIdenticalToOneProcessExport) {
  testing::ScopedTestDir dir("stage-export");
  auto summary = learner::AssembleExport(Options(), Actors(), table_, plan_, dir.path() + "/dist");
  ASSERT_TRUE(summary.ok()) << summary.status();

  auto checkpoint = model::Checkpoint::Open(ModelDir());
  ASSERT_TRUE(checkpoint.ok());
  const quant::StageFits fits = MergedFits();
  exporter::ExportInputs in;
  in.checkpoint = checkpoint->get();
  in.table = &table_;
  in.fits = &fits;
  in.plan = &plan_;
  in.model_dir = ModelDir();
  ASSERT_TRUE(exporter::WriteQuantizedCheckpoint(in, dir.path() + "/one/quantized").ok());
  ASSERT_TRUE(exporter::WriteFakeQuantCheckpoint(in, dir.path() + "/one/fake_quant").ok());

  const auto one = Files(dir.path() + "/one");
  const auto dist = Files(dir.path() + "/dist");
  ASSERT_EQ(dist.size(), one.size());
  for (const auto& [name, bytes] : one) {
    ASSERT_TRUE(dist.count(name)) << name << " missing from the assembled export";
    EXPECT_TRUE(dist.at(name) == bytes) << name << " differs";
  }
  EXPECT_EQ(summary->quantized_bytes, one.at("quantized/quantized.safetensors").size());
  EXPECT_EQ(summary->fake_quant_bytes, one.at("fake_quant/model.safetensors").size());
  EXPECT_GT(summary->pulled_bytes, 0u);
  EXPECT_LT(summary->pulled_bytes, summary->quantized_bytes + summary->fake_quant_bytes);
  // The packed file decodes to exactly the weights the plan applies.
  const absl::Status verified =
      exporter::VerifyQuantizedCheckpoint(in, dir.path() + "/dist/quantized", "assembled");
  EXPECT_TRUE(verified.ok()) << verified;
}

TEST_F(StageExportTest, RefusingStageFailsInOneLineAndLeavesNothing) {
  testing::ScopedTestDir dir("stage-export");
  // Stage 0 asked to stand for stage 1: the stages do not tile the model.
  auto tiled = learner::AssembleExport(Options(), Actors(/*second=*/0), table_, plan_, dir.path());
  EXPECT_EQ(tiled.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(tiled.status().message().find("do not tile"), std::string::npos) << tiled.status();
  // A plan of another model: the actor refuses, the message names it and the part.
  plan::Plan other = plan_;
  other.model_fingerprint = "0000";
  plan::UnitTable other_table = table_;
  other_table.fingerprint = "0000";
  auto refused = learner::AssembleExport(Options(), Actors(), other_table, other, dir.path());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("actor-s0 (quantized layers)"), std::string::npos)
      << refused.status();
  EXPECT_NE(refused.status().message().find("plan.model_fingerprint"), std::string::npos);
  EXPECT_EQ(refused.status().message().find('\n'), std::string::npos);
  EXPECT_TRUE(Files(dir.path()).empty()) << Files(dir.path()).begin()->first;
}

// error-case: learner.export-actor-failed
TEST_F(StageExportTest, ActorDyingMidExportLeavesNoHalfWrittenFile) {
  testing::ScopedTestDir dir("stage-export");
  const int64_t L = workers_[1]->end_layer();
  dying_ = std::make_unique<DyingActor>(static_cast<int>(L - 2), static_cast<int>(L));
  DyingActor& dying = *dying_;
  auto config = model::LlamaConfig::FromDirectory(ModelDir());
  auto declared =
      exporter::DeclarePart(exporter::ExportFile::kQuantized, exporter::ExportPart::kLayers,
                            {L - 2, L, false, true}, *config, table_, plan_.actions);
  ASSERT_TRUE(declared.ok());
  for (const auto& t : *declared) dying.expected_part_bytes += t.num_bytes();
  AddServer(&dying);
  auto result =
      learner::AssembleExport(Options(), Actors(channels_.size() - 1), table_, plan_, dir.path());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable) << result.status();
  EXPECT_NE(result.status().message().find("actor-s1"), std::string::npos) << result.status();
  EXPECT_NE(result.status().message().find("actor process exited"), std::string::npos);
  EXPECT_TRUE(Files(dir.path()).empty()) << Files(dir.path()).begin()->first;
}

}  // namespace
}  // namespace windquant
