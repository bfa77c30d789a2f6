// distributed_bench: what the distributed service (DESIGN.md section 5) costs
// over loopback, each figure next to the one-process figure measured in the
// same run, so that the overhead is read against this machine and not a number
// from elsewhere.
//
//  1. Learner ingestion: transitions/s that a real LearnerService (LearnerCore
//     behind a GrpcServer on 127.0.0.1) accepts from 1, 2 and 4 actor
//     processes. Each actor process (this binary, --role ingest) fetches the
//     unit table from the learner, rolls out --episodes episodes once with a
//     fresh policy (RolloutWorker), then streams them for --seconds on one
//     StreamTransitions stream exactly like actor/rollout_loop.cc does (write
//     one TransitionBatch, wait for its ack), each with a new episode id.
//     Counted at the learner: accepted episodes x steps per episode.
//     One-process figure: the same episodes handed to LearnerCore::SubmitEpisode
//     in this process (no codec, no wire), for the same time.
//  2. Bytes per transition: the protobuf payload (TransitionBatch bytes /
//     steps), and the real TCP bytes both ways (HTTP/2 + gRPC framing, acks,
//     window updates, pings) for one actor streaming through a counting TCP
//     relay in this process.
//  3. Pipeline evaluation: tokens/s of PipelineEvaluator::Perplexity through
//     1, 2 and 4 stage processes (this binary, --role stage: a StageWorker with
//     its layers behind the Actor service, as windquant-actor), full precision
//     and with a 2.0-bit Lagrangian plan applied; one-process figure:
//     model::ComputePerplexity of the whole model in this process, same
//     tokens, context and micro-batch, at --threads and at every core (the
//     faster is the reference of the ratios). Every bench process runs
//     --threads intra-op threads. Also prints the perplexities (they must agree).
//  4. (--load, alone) The learner under load: 64 concurrent StreamTransitions
//     streams (4 actor processes x 16, one connection each, TransitionStreams)
//     saturate a learner wired as windquant-learner's (metrics registry,
//     /metrics and /healthz on a MetricsServer) while a ServiceProber here asks
//     /metrics, /healthz, grpc.health.v1 and Learner.GetRunStatus every 50 ms,
//     idle first, then under load: intake, per-batch ack latency and each probe's
//     latency and failures. References: the one-process SubmitEpisode row and one
//     actor process of one stream, measured in the same run.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "actor/actor_service.h"
#include "common/base/files.h"
#include "common/base/text_range.h"
#include "common/config/run_config.h"
#include "common/metrics/http_server.h"
#include "common/metrics/registry.h"
#include "common/model/perplexity.h"
#include "common/net/channel.h"
#include "common/net/server.h"
#include "common/quant/quantization_session.h"
#include "common/quant/table_fingerprint.h"
#include "common/rl/policy.h"
#include "common/rl/rollout_worker.h"
#include "common/rl/state_features.h"
#include "common/rl/transition_codec.h"
#include "common/search/baselines.h"
#include "common/stage/stage_worker.h"
#include "common/testing/service_prober.h"
#include "common/testing/transition_streams.h"
#include "common/transport/grpc_activation_transport.h"
#include "evaluator/pipeline_evaluator.h"
#include "job/learner_options.h"
#include "job/node_options.h"
#include "learner/learner_core.h"
#include "learner/learner_service.h"
#include "windquant/v1/learner.grpc.pb.h"

namespace {

namespace wq = windquant;
using nlohmann::json;

constexpr char kUsage[] =
    "usage: distributed_bench [flags]\n\n"
    "Loopback costs of the distributed service next to the one-process figures of the same\n"
    "run: learner ingestion (transitions/s from 1, 2, 4 actor processes), bytes per\n"
    "transition on the wire, pipeline evaluation tokens/s through 1, 2, 4 stage processes.\n"
    "Default run: ~2-4 min on 2 shared cores (the 2-thread one-process row is slow under load).\n\n"
    "flags:\n"
    "  --config FILE      run config (default $WQ_SOURCE_DIR/configs/stories260k.yaml, else\n"
    "                     ./configs/stories260k.yaml); its unit table is cached in\n"
    "                     quant.cache_dir as usual\n"
    "  --set key=value    config override (repeatable)\n"
    "  --actors LIST      actor process counts for ingestion (1,2,4)\n"
    "  --stages LIST      stage counts for the pipeline (1,2,4; at most the model's layers)\n"
    "  --seconds S        streaming time per ingestion case (4)\n"
    "  --wire-seconds S   streaming time through the counting relay (2)\n"
    "  --episodes N       distinct episodes each actor rolls out and replays (8)\n"
    "  --eval-tokens N    evaluation-text tokens per pipeline pass (16320 = 64 windows of 255)\n"
    "  --batch N          windows per micro-batch (8)\n"
    "  --repeats N        timed passes per pipeline case; the best is shown (3)\n"
    "  --threads N        intra-op threads of every process (1)\n"
    "  --hold-ms N        service.evaluation_timeout_ms of the bench learners (2000): no\n"
    "                     evaluation arrives here, so each accepted episode is held this\n"
    "                     long (LearnerCore scans the held episodes on every submit)\n"
    "  --load             only the learner under load (section 4): --load-streams concurrent\n"
    "                     StreamTransitions streams (one connection each, one ack per episode)\n"
    "                     from --load-processes actor processes saturate a learner for\n"
    "                     --load-seconds while this process polls its /metrics, /healthz and\n"
    "                     grpc.health.v1 every --probe-ms (deadline 5 s), idle for\n"
    "                     --idle-seconds first; with the one-process SubmitEpisode row and one\n"
    "                     actor process (--seconds each) as references. ~1 min\n"
    "  --load-streams N   concurrent streams under load (64)\n"
    "  --load-processes N actor processes they come from (4; must divide --load-streams)\n"
    "  --load-seconds S   time under load (8)\n"
    "  --idle-seconds S   probing before the load (2)\n"
    "  --probe-ms N       probe interval (50)\n"
    "  --json             one JSON object instead of the tables\n"
    "  --help             this text\n"
    "internal: --role ingest|stage (the child processes), --streams N (of an ingest process)\n";

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "distributed_bench: %s\n", what.c_str());
  std::exit(1);
}

template <typename T>
T OrDie(absl::StatusOr<T> v, const std::string& what) {
  if (!v.ok()) Die(absl::StrCat(what, ": ", v.status().message()));
  return *std::move(v);
}
void OrDie(const absl::Status& s, const std::string& what) {
  if (!s.ok()) Die(absl::StrCat(what, ": ", s.message()));
}

// The run's policy with fresh weights (the config's hidden sizes and seed).
auto FreshPolicy(const wq::config::RunConfig& cfg) {
  wq::rl::PolicyOptions po;
  po.state_dim = wq::rl::kStateDim;
  po.num_actions = wq::plan::kNumActions;
  po.hidden_sizes.assign(cfg.ppo.hidden.begin(), cfg.ppo.hidden.end());
  po.init_seed = cfg.training.seed;
  return OrDie(wq::rl::Policy::Create(po), "policy");
}

// --- flags ------------------------------------------------------------------

struct Flags {
  std::map<std::string, std::string> one;
  std::vector<std::string> sets;
  std::string Get(const std::string& k, const std::string& d = "") const {
    auto it = one.find(k);
    return it == one.end() ? d : it->second;
  }
  double Num(const std::string& k, double d) const {
    auto it = one.find(k);
    if (it == one.end()) return d;
    char* end = nullptr;
    const double v = std::strtod(it->second.c_str(), &end);
    if (end == it->second.c_str() || *end != '\0')
      Die(absl::StrCat("--", k, ": not a number: ", it->second));
    return v;
  }
  std::vector<int> List(const std::string& k, const std::string& d) const {
    std::vector<int> out;
    std::string s = Get(k, d);
    size_t p = 0;
    while (p <= s.size()) {
      const size_t q = std::min(s.find(',', p), s.size());
      const int v = std::atoi(s.substr(p, q - p).c_str());
      if (v < 1) Die(absl::StrCat("--", k, ": expected positive integers, got ", s));
      out.push_back(v);
      p = q + 1;
    }
    return out;
  }
};

Flags ParseFlags(int argc, char** argv) {
  static const char* kKnown[] = {
      "config",       "set",         "actors",  "stages",       "seconds",        "wire-seconds",
      "episodes",     "eval-tokens", "batch",   "repeats",      "threads",        "json",
      "hold-ms",      "role",        "learner", "index",        "model",          "first",
      "end",          "streams",     "load",    "load-streams", "load-processes", "load-seconds",
      "idle-seconds", "probe-ms"};
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      std::exit(0);
    }
    if (a.rfind("--", 0) != 0) Die(absl::StrCat("unexpected argument ", a, " (see --help)"));
    std::string key = a.substr(2), value;
    const size_t eq = key.find('=');
    if (eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    } else if (key != "json" && key != "load") {
      if (i + 1 >= argc) Die(absl::StrCat("--", key, " needs a value"));
      value = argv[++i];
    }
    if (std::find_if(std::begin(kKnown), std::end(kKnown),
                     [&](const char* k) { return key == k; }) == std::end(kKnown)) {
      Die(absl::StrCat("unknown flag --", key, " (see --help)"));
    }
    if (key == "set") {
      f.sets.push_back(value);
    } else {
      f.one[key] = value;
    }
  }
  return f;
}

std::string DefaultConfig() {
  std::vector<std::string> c;
  if (const char* s = std::getenv("WQ_SOURCE_DIR"))
    c.push_back(std::string(s) + "/configs/stories260k.yaml");
  c.push_back("configs/stories260k.yaml");
  c.push_back("../configs/stories260k.yaml");
  c.push_back("../../configs/stories260k.yaml");
  for (const auto& p : c) {
    if (std::filesystem::exists(p)) return p;
  }
  return c.front();
}

// --- child processes ----------------------------------------------------------

std::string SelfExe() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) Die("cannot read /proc/self/exe");
  buf[n] = '\0';
  return buf;
}

// A child running this binary with `args`; its stdin is a pipe from us (it
// exits when we close it) and its stdout a pipe to us (one line per message).
struct Child {
  pid_t pid = -1;
  int to_child = -1;
  FILE* from_child = nullptr;
};

Child Spawn(const std::vector<std::string>& args) {
  int in[2], out[2];
  // Close-on-exec: a later child must not inherit this one's pipe ends (its stdin
  // would never see EOF).
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) Die("pipe failed");
  const std::string exe = SelfExe();
  const pid_t pid = fork();
  if (pid < 0) Die("fork failed");
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[0]);
    close(in[1]);
    close(out[0]);
    close(out[1]);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(exe.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(exe.c_str(), argv.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  Child c;
  c.pid = pid;
  c.to_child = in[1];
  c.from_child = fdopen(out[0], "r");
  return c;
}

std::string ReadLine(Child& c, const std::string& what) {
  char* buf = nullptr;
  size_t cap = 0;
  const ssize_t n = getline(&buf, &cap, c.from_child);  // any length (ack latencies)
  std::string s(buf != nullptr && n > 0 ? buf : "");
  std::free(buf);
  if (n <= 0) Die(absl::StrCat(what, ": child exited early"));
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

void Send(Child& c, const std::string& line) {
  const std::string l = line + "\n";
  if (write(c.to_child, l.data(), l.size()) != static_cast<ssize_t>(l.size()))
    Die("write to child failed");
}

void Finish(Child& c) {
  if (c.to_child >= 0) close(c.to_child);
  c.to_child = -1;
  int status = 0;
  waitpid(c.pid, &status, 0);
  if (c.from_child) fclose(c.from_child);
  c.from_child = nullptr;
}

// Blocks until our stdin reaches EOF (the parent closed it) or a line arrives.
bool WaitForParentLine(std::string* line) {
  char buf[256];
  if (fgets(buf, sizeof(buf), stdin) == nullptr) return false;
  *line = buf;
  return true;
}

// --- counting TCP relay --------------------------------------------------------

class CountingRelay {
 public:
  explicit CountingRelay(int upstream_port) : upstream_port_(upstream_port) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        listen(listen_fd_, 16) != 0) {
      Die("relay: cannot listen on 127.0.0.1");
    }
    socklen_t len = sizeof(a);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~CountingRelay() {
    stop_ = true;
    shutdown(listen_fd_, SHUT_RDWR);
    close(listen_fd_);
    acceptor_.join();
    for (int fd : fds_) shutdown(fd, SHUT_RDWR);
    for (auto& t : pumps_) t.join();
    for (int fd : fds_) close(fd);
  }
  int port() const { return port_; }
  int64_t up() const { return up_; }
  int64_t down() const { return down_; }

 private:
  void Accept() {
    while (!stop_) {
      const int c = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      const int u = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<uint16_t>(upstream_port_));
      if (connect(u, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
        close(c);
        close(u);
        continue;
      }
      const int one = 1;
      setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      setsockopt(u, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      fds_.push_back(c);
      fds_.push_back(u);
      pumps_.emplace_back([this, c, u] { Pump(c, u, &up_); });
      pumps_.emplace_back([this, c, u] { Pump(u, c, &down_); });
    }
  }
  static void Pump(int from, int to, std::atomic<int64_t>* count) {
    char buf[1 << 16];
    while (true) {
      const ssize_t n = read(from, buf, sizeof(buf));
      if (n <= 0) break;
      ssize_t done = 0;
      while (done < n) {
        const ssize_t w = write(to, buf + done, n - done);
        if (w <= 0) return;
        done += w;
      }
      *count += n;
    }
    shutdown(to, SHUT_WR);
  }

  const int upstream_port_;
  int listen_fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> up_{0}, down_{0};
  std::thread acceptor_;
  std::vector<std::thread> pumps_;
  std::vector<int> fds_;  // touched by the acceptor only until it is joined
};

// --- role: ingest (an actor process streaming transitions) -------------------

// Ack latencies to the microsecond (a short line to the parent).
std::vector<double> AckMs(const std::vector<double>& ms) {
  std::vector<double> out;
  out.reserve(ms.size());
  for (double m : ms) out.push_back(std::round(m * 1000) / 1000);
  return out;
}

int RunIngestChild(const Flags& f) {
  const wq::config::RunConfig cfg =
      OrDie(wq::config::LoadRunConfig(f.Get("config"), f.sets), "config");
  at::set_num_threads(static_cast<int>(f.Num("threads", 1)));
  const int index = static_cast<int>(f.Num("index", 0));
  const int episodes_n = static_cast<int>(f.Num("episodes", 8));
  wq::net::ChannelOptions co;
  co.target = f.Get("learner");
  auto channel = OrDie(wq::net::MakeChannel(co), "channel");
  auto stub = wq::v1::Learner::NewStub(channel);
  wq::v1::UnitTable proto;
  {
    grpc::ClientContext ctx;
    wq::net::ConfigureContext(ctx, absl::Seconds(30), /*wait_for_ready=*/true);
    const grpc::Status s = stub->GetUnitTable(&ctx, wq::v1::GetUnitTableRequest(), &proto);
    if (!s.ok()) Die(absl::StrCat("GetUnitTable: ", s.error_message()));
  }
  const wq::plan::UnitTable table = OrDie(wq::plan::UnitTable::FromProto(proto), "table");
  stub.reset();  // the streams below have connections of their own
  channel.reset();
  auto policy = FreshPolicy(cfg);
  const std::string actor_id = absl::StrCat("bench-actor-", index);
  auto worker = OrDie(wq::rl::RolloutWorker::Create(table, cfg.env, actor_id, index, 0, episodes_n,
                                                    cfg.training.seed),
                      "rollout worker");
  std::vector<wq::rl::Episode> episodes =
      OrDie(worker->Run(*policy, cfg.curriculum.target_bits.back()), "rollout");
  std::vector<wq::v1::TransitionBatch> batches(episodes.size());
  for (size_t i = 0; i < episodes.size(); ++i)
    wq::rl::EncodeEpisode(episodes[i], table, &batches[i]);
  const double seconds = f.Num("seconds", 4);
  std::printf("ready\n");
  std::fflush(stdout);
  std::string go;
  if (!WaitForParentLine(&go)) return 0;

  // --streams streams, each on a connection of its own (TransitionStreams),
  // each like actor/rollout_loop.cc: write one TransitionBatch, wait for its ack.
  wq::testing::TransitionStreamsOptions so;
  so.target = f.Get("learner");
  so.streams = static_cast<int>(f.Num("streams", 1));
  so.episode_id_base = static_cast<uint64_t>(index + 1) << 48;
  so.max_message_bytes = cfg.service.max_message_bytes;
  wq::testing::TransitionStreams streams(so, std::move(batches));
  streams.Start();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const wq::testing::TransitionStreams::Result r = streams.Stop();
  json j = {{"episodes", r.sent},       {"transitions", r.transitions},
            {"accepted", r.accepted},   {"payload_bytes", r.payload_bytes},
            {"seconds", r.seconds},     {"status", absl::StrJoin(r.errors, "; ")},
            {"ack_ms", AckMs(r.ack_ms)}};
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
  return 0;
}

// --- role: stage (a StageWorker behind the Actor service) ---------------------

int RunStageChild(const Flags& f) {
  at::set_num_threads(static_cast<int>(f.Num("threads", 1)));
  const wq::config::RunConfig cfg =
      OrDie(wq::config::LoadRunConfig(f.Get("config"), f.sets), "config");
  wq::stage::StageWorkerOptions wo = wq::job::ActorNodeOptionsFrom(cfg).worker;
  wo.first_layer = static_cast<int64_t>(f.Num("first", 0));
  wo.end_layer = static_cast<int64_t>(f.Num("end", -1));
  wo.cache_dir.clear();  // the bench fits every time
  auto worker = OrDie(wq::stage::StageWorker::Create(wo), "stage worker");
  wq::actor::ActorIdentity id;
  id.stage = static_cast<int>(f.Num("index", 0));
  id.stages = 1;
  id.actor_id = absl::StrCat("bench-stage-", id.stage);
  id.model_key = OrDie(
      wq::quant::ModelKey(wo.model_dir, wo.units.chunk_size, wq::quant::QuantizerFor(wo.units)),
      "model key");
  wq::actor::ActorService service(worker.get(), id, nullptr, nullptr);
  wq::net::ServerOptions so;
  so.address = "127.0.0.1:0";
  so.max_message_bytes = cfg.service.max_message_bytes;
  wq::net::GrpcServer server(so);
  server.AddService(&service, wq::v1::Actor::service_full_name());
  OrDie(server.Start(), "stage server");
  std::printf("port=%d\n", server.port());
  std::fflush(stdout);
  std::string line;
  while (WaitForParentLine(&line)) {
  }
  server.Drain(absl::Now() + absl::Seconds(2));
  return 0;
}

// --- parent: ingestion ---------------------------------------------------------

struct Learner {
  std::unique_ptr<wq::metrics::Registry> registry;  // outlives the parts below; observed only
  std::unique_ptr<wq::learner::LearnerCore> core;
  std::unique_ptr<wq::learner::LearnerService> service;
  std::unique_ptr<wq::net::GrpcServer> server;
  std::unique_ptr<wq::metrics::MetricsServer> metrics;  // observed only
};

// Held episodes wait this long for an evaluation that never comes here
// (service.evaluation_timeout_ms; LearnerCore scans the held ones on every submit).
int64_t g_hold_ms = 2000;

Learner StartLearner(wq::config::RunConfig cfg, const wq::plan::UnitTable& table,
                     const std::string& dir, bool serve, bool observed = false) {
  std::filesystem::remove_all(dir);
  cfg.output.dir = dir;
  cfg.service.stages = 1;
  cfg.service.replicas = 1;
  cfg.service.evaluation_timeout_ms = g_hold_ms;
  Learner l;
  // Observed: metrics as windquant-learner has them (LearnerMetrics, RPC metrics,
  // /metrics and /healthz on a MetricsServer of their own).
  if (observed) l.registry = std::make_unique<wq::metrics::Registry>();
  l.core = OrDie(wq::learner::LearnerCore::Create(wq::job::LearnerCoreOptionsFrom(cfg), nullptr,
                                                  l.registry.get()),
                 "learner core");
  OrDie(l.core->RegisterTable(0, 0, table).status(), "register table");
  if (serve) {
    l.service = std::make_unique<wq::learner::LearnerService>(l.core.get(), l.registry.get());
    wq::net::ServerOptions so;
    so.address = "127.0.0.1:0";
    so.max_message_bytes = cfg.service.max_message_bytes;
    so.registry = l.registry.get();
    l.server = std::make_unique<wq::net::GrpcServer>(so);
    l.server->AddService(l.service.get(), wq::v1::Learner::service_full_name());
    OrDie(l.server->Start(), "learner server");
  }
  if (observed) {
    l.metrics = std::make_unique<wq::metrics::MetricsServer>(l.registry.get(),
                                                             wq::metrics::MetricsServerOptions());
    OrDie(l.metrics->Start(), "metrics server");
  }
  return l;
}

struct IngestCase {
  std::string name;
  int actors = 0;
  double transitions_per_s = 0, episodes_per_s = 0;
  int64_t accepted = 0, sent = 0;
  double payload_bytes_per_transition = 0;
  std::vector<double> ack_ms;  // write-to-ack time of every batch, all streams
  int64_t stream_errors = 0;   // streams that ended with an error
};

std::vector<std::string> ChildArgs(const Flags& f, const std::string& config) {
  std::vector<std::string> a = {"--config", config, "--threads", f.Get("threads", "1")};
  for (const auto& s : f.sets) {
    a.push_back("--set");
    a.push_back(s);
  }
  return a;
}

// k actor processes of `streams` streams each, ready to stream to `port` for
// `seconds` once told "go".
std::vector<Child> SpawnActors(const Flags& f, const std::string& config, int k, int port,
                               double seconds, int streams) {
  std::vector<Child> children;
  for (int i = 0; i < k; ++i) {
    std::vector<std::string> a = ChildArgs(f, config);
    for (const std::string& s :
         {std::string("--role"), std::string("ingest"), std::string("--learner"),
          absl::StrCat("127.0.0.1:", port), std::string("--index"), std::to_string(i),
          std::string("--seconds"), absl::StrCat(seconds), std::string("--episodes"),
          f.Get("episodes", "8"), std::string("--streams"), std::to_string(streams)}) {
      a.push_back(s);
    }
    children.push_back(Spawn(a));
  }
  for (auto& c : children) {
    if (ReadLine(c, "actor process") != "ready") Die("actor process: unexpected first line");
  }
  return children;
}

// The actor processes' reports after "go" at `t0` (`before`: the learner's
// accepted episodes then); counted at `core`.
IngestCase CollectActors(std::vector<Child>& children, wq::learner::LearnerCore* core,
                         int64_t before, double t0, int steps_per_episode) {
  IngestCase r;
  r.actors = static_cast<int>(children.size());
  int64_t payload = 0, transitions = 0;
  for (auto& c : children) {
    const json j = json::parse(ReadLine(c, "actor process"));
    r.sent += j["episodes"].get<int64_t>();
    payload += j["payload_bytes"].get<int64_t>();
    transitions += j["transitions"].get<int64_t>();
    for (double ms : j["ack_ms"]) r.ack_ms.push_back(ms);
    if (!j["status"].get<std::string>().empty()) {
      ++r.stream_errors;
      std::fprintf(stderr, "distributed_bench: actor stream ended with: %s\n",
                   j["status"].get<std::string>().c_str());
    }
  }
  const double elapsed = Now() - t0;
  r.accepted = core->Status().episodes - before;
  for (auto& c : children) Finish(c);
  r.episodes_per_s = r.accepted / elapsed;
  r.transitions_per_s = r.episodes_per_s * steps_per_episode;
  r.payload_bytes_per_transition = transitions > 0 ? static_cast<double>(payload) / transitions : 0;
  return r;
}

// k actor processes (one stream each) streaming to `port` for `seconds`; counted at `core`.
IngestCase RunActors(const Flags& f, const std::string& config, int k, int port, double seconds,
                     wq::learner::LearnerCore* core, int steps_per_episode, int streams = 1) {
  std::vector<Child> children = SpawnActors(f, config, k, port, seconds, streams);
  const int64_t before = core->Status().episodes;
  const double t0 = Now();
  for (auto& c : children) Send(c, "go");
  return CollectActors(children, core, before, t0, steps_per_episode);
}

// --- parent: rollouts and the one-process reference --------------------------------

// The episodes the bench's learners ingest: RolloutWorker passes of `n` envs with a
// fresh policy, repeated for a second; *transitions_per_s: the rate it produced them
// at (what `windquant quantize` generates per second). Returns the last pass.
std::vector<wq::rl::Episode> RollOut(const wq::config::RunConfig& cfg,
                                     const wq::plan::UnitTable& table, int n,
                                     double* transitions_per_s) {
  auto policy = FreshPolicy(cfg);
  auto worker =
      OrDie(wq::rl::RolloutWorker::Create(table, cfg.env, "bench", 0, 0, n, cfg.training.seed),
            "rollout worker");
  const double t0 = Now();
  int64_t produced = 0;
  std::vector<wq::rl::Episode> episodes;
  while (Now() - t0 < 1.0 || episodes.empty()) {
    episodes = OrDie(worker->Run(*policy, cfg.curriculum.target_bits.back()), "rollout");
    for (const auto& e : episodes) produced += static_cast<int64_t>(e.steps.size());
  }
  *transitions_per_s = produced / (Now() - t0);
  return episodes;
}

// `episodes` handed to LearnerCore::SubmitEpisode of a learner in this process for
// `seconds`, each with a new id (`codec`: encoded and decoded first, as over the wire);
// counted as accepted.
IngestCase InProcessIngest(const wq::config::RunConfig& cfg, const wq::plan::UnitTable& table,
                           const std::string& dir, const std::vector<wq::rl::Episode>& episodes,
                           double seconds, int steps, bool codec) {
  Learner local = StartLearner(cfg, table, dir, false);
  int64_t k = 0;
  const double t = Now();
  while (Now() - t < seconds) {
    wq::rl::Episode e = episodes[k % episodes.size()];
    e.episode_id = (uint64_t{1} << 60) | static_cast<uint64_t>(++k);
    if (codec) {
      wq::v1::TransitionBatch b;
      wq::rl::EncodeEpisode(e, table, &b);
      e = OrDie(wq::rl::DecodeEpisode(b, table), "decode");
    }
    OrDie(local.core->SubmitEpisode(std::move(e)).status(), "SubmitEpisode");
  }
  IngestCase c;
  c.name = codec ? "one process: encode + decode + SubmitEpisode"
                 : "one process: LearnerCore::SubmitEpisode";
  c.accepted = local.core->Status().episodes;
  c.episodes_per_s = c.accepted / (Now() - t);
  c.transitions_per_s = c.episodes_per_s * steps;
  return c;
}

// --- parent: pipeline ------------------------------------------------------------

struct PipelineCase {
  std::string name;
  int stages = 0;
  double fp_tokens_per_s = 0, plan_tokens_per_s = 0;
  double fp_ppl = 0, plan_ppl = 0;
  double calibration_s = 0;
  int64_t tokens = 0;
};

// --- parent: the learner under load (--load) ------------------------------------

using Samples = std::array<wq::testing::ProbeSamples, wq::testing::kNumProbes>;

struct LoadCase {
  IngestCase ingest;
  Samples idle, loaded;  // the prober's, before "go" and while streaming
  double seconds = 0, idle_seconds = 0, probe_ms = 0;
};

// What the actors call with a 5 s deadline (rollout_loop.cc); it takes the learner
// core's lock, as the handlers of StreamTransitions and ReportEvaluation do.
std::function<absl::Status(absl::Duration)> GetRunStatusCall(
    std::shared_ptr<grpc::Channel> channel) {
  std::shared_ptr<wq::v1::Learner::Stub> stub = wq::v1::Learner::NewStub(channel);
  return [stub](absl::Duration deadline) {
    grpc::ClientContext ctx;
    wq::net::ConfigureContext(ctx, deadline);
    wq::v1::RunStatus reply;
    const grpc::Status s = stub->GetRunStatus(&ctx, wq::v1::RunStatusRequest(), &reply);
    return s.ok() ? absl::OkStatus() : absl::UnavailableError(s.error_message());
  };
}

const char* LoadProbeName(int p) {
  const auto probe = static_cast<wq::testing::Probe>(p);
  return probe == wq::testing::Probe::kRpc ? "GetRunStatus" : wq::testing::ProbeName(probe);
}

void SleepFor(double seconds) {
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

// --load-processes processes of --load-streams / --load-processes streams each saturate
// an observed learner (its metrics and /metrics as windquant-learner's) for
// --load-seconds, while a ServiceProber in this process polls its /metrics, /healthz
// and grpc.health.v1 every --probe-ms: first for --idle-seconds with the actors ready
// but not streaming (the same learner, idle), then under the load.
LoadCase RunLoad(const Flags& f, const std::string& config, const wq::config::RunConfig& cfg,
                 const wq::plan::UnitTable& table, const std::string& dir, int steps) {
  const int processes = std::max(1, static_cast<int>(f.Num("load-processes", 4)));
  const int streams = std::max(1, static_cast<int>(f.Num("load-streams", 64)));
  LoadCase r;
  r.seconds = f.Num("load-seconds", 8);
  r.idle_seconds = f.Num("idle-seconds", 2);
  r.probe_ms = f.Num("probe-ms", 50);
  Learner l = StartLearner(cfg, table, dir, /*serve=*/true, /*observed=*/true);
  std::vector<Child> children =
      SpawnActors(f, config, processes, l.server->port(), r.seconds, streams / processes);
  wq::testing::ServiceProberOptions po;
  po.metrics_port = l.metrics->port();
  wq::net::ChannelOptions co;
  co.target = l.server->address();
  po.health = OrDie(wq::net::MakeChannel(co), "health channel");
  po.interval = absl::Milliseconds(r.probe_ms);
  po.metrics_must_contain = "windquant_learner_episodes_total";
  po.rpc = GetRunStatusCall(po.health);
  wq::testing::ServiceProber prober(po);
  prober.Start();
  SleepFor(r.idle_seconds);
  r.idle = prober.TakeSamples();
  const int64_t before = l.core->Status().episodes;
  const double t0 = Now();
  for (auto& c : children) Send(c, "go");
  SleepFor(r.seconds);
  r.loaded = prober.TakeSamples();
  prober.Stop();
  r.ingest = CollectActors(children, l.core.get(), before, t0, steps);
  r.ingest.name = absl::StrCat(streams, " streams (", processes, " processes x ",
                               streams / processes, ") over loopback");
  l.server->Shutdown(absl::Now() + absl::Seconds(2));
  return r;
}

json SummaryJson(const std::vector<double>& ms) {
  const wq::testing::LatencySummary s = wq::testing::Summarize(ms);
  return {{"count", s.count}, {"p50_ms", s.p50}, {"p99_ms", s.p99}, {"max_ms", s.max}};
}

json LoadJson(const std::vector<IngestCase>& rows, const LoadCase& load) {
  json j;
  json ij = json::array();
  for (const auto& c : rows) {
    ij.push_back({{"case", c.name},
                  {"transitions_per_s", c.transitions_per_s},
                  {"episodes_per_s", c.episodes_per_s},
                  {"accepted_episodes", c.accepted},
                  {"ratio_to_one_process", c.transitions_per_s / rows.front().transitions_per_s},
                  {"stream_errors", c.stream_errors},
                  {"ack", SummaryJson(c.ack_ms)}});
  }
  j["ingestion"] = ij;
  for (int p = 0; p < wq::testing::kNumProbes; ++p) {
    const char* name = LoadProbeName(p);
    const std::pair<const char*, const Samples*> phases[] = {{"idle", &load.idle},
                                                             {"load", &load.loaded}};
    for (const auto& [phase, samples] : phases) {
      json pj = SummaryJson((*samples)[p].ms);
      pj["failures"] = (*samples)[p].failures.size();
      pj["failure_messages"] = (*samples)[p].failures;
      j["probes"][name][phase] = pj;
    }
  }
  j["load_seconds"] = load.seconds;
  j["idle_seconds"] = load.idle_seconds;
  j["probe_interval_ms"] = load.probe_ms;
  return j;
}

void PrintLoad(const std::vector<IngestCase>& rows, const LoadCase& load, int steps) {
  std::printf(
      "4. the learner under load: %s streaming for %.0f s (StreamTransitions, one connection per "
      "stream,\n   one ack per episode of %d transitions, episodes held %lld ms); counted as "
      "accepted at the learner\n",
      load.ingest.name.c_str(), load.seconds, steps, static_cast<long long>(g_hold_ms));
  std::printf("   %-46s %13s %11s %7s %9s %9s %9s\n", "case", "transitions/s", "episodes/s",
              "ratio", "ack p50", "ack p99", "ack max");
  for (const auto& c : rows) {
    const wq::testing::LatencySummary a = wq::testing::Summarize(c.ack_ms);
    std::string p50 = "-", p99 = "-", max = "-";
    if (a.count > 0) {
      p50 = absl::StrFormat("%.2f ms", a.p50);
      p99 = absl::StrFormat("%.2f ms", a.p99);
      max = absl::StrFormat("%.1f ms", a.max);
    }
    std::printf("   %-46s %13.0f %11.1f %7.3f %9s %9s %9s\n", c.name.c_str(), c.transitions_per_s,
                c.episodes_per_s, c.transitions_per_s / rows.front().transitions_per_s, p50.c_str(),
                p99.c_str(), max.c_str());
  }
  std::printf(
      "   (ratio: to the first row (best of 2, before and after). ack: write to ack, every "
      "batch of every stream;\n    %lld stream(s) ended with an error)\n",
      static_cast<long long>(load.ingest.stream_errors));
  std::printf(
      "   the same learner's /metrics, /healthz (its MetricsServer), grpc.health.v1 Check and "
      "Learner.GetRunStatus,\n   one after the other every %.0f ms from this process (deadline "
      "5 s): idle for %.0f s before the load, then under it\n",
      load.probe_ms, load.idle_seconds);
  std::printf("   %-16s %-6s %8s %9s %9s %9s %9s\n", "probe", "phase", "answers", "failures",
              "p50 ms", "p99 ms", "max ms");
  for (int p = 0; p < wq::testing::kNumProbes; ++p) {
    const char* name = LoadProbeName(p);
    const std::pair<const char*, const Samples*> phases[] = {{"idle", &load.idle},
                                                             {"load", &load.loaded}};
    for (const auto& [phase, samples] : phases) {
      const wq::testing::LatencySummary s = wq::testing::Summarize((*samples)[p].ms);
      std::printf("   %-16s %-6s %8lld %9zu %9.2f %9.2f %9.2f\n", name, phase,
                  static_cast<long long>(s.count), (*samples)[p].failures.size(), s.p50, s.p99,
                  s.max);
      for (const auto& why : (*samples)[p].failures) std::printf("      failed: %s\n", why.c_str());
    }
  }
}

// --load: section 4 only, with its references measured in the same run: the
// one-process SubmitEpisode row (before and after, best of 2) and one actor process
// of one stream over loopback.
int RunLoadMode(const Flags& f, const std::string& config, const wq::config::RunConfig& cfg,
                const wq::plan::UnitTable& table, const std::string& tmp, int steps, json out) {
  const int load_streams = static_cast<int>(f.Num("load-streams", 64));
  const int load_processes = static_cast<int>(f.Num("load-processes", 4));
  if (load_streams < 1 || load_processes < 1 || load_streams % load_processes != 0) {
    Die("--load-streams: must be a positive multiple of --load-processes (>= 1)");
  }
  const double seconds = f.Num("seconds", 4);
  double rollout_per_s = 0;
  const std::vector<wq::rl::Episode> episodes =
      RollOut(cfg, table, static_cast<int>(f.Num("episodes", 8)), &rollout_per_s);
  std::vector<IngestCase> rows;
  rows.push_back(InProcessIngest(cfg, table, tmp + "/local-0", episodes, seconds, steps, false));
  {
    Learner l = StartLearner(cfg, table, tmp + "/loopback-1", true);
    IngestCase c = RunActors(f, config, 1, l.server->port(), seconds, l.core.get(), steps);
    c.name = "1 actor process (1 stream) over loopback";
    rows.push_back(c);
    l.server->Shutdown(absl::Now() + absl::Seconds(2));
  }
  const LoadCase load = RunLoad(f, config, cfg, table, tmp + "/load", steps);
  rows.push_back(load.ingest);
  IngestCase again = InProcessIngest(cfg, table, tmp + "/local-1", episodes, seconds, steps, false);
  if (again.transitions_per_s > rows[0].transitions_per_s) rows[0] = again;
  std::error_code ec;
  std::filesystem::remove_all(tmp, ec);
  if (f.one.count("json") > 0) {
    out["load"] = LoadJson(rows, load);
    std::printf("%s\n", out.dump(1).c_str());
    return 0;
  }
  std::printf(
      "distributed_bench --load: %s (%d units), %u cores, %d intra-op thread(s) per "
      "process, 127.0.0.1\n\n",
      cfg.model.dir.c_str(), steps, std::thread::hardware_concurrency(),
      static_cast<int>(f.Num("threads", 1)));
  PrintLoad(rows, load, steps);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  const Flags f = ParseFlags(argc, argv);
  const std::string config = f.Get("config", DefaultConfig());
  const std::string role = f.Get("role");
  if (role == "ingest") return RunIngestChild(f);
  if (role == "stage") return RunStageChild(f);
  if (!role.empty()) Die(absl::StrCat("--role: unknown ", role));

  const int threads = static_cast<int>(f.Num("threads", 1));
  at::set_num_threads(threads);
  g_hold_ms = static_cast<int64_t>(f.Num("hold-ms", 2000));
  const double seconds = f.Num("seconds", 4), wire_seconds = f.Num("wire-seconds", 2);
  const int64_t eval_tokens = static_cast<int64_t>(f.Num("eval-tokens", 16320));
  const int64_t batch = static_cast<int64_t>(f.Num("batch", 8));
  const int repeats = std::max(1, static_cast<int>(f.Num("repeats", 3)));
  const bool as_json = f.one.count("json") > 0;
  const std::vector<int> actor_counts = f.List("actors", "1,2,4");
  const std::vector<int> stage_counts = f.List("stages", "1,2,4");
  const double t_start = Now();

  wq::config::RunConfig cfg = OrDie(wq::config::LoadRunConfig(config, f.sets), config);
  wq::quant::SessionOptions so = wq::job::SessionOptionsFrom(cfg);
  so.log = nullptr;
  auto session = OrDie(wq::quant::QuantizationSession::Create(so), "quantization session");
  const wq::plan::UnitTable& table = session->table();
  const int steps = static_cast<int>(table.units.size());
  const int64_t layers = session->model().config().num_hidden_layers;
  const std::string tmp = absl::StrCat(std::filesystem::temp_directory_path().string(),
                                       "/wq-distributed-bench-", getpid());
  json out;
  out["model"] = cfg.model.dir;
  out["units"] = steps;
  out["layers"] = layers;
  out["threads_per_process"] = threads;
  out["hold_ms"] = g_hold_ms;
  out["cores"] = std::thread::hardware_concurrency();
  if (f.one.count("load") > 0) return RunLoadMode(f, config, cfg, table, tmp, steps, out);

  // 1. Ingestion. One-process reference: the same rollouts, SubmitEpisode in process.
  std::vector<IngestCase> ingest;
  {
    double rollout_per_s = 0;
    const std::vector<wq::rl::Episode> episodes =
        RollOut(cfg, table, static_cast<int>(f.Num("episodes", 8)), &rollout_per_s);
    out["one_process_rollout_transitions_per_s"] = rollout_per_s;

    // In process, measured before and after the loopback cases (best of the
    // two), so that a burst of load from other processes does not decide it.
    auto in_process = [&](bool codec, int round) {
      return InProcessIngest(cfg, table, absl::StrCat(tmp, "/local-", codec, "-", round), episodes,
                             seconds, steps, codec);
    };
    ingest.push_back(in_process(false, 0));
    ingest.push_back(in_process(true, 0));
    for (int a : actor_counts) {
      Learner l = StartLearner(cfg, table, absl::StrCat(tmp, "/loopback-", a), true);
      IngestCase c = RunActors(f, config, a, l.server->port(), seconds, l.core.get(), steps);
      c.name = absl::StrCat(a, " actor process", a == 1 ? "" : "es", " over loopback");
      ingest.push_back(c);
      l.server->Shutdown(absl::Now() + absl::Seconds(2));
    }
    for (int i = 0; i < 2; ++i) {
      IngestCase again = in_process(i == 1, 1);
      if (again.transitions_per_s > ingest[i].transitions_per_s) ingest[i] = again;
    }
  }
  // 2. Wire bytes: one actor through the counting relay.
  double payload_per_t = 0, up_per_t = 0, down_per_t = 0;
  {
    Learner l = StartLearner(cfg, table, tmp + "/wire", true);
    CountingRelay relay(l.server->port());
    IngestCase c = RunActors(f, config, 1, relay.port(), wire_seconds, l.core.get(), steps);
    const double transitions = static_cast<double>(c.sent) * steps;
    payload_per_t = c.payload_bytes_per_transition;
    up_per_t = transitions > 0 ? relay.up() / transitions : 0;
    down_per_t = transitions > 0 ? relay.down() / transitions : 0;
    out["wire"] = {{"episodes", c.sent},
                   {"payload_bytes_per_transition", payload_per_t},
                   {"payload_bytes_per_episode", payload_per_t * steps},
                   {"tcp_bytes_actor_to_learner_per_transition", up_per_t},
                   {"tcp_bytes_learner_to_actor_per_transition", down_per_t},
                   {"tcp_bytes_actor_to_learner", relay.up()},
                   {"tcp_bytes_learner_to_actor", relay.down()}};
    l.server->Shutdown(absl::Now() + absl::Seconds(2));
  }

  // 3. Pipeline evaluation.
  const std::vector<int32_t>& eval_ids = session->eval_ids();
  const std::vector<int32_t> calib_ids = OrDie(
      wq::base::ReadTextRange(
          wq::config::CalibrationRange(cfg.calibration), "calibration",
          [&tok = session->tokenizer()](std::string_view text) { return tok.Encode(text, false); }),
      "calibration");
  const std::vector<int> plan_actions =
      OrDie(wq::search::LagrangePlan(table, 2.0), "lagrange plan").actions;
  wq::model::PerplexityOptions popt;
  popt.context = cfg.evaluation.context;
  popt.batch_size = batch;
  popt.max_tokens = eval_tokens;
  std::vector<PipelineCase> pipeline;
  // One process at --threads, and at every core (what `windquant quantize`
  // uses with model.threads = 0); the faster one is the ratios' reference.
  std::vector<int> one_threads = {threads};
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (cores != threads) one_threads.push_back(cores);
  // Measured before and after the stage cases (best of both rounds), so
  // that a burst of load from other processes does not decide the reference.
  auto measure_one_process = [&](std::vector<PipelineCase>* rows) {
    for (size_t i = 0; i < one_threads.size(); ++i) {
      const int t = one_threads[i];
      at::set_num_threads(t);
      if (rows->size() <= i) {
        PipelineCase c;
        c.name = absl::StrCat("one process, ", t, " thread", t == 1 ? "" : "s");
        rows->push_back(c);
      }
      PipelineCase& one = (*rows)[i];
      {
        wq::model::PerplexityOptions warm = popt;
        warm.max_tokens = batch * (cfg.evaluation.context - 1);
        OrDie(wq::model::ComputePerplexity(session->model(), eval_ids, warm).status(), "warm-up");
      }
      for (int r = 0; r < repeats; ++r) {
        auto fp =
            OrDie(wq::model::ComputePerplexity(session->model(), eval_ids, popt), "perplexity");
        one.fp_tokens_per_s = std::max(one.fp_tokens_per_s, fp.tokens / fp.seconds);
        one.fp_ppl = fp.perplexity;
        one.tokens = fp.tokens;
      }
      const auto planned_model = OrDie(session->PlanModel(plan_actions), "apply plan");
      const wq::model::LlamaModel& planned = *planned_model;
      for (int r = 0; r < repeats; ++r) {
        auto p = OrDie(wq::model::ComputePerplexity(planned, eval_ids, popt), "perplexity");
        one.plan_tokens_per_s = std::max(one.plan_tokens_per_s, p.tokens / p.seconds);
        one.plan_ppl = p.perplexity;
      }
    }
    at::set_num_threads(threads);
  };
  measure_one_process(&pipeline);
  at::set_num_threads(threads);
  const size_t one_rows = pipeline.size();
  for (int k : stage_counts) {
    if (k > layers) {
      std::fprintf(stderr, "distributed_bench: skipping %d stages (the model has %lld layers)\n", k,
                   static_cast<long long>(layers));
      continue;
    }
    std::vector<Child> children;
    const int64_t base = layers / k, extra = layers % k;
    for (int s = 0; s < k; ++s) {
      const int64_t first = s * base + std::min<int64_t>(s, extra);
      const int64_t end = first + base + (s < extra ? 1 : 0);
      std::vector<std::string> a = ChildArgs(f, config);
      for (const std::string& x :
           {std::string("--role"), std::string("stage"), std::string("--index"), std::to_string(s),
            std::string("--first"), std::to_string(first), std::string("--end"),
            std::to_string(end)}) {
        a.push_back(x);
      }
      children.push_back(Spawn(a));
    }
    std::vector<std::unique_ptr<wq::transport::GrpcActivationTransport>> transports;
    std::vector<wq::transport::ActivationTransport*> stages;
    for (int s = 0; s < k; ++s) {
      const std::string line = ReadLine(children[s], "stage process");
      if (line.rfind("port=", 0) != 0) Die(absl::StrCat("stage process said: ", line));
      wq::net::ChannelOptions co;
      co.target = absl::StrCat("127.0.0.1:", line.substr(5));
      co.max_message_bytes = cfg.service.max_message_bytes;
      transports.push_back(std::make_unique<wq::transport::GrpcActivationTransport>(
          OrDie(wq::net::MakeChannel(co), "channel"), absl::StrCat("stage ", s),
          absl::Minutes(10)));
      stages.push_back(transports.back().get());
    }
    wq::evaluator::PipelineEvaluatorOptions eo;
    eo.context = cfg.evaluation.context;
    eo.batch_size = batch;
    eo.calibration_samples = cfg.calibration.samples;
    eo.calibration_seq_len = cfg.calibration.seq_len;
    eo.calibration_seed = cfg.calibration.seed;
    eo.calibration_batch = batch;
    auto pe =
        OrDie(wq::evaluator::PipelineEvaluator::Create(cfg.model.dir, eo, calib_ids, eval_ids),
              "pipeline evaluator");
    PipelineCase c;
    c.stages = k;
    c.name = absl::StrCat(k, " stage process", k == 1 ? "" : "es", " over loopback");
    double t0 = Now();
    auto tables = OrDie(pe->Calibrate(stages, pe->CalibrationFingerprint()), "calibration");
    c.calibration_s = Now() - t0;
    const wq::plan::UnitTable merged = OrDie(wq::plan::UnitTable::Merge(tables), "merge");
    const wq::plan::Plan plan = wq::plan::Plan::Make(merged, plan_actions, "lagrange", 2.0);
    wq::transport::PassSpec fp_spec;
    wq::transport::PassSpec plan_spec;
    plan_spec.plan_id = wq::evaluator::PipelineEvaluator::PlanKey(plan);
    plan_spec.model_fingerprint = plan.model_fingerprint;
    plan_spec.actions = std::make_shared<const std::vector<int>>(plan.actions);
    // Warm-up: one micro-batch (streams opened, allocator warm), not timed.
    OrDie(pe->Perplexity(stages, fp_spec, eval_ids, batch * (cfg.evaluation.context - 1)).status(),
          "warm-up");
    for (int r = 0; r < repeats; ++r) {
      auto fp =
          OrDie(pe->Perplexity(stages, fp_spec, eval_ids, eval_tokens), "pipeline perplexity");
      c.fp_tokens_per_s = std::max(c.fp_tokens_per_s, fp.tokens / fp.seconds);
      c.fp_ppl = fp.perplexity;
      c.tokens = fp.tokens;
    }
    // The first plan pass applies the plan on every stage (kept per plan id).
    OrDie(
        pe->Perplexity(stages, plan_spec, eval_ids, batch * (cfg.evaluation.context - 1)).status(),
        "plan warm-up");
    for (int r = 0; r < repeats; ++r) {
      auto p =
          OrDie(pe->Perplexity(stages, plan_spec, eval_ids, eval_tokens), "pipeline perplexity");
      c.plan_tokens_per_s = std::max(c.plan_tokens_per_s, p.tokens / p.seconds);
      c.plan_ppl = p.perplexity;
    }
    pipeline.push_back(c);
    transports.clear();
    for (auto& ch : children) Finish(ch);
  }
  {
    std::vector<PipelineCase> again(pipeline.begin(), pipeline.begin() + one_rows);
    measure_one_process(&again);
    for (size_t i = 0; i < one_rows; ++i) pipeline[i] = again[i];
  }
  std::error_code ec;
  std::filesystem::remove_all(tmp, ec);

  // Report.
  const double ingest_ref = ingest.front().transitions_per_s;
  double fp_ref = 0, plan_ref = 0;
  for (size_t i = 0; i < one_rows; ++i) {
    fp_ref = std::max(fp_ref, pipeline[i].fp_tokens_per_s);
    plan_ref = std::max(plan_ref, pipeline[i].plan_tokens_per_s);
  }
  json ij = json::array();
  for (const auto& c : ingest) {
    ij.push_back({{"case", c.name},
                  {"actors", c.actors},
                  {"transitions_per_s", c.transitions_per_s},
                  {"episodes_per_s", c.episodes_per_s},
                  {"accepted_episodes", c.accepted},
                  {"ratio_to_one_process", c.transitions_per_s / ingest_ref}});
  }
  out["ingestion"] = ij;
  out["ingestion_seconds_per_case"] = seconds;
  json pj = json::array();
  for (const auto& c : pipeline) {
    pj.push_back({{"case", c.name},
                  {"stages", c.stages},
                  {"tokens", c.tokens},
                  {"fp_tokens_per_s", c.fp_tokens_per_s},
                  {"fp_ratio", c.fp_tokens_per_s / fp_ref},
                  {"plan_tokens_per_s", c.plan_tokens_per_s},
                  {"plan_ratio", c.plan_tokens_per_s / plan_ref},
                  {"fp_ppl", c.fp_ppl},
                  {"plan_ppl", c.plan_ppl},
                  {"calibration_s", c.calibration_s}});
  }
  out["pipeline"] = pj;
  out["pipeline_context"] = cfg.evaluation.context;
  out["pipeline_batch"] = batch;
  out["pipeline_repeats"] = repeats;
  out["wall_s"] = Now() - t_start;
  if (as_json) {
    std::printf("%s\n", out.dump(1).c_str());
    return 0;
  }
  std::printf(
      "distributed_bench: %s (%lld layers, %d units), %u cores, %d intra-op thread(s) per process, "
      "127.0.0.1\n\n",
      cfg.model.dir.c_str(), static_cast<long long>(layers), steps,
      std::thread::hardware_concurrency(), threads);
  std::printf(
      "1. learner ingestion (StreamTransitions, one ack per episode, %d transitions per episode, "
      "%.0f s per case (in-process rows: best of 2, before and after); counted as accepted at the "
      "learner;\n"
      "   episodes held %lld ms)\n",
      steps, seconds, static_cast<long long>(g_hold_ms));
  std::printf("   %-48s %14s %12s %10s\n", "case", "transitions/s", "episodes/s", "ratio");
  for (const auto& c : ingest) {
    std::printf("   %-48s %14.0f %12.1f %10.3f\n", c.name.c_str(), c.transitions_per_s,
                c.episodes_per_s, c.transitions_per_s / ingest_ref);
  }
  std::printf(
      "   (ratio: to the first row. One process produces %.0f transitions/s with RolloutWorker,\n"
      "    %d envs, policy %s; that is the rate the learner has to keep up with per actor.)\n\n",
      out["one_process_rollout_transitions_per_s"].get<double>(),
      static_cast<int>(f.Num("episodes", 8)), absl::StrJoin(cfg.ppo.hidden, "x").c_str());
  std::printf(
      "2. bytes per transition (1 actor process through a counting TCP relay, %.0f s, %lld "
      "episodes)\n",
      wire_seconds, static_cast<long long>(out["wire"]["episodes"].get<int64_t>()));
  std::printf(
      "   protobuf payload (TransitionBatch incl. the plan)  %8.1f B/transition (%.0f B/episode)\n",
      payload_per_t, payload_per_t * steps);
  std::printf(
      "   TCP bytes actor -> learner (HTTP/2, gRPC framing)  %8.1f B/transition (x%.3f payload)\n",
      up_per_t, payload_per_t > 0 ? up_per_t / payload_per_t : 0);
  std::printf("   TCP bytes learner -> actor (acks, flow control)    %8.1f B/transition\n",
              down_per_t);
  std::printf("   one process: 0 B (transitions stay in memory)\n\n");
  std::printf(
      "3. pipeline evaluation (PipelineEvaluator::Perplexity, %lld tokens, context %lld, %lld "
      "windows per "
      "micro-batch, best of %d; one-process rows: best of 2 x %d, before and after the stage "
      "cases)\n",
      static_cast<long long>(pipeline.front().tokens),
      static_cast<long long>(cfg.evaluation.context), static_cast<long long>(batch), repeats,
      repeats);
  std::printf("   %-36s %10s %7s %12s %7s %10s %10s %8s\n", "case", "FP tok/s", "ratio",
              "plan tok/s", "ratio", "FP PPL", "plan PPL", "calib s");
  for (const auto& c : pipeline) {
    std::printf("   %-36s %10.0f %7.3f %12.0f %7.3f %10.4f %10.4f %8.2f\n", c.name.c_str(),
                c.fp_tokens_per_s, c.fp_tokens_per_s / fp_ref, c.plan_tokens_per_s,
                c.plan_tokens_per_s / plan_ref, c.fp_ppl, c.plan_ppl, c.calibration_s);
  }
  std::printf(
      "   (plan: the Lagrangian plan at 2.0 bits. ratio: to the faster one-process row. A pipeline "
      "of k\n"
      "    stages is k + 1 processes (the evaluator runs embeddings + head) of %d thread(s) each.\n"
      "    calib s: calibration pass + fits of every stage. PPLs must agree between rows.)\n\n",
      threads);
  std::printf("wall time %.1f s\n", Now() - t_start);
  return 0;
}
