// Test-only helpers to find and run the external tools some tests check
// against (promtool, moto_server, aws, chromium, ...).
#ifndef WINDQUANT_COMMON_TESTING_SHELL_H_
#define WINDQUANT_COMMON_TESTING_SHELL_H_

#include <string>

namespace windquant::testing {

// `s` single-quoted for /bin/sh (a ' inside becomes '\'').
std::string ShellQuote(const std::string& s);

// The first executable `name` on $PATH, or "" when there is none.
std::string FindOnPath(const std::string& name);

struct CommandResult {
  int exit_code = -1;  // -1 when the command could not run or did not exit normally
  std::string output;  // stdout and stderr together
};

// Runs `command` with /bin/sh and captures its stdout and stderr.
CommandResult RunShell(const std::string& command);

struct CommandOutput {
  int exit_code = -1;  // 128 + the signal when killed; 124 when it ran out of time
  std::string out, err;
};

// Runs `command` with /bin/sh in the existing folder `dir`, under coreutils' `timeout`
// (so a command that hangs fails the test instead of blocking it), with stdout and
// stderr captured apart (through dir/.stdout and dir/.stderr).
CommandOutput RunInDir(const std::string& dir, const std::string& command, int timeout_s = 60);

}  // namespace windquant::testing

#endif  // WINDQUANT_COMMON_TESTING_SHELL_H_
