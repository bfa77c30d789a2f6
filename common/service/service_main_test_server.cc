// A service main for service_main_test: RunServiceMain with a fake service whose
// behaviour WQ_FAKE_SERVICE picks: "" serves (port 4242) until SIGTERM; "create-fails",
// "bad-config" and "start-fails" fail at that step. Stop prints "fake: stopped". Its
// `load` only reads the --config file (the skeleton knows no run config).
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/service/service_main.h"

namespace {

std::string Mode() {
  const char* m = std::getenv("WQ_FAKE_SERVICE");
  return m == nullptr ? "" : m;
}

class FakeService : public windquant::service::Service {
 public:
  absl::Status Start() override {
    if (Mode() == "start-fails") return absl::UnavailableError("fake: peer unreachable");
    return absl::OkStatus();
  }
  int port() const override { return 4242; }
  void Stop() override { std::cerr << "fake: stopped" << std::endl; }
};

absl::StatusOr<std::unique_ptr<windquant::service::Service>> Create(
    windquant::metrics::Registry*, const windquant::base::LogSink&) {
  if (Mode() == "create-fails") return absl::UnavailableError("fake: cannot load");
  if (Mode() == "bad-config") return absl::InvalidArgumentError("fake.key: must be positive");
  return std::make_unique<FakeService>();
}

absl::StatusOr<windquant::service::ServiceSettings> Load(
    const windquant::service::ServiceFlags& flags) {
  WQ_RETURN_IF_ERROR(windquant::base::ReadFile(flags.config).status());
  windquant::service::ServiceSettings settings;
  settings.create = &Create;
  return settings;
}

}  // namespace

int main(int argc, char** argv) {
  return windquant::service::RunServiceMain(
      argc, argv, {"fake-service", "fake_port", "usage: fake-service --config F\n", &Load});
}
