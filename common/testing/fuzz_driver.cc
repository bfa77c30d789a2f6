#include "common/testing/fuzz_driver.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace windquant::testing {
namespace {

// The input being run, for the crash handler (async-signal-safe write).
const std::string* g_current = nullptr;
char g_crash_path[4096] = "fuzz.crash";

void OnCrash(int sig) {
  if (g_current != nullptr) {
    const int fd = ::open(g_crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ssize_t ignored = ::write(fd, g_current->data(), g_current->size());
      (void)ignored;
      ::close(fd);
    }
    static const char kMsg[] = "fuzz: crash; the input is in the --crash file\n";
    ssize_t ignored = ::write(2, kMsg, sizeof(kMsg) - 1);
    (void)ignored;
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// One random edit of `s`.
void MutateOnce(std::string* s, const std::vector<std::string>& corpus, std::mt19937_64& rng,
                size_t max_len) {
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  static constexpr unsigned char kInteresting[] = {0, 1, 0x7f, 0x80, 0xff, 0x08, 0x10, 0x12, 0x1a};
  switch (rng() % 8) {
    case 0:  // flip a bit
      if (!s->empty()) (*s)[pick(s->size())] ^= static_cast<char>(1u << (rng() % 8));
      break;
    case 1:  // set a byte to an interesting value (varint ends, field tags)
      if (!s->empty()) (*s)[pick(s->size())] = static_cast<char>(kInteresting[rng() % 9]);
      break;
    case 2:  // insert random bytes
      if (s->size() < max_len) {
        std::string ins(1 + pick(8), '\0');
        for (char& c : ins) c = static_cast<char>(rng());
        s->insert(pick(s->size() + 1), ins);
      }
      break;
    case 3:  // erase a range
      if (!s->empty()) {
        const size_t at = pick(s->size());
        s->erase(at, 1 + pick(std::min<size_t>(16, s->size() - at)));
      }
      break;
    case 4:  // duplicate a range (repeated fields, nested messages)
      if (!s->empty() && s->size() < max_len) {
        const size_t at = pick(s->size());
        const std::string part = s->substr(at, 1 + pick(32));
        s->insert(pick(s->size() + 1), part);
      }
      break;
    case 5:  // splice with another seed
      if (!corpus.empty()) {
        const std::string& o = corpus[pick(corpus.size())];
        *s = s->substr(0, pick(s->size() + 1)) + o.substr(pick(o.size() + 1));
      }
      break;
    case 6:  // truncate
      s->resize(pick(s->size() + 1));
      break;
    default:  // overwrite a byte at random
      if (!s->empty()) (*s)[pick(s->size())] = static_cast<char>(rng());
      break;
  }
  if (s->size() > max_len) s->resize(max_len);
}

}  // namespace

void FuzzFail(const std::string& what) {
  std::fprintf(stderr, "fuzz: invariant failed: %s\n", what.c_str());
  std::abort();
}

void CheckRefusedCall(int method, const grpc::Status& s, bool state_changed,
                      const std::string& state) {
  if (s.error_message().find('\n') != std::string::npos) {
    FuzzFail("multi-line error: " + s.error_message());
  }
  if (s.error_code() == grpc::StatusCode::INTERNAL || s.error_code() == grpc::StatusCode::UNKNOWN) {
    FuzzFail("method " + std::to_string(method) + ": code " +
             std::to_string(static_cast<int>(s.error_code())) + ": " + s.error_message());
  }
  if (state_changed) {
    FuzzFail("method " + std::to_string(method) + " failed (" + s.error_message() +
             ") but changed " + state);
  }
}

}  // namespace windquant::testing

int main(int argc, char** argv) {
  using windquant::testing::g_crash_path;
  double seconds = 5;
  uint64_t seed = 1;
  size_t max_len = 4096;
  std::string name = argc > 0 ? argv[0] : "fuzz";
  name = name.substr(name.rfind('/') + 1);
  std::string crash = name + ".crash";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--help" || a == "-h") {
      std::printf("usage: %s [--time SECONDS] [--seed N] [--max-len BYTES] [--crash FILE]\n",
                  name.c_str());
      return 0;
    }
    if (v == nullptr) {
      std::fprintf(stderr, "%s: %s: expected a value\n", name.c_str(), a.c_str());
      return 2;
    }
    if (a == "--time") {
      seconds = std::atof(v);
    } else if (a == "--seed") {
      seed = std::strtoull(v, nullptr, 10);
    } else if (a == "--max-len") {
      max_len = std::strtoull(v, nullptr, 10);
    } else if (a == "--crash") {
      crash = v;
    } else {
      std::fprintf(stderr, "%s: unknown flag %s (see --help)\n", name.c_str(), a.c_str());
      return 2;
    }
    ++i;
  }
  std::snprintf(g_crash_path, sizeof(g_crash_path), "%s", crash.c_str());
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL})
    ::signal(sig, windquant::testing::OnCrash);

  const std::vector<std::string> seeds = windquant::testing::WqFuzzSeeds();
  std::mt19937_64 rng(seed);
  std::string input;
  windquant::testing::g_current = &input;
  int64_t runs = 0, from_seeds = 0;
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  // Every seed once as is, then mutations until the time is up.
  for (const std::string& s : seeds) {
    input = s;
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
    ++runs;
  }
  while (elapsed() < seconds) {
    if (seeds.empty() || rng() % 8 == 0) {
      input.assign(rng() % 256, '\0');
      for (char& c : input) c = static_cast<char>(rng());
    } else {
      input = seeds[rng() % seeds.size()];
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits; ++e) {
        windquant::testing::MutateOnce(&input, seeds, rng, max_len);
      }
      ++from_seeds;
    }
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
    ++runs;
  }
  std::printf("%s: %lld executions in %.1f s (%lld mutated from %zu seeds, seed %llu)\n",
              name.c_str(), static_cast<long long>(runs), elapsed(),
              static_cast<long long>(from_seeds), seeds.size(),
              static_cast<unsigned long long>(seed));
  return 0;
}
