#include "common/testing/test_paths.h"

#include <cstdlib>
#include <filesystem>

namespace windquant::testing {
namespace {

namespace fs = std::filesystem;

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

bool IsFile(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

}  // namespace

std::string SourceDir() { return EnvOr("WQ_SOURCE_DIR", "."); }

std::string BinaryDir() { return EnvOr("WQ_BINARY_DIR", fs::temp_directory_path().string()); }

std::string SharedDir() {
  const std::string dir = SourceDir() + "/../shared";
  std::error_code ec;
  return fs::is_directory(dir, ec) ? dir : "";
}

TestModel RealModel() {
  const std::string shared = SharedDir();
  TestModel m;
  if (!shared.empty() && IsFile(shared + "/models/stories260k/model.safetensors") &&
      IsFile(shared + "/data/tinystories-valid-sample.txt")) {
    m.name = "stories260k";
    m.dir = shared + "/models/stories260k";
    m.text_path = shared + "/data/tinystories-valid-sample.txt";
    m.config = SourceDir() + "/configs/test-stories260k.yaml";
    m.stories260k = true;
    return m;
  }
  // Paths written by scripts/default-model.sh --small and scripts/fetch-default-data.sh.
  m.name = "test-model";
  m.dir = SourceDir() + "/.cache/test-model";
  m.text_path = SourceDir() + "/.cache/default-data/heldout.txt";
  m.config = SourceDir() + "/configs/test-model.yaml";
  return m;
}

std::vector<std::string> TextPaths() {
  const std::string shared = SharedDir();
  if (!shared.empty() && IsFile(shared + "/data/tinystories-valid-sample.txt") &&
      IsFile(shared + "/data/wikitext2-test.txt")) {
    return {shared + "/data/tinystories-valid-sample.txt", shared + "/data/wikitext2-test.txt"};
  }
  return {SourceDir() + "/.cache/default-data/heldout.txt"};
}

}  // namespace windquant::testing
