// model.device and model.threads against the machine: synthetic machines for each
// instance of the class, and this real one.
#include "common/config/this_machine.h"

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace windquant::config {
namespace {

using ::windquant::testing::StatusIs;

ModelConfig Model(const std::string& device, int threads) {
  ModelConfig m;
  m.compute.device = device;
  m.threads = threads;
  return m;
}

// error-case: config.machine-resources
TEST(MachineResourcesTest, MissingDeviceOrTooManyThreadsIsRefused) {
  const MachineResources cpu_only{/*cuda_devices=*/0, /*cores=*/2};
  EXPECT_THAT(CheckMachineResources(Model("cuda", 0), cpu_only),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "model.device: cuda, but this machine has no CUDA device (use cpu)"));
  EXPECT_THAT(CheckMachineResources(Model("cpu", 3), cpu_only),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "model.threads: 3, more than the 2 cores of this machine"));
  EXPECT_THAT(CheckMachineResources(Model("cuda", 64), MachineResources{1, 16}),
              StatusIs(absl::StatusCode::kFailedPrecondition, "model.threads: 64, more than"));
  EXPECT_TRUE(CheckMachineResources(Model("cpu", 2), cpu_only).ok());
  EXPECT_TRUE(CheckMachineResources(Model("cpu", 0), cpu_only).ok());  // 0 = all cores
  EXPECT_TRUE(CheckMachineResources(Model("cuda", 16), MachineResources{1, 16}).ok());
  // A device index the machine does not have.
  EXPECT_THAT(CheckMachineResources(Model("cuda:7", 0), MachineResources{1, 16}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "model.device: cuda:7, but this machine has 1 CUDA devices"));
  EXPECT_THAT(CheckMachineResources(Model("cuda:0", 0), cpu_only),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "model.device: cuda:0, but this machine has no CUDA device (use cpu)"));
  EXPECT_TRUE(CheckMachineResources(Model("cuda:1", 0), MachineResources{2, 16}).ok());
}

TEST(MachineResourcesTest, ThisMachine) {
  const MachineResources m = ThisMachine();
  ASSERT_GE(m.cores, 1);
  EXPECT_TRUE(CheckThisMachine(Model("cpu", m.cores)).ok());
  EXPECT_THAT(CheckThisMachine(Model("cpu", m.cores + 1)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "model.threads: " + std::to_string(m.cores + 1) + ", more than the " +
                           std::to_string(m.cores) + " cores"));
  EXPECT_EQ(CheckThisMachine(Model("cuda", 0)).ok(), m.cuda_devices > 0);
}

}  // namespace
}  // namespace windquant::config
