// The machine this process runs on, as a run config's model.device and
// model.threads see it: CUDA devices torch can use and the CPUs this process may
// run on (its affinity mask, which a container's cpuset narrows). Thread-safe.
#ifndef WINDQUANT_COMMON_CONFIG_THIS_MACHINE_H_
#define WINDQUANT_COMMON_CONFIG_THIS_MACHINE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/config/run_config.h"

namespace windquant::config {

// What the machine a run starts on offers.
struct MachineResources {
  int cuda_devices = 0;
  int cores = 1;  // CPUs this process may run on
};

MachineResources ThisMachine();

// model.device and model.threads against `machine`, for a process about to work (a
// config may describe another machine, so parsing does not check this).
// FAILED_PRECONDITION naming the key: "model.device: cuda, but this machine has no CUDA
// device (use cpu)", "model.threads: 64, more than the 2 cores of this machine".
absl::Status CheckMachineResources(const ModelConfig& model, const MachineResources& machine);

// CheckMachineResources(model, ThisMachine()): call at start, before any work.
absl::Status CheckThisMachine(const ModelConfig& model);

// A device flag (`--device`) against this machine: INVALID_ARGUMENT for a name other than
// cpu, cuda, cuda:N; FAILED_PRECONDITION "--device: cuda, but this machine has no CUDA
// device (use cpu)" for a device it lacks.
absl::Status CheckDeviceFlag(absl::string_view flag, const std::string& device);

// A thread-count flag (`--threads`) against this machine's cores (0 = all):
// FAILED_PRECONDITION "--threads: 64, more than the 2 cores of this machine".
absl::Status CheckThreadsFlag(absl::string_view flag, int64_t threads);

}  // namespace windquant::config

#endif  // WINDQUANT_COMMON_CONFIG_THIS_MACHINE_H_
