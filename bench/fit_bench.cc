// fit_bench: throughput of quantizer fitting (common/quant FitUnit, all 7 actions per unit)
// on synthetic LLaMA-3.2-1B-shaped and stories260k-shaped layers, reported as unit-actions/s
// and GB/s of FP32 weights read, and as a ratio of this machine's memory bandwidth measured
// in the same run (a large tensor copy).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "common/base/progress.h"
#include "common/quant/quantizer.h"

namespace {

using windquant::quant::Action;
using windquant::quant::FitUnit;
using windquant::quant::kAllActions;

constexpr char kUsage[] = R"(fit_bench: quantizer fitting throughput (all 7 actions per unit).

Usage: fit_bench [--model=llama1b|stories260k|all] [--threads=N] [--mode=units|intraop]
                 [--layers=N] [--chunk=C] [--tiny_chunk=C] [--bandwidth_mb=MB] [--seed=S]

  --model        shapes to fit (default all)
                 llama1b: one decoder layer of LLaMA-3.2-1B (q,o 2048x2048; k,v 512x2048;
                 gate,up 8192x2048; down 2048x8192) in column chunks of --chunk (256) = 80 units
                 stories260k: all 5 layers (q,o 64x64; k,v 32x64; gate,up 172x64; down 64x172)
                 in chunks of --tiny_chunk (32) = 90 units
  --threads      ATen threads (default 2)
  --mode         units: at::parallel_for over units, one thread per unit (default)
                 intraop: units one after another, ATen ops use the threads
  --layers       llama1b layers to fit (default 1; a full model is 16)
  --bandwidth_mb size of the tensor copied to measure memory bandwidth (default 512)
  --seed         RNG seed (default 1)
)";

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct UnitShape {
  int64_t rows, cols;
};

// Unit shapes of one linear [out, in] in column chunks of `chunk` (last may be narrower).
void AddMatrix(int64_t out, int64_t in, int64_t chunk, std::vector<UnitShape>* units) {
  for (int64_t j = 0; j < in; j += chunk) units->push_back({out, std::min(chunk, in - j)});
}

// Copy bandwidth in bytes/s (read + write counted), best of several copies.
double MeasureBandwidth(int64_t mb) {
  const int64_t n = mb * (1 << 20) / 4;
  at::Tensor src = at::rand({n});
  at::Tensor dst = at::empty_like(src);
  dst.copy_(src);  // fault the pages in
  double best = 0;
  for (int r = 0; r < 5; ++r) {
    const double t0 = Now();
    dst.copy_(src);
    const double dt = Now() - t0;
    best = std::max(best, 2.0 * n * 4 / dt);
  }
  return best;
}

struct Result {
  int64_t units = 0, weights = 0;
  double seconds = 0;
};

Result Run(const std::string& label, const std::vector<UnitShape>& shapes, bool per_unit,
           uint64_t seed) {
  // Synthetic weights ~ N(0, 0.02^2) with 0.5% outliers x8; log-normal activation scales.
  at::manual_seed(seed);
  std::vector<at::Tensor> w, s;
  Result r;
  for (const UnitShape& u : shapes) {
    at::Tensor x = at::randn({u.rows, u.cols}) * 0.02;
    x = at::where(at::rand_like(x) < 0.005, x * 8, x);
    w.push_back(x);
    s.push_back(at::exp(at::randn({u.cols}) * 0.7));
    r.units++;
    r.weights += u.rows * u.cols;
  }
  windquant::base::Progress progress(label, static_cast<double>(shapes.size()), "units", 5.0);
  std::vector<int> failed(shapes.size(), 0);
  const double t0 = Now();
  if (per_unit) {
    at::parallel_for(0, static_cast<int64_t>(shapes.size()), 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) failed[i] = !FitUnit(w[i], s[i], kAllActions).ok();
    });
  } else {
    for (size_t i = 0; i < shapes.size(); ++i) {
      failed[i] = !FitUnit(w[i], s[i], kAllActions).ok();
      progress.Update(static_cast<double>(i + 1));
    }
  }
  r.seconds = Now() - t0;
  progress.Finish();
  if (std::count(failed.begin(), failed.end(), 1) > 0) {
    std::fprintf(stderr, "fit_bench: FitUnit failed on some units\n");
    std::exit(1);
  }
  return r;
}

void Report(const char* name, const Result& r, double bandwidth) {
  const double unit_actions = r.units * static_cast<double>(windquant::quant::kNumActions);
  const double bytes = r.weights * 4.0;
  std::printf(
      "%-12s units=%lld weights=%.3fM time=%.3fs  unit-actions/s=%.1f  weights GB/s=%.4f"
      "  ratio_to_copy_bandwidth=%.5f  ms/unit=%.2f\n",
      name, static_cast<long long>(r.units), r.weights / 1e6, r.seconds, unit_actions / r.seconds,
      bytes / r.seconds / 1e9, bytes / r.seconds / bandwidth, 1e3 * r.seconds / r.units);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = "all", mode = "units";
  int threads = 2, layers = 1;
  int64_t chunk = 256, tiny_chunk = 32, bandwidth_mb = 512;
  uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* flag) -> const char* {
      const std::string prefix = std::string(flag) + "=";
      return a.rfind(prefix, 0) == 0 ? argv[i] + prefix.size() : nullptr;
    };
    bool ok = true;
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (const char* v = value("--model")) {
      model = v;
      ok = model == "all" || model == "llama1b" || model == "stories260k";
    } else if (const char* v = value("--mode")) {
      mode = v;
      ok = mode == "units" || mode == "intraop";
    } else if (const char* v = value("--threads")) {
      ok = absl::SimpleAtoi(v, &threads) && threads >= 1;
    } else if (const char* v = value("--layers")) {
      ok = absl::SimpleAtoi(v, &layers) && layers >= 1;
    } else if (const char* v = value("--chunk")) {
      ok = absl::SimpleAtoi(v, &chunk) && chunk >= 1;
    } else if (const char* v = value("--tiny_chunk")) {
      ok = absl::SimpleAtoi(v, &tiny_chunk) && tiny_chunk >= 1;
    } else if (const char* v = value("--bandwidth_mb")) {
      ok = absl::SimpleAtoi(v, &bandwidth_mb) && bandwidth_mb >= 1;
    } else if (const char* v = value("--seed")) {
      ok = absl::SimpleAtoi(v, &seed);
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "fit_bench: bad flag '%s' (see --help)\n", argv[i]);
      return 2;
    }
  }
  at::set_num_threads(threads);
  const double bandwidth = MeasureBandwidth(bandwidth_mb);
  std::printf("threads=%d mode=%s  memory copy bandwidth (read+write) = %.2f GB/s\n", threads,
              mode.c_str(), bandwidth / 1e9);
  const bool per_unit = mode == "units";
  if (model == "all" || model == "stories260k") {
    std::vector<UnitShape> units;
    for (int l = 0; l < 5; ++l) {
      AddMatrix(64, 64, tiny_chunk, &units);   // q
      AddMatrix(32, 64, tiny_chunk, &units);   // k
      AddMatrix(32, 64, tiny_chunk, &units);   // v
      AddMatrix(64, 64, tiny_chunk, &units);   // o
      AddMatrix(172, 64, tiny_chunk, &units);  // gate
      AddMatrix(172, 64, tiny_chunk, &units);  // up
      AddMatrix(64, 172, tiny_chunk, &units);  // down
    }
    Report("stories260k", Run("stories260k", units, per_unit, seed), bandwidth);
  }
  if (model == "all" || model == "llama1b") {
    std::vector<UnitShape> units;
    for (int l = 0; l < layers; ++l) {
      AddMatrix(2048, 2048, chunk, &units);  // q
      AddMatrix(512, 2048, chunk, &units);   // k
      AddMatrix(512, 2048, chunk, &units);   // v
      AddMatrix(2048, 2048, chunk, &units);  // o
      AddMatrix(8192, 2048, chunk, &units);  // gate
      AddMatrix(8192, 2048, chunk, &units);  // up
      AddMatrix(2048, 8192, chunk, &units);  // down
    }
    const Result r = Run("llama1b", units, per_unit, seed);
    Report("llama1b", r, bandwidth);
    std::printf("llama1b: projected full model (16 layers) fit time = %.1f s\n",
                r.seconds * 16.0 / layers);
  }
  return 0;
}
