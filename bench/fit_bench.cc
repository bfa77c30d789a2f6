// fit_bench: throughput of building the unit table (common/quant BuildStageFits: every
// action of every unit fitted, features, compact fits) on synthetic LLaMA-3.2-1B-shaped
// layers (BF16 weights N(0, 0.02^2) with outlier channels, log-normal activation scales)
// and on stories260k-shaped ones, reported as float32 weight bytes per second and as a
// ratio of this machine's memory-copy bandwidth measured in the same run.
// --reference times the first, ATen-only quantizer (reference_quantizer.h) on the same
// units, one FitUnit per unit, for a before/after on one machine.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "common/quant/calibration.h"
#include "common/quant/reference_quantizer.h"
#include "common/quant/unit_table_builder.h"

namespace {

namespace wq = windquant;

constexpr char kUsage[] = R"(fit_bench: unit-table build throughput (all 7 actions per unit).

Usage: fit_bench [--model=llama1b|stories260k|all] [--layers=N] [--chunk=C] [--tiny_chunk=C]
                 [--threads=N] [--reference] [--bandwidth_mb=MB] [--seed=S]

  --model        shapes to fit (default all)
                 llama1b: decoder layers of LLaMA-3.2-1B (q,o 2048x2048; k,v 512x2048;
                 gate,up 8192x2048; down 2048x8192), BF16, in column chunks of --chunk
                 (128 = 160 units per layer)
                 stories260k: 5 layers (q,o 64x64; k,v 32x64; gate,up 172x64; down 64x172)
                 in chunks of --tiny_chunk (64)
  --layers       llama1b layers (default 2; the full model is 16)
  --threads      ATen threads (default 2)
  --reference    also time the ATen-only quantizer (one FitUnit per unit, units in parallel)
  --bandwidth_mb size of the tensor copied to measure memory bandwidth (default 512)
  --seed         RNG seed (default 1)
)";

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
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

struct Shape {
  int64_t hidden, intermediate, heads, kv_heads, head_dim, layers;
};

// Synthetic stage: weights N(0, 0.02^2), 0.5% outlier input channels x6, in `dtype`;
// activation scales log-normal with a few large channels.
void MakeStage(const Shape& sh, at::ScalarType dtype, wq::model::LlamaWeights* w,
               wq::quant::ActivationStats* stats) {
  auto& c = w->config;
  c.hidden_size = sh.hidden;
  c.intermediate_size = sh.intermediate;
  c.num_hidden_layers = sh.layers;
  c.num_attention_heads = sh.heads;
  c.num_key_value_heads = sh.kv_heads;
  c.head_dim = sh.head_dim;
  c.vocab_size = 2048;
  c.tie_word_embeddings = true;
  const int64_t q = sh.heads * sh.head_dim, kv = sh.kv_heads * sh.head_dim;
  const int64_t out[7] = {q, kv, kv, sh.hidden, sh.intermediate, sh.intermediate, sh.hidden};
  const int64_t in[7] = {sh.hidden, sh.hidden, sh.hidden, q, sh.hidden, sh.hidden, sh.intermediate};
  stats->first_layer = 0;
  stats->layers.resize(sh.layers);
  for (int64_t l = 0; l < sh.layers; ++l) {
    wq::model::LayerWeights lw;
    for (int m = 0; m < 7; ++m) {
      at::Tensor x = at::randn({out[m], in[m]}) * 0.02;
      x = x * at::where(at::rand({1, in[m]}) < 0.005, at::full({1}, 6.0), at::ones({1}));
      lw.linear[m] = x.to(dtype);
      at::Tensor s = at::exp(at::randn({in[m]}) * 0.7);
      (*stats).layers[l][m].mean_abs = at::where(at::rand({in[m]}) < 0.01, s * 20, s);
    }
    lw.input_layernorm = at::ones({sh.hidden});
    lw.post_attention_layernorm = at::ones({sh.hidden});
    w->layers.push_back(lw);
  }
}

struct Result {
  int64_t units = 0, weights = 0;
  double seconds = 0;
};

Result BuildTable(const wq::model::LlamaWeights& w, const wq::quant::ActivationStats& stats,
                  int64_t chunk) {
  wq::quant::UnitTableOptions o;
  o.chunk_size = chunk;
  const double t0 = Now();
  auto fits = wq::quant::BuildStageFits(w, stats, o, "bench");
  Result r;
  r.seconds = Now() - t0;
  if (!fits.ok()) {
    std::fprintf(stderr, "fit_bench: %s\n", std::string(fits.status().message()).c_str());
    std::exit(1);
  }
  r.units = static_cast<int64_t>(fits->table().units.size());
  r.weights = fits->table().TotalWeights();
  std::printf("  fits held: %.1f MB (%.4f bytes per weight)\n", fits->ParamBytes() / 1e6,
              static_cast<double>(fits->ParamBytes()) / r.weights);
  return r;
}

// The ATen-only quantizer on the same units (all 7 actions, units in parallel).
Result ReferenceFits(const wq::model::LlamaWeights& w, const wq::quant::ActivationStats& stats,
                     int64_t chunk) {
  std::vector<std::pair<at::Tensor, at::Tensor>> units;
  Result r;
  for (size_t l = 0; l < w.layers.size(); ++l) {
    for (int m = 0; m < 7; ++m) {
      const at::Tensor W = w.layers[l].linear[m].to(at::kFloat);
      const at::Tensor& s = stats.layers[l][m].mean_abs;
      for (int64_t c0 = 0; c0 < W.size(1); c0 += chunk) {
        const int64_t c1 = std::min(c0 + chunk, W.size(1));
        units.emplace_back(W.slice(1, c0, c1).contiguous(), s.slice(0, c0, c1).contiguous());
        r.weights += W.size(0) * (c1 - c0);
      }
    }
  }
  r.units = static_cast<int64_t>(units.size());
  std::vector<int> failed(units.size(), 0);
  const double t0 = Now();
  at::parallel_for(0, r.units, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      failed[i] = !wq::quant::reference::ReferenceFitUnit(units[i].first, units[i].second,
                                                          wq::plan::kAllActions)
                       .ok();
    }
  });
  r.seconds = Now() - t0;
  if (std::count(failed.begin(), failed.end(), 1) > 0) {
    std::fprintf(stderr, "fit_bench: the reference failed on some units\n");
    std::exit(1);
  }
  return r;
}

void Report(const char* name, const Result& r, double bandwidth) {
  const double bytes = r.weights * 4.0;
  std::printf(
      "%-22s units=%lld weights=%.3fM time=%.3fs  float32 weight GB/s=%.4f"
      "  ratio_to_copy_bandwidth=%.6f  ms/unit=%.2f\n",
      name, static_cast<long long>(r.units), r.weights / 1e6, r.seconds, bytes / r.seconds / 1e9,
      bytes / r.seconds / bandwidth, 1e3 * r.seconds / r.units);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = "all";
  int threads = 2, layers = 2;
  int64_t chunk = 128, tiny_chunk = 64, bandwidth_mb = 512;
  uint64_t seed = 1;
  bool reference = false;
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
    } else if (a == "--reference") {
      reference = true;
    } else if (const char* v = value("--model")) {
      model = v;
      ok = model == "all" || model == "llama1b" || model == "stories260k";
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
  at::manual_seed(seed);
  const double bandwidth = MeasureBandwidth(bandwidth_mb);
  std::printf("threads=%d  memory copy bandwidth (read+write) = %.2f GB/s\n", threads,
              bandwidth / 1e9);
  auto run = [&](const char* name, const Shape& sh, at::ScalarType dtype, int64_t c) {
    wq::model::LlamaWeights w;
    wq::quant::ActivationStats stats;
    MakeStage(sh, dtype, &w, &stats);
    std::printf("%s: %lld layers, chunk %lld\n", name, static_cast<long long>(sh.layers),
                static_cast<long long>(c));
    const Result r = BuildTable(w, stats, c);
    Report((std::string(name) + " table").c_str(), r, bandwidth);
    if (reference)
      Report((std::string(name) + " reference").c_str(), ReferenceFits(w, stats, c), bandwidth);
    return r;
  };
  if (model == "all" || model == "stories260k") {
    run("stories260k", Shape{64, 172, 8, 4, 8, 5}, at::kFloat, tiny_chunk);
  }
  if (model == "all" || model == "llama1b") {
    const Result r = run("llama1b", Shape{2048, 8192, 32, 8, 64, layers}, at::kBFloat16, chunk);
    std::printf("llama1b: projected full model (16 layers) table build = %.1f s\n",
                r.seconds * 16.0 / layers);
  }
  return 0;
}
