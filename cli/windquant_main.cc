// `windquant`: dispatches to the registered subcommands (cli/*_command.cc).
#include <cstdio>
#include <string>
#include <vector>

#include "cli/command.h"
#include "common/base/build_commit.h"

namespace {

void PrintHelp() {
  std::printf(
      "windquant: learned mixed-precision quantization of LLaMA models (WINDQuant).\n\n"
      "usage: windquant COMMAND [flags]   (windquant COMMAND --help for its flags)\n"
      "       windquant --version            (the commit it was built from)\n\ncommands:\n");
  for (const auto& [name, c] : windquant::cli::CommandRegistry()) {
    std::printf("  %-12s %s\n", name.c_str(), c.summary.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" ||
      std::string(argv[1]) == "help") {
    PrintHelp();
    return argc < 2 ? 2 : 0;
  }
  if (std::string(argv[1]) == "--version") {
    std::printf("windquant %s\n", windquant::base::BuildCommit());
    return 0;
  }
  auto& registry = windquant::cli::CommandRegistry();
  auto it = registry.find(argv[1]);
  if (it == registry.end()) {
    std::fprintf(stderr, "windquant: unknown command '%s' (see windquant --help)\n", argv[1]);
    return 2;
  }
  windquant::cli::Args args(argv[1], std::vector<std::string>(argv + 2, argv + argc));
  if (args.help()) {
    std::printf("%s\n", it->second.usage.c_str());
    return 0;
  }
  absl::Status status = it->second.run(args);
  if (!status.ok()) {
    std::fprintf(stderr, "windquant %s: %s\n", argv[1], std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
