// The service mains' run config: what the skeleton's `load` checks before any work,
// what it hands the skeleton (threads, /metrics) and the role (the config with the
// --set overrides), and the actor's stage/replica.
#include "job/service_run_config.h"

#include <filesystem>

#include "common/base/files.h"
#include "common/testing/scoped_test_dir.h"
#include "common/testing/status_matchers.h"
#include "common/transport/tensor_pipes.h"
#include "gtest/gtest.h"

namespace windquant::job {
namespace {

using ::windquant::testing::StatusIs;

// A run config under `dir` whose model folder exists; `extra` is appended.
service::ServiceFlags FlagsFor(const std::string& dir, const std::string& extra = "") {
  std::filesystem::create_directories(dir + "/m");
  EXPECT_TRUE(base::WriteFileAtomic(dir + "/run.yaml",
                                    "model: {dir: " + dir + "/m, threads: 1}\n" +
                                        "calibration: {text: c.txt}\n" + "output: {dir: " + dir +
                                        "/out}\n" + "evaluation:\n" +
                                        "  selection: {text: e.txt, tokens: [0, 100]}\n" +
                                        "  heldout: {text: e.txt, tokens: [100, 200]}\n" + extra)
                  .ok());
  service::ServiceFlags flags;
  flags.config = dir + "/run.yaml";
  return flags;
}

// A loader whose role must never be built (the config is refused before).
service::ServiceLoader LoaderThatMustNotStartTheRole() {
  return RunConfigLoader(
      [](const config::RunConfig&, metrics::Registry*,
         const base::LogSink&) -> absl::StatusOr<std::unique_ptr<service::Service>> {
        return absl::InternalError("not reached");
      });
}

TEST(RunConfigLoaderTest, HandsTheSkeletonItsSettingsAndTheRoleTheConfig) {
  testing::ScopedTestDir dir("service_run_config");
  service::ServiceFlags flags =
      FlagsFor(dir.path(), "service: {metrics_address: '0.0.0.0:9464'}\n");
  flags.overrides = {"service.stages=3"};
  int stages = 0;
  auto load = RunConfigLoader(
      [&](const config::RunConfig& c, metrics::Registry*,
          const base::LogSink&) -> absl::StatusOr<std::unique_ptr<service::Service>> {
        stages = c.service.stages;
        return absl::InvalidArgumentError("role: refused");
      });
  absl::StatusOr<service::ServiceSettings> s = load(flags);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->threads, 1);
  EXPECT_EQ(s->metrics.address, "0.0.0.0");
  EXPECT_EQ(s->metrics.port, 9464);
  EXPECT_EQ(stages, 0) << "the role is built by the skeleton, after load";
  EXPECT_THAT(s->create(nullptr, nullptr).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "role: refused"));
  EXPECT_EQ(stages, 3) << "the role gets the config with the --set overrides";
}

// error-case: service.bad-config
TEST(RunConfigLoaderTest, ABadConfigIsOneLineNamingTheKey) {
  testing::ScopedTestDir dir("service_run_config");
  service::ServiceLoader load = LoaderThatMustNotStartTheRole();
  service::ServiceFlags flags = FlagsFor(dir.path(), "service: {metrics_address: 'nowhere'}\n");
  EXPECT_THAT(load(flags).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "service.metrics_address"));
  flags = FlagsFor(dir.path());
  flags.overrides = {"model.dir=" + dir.path() + "/missing"};
  EXPECT_THAT(load(flags).status(), StatusIs(absl::StatusCode::kNotFound, "model.dir"));
}

// error-case: service.hidden-states-nccl
TEST(RunConfigLoaderTest, NcclHiddenStatesNeedANcclBuildAndStagesOnCuda) {
  testing::ScopedTestDir dir("service_run_config");
  service::ServiceLoader load = LoaderThatMustNotStartTheRole();
  service::ServiceFlags flags = FlagsFor(dir.path());
  flags.overrides = {"service.hidden_states=nccl"};  // model.device: cpu
  EXPECT_THAT(
      load(flags).status(),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               transport::NcclBuilt() ? "service.hidden_states: nccl, but the stages compute on cpu"
                                      : "service.hidden_states: nccl, but this build has no NCCL"));
  // Where the device is CUDA, only the build decides (a CPU build: no NCCL).
  EXPECT_EQ(transport::CheckPipeKind("k", transport::PipeKind::kNccl, "cuda:1").ok(),
            transport::NcclBuilt());
  EXPECT_TRUE(transport::CheckPipeKind("k", transport::PipeKind::kGrpc, "cpu").ok());
}

TEST(ResolveStageReplicaTest, FromTheConfigElseFromThePodOrdinal) {
  config::ServiceConfig svc;
  svc.stages = 2;
  svc.replicas = 3;
  EXPECT_EQ(ResolveStageReplica(svc, "5").value(), std::make_pair(1, 2));
  svc.stage = 1;
  svc.replica = 0;
  EXPECT_EQ(ResolveStageReplica(svc, "5").value(), std::make_pair(1, 0));
}

// error-case: service.stage-replica
TEST(ResolveStageReplicaTest, MissingMalformedOrOutOfRangeIsRefused) {
  config::ServiceConfig svc;
  svc.stages = 2;
  svc.replicas = 3;
  EXPECT_THAT(ResolveStageReplica(svc, "").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "WQ_POD_ORDINAL"));
  EXPECT_THAT(ResolveStageReplica(svc, "x").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "'x' is not a non-negative integer"));
  EXPECT_THAT(ResolveStageReplica(svc, "6").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "6 >= 2 stages x 3 replicas"));
  svc.stage = 2;
  svc.replica = 0;
  EXPECT_THAT(ResolveStageReplica(svc, "0").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "service.stage/replica: 2/0"));
}

}  // namespace
}  // namespace windquant::job
