// TLS and mutual TLS between GrpcServer and MakeChannel with certificates made by the
// openssl CLI (test_certs.h), plus the bearer token over TLS and the config mapping.
#include <filesystem>
#include <fstream>

#include "common/net/channel.h"
#include "common/net/health_client.h"
#include "common/net/server.h"
#include "common/net/test_certs.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "windquant/v1/learner.grpc.pb.h"

namespace windquant::net {
namespace {

using ::windquant::testing::StatusIs;

constexpr absl::Duration kTimeout = absl::Seconds(10);
constexpr absl::Duration kFailTimeout = absl::Seconds(5);
const std::string kLearner = v1::Learner::service_full_name();

class FakeLearner final : public v1::Learner::Service {
  grpc::Status GetRunStatus(grpc::ServerContext*, const v1::RunStatusRequest*,
                            v1::RunStatus* reply) override {
    reply->set_episodes(7);
    return grpc::Status::OK;
  }
};

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto certs = MakeTestCerts();
    if (certs.ok()) {
      certs_ = new TestCerts(*certs);
    } else {
      error_ = new std::string(certs.status().ToString());
    }
  }
  static void TearDownTestSuite() {
    if (certs_ != nullptr) std::filesystem::remove_all(certs_->dir);
  }
  void SetUp() override { ASSERT_NE(certs_, nullptr) << "no test certificates: " << *error_; }

  // Starts a TLS server (mutual when `mutual`), optionally with a token.
  void StartServer(bool mutual, const std::string& token = "") {
    ServerOptions options;
    options.cert_file = certs_->server_cert;
    options.key_file = certs_->server_key;
    if (mutual) {
      options.ca_file = certs_->ca_cert;
      options.require_client_cert = true;
    }
    options.bearer_token = token;
    server_ = std::make_unique<GrpcServer>(options);
    server_->AddService(&learner_, kLearner);
    absl::Status s = server_->Start();
    ASSERT_TRUE(s.ok()) << s;
  }
  std::shared_ptr<grpc::Channel> Channel(ChannelOptions options) {
    options.target = server_->address();
    return MakeChannel(options).value();
  }
  ChannelOptions Tls() const {
    ChannelOptions o;
    o.ca_file = certs_->ca_cert;
    return o;
  }
  grpc::Status Call(const std::shared_ptr<grpc::Channel>& channel,
                    absl::Duration timeout = kTimeout) {
    auto stub = v1::Learner::NewStub(channel);
    grpc::ClientContext context;
    ConfigureContext(context, timeout);
    v1::RunStatus reply;
    grpc::Status s = stub->GetRunStatus(&context, v1::RunStatusRequest(), &reply);
    if (s.ok()) {
      EXPECT_EQ(reply.episodes(), 7);
    }
    return s;
  }

  static TestCerts* certs_;
  static std::string* error_;
  FakeLearner learner_;
  std::unique_ptr<GrpcServer> server_;
};
TestCerts* TlsTest::certs_ = nullptr;
std::string* TlsTest::error_ = nullptr;

TEST_F(TlsTest, TlsClientServedPlaintextClientRefused) {
  StartServer(/*mutual=*/false);
  EXPECT_TRUE(Call(Channel(Tls())).ok());
  EXPECT_EQ(CheckHealth(Channel(Tls()), "", kTimeout).value(),
            grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(Call(Channel(ChannelOptions{}), kFailTimeout).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsTest, ClientRefusesServerFromUntrustedCa) {
  StartServer(/*mutual=*/false);
  ChannelOptions wrong_root;
  wrong_root.ca_file = certs_->rogue_cert;
  EXPECT_EQ(Call(Channel(wrong_root), kFailTimeout).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsTest, MutualTlsRequiresClientCertificateFromTheCa) {
  StartServer(/*mutual=*/true);
  // No client certificate.
  EXPECT_EQ(Call(Channel(Tls()), kFailTimeout).error_code(), grpc::StatusCode::UNAVAILABLE);
  // A certificate signed by the CA.
  ChannelOptions good = Tls();
  good.cert_file = certs_->client_cert;
  good.key_file = certs_->client_key;
  grpc::Status s = Call(Channel(good));
  EXPECT_TRUE(s.ok()) << s.error_message();
  // A self-signed certificate from another "CA".
  ChannelOptions rogue = Tls();
  rogue.cert_file = certs_->rogue_cert;
  rogue.key_file = certs_->rogue_key;
  EXPECT_EQ(Call(Channel(rogue), kFailTimeout).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsTest, BearerTokenOverMutualTls) {
  StartServer(/*mutual=*/true, "tls-token-123");
  ChannelOptions o = Tls();
  o.cert_file = certs_->client_cert;
  o.key_file = certs_->client_key;
  EXPECT_EQ(Call(Channel(o)).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  o.bearer_token = "tls-token-12";
  EXPECT_EQ(Call(Channel(o)).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  o.bearer_token = "tls-token-123";
  grpc::Status s = Call(Channel(o));
  EXPECT_TRUE(s.ok()) << s.error_message();
}

TEST_F(TlsTest, OptionsFromServiceConfig) {
  const std::string token_file = certs_->dir + "/token";
  std::ofstream(token_file) << "cfg-token\n";
  PeerOptions service;
  service.tls.cert_file = certs_->server_cert;
  service.tls.key_file = certs_->server_key;
  service.tls.ca_file = certs_->ca_cert;
  service.tls.require_client_cert = true;
  service.tls.bearer_token_file = token_file;
  // In the test the server and client share one certificate pair per role, as the
  // deployment mounts the same Secret: here the client presents the client certificate.
  auto server_options = ServerOptionsFromConfig(service, "127.0.0.1:0");
  ASSERT_TRUE(server_options.ok()) << server_options.status();
  EXPECT_EQ(server_options->bearer_token, "cfg-token");
  GrpcServer server(*server_options);
  server.AddService(&learner_, kLearner);
  ASSERT_TRUE(server.Start().ok());
  auto channel_options = ChannelOptionsFromConfig(service, server.address());
  ASSERT_TRUE(channel_options.ok()) << channel_options.status();
  EXPECT_EQ(channel_options->ca_file, certs_->ca_cert);
  EXPECT_EQ(channel_options->bearer_token, "cfg-token");
  EXPECT_EQ(channel_options->default_deadline, absl::Milliseconds(service.rpc_deadline_ms));
  // The config's cert pair is the server's; a client with a server-only certificate is
  // refused (extendedKeyUsage=serverAuth), so present the client pair here.
  channel_options->cert_file = certs_->client_cert;
  channel_options->key_file = certs_->client_key;
  auto channel = MakeChannel(*channel_options).value();
  auto stub = v1::Learner::NewStub(channel);
  grpc::ClientContext context;
  ConfigureContext(context, kTimeout);
  v1::RunStatus reply;
  grpc::Status s = stub->GetRunStatus(&context, v1::RunStatusRequest(), &reply);
  EXPECT_TRUE(s.ok()) << s.error_message();

  service.tls.bearer_token_file = certs_->dir + "/missing";
  EXPECT_THAT(ServerOptionsFromConfig(service, "127.0.0.1:0"),
              StatusIs(absl::StatusCode::kNotFound,
                       "service.tls.bearer_token_file: " + certs_->dir + "/missing: no such file"));
  std::ofstream(token_file) << "  \n";
  service.tls.bearer_token_file = token_file;
  EXPECT_THAT(
      ChannelOptionsFromConfig(service, "x:1"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "service.tls.bearer_token_file: " + token_file + ": bearer token file is empty"));
}

// Every setting that asks for security is used or refused, never dropped for less.
// error-case: net.tls-never-falls-back
TEST_F(TlsTest, SecuritySettingsAreUsedOrRefusedNeverDropped) {
  // A plaintext server that answers (the control: plaintext clients get through).
  server_ = std::make_unique<GrpcServer>(ServerOptions{});
  server_->AddService(&learner_, kLearner);
  ASSERT_TRUE(server_->Start().ok());
  ASSERT_TRUE(Call(Channel(ChannelOptions{})).ok());

  // A client with a CA (from the config, without a server cert of its own, as in
  // `windquant status --ca-file`) uses TLS: the plaintext server fails the handshake.
  PeerOptions client;
  client.tls.ca_file = certs_->ca_cert;
  auto from_config = ChannelOptionsFromConfig(client, server_->address());
  ASSERT_TRUE(from_config.ok()) << from_config.status();
  EXPECT_EQ(from_config->ca_file, certs_->ca_cert);
  EXPECT_EQ(Call(MakeChannel(*from_config).value(), kFailTimeout).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // ... and so does a client certificate on top.
  client.tls.cert_file = certs_->client_cert;
  client.tls.key_file = certs_->client_key;
  client.tls.require_client_cert = true;
  from_config = ChannelOptionsFromConfig(client, server_->address());
  ASSERT_TRUE(from_config.ok()) << from_config.status();
  EXPECT_EQ(from_config->cert_file, certs_->client_cert);
  EXPECT_EQ(Call(MakeChannel(*from_config).value(), kFailTimeout).error_code(),
            grpc::StatusCode::UNAVAILABLE);

  // A client certificate asked for but not given.
  PeerOptions no_cert;
  no_cert.tls.ca_file = certs_->ca_cert;
  no_cert.tls.require_client_cert = true;
  EXPECT_THAT(ChannelOptionsFromConfig(no_cert, "x:1"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "service.tls.require_client_cert: needs cert_file"));

  // A server given a CA but no certificate of its own would be plaintext: refused.
  ServerOptions ca_only;
  ca_only.ca_file = certs_->ca_cert;
  GrpcServer refused(ca_only);
  refused.AddService(&learner_, kLearner);
  EXPECT_THAT(refused.Start(), StatusIs(absl::StatusCode::kInvalidArgument,
                                        "service.tls.ca_file: set without cert_file"));
  EXPECT_EQ(refused.port(), 0);
}

// error-case: net.tls-bogus-pem
TEST_F(TlsTest, BogusPemFilesAreRefusedBeforeConnecting) {
  const std::string not_pem = certs_->dir + "/not_pem.crt";
  const std::string fake_pem = certs_->dir + "/fake_pem.crt";
  std::ofstream(not_pem) << "hello\n";
  std::ofstream(fake_pem) << "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n"
                             "-----END CERTIFICATE-----\n";
  const std::string missing = certs_->dir + "/missing.crt";
  for (const std::string& bad : {not_pem, fake_pem}) {
    ChannelOptions ca;
    ca.target = "127.0.0.1:1";
    ca.ca_file = bad;
    EXPECT_THAT(MakeChannel(ca),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         "service.tls.ca_file: " + bad + ": no PEM certificate OpenSSL can parse"));
    ChannelOptions cert = Tls();
    cert.target = "127.0.0.1:1";
    cert.cert_file = bad;
    cert.key_file = certs_->client_key;
    EXPECT_THAT(MakeChannel(cert), StatusIs(absl::StatusCode::kInvalidArgument,
                                            "service.tls.cert_file: " + bad +
                                                ": no PEM certificate OpenSSL can parse"));
    // A certificate is no private key.
    cert.cert_file = certs_->client_cert;
    cert.key_file = certs_->client_cert;
    EXPECT_THAT(MakeChannel(cert), StatusIs(absl::StatusCode::kInvalidArgument,
                                            "service.tls.key_file: " + certs_->client_cert +
                                                ": no PEM private key OpenSSL can parse"));
    ServerOptions server;
    server.cert_file = certs_->server_cert;
    server.key_file = certs_->server_key;
    server.ca_file = bad;
    GrpcServer refused(server);
    refused.AddService(&learner_, kLearner);
    EXPECT_THAT(refused.Start(),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         "service.tls.ca_file: " + bad + ": no PEM certificate OpenSSL can parse"));
  }
  ChannelOptions gone;
  gone.target = "127.0.0.1:1";
  gone.ca_file = missing;
  EXPECT_THAT(MakeChannel(gone),
              StatusIs(absl::StatusCode::kNotFound, "service.tls.ca_file: " + missing));
}

}  // namespace
}  // namespace windquant::net
