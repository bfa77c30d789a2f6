#include "cli/command.h"

#include <cmath>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace windquant::cli {

std::map<std::string, Command>& CommandRegistry() {
  static auto* registry = new std::map<std::string, Command>();
  return *registry;
}

Args::Args(std::string command, std::vector<std::string> argv) : command_(std::move(command)) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--help" || a == "-h") {
      help_ = true;
    } else if (absl::StartsWith(a, "--")) {
      std::string key = a.substr(2), value;
      const size_t eq = key.find('=');
      if (eq != std::string::npos) {
        value = key.substr(eq + 1);
        key = key.substr(0, eq);
      } else if (i + 1 < argv.size() && !absl::StartsWith(argv[i + 1], "--")) {
        value = argv[++i];
      } else {
        value = "";  // bare flag
      }
      flags_.emplace(key, value);
    } else {
      positional_.push_back(a);
    }
  }
}

std::string Args::Get(const std::string& name, const std::string& default_value) {
  known_[name] = true;
  auto it = flags_.find(name);
  if (it == flags_.end()) return default_value;
  // Like a config key: given twice or without a value is an error (Finish),
  // not a silent pick of one value or of the default.
  if (flags_.count(name) > 1) {
    misused_.emplace(name, "given more than once");
  } else if (it->second.empty()) {
    misused_.emplace(name, "expected a value");
  }
  return it->second;
}

bool Args::Has(const std::string& name) {
  known_[name] = true;
  return flags_.count(name) > 0;
}

std::vector<std::string> Args::GetAll(const std::string& name) {
  known_[name] = true;
  std::vector<std::string> out;
  auto range = flags_.equal_range(name);
  for (auto it = range.first; it != range.second; ++it) out.push_back(it->second);
  return out;
}

absl::StatusOr<int64_t> Args::GetInt(const std::string& name, int64_t default_value) {
  if (!Has(name)) return default_value;
  int64_t v;
  const std::string s = Get(name);
  if (!absl::SimpleAtoi(s, &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": expected an integer, got '", s, "'"));
  }
  return v;
}

absl::StatusOr<double> Args::GetDouble(const std::string& name, double default_value) {
  if (!Has(name)) return default_value;
  double v;
  const std::string s = Get(name);
  if (!absl::SimpleAtod(s, &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": expected a number, got '", s, "'"));
  }
  if (!std::isfinite(v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": must be a finite number, got '", s, "'"));
  }
  return v;
}

absl::Status Args::Finish(size_t max_positionals) const {
  if (!misused_.empty()) {
    const auto& [name, what] = *misused_.begin();
    return absl::InvalidArgumentError(absl::StrCat("--", name, ": ", what));
  }
  for (const auto& [k, v] : flags_) {
    if (!known_.count(k)) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", k, " (see windquant ", command_, " --help)"));
    }
  }
  if (positional_.size() > max_positionals) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", positional_[max_positionals], "'"));
  }
  return absl::OkStatus();
}

}  // namespace windquant::cli
