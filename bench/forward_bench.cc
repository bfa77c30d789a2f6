// forward_bench: throughput of LlamaModel::Logits (no grad) in tokens/s and
// achieved GFLOP/s, against a plain at::matmul GFLOP/s measured in the same
// run (the machine's own GEMM limit at this thread count).
//  * stories260k (real checkpoint) when found;
//  * a synthetic model with LLaMA-3.2-1B shapes (hidden 2048, intermediate
//    8192, 32 heads, 8 KV heads, head_dim 64, vocab 128256, tied embeddings),
//    2 decoder layers, random weights.
// FLOPs counted: 2 * (linear + lm_head parameters) * tokens, plus attention
// 4 * B * heads * T^2 * head_dim per layer (QK^T and PV over the full T x T
// score matrix, which is what the dense causal implementation computes).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/matmul_reference.h"
#include "common/model/checkpoint.h"
#include "common/model/llama_model.h"

namespace {

using windquant::bench::MatmulGflops;
using windquant::bench::Now;

using windquant::model::LayerWeights;
using windquant::model::LlamaConfig;
using windquant::model::LlamaModel;
using windquant::model::LlamaWeights;
using windquant::model::Matrix;

constexpr char kUsage[] =
    "usage: forward_bench [flags]\n\n"
    "Forward-pass throughput (tokens/s, GFLOP/s, ratio to plain at::matmul GFLOP/s).\n\n"
    "flags:\n"
    "  --threads N     intra-op threads (2)\n"
    "  --seq N         sequence length of the synthetic 1B-shaped model (512)\n"
    "  --max-batch N   batch sizes 1..N (2)\n"
    "  --layers N      decoder layers of the synthetic model (2)\n"
    "  --iters N       timed iterations per case (3)\n"
    "  --gemm N        size of the reference square matmul (2048)\n"
    "  --model DIR     real model to bench too (default: $WQ_SOURCE_DIR/../shared/models/\n"
    "                  stories260k, else ./shared/models/stories260k, else ../shared/...)\n"
    "  --help          this text\n";

int64_t LinearParams(const LlamaModel& m) {
  int64_t p = 0;
  for (const LayerWeights& l : m.weights().layers)
    for (const at::Tensor& t : l.linear) p += t.numel();
  const at::Tensor& head =
      m.weights().lm_head.defined() ? m.weights().lm_head : m.weights().embed_tokens;
  return p + head.numel();
}

void Bench(const std::string& name, const LlamaModel& model, int64_t seq,
           const std::vector<int64_t>& batches, int iters, double gemm_gflops) {
  const LlamaConfig& c = model.config();
  const int64_t layers = model.end_layer() - model.first_layer();
  for (const int64_t b : batches) {
    at::manual_seed(1);
    const at::Tensor ids = at::randint(c.vocab_size, {b, seq}, at::kLong);
    c10::NoGradGuard no_grad;
    model.Logits(ids);  // warm-up
    const double t0 = Now();
    for (int i = 0; i < iters; ++i) model.Logits(ids);
    const double s = (Now() - t0) / iters;
    const double tokens = static_cast<double>(b * seq);
    const double flops = 2.0 * LinearParams(model) * tokens +
                         4.0 * layers * b * c.num_attention_heads * double(seq) * seq * c.head_dim;
    const double gflops = flops / s / 1e9;
    std::printf(
        "%-22s batch %lld seq %lld: %9.0f tokens/s  %7.2f GFLOP/s  %5.1f%% of matmul  (%.3f "
        "s/iter)\n",
        name.c_str(), static_cast<long long>(b), static_cast<long long>(seq), tokens / s, gflops,
        100.0 * gflops / gemm_gflops, s);
    std::fflush(stdout);
  }
}

LlamaModel Synthetic1B(int64_t layers) {
  LlamaConfig c;
  c.hidden_size = 2048;
  c.intermediate_size = 8192;
  c.num_hidden_layers = layers;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 8;
  c.head_dim = 64;
  c.vocab_size = 128256;
  c.max_position_embeddings = 131072;
  c.rope_theta = 500000.0;
  c.rope_scaling = windquant::model::RopeScaling{"llama3", 32.0, 1.0, 4.0, 8192};
  c.tie_word_embeddings = true;
  at::manual_seed(2);
  auto lin = [](int64_t out, int64_t in) { return at::randn({out, in}).mul_(0.02); };
  LlamaWeights w;
  w.config = c;
  for (int64_t i = 0; i < layers; ++i) {
    LayerWeights l;
    l.at(Matrix::kQ) = lin(2048, 2048);
    l.at(Matrix::kK) = lin(512, 2048);
    l.at(Matrix::kV) = lin(512, 2048);
    l.at(Matrix::kO) = lin(2048, 2048);
    l.at(Matrix::kGate) = lin(8192, 2048);
    l.at(Matrix::kUp) = lin(8192, 2048);
    l.at(Matrix::kDown) = lin(2048, 8192);
    l.input_layernorm = at::ones({2048});
    l.post_attention_layernorm = at::ones({2048});
    w.layers.push_back(l);
  }
  w.embed_tokens = lin(c.vocab_size, 2048);
  w.lm_head = w.embed_tokens;
  w.final_norm = at::ones({2048});
  return LlamaModel(std::move(w));
}

}  // namespace

int main(int argc, char** argv) {
  int64_t threads = 2, seq = 512, max_batch = 2, layers = 2, iters = 3, gemm = 2048;
  std::string model_dir;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      return 0;
    }
    auto value = [&](int64_t* out) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "forward_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      char* end = nullptr;
      *out = std::strtoll(argv[++i], &end, 10);
      if (*end != '\0' || *out <= 0) {
        std::fprintf(stderr, "forward_bench: %s: expected a positive integer, got '%s'\n",
                     a.c_str(), argv[i]);
        std::exit(2);
      }
    };
    if (a == "--threads")
      value(&threads);
    else if (a == "--seq")
      value(&seq);
    else if (a == "--max-batch")
      value(&max_batch);
    else if (a == "--layers")
      value(&layers);
    else if (a == "--iters")
      value(&iters);
    else if (a == "--gemm")
      value(&gemm);
    else if (a == "--model" && i + 1 < argc)
      model_dir = argv[++i];
    else {
      std::fprintf(stderr, "forward_bench: unknown flag '%s' (see --help)\n", a.c_str());
      return 2;
    }
  }
  at::set_num_threads(static_cast<int>(threads));
  std::printf("threads %d\n", at::get_num_threads());
  const double gemm_gflops = MatmulGflops(gemm, static_cast<int>(iters));
  std::printf("at::matmul %lldx%lldx%lld: %.2f GFLOP/s\n", static_cast<long long>(gemm),
              static_cast<long long>(gemm), static_cast<long long>(gemm), gemm_gflops);

  if (model_dir.empty()) {
    std::vector<std::string> candidates;
    if (const char* src = std::getenv("WQ_SOURCE_DIR")) {
      candidates.push_back(std::string(src) + "/../shared/models/stories260k");
    }
    candidates.push_back("shared/models/stories260k");
    candidates.push_back("../shared/models/stories260k");
    for (const std::string& c : candidates) {
      if (std::FILE* f = std::fopen((c + "/model.safetensors").c_str(), "rb")) {
        std::fclose(f);
        model_dir = c;
        break;
      }
    }
  }
  if (!model_dir.empty()) {
    auto ckpt = windquant::model::Checkpoint::Open(model_dir);
    auto w = ckpt.ok() ? (*ckpt)->LoadWeights(windquant::model::LoadRequest{})
                       : absl::StatusOr<LlamaWeights>(ckpt.status());
    if (!w.ok()) {
      std::fprintf(stderr, "forward_bench: %s\n", std::string(w.status().message()).c_str());
      return 1;
    }
    LlamaModel stories(std::move(*w));
    const int64_t stories_seq = std::min<int64_t>(256, stories.config().max_position_embeddings);
    Bench("stories260k", stories, stories_seq, {1, 16}, static_cast<int>(iters), gemm_gflops);
  } else {
    std::printf("stories260k: not found (pass --model DIR)\n");
  }
  const LlamaModel synth = Synthetic1B(layers);
  std::vector<int64_t> batches;
  for (int64_t b = 1; b <= max_batch; ++b) batches.push_back(b);
  Bench("llama3.2-1B-shape x" + std::to_string(layers), synth, seq, batches,
        static_cast<int>(iters), gemm_gflops);
  return 0;
}
