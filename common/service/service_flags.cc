#include "common/service/service_flags.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace windquant::service {

absl::StatusOr<ServiceFlags> ParseServiceFlags(int argc, char** argv) {
  ServiceFlags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const std::string& name) -> absl::StatusOr<std::string> {
      if (absl::StartsWith(a, name + "=")) return a.substr(name.size() + 1);
      if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat(name, ": needs a value"));
      return std::string(argv[++i]);
    };
    if (a == "--help" || a == "-h") {
      flags.help = true;
      return flags;
    } else if (a == "--config" || absl::StartsWith(a, "--config=")) {
      if (!flags.config.empty()) {
        return absl::InvalidArgumentError("--config: given more than once");
      }
      WQ_ASSIGN_OR_RETURN(flags.config, value("--config"));
      if (flags.config.empty()) return absl::InvalidArgumentError("--config: empty value");
    } else if (a == "--set" || absl::StartsWith(a, "--set=")) {
      WQ_ASSIGN_OR_RETURN(std::string o, value("--set"));
      flags.overrides.push_back(o);
    } else if (a == "--metrics-port" || absl::StartsWith(a, "--metrics-port=")) {
      if (flags.metrics_port >= 0) {
        return absl::InvalidArgumentError("--metrics-port: given more than once");
      }
      WQ_ASSIGN_OR_RETURN(std::string p, value("--metrics-port"));
      int port = -1;
      if (!absl::SimpleAtoi(p, &port) || port < 0 || port > 65535) {
        return absl::InvalidArgumentError(
            absl::StrCat("--metrics-port: '", p, "' is not a port in [0, 65535]"));
      }
      flags.metrics_port = port;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", a, " (see --help)"));
    }
  }
  if (flags.config.empty()) return absl::InvalidArgumentError("--config: required");
  return flags;
}

}  // namespace windquant::service
