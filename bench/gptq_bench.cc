// gptq_bench: error compensation (CompensateLinear, gptq.h) at the LLaMA-3.2-1B linear
// shapes, in achieved GFLOP/s against a plain at::matmul GFLOP/s measured in the same run
// (the machine's GEMM limit at this thread count), for each trailing-update kernel:
//  * per-row: the previous kernel (each row alone over 64-column register tiles,
//    reloading the factor's row segment for every row), kept here for the comparison;
//  * baseline: gptq_kernels.inc with the x86-64 baseline instruction set;
//  * avx2: gptq_kernels.inc with AVX2 (no FMA), when the CPU has it;
//  * torch ops: CompensateLinearTorch (gptq_torch.h, the device path), per-column vector
//    ops and one at::addmm per block for the trailing update.
// The first three give the same bits (checked here, and by gptq_test); the torch ops sum
// each entry's block terms in the GEMM's order, so a few entries may round the other way
// (counted here; gptq_test bounds the output error). FLOPs counted: rows *
// in * (in - 1), a multiply and a subtraction per (row, j < k) term of the definition.
// The factor is a random well-conditioned upper-triangular matrix (speed does not depend
// on its values); units of 128 columns cycle through 2, 3 and 4 bits.
// With --factor the bench times the factorisation instead (GptqFactors::Create of one
// [in, in] Hessian, H = 2/N X^T X of N = 512 random tokens, the other input kinds 1x1):
// the host path (gptq.cc: LAPACK in place, cholesky_inverse) and the torch-ops path
// (gptq_torch.h: what a stage on a GPU runs), and how far apart their packed factors are.
// Each row prints the process's resident memory before Create and its peak so far (run
// one path per process to see that path's peak).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "bench/matmul_reference.h"
#include "common/quant/gptq.h"
#include "common/quant/gptq_kernels.h"
#include "common/quant/gptq_torch.h"

namespace {

using windquant::bench::MatmulGflops;
using windquant::bench::Now;

using windquant::plan::Action;
using windquant::quant::ColumnUnit;
using windquant::quant::GptqOptions;
using windquant::quant::PackedUpper;
using windquant::quant::SalientSet;
using windquant::quant::TrailingUpdateFn;

constexpr char kUsage[] =
    "usage: gptq_bench [flags]\n\n"
    "Error compensation (CompensateLinear) GFLOP/s at the LLaMA-3.2-1B linear shapes\n"
    "(2048x2048, 8192x2048, 2048x8192), per trailing-update kernel and with torch ops, against a "
    "plain\n"
    "at::matmul's GFLOP/s in the same run.\n\n"
    "flags:\n"
    "  --threads N     intra-op threads (2)\n"
    "  --iters N       timed runs per case (1)\n"
    "  --gemm N        size of the reference square matmul (2048)\n"
    "  --no-per-row    skip the previous per-row kernel (slow)\n"
    "  --no-torch      skip the torch-ops path (CompensateLinearTorch)\n"
    "  --case NAME     only the shape whose name starts with NAME (q, k, gate, down)\n"
    "  --factor PATHS  time the factorisation instead: host, torch or both, at in = 2048\n"
    "                  (--case q) and 8192 (--case down)\n"
    "  --help          this text\n";

// The previous trailing update: row by row, 64 columns of accumulators, the factor's
// segment reloaded for every row.
void PerRowTrailing(const float* e, int64_t es, const float* const* u, int64_t nj, float* w,
                    int64_t ws, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 64;
  for (int64_t r = 0; r < rows; ++r) {
    float* wr = w + r * ws;
    const float* er = e + r * es;
    for (int64_t k0 = 0; k0 < cols; k0 += kTile) {
      const int64_t n = std::min(kTile, cols - k0);
      float acc[kTile];
      std::memcpy(acc, wr + k0, n * sizeof(float));
      for (int64_t j = 0; j < nj; ++j) {
        const float x = er[j];
        const float* uj = u[j] + k0;
        if (n == kTile) {
          for (int64_t t = 0; t < kTile; ++t) acc[t] = acc[t] - x * uj[t];
        } else {
          for (int64_t t = 0; t < n; ++t) acc[t] = acc[t] - x * uj[t];
        }
      }
      std::memcpy(wr + k0, acc, n * sizeof(float));
    }
  }
}

// The process's resident bytes now, and at most so far (getrusage).
double RssGb() {
  long pages = 0, resident = 0;
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f != nullptr) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / 1e9;
}
double PeakRssGb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024.0 / 1e9;
}

// Create's time for one [in, in] Hessian (best of `iters`), its packed factor in *u.
double TimeFactor(const at::Tensor& h, bool torch, int iters, at::Tensor* u) {
  double best = 1e30;
  for (int it = 0; it < iters; ++it) {
    windquant::quant::StageHessians s;
    s.layers.resize(1);
    for (at::Tensor& k : s.layers[0]) k = at::ones({1, 1}, at::kDouble);
    s.layers[0][static_cast<int>(windquant::quant::InputKind::kDown)] = h.clone();
    GptqOptions o;
    o.torch_ops = torch;
    const double t0 = Now();
    absl::StatusOr<windquant::quant::GptqFactors> f =
        windquant::quant::GptqFactors::Create(std::move(s), o);
    best = std::min(best, Now() - t0);
    if (!f.ok()) {
      std::fprintf(stderr, "gptq_bench: %s\n", f.status().ToString().c_str());
      std::exit(1);
    }
    *u = f->Layer(0)->Of(windquant::model::Matrix::kDown).data();
  }
  return best;
}

void BenchFactor(int64_t in, const std::string& paths, int iters) {
  at::manual_seed(2);
  const at::Tensor x = at::randn({512, in}, at::kDouble);  // float64 throughout: a low setup peak
  const at::Tensor h = x.t().mm(x).mul_(2.0 / 512);
  at::Tensor host, torch;
  for (const bool t : {false, true}) {
    if (paths != "both" && paths != (t ? "torch" : "host")) continue;
    const double before = RssGb();
    const double s = TimeFactor(h, t, iters, t ? &torch : &host);
    std::printf("factor in=%-6lld %-22s %8.3f s  RSS before %.2f GB, peak so far %.2f GB\n",
                static_cast<long long>(in), t ? "torch ops (float64)" : "host (LAPACK in place)", s,
                before, PeakRssGb());
  }
  if (host.defined() && torch.defined()) {
    const double diff = (host - torch).abs().max().item<double>();
    std::printf(
        "factor in=%-6lld packed factors: max |host - torch| = %.3g (%.3g of max |U|), "
        "%lld of %lld floats differ\n",
        static_cast<long long>(in), diff, diff / host.abs().max().item<double>(),
        static_cast<long long>(host.ne(torch).sum().item<int64_t>()),
        static_cast<long long>(host.numel()));
  }
}

struct Case {
  const char* name;
  int64_t rows, in;
  int per_layer;
};

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, iters = 1;
  int64_t gemm = 2048;
  bool per_row = true, torch_ops = true;
  std::string only, factor;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "gptq_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--threads") {
      threads = std::atoi(next());
    } else if (a == "--iters") {
      iters = std::atoi(next());
    } else if (a == "--gemm") {
      gemm = std::atoll(next());
    } else if (a == "--case") {
      only = next();
    } else if (a == "--no-per-row") {
      per_row = false;
    } else if (a == "--factor") {
      factor = next();
      if (factor != "host" && factor != "torch" && factor != "both") {
        std::fprintf(stderr, "gptq_bench: --factor takes host, torch or both\n");
        return 2;
      }
    } else if (a == "--no-torch") {
      torch_ops = false;
    } else {
      std::fprintf(stderr, "gptq_bench: unknown flag %s\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  at::set_num_threads(threads);
  if (!factor.empty()) {
    std::printf("GptqFactors::Create, one Hessian (%d threads)\n", threads);
    for (const auto& [name, in] : {std::pair<const char*, int64_t>{"q", 2048}, {"down", 8192}}) {
      if (only.empty() || std::string(name).rfind(only, 0) == 0) BenchFactor(in, factor, iters);
    }
    return 0;
  }
  const double peak = MatmulGflops(gemm, 3);
  std::printf("at::matmul %lldx%lldx%lld: %.2f GFLOP/s (%d threads)\n",
              static_cast<long long>(gemm), static_cast<long long>(gemm),
              static_cast<long long>(gemm), peak, threads);
  struct Kernel {
    const char* name;
    TrailingUpdateFn fn;
    bool torch = false;
  };
  std::vector<Kernel> kernels;
  if (per_row) kernels.push_back({"per-row (previous)", &PerRowTrailing});
  kernels.push_back({"baseline", &windquant::quant::gptq_baseline::TrailingUpdate});
  if (__builtin_cpu_supports("avx2")) {
    kernels.push_back({"avx2", &windquant::quant::gptq_avx2::TrailingUpdate});
  }
  if (torch_ops) kernels.push_back({"torch ops (GEMM)", nullptr, true});
  // How often each shape occurs in one decoder layer.
  const Case cases[] = {{"q/o 2048x2048", 2048, 2048, 2},
                        {"k/v 512x2048", 512, 2048, 2},
                        {"gate/up 8192x2048", 8192, 2048, 2},
                        {"down 2048x8192", 2048, 8192, 1}};
  std::vector<double> layer_s(kernels.size(), 0.0);
  int measured = 0;
  const Action acts[] = {Action::k2, Action::k3, Action::k4};
  for (const Case& c : cases) {
    if (!only.empty() && std::string(c.name).rfind(only, 0) != 0) continue;
    ++measured;
    at::manual_seed(1);
    const at::Tensor w0 = at::randn({c.rows, c.in}) * 0.02;
    const PackedUpper u =
        PackedUpper::Pack(at::triu(at::randn({c.in, c.in}) * (0.5 / c.in)) + at::eye(c.in));
    std::vector<float> scales(c.rows, 0.01f);
    const SalientSet none;
    std::vector<ColumnUnit> units;
    for (int64_t c0 = 0, k = 0; c0 < c.in; c0 += 128, ++k) {
      units.push_back({c0, 128, acts[k % 3], scales.data(), nullptr, &none});
    }
    const double flops = static_cast<double>(c.rows) * c.in * (c.in - 1);
    at::Tensor first;
    for (size_t ki = 0; ki < kernels.size(); ++ki) {
      const Kernel& k = kernels[ki];
      GptqOptions o;
      o.trailing = k.fn;
      if (k.fn == &PerRowTrailing) o.row_group = 16;  // the previous default
      at::Tensor w;
      double best = 1e30;
      for (int it = 0; it < iters; ++it) {
        w = w0.clone();
        const double t0 = Now();
        if (k.torch) {
          windquant::quant::CompensateLinearTorch(units, u, &w, nullptr, o);
        } else {
          windquant::quant::CompensateLinear(units, u, &w, nullptr, o);
        }
        best = std::min(best, Now() - t0);
      }
      const int64_t differ = first.defined() ? first.ne(w).sum().item<int64_t>() : 0;
      if (!first.defined()) first = w;
      const double g = flops / best / 1e9;
      layer_s[ki] += c.per_layer * best;
      std::printf("%-18s %-20s %8.3f s  %7.2f GFLOP/s  %5.1f%% of matmul", c.name, k.name, best, g,
                  100.0 * g / peak);
      if (differ > 0) {
        std::printf("  %s: %lld of %lld entries differ", k.torch ? "rounding" : "VALUES DIFFER",
                    static_cast<long long>(differ), static_cast<long long>(w.numel()));
      }
      std::printf("\n");
    }
  }
  if (measured == 4) {
    for (size_t ki = 0; ki < kernels.size(); ++ki) {
      std::printf("one LLaMA-3.2-1B layer (q, k, v, o, gate, up, down), %s: %.2f s\n",
                  kernels[ki].name, layer_s[ki]);
    }
  }
  return 0;
}
