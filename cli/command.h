// The `windquant` command: each subcommand lives in its own
// cli/<name>_command.cc and registers itself with WQ_REGISTER_COMMAND.
#ifndef WINDQUANT_CLI_COMMAND_H_
#define WINDQUANT_CLI_COMMAND_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace windquant::cli {

// Parsed `--key value`, `--key=value` and bare `--flag` arguments.
// Unknown flags are an error naming the flag (checked by Finish()).
class Args {
 public:
  Args(std::string command, std::vector<std::string> argv);
  // Accessors mark a flag as known. Errors name the flag and its value.
  std::string Get(const std::string& name, const std::string& default_value = "");
  absl::StatusOr<int64_t> GetInt(const std::string& name, int64_t default_value);
  absl::StatusOr<double> GetDouble(const std::string& name, double default_value);
  bool Has(const std::string& name);  // `--flag` present (bare or with a value)
  std::vector<std::string> GetAll(const std::string& name);  // repeated flag
  const std::vector<std::string>& positional() const { return positional_; }
  bool help() const { return help_; }
  // After all accessors: error for a value flag given twice or without a
  // value, for any flag no accessor asked for, or for more
  // than `max_positionals` positional arguments (e.g. the verb of `plans`).
  absl::Status Finish(size_t max_positionals = 0) const;

 private:
  std::string command_;
  std::multimap<std::string, std::string> flags_;
  std::vector<std::string> positional_;
  mutable std::map<std::string, bool> known_;
  std::map<std::string, std::string> misused_;  // flag -> why (given twice, no value)
  bool help_ = false;
};

struct Command {
  std::string name;
  std::string summary;  // one line for `windquant --help`
  std::string usage;    // full text for `windquant NAME --help`
  std::function<absl::Status(Args&)> run;
};

std::map<std::string, Command>& CommandRegistry();

struct CommandRegistrar {
  explicit CommandRegistrar(Command c) { CommandRegistry()[c.name] = std::move(c); }
};

#define WQ_REGISTER_COMMAND(var, ...) \
  static ::windquant::cli::CommandRegistrar wq_command_##var(::windquant::cli::Command{__VA_ARGS__})

}  // namespace windquant::cli

#endif  // WINDQUANT_CLI_COMMAND_H_
