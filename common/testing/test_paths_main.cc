// Prints the test model and texts of common/testing/test_paths.h as shell
// assignments, so that the shell tests (tests/*.sh, scripts/test-model.sh)
// share the C++ tests' one definition:  eval "$(wq-test-paths)"
#include <cstdio>
#include <cstring>
#include <string>

#include "common/testing/shell.h"
#include "common/testing/test_paths.h"

int main(int argc, char** argv) {
  using windquant::testing::ShellQuote;
  if (argc > 1 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::printf(
        "usage: wq-test-paths\n"
        "Prints WQ_TEST_MODEL_NAME, WQ_TEST_MODEL_DIR, WQ_TEST_TEXT, WQ_TEST_CONFIG,\n"
        "WQ_TEST_STORIES260K and\n"
        "WQ_SHARED_DIR as shell assignments (reads WQ_SOURCE_DIR).\n");
    return 0;
  }
  const windquant::testing::TestModel m = windquant::testing::RealModel();
  std::printf("WQ_TEST_MODEL_NAME=%s\n", ShellQuote(m.name).c_str());
  std::printf("WQ_TEST_MODEL_DIR=%s\n", ShellQuote(m.dir).c_str());
  std::printf("WQ_TEST_TEXT=%s\n", ShellQuote(m.text_path).c_str());
  std::printf("WQ_TEST_CONFIG=%s\n", ShellQuote(m.config).c_str());
  std::printf("WQ_TEST_STORIES260K=%d\n", m.stories260k ? 1 : 0);
  std::printf("WQ_SHARED_DIR=%s\n", ShellQuote(windquant::testing::SharedDir()).c_str());
  return 0;
}
