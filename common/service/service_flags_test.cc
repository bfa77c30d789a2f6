// The flags of windquant-learner, -evaluator and -actor are checked like the
// config keys: given twice or empty is an error naming the flag.
#include "common/service/service_flags.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace windquant::service {
namespace {

absl::StatusOr<ServiceFlags> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "windquant-learner");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return ParseServiceFlags(static_cast<int>(argv.size()), argv.data());
}

std::string ErrorOf(std::vector<std::string> args) {
  auto f = Parse(std::move(args));
  return f.ok() ? "" : std::string(f.status().message());
}

TEST(ServiceFlagsTest, KeepsTheFlagsAsGiven) {
  absl::StatusOr<ServiceFlags> f =
      Parse({"--set", "a=1", "--config=r.yaml", "--metrics-port", "0", "--set=b=2"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_FALSE(f->help);
  EXPECT_EQ(f->config, "r.yaml");
  EXPECT_EQ(f->overrides, (std::vector<std::string>{"a=1", "b=2"}));
  EXPECT_EQ(f->metrics_port, 0);
  EXPECT_EQ(Parse({"--config", "r.yaml"})->metrics_port, -1) << "not given";
  EXPECT_TRUE(Parse({"--help", "--bogus"})->help) << "--help stops the parse";
  EXPECT_EQ(ErrorOf({"--set", "a=1"}), "--config: required");
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
