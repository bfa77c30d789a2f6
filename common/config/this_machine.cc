#include "common/config/this_machine.h"

#include <ATen/Context.h>
#include <sched.h>

#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/base/status_macros.h"

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

absl::Status CheckDevice(absl::string_view key, const std::string& device,
                         const MachineResources& machine) {
  if (!IsDeviceName(device)) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, ": ", device, ", must be cpu, cuda or cuda:N"));
  }
  if (absl::StartsWith(device, "cuda") && machine.cuda_devices < 1) {
    return absl::FailedPreconditionError(
        absl::StrCat(key, ": ", device, ", but this machine has no CUDA device (use cpu)"));
  }
  absl::string_view index_text = device;
  int index = 0;
  if (absl::ConsumePrefix(&index_text, "cuda:") &&
      (!absl::SimpleAtoi(index_text, &index) || index >= machine.cuda_devices)) {
    return absl::FailedPreconditionError(absl::StrCat(key, ": ", device, ", but this machine has ",
                                                      machine.cuda_devices, " CUDA devices"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckMachineResources(const ModelConfig& model, const MachineResources& machine) {
  WQ_RETURN_IF_ERROR(CheckDevice("model.device", model.compute.device, machine));
  return CheckThreads("model.threads", model.threads, machine);
}

absl::Status CheckThisMachine(const ModelConfig& model) {
  return CheckMachineResources(model, ThisMachine());
}

absl::Status CheckDeviceFlag(absl::string_view flag, const std::string& device) {
  return CheckDevice(flag, device, ThisMachine());
}

absl::Status CheckThreadsFlag(absl::string_view flag, int64_t threads) {
  return CheckThreads(flag, threads, ThisMachine());
}

}  // namespace windquant::config
