// The flags of windquant-learner, -evaluator and -actor are checked like the
// config keys: given twice or empty is an error naming the flag.
#include "common/service/service_flags.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace windquant::service {
namespace {

std::string ErrorOf(std::vector<std::string> args) {
  args.insert(args.begin(), "windquant-learner");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  auto f = ParseServiceFlags(static_cast<int>(argv.size()), argv.data());
  return f.ok() ? "" : std::string(f.status().message());
}

// error-case: service.flag-twice
TEST(ServiceFlagsTest, FlagGivenTwiceIsRefused) {
  EXPECT_EQ(ErrorOf({"--config", "a.yaml", "--config=b.yaml"}), "--config: given more than once");
  EXPECT_EQ(ErrorOf({"--metrics-port", "1", "--metrics-port", "2", "--config", "a.yaml"}),
            "--metrics-port: given more than once");
}

// error-case: service.flag-empty
TEST(ServiceFlagsTest, EmptyOrMissingValuesAreRefused) {
  EXPECT_EQ(ErrorOf({"--config="}), "--config: empty value");
  EXPECT_EQ(ErrorOf({"--config"}), "--config: needs a value");
  EXPECT_EQ(ErrorOf({"--config", "a.yaml", "--metrics-port", "x"}),
            "--metrics-port: 'x' is not a port in [0, 65535]");
  EXPECT_EQ(ErrorOf({"--bogus"}), "unknown flag --bogus (see --help)");
}

}  // namespace
}  // namespace windquant::service
