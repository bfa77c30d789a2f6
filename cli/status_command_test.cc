// `windquant status` (the real binary, a child process) against a real learner stub
// served by net::GrpcServer on 127.0.0.1:0: a flag that asks for security (--ca-file,
// --token-file) is used or the command fails with one line; it never falls back.
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/base/files.h"
#include "common/net/server.h"
#include "common/net/test_certs.h"
#include "common/testing/shell.h"
#include "windquant/v1/learner.grpc.pb.h"

namespace windquant::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class FakeLearner final : public v1::Learner::Service {
  grpc::Status GetRunStatus(grpc::ServerContext*, const v1::RunStatusRequest*,
                            v1::RunStatus* reply) override {
    reply->set_episodes(7);
    return grpc::Status::OK;
  }
};

using Result = testing::CommandOutput;

class StatusCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("WQ_BINARY_DIR");
    ASSERT_NE(bin, nullptr) << "WQ_BINARY_DIR (set by ctest)";
    windquant_ = std::string(bin) + "/cli/windquant";
    ASSERT_TRUE(fs::exists(windquant_)) << windquant_;
    auto certs = net::MakeTestCerts();
    ASSERT_TRUE(certs.ok()) << certs.status();
    certs_ = *certs;
    dir_ = certs_.dir;
  }
  void TearDown() override { fs::remove_all(certs_.dir); }

  void StartLearner(net::ServerOptions options) {
    server_ = std::make_unique<net::GrpcServer>(options);
    server_->AddService(&learner_, v1::Learner::service_full_name());
    absl::Status s = server_->Start();
    ASSERT_TRUE(s.ok()) << s;
  }
  Result Status(const std::string& flags) {
    return testing::RunInDir(dir_, windquant_ + " status --learner " + server_->address() +
                                       " --timeout-ms 5000 " + flags);
  }
  // Exit 1, nothing on stdout, one line on stderr naming `culprit`.
  void ExpectRefused(const std::string& flags, const std::string& culprit) {
    const Result r = Status(flags);
    EXPECT_EQ(r.exit_code, 1) << flags << "\n" << r.out << r.err;
    EXPECT_EQ(r.out, "") << flags;
    EXPECT_THAT(r.err, HasSubstr(culprit)) << flags;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << flags << "\n" << r.err;
  }

  std::string windquant_, dir_;
  net::TestCerts certs_;
  FakeLearner learner_;
  std::unique_ptr<net::GrpcServer> server_;
};

// error-case: cli.status-security-flags
TEST_F(StatusCommandTest, SecurityFlagsAreUsedOrTheCommandFails) {
  StartLearner(net::ServerOptions{});  // plaintext
  // The control: the learner answers plaintext clients.
  Result plain = Status("");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_THAT(plain.out, HasSubstr("episodes=7"));

  // A valid CA against the plaintext learner: TLS is attempted, the handshake fails.
  ExpectRefused("--ca-file " + certs_.ca_cert, "learner " + server_->address() + ": ");
  // Files that hold no certificate: refused before connecting, naming flag and file.
  const std::string not_pem = dir_ + "/bogus.crt";
  std::ofstream(not_pem) << "not a certificate\n";
  ExpectRefused("--ca-file " + not_pem,
                "--ca-file: " + not_pem + ": no PEM certificate OpenSSL can parse");
  const std::string fake_pem = dir_ + "/fake.crt";
  std::ofstream(fake_pem) << "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
  ExpectRefused("--ca-file " + fake_pem,
                "--ca-file: " + fake_pem + ": no PEM certificate OpenSSL can parse");
  ExpectRefused("--ca-file " + dir_ + "/missing.crt", "--ca-file: " + dir_ + "/missing.crt");
  // A token file that holds no token.
  const std::string empty_token = dir_ + "/empty.token";
  std::ofstream(empty_token) << "\n";
  ExpectRefused("--token-file " + empty_token,
                "--token-file: " + empty_token + ": bearer token file is empty");
}

TEST_F(StatusCommandTest, CaFileVerifiesATlsLearner) {
  net::ServerOptions tls;
  tls.cert_file = certs_.server_cert;
  tls.key_file = certs_.server_key;
  StartLearner(tls);
  const Result r = Status("--ca-file " + certs_.ca_cert);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("episodes=7"));
  // A CA that did not sign the learner's certificate.
  ExpectRefused("--ca-file " + certs_.rogue_cert, "learner " + server_->address() + ": ");
}

}  // namespace
}  // namespace windquant::cli
