// `windquant status --learner HOST:PORT`: the state of a distributed run
// (Learner.GetRunStatus), one `key=value` per line, or --json.
#include <grpc/support/log.h>

#include <iostream>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cli/command.h"
#include "common/net/channel.h"
#include "common/net/status_convert.h"
#include "windquant/v1/learner.grpc.pb.h"

namespace windquant::cli {
namespace {

// The channel library names config keys; here the user gave flags.
absl::Status NameFlags(const absl::Status& status) {
  std::string message(status.message());
  for (const auto& [key, flag] :
       {std::pair<std::string, std::string>{"service.tls.ca_file", "--ca-file"},
        {"service.tls.bearer_token_file", "--token-file"}}) {
    if (absl::StartsWith(message, key)) message = flag + message.substr(key.size());
  }
  return absl::Status(status.code(), message);
}

// --ca-file means TLS verified against that CA: the channel never falls back to
// plaintext, so a plaintext (or untrusted) learner fails the handshake, and a file
// that holds no certificate is refused before connecting.
absl::Status RunStatus(Args& args) {
  const std::string learner = args.Get("learner");
  const std::string token_file = args.Get("token-file");
  const std::string ca_file = args.Get("ca-file");
  absl::StatusOr<int64_t> timeout_ms = args.GetInt("timeout-ms", 5000);
  if (!timeout_ms.ok()) return timeout_ms.status();
  const bool wait = args.Has("wait-for-ready");
  absl::Status finish = args.Finish();
  if (!finish.ok()) return finish;
  if (learner.empty()) return absl::InvalidArgumentError("--learner: required (HOST:PORT)");
  // gRPC core would also log a failed handshake to stderr; the returned status says it
  // on the command's one line.
  gpr_set_log_function([](gpr_log_func_args*) {});
  net::PeerOptions service;  // the service section's transport keys, from the flags
  service.tls.bearer_token_file = token_file;
  service.tls.ca_file = ca_file;
  absl::StatusOr<net::ChannelOptions> options = net::ChannelOptionsFromConfig(service, learner);
  if (!options.ok()) return NameFlags(options.status());
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = net::MakeChannel(*options);
  if (!channel.ok()) return NameFlags(channel.status());
  auto stub = v1::Learner::NewStub(*channel);
  grpc::ClientContext ctx;
  net::ConfigureContext(ctx, absl::Milliseconds(*timeout_ms), wait);
  v1::RunStatus s;
  grpc::Status st = stub->GetRunStatus(&ctx, v1::RunStatusRequest(), &s);
  if (!st.ok()) {
    absl::Status a = net::FromGrpcStatus(st);
    return absl::Status(a.code(), absl::StrCat("learner ", learner, ": ", a.message()));
  }
  std::cout << "done=" << (s.done() ? "true" : "false") << "\n"
            << "unit_table_complete=" << (s.unit_table_complete() ? "true" : "false") << "\n"
            << "curriculum_stage=" << s.curriculum_stage() << "/" << s.curriculum_stages() << "\n"
            << "target_bits=" << s.target_bits() << "\n"
            << "updates=" << s.updates() << "\n"
            << "episodes=" << s.episodes() << "\n"
            << "policy_version=" << s.policy_version() << "\n"
            << "lambda=" << s.lambda() << "\n"
            << "connected_actors=" << s.connected_actors() << "\n"
            << "best_plan_id=" << s.best_plan_id() << "\n"
            << "best_plan_effective_bits=" << s.best_plan_effective_bits() << "\n"
            << "best_plan_perplexity=" << s.best_plan_perplexity() << std::endl;
  return absl::OkStatus();
}

WQ_REGISTER_COMMAND(status, "status", "state of a distributed run (asks the learner)",
                    "usage: windquant status --learner HOST:PORT [--timeout-ms 5000]\n"
                    "       [--wait-for-ready] [--token-file F] [--ca-file F]\n"
                    "Prints done, curriculum stage, updates, episodes, policy version, lambda\n"
                    "and the best plan so far, one key=value per line.\n",
                    RunStatus);

}  // namespace
}  // namespace windquant::cli
