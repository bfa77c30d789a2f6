#include "common/config/this_machine.h"

#include <ATen/Context.h>
#include <sched.h>

#include <thread>

#include "absl/strings/str_cat.h"

namespace windquant::config {

MachineResources ThisMachine() {
  MachineResources m;
  // at::hasCUDA is false both for a CPU-only libtorch and for a machine without a GPU.
  m.cuda_devices = at::hasCUDA() ? static_cast<int>(at::getNumGPUs()) : 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    m.cores = CPU_COUNT(&set);
  } else {
    m.cores = static_cast<int>(std::thread::hardware_concurrency());
  }
  if (m.cores < 1) m.cores = 1;
  return m;
}

namespace {

absl::Status CheckThreads(absl::string_view key, int64_t threads, const MachineResources& machine) {
  if (threads <= machine.cores) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(key, ": ", threads, ", more than the ",
                                                    machine.cores, " cores of this machine"));
}

}  // namespace

absl::Status CheckMachineResources(const ModelConfig& model, const MachineResources& machine) {
  if (model.device == "cuda" && machine.cuda_devices < 1) {
    return absl::FailedPreconditionError(
        "model.device: cuda, but this machine has no CUDA device (use cpu)");
  }
  return CheckThreads("model.threads", model.threads, machine);
}

absl::Status CheckThisMachine(const ModelConfig& model) {
  return CheckMachineResources(model, ThisMachine());
}

absl::Status CheckThreadsFlag(absl::string_view flag, int64_t threads) {
  return CheckThreads(flag, threads, ThisMachine());
}

}  // namespace windquant::config
