// stage_bench: what one stage of a LLaMA-shaped model costs on this machine, for the
// capacity model of docs/capacity.md. On a synthetic stage with the decoder-layer shapes
// of LLaMA-3.2-1B (hidden 2048, intermediate 8192, 32/8 heads of 64; BF16 weights
// N(0, 0.02^2) with outlier channels, log-normal activation scales, as fit_bench):
//  * fits: BuildStageFits (every action of every unit) in ms per unit and float32
//    weight bytes/s, the fits' bytes per weight (StageFits::ParamBytes), and the unit
//    table on the wire (windquant.v1.UnitTable) in bytes per unit;
//  * forward: ForwardLayers over [batch, seq, hidden] FP32 hidden states, with the
//    stored weights (FP: each layer widened to FP32) and with a plan applied
//    (quant::ApplyPlan: each layer's codes made on its first forward, then decoded on
//    every forward: quant/plan_codes.h), in tokens/s and GFLOP/s against a plain
//    at::matmul of this run;
//  * plan application alone (PlanLinears::Linears per layer, after the first: the decode)
//    in weights/s and in bytes/s of the FP32 layer written, against this run's
//    memory-copy bandwidth, and the first forward's (which makes a plan's codes);
//  * wire: hidden states crossing a stage boundary (windquant.v1.HiddenStates, the
//    codec of the actor's Forward RPC) in bytes per token, and a plan (windquant.v1.Plan)
//    in bytes per unit.
// FLOPs counted as forward_bench: 2 * linear parameters * tokens + attention
// 4 * batch * heads * seq^2 * head_dim per layer (the dense T x T score matrix).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "common/model/llama_model.h"
#include "common/plan/plan.h"
#include "common/quant/calibration.h"
#include "common/quant/quantized_stage.h"
#include "common/quant/unit_table_builder.h"
#include "common/transport/hidden_states_codec.h"
#include "windquant/v1/types.pb.h"

namespace {

namespace wq = windquant;

constexpr char kUsage[] = R"(stage_bench: fits, FP and plan forward, plan application and wire
sizes of one stage of LLaMA-3.2-1B-shaped decoder layers (see the file's header).

Usage: stage_bench [--layers=N] [--chunk=C] [--batch=B] [--seq=T] [--iters=N]
                   [--threads=N] [--seed=S]

  --layers   decoder layers of the stage (default 1)
  --chunk    unit width in columns (default 256, the real-model chunk_size)
  --batch    sequences per forward micro-batch (default 1)
  --seq      tokens per sequence (default 512)
  --iters    timed forwards per case, best taken (default 2)
  --threads  ATen threads (default 2)
  --seed     RNG seed (default 1)
)";

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Copy bandwidth in bytes/s (read + write counted), best of five 512 MiB copies.
double CopyBandwidth() {
  const int64_t n = int64_t{512} * (1 << 20) / 4;
  at::Tensor src = at::rand({n});
  at::Tensor dst = at::empty_like(src);
  dst.copy_(src);
  double best = 0;
  for (int r = 0; r < 5; ++r) {
    const double t0 = Now();
    dst.copy_(src);
    best = std::max(best, 2.0 * n * 4 / (Now() - t0));
  }
  return best;
}

double MatmulGflops() {
  const int64_t n = 2048;
  const at::Tensor a = at::randn({n, n}), b = at::randn({n, n});
  at::matmul(a, b);
  double best = 1e300;
  for (int i = 0; i < 3; ++i) {
    const double t0 = Now();
    at::matmul(a, b);
    best = std::min(best, Now() - t0);
  }
  return 2.0 * n * n * n / best / 1e9;
}

// LLaMA-3.2-1B decoder layers, BF16, with activation statistics for the fits.
void MakeStage(int64_t layers, wq::model::LlamaWeights* w, wq::quant::ActivationStats* stats) {
  auto& c = w->config;
  c.hidden_size = 2048;
  c.intermediate_size = 8192;
  c.num_hidden_layers = layers;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 8;
  c.head_dim = 64;
  c.vocab_size = 2048;
  c.rope_theta = 500000.0;
  c.max_position_embeddings = 8192;
  c.tie_word_embeddings = true;
  const int64_t q = 32 * 64, kv = 8 * 64, h = 2048, i = 8192;
  const int64_t out[7] = {q, kv, kv, h, i, i, h};
  const int64_t in[7] = {h, h, h, q, h, h, i};
  stats->first_layer = 0;
  stats->layers.resize(layers);
  for (int64_t l = 0; l < layers; ++l) {
    wq::model::LayerWeights lw;
    for (int m = 0; m < 7; ++m) {
      at::Tensor x = at::randn({out[m], in[m]}) * 0.02;
      x = x * at::where(at::rand({1, in[m]}) < 0.005, at::full({1}, 6.0), at::ones({1}));
      lw.linear[m] = x.to(at::kBFloat16);
      const at::Tensor s = at::exp(at::randn({in[m]}) * 0.7);
      stats->layers[l][m].mean_abs = at::where(at::rand({in[m]}) < 0.01, s * 20, s);
    }
    lw.input_layernorm = at::ones({h});
    lw.post_attention_layernorm = at::ones({h});
    w->layers.push_back(lw);
  }
}

template <typename T>
T OrDie(absl::StatusOr<T> v) {
  if (!v.ok()) {
    std::fprintf(stderr, "stage_bench: %s\n", std::string(v.status().message()).c_str());
    std::exit(1);
  }
  return *std::move(v);
}

// Best-of-`iters` seconds of one ForwardLayers over `hidden`.
double TimeForward(const wq::model::LlamaModel& model, const at::Tensor& hidden, int iters) {
  c10::NoGradGuard no_grad;
  model.ForwardLayers(hidden, model.first_layer(), model.end_layer());  // warm-up
  double best = 1e300;
  for (int i = 0; i < iters; ++i) {
    const double t0 = Now();
    model.ForwardLayers(hidden, model.first_layer(), model.end_layer());
    best = std::min(best, Now() - t0);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t layers = 1, chunk = 256, batch = 1, seq = 512, iters = 2, threads = 2, seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    const size_t eq = a.find('=');
    const std::string key = a.substr(0, eq);
    int64_t v = 0;
    const bool parsed = eq != std::string::npos && absl::SimpleAtoi(a.substr(eq + 1), &v) && v >= 1;
    int64_t* target = key == "--layers"    ? &layers
                      : key == "--chunk"   ? &chunk
                      : key == "--batch"   ? &batch
                      : key == "--seq"     ? &seq
                      : key == "--iters"   ? &iters
                      : key == "--threads" ? &threads
                      : key == "--seed"    ? &seed
                                           : nullptr;
    if (target == nullptr || !parsed) {
      std::fprintf(stderr, "stage_bench: bad flag '%s' (see --help)\n", a.c_str());
      return 2;
    }
    *target = v;
  }
  at::set_num_threads(static_cast<int>(threads));
  at::manual_seed(static_cast<uint64_t>(seed));
  const double copy = CopyBandwidth();
  const double gemm = MatmulGflops();
  std::printf(
      "stage_bench: %lld LLaMA-3.2-1B-shaped layer(s), chunk %lld, %d threads\n"
      "limits: at::matmul 2048^3 %.2f GFLOP/s; memory copy %.2f GB/s\n",
      static_cast<long long>(layers), static_cast<long long>(chunk), at::get_num_threads(), gemm,
      copy / 1e9);

  wq::model::LlamaWeights w;
  wq::quant::ActivationStats stats;
  MakeStage(layers, &w, &stats);

  // Fits of every (unit, action).
  wq::quant::UnitTableOptions to;
  to.chunk_size = chunk;
  double t0 = Now();
  auto fits = std::make_shared<const wq::quant::StageFits>(
      OrDie(wq::quant::BuildStageFits(w, stats, to, "stage-bench")));
  const double fit_s = Now() - t0;
  const wq::plan::UnitTable& table = fits->table();
  const auto units = static_cast<double>(table.units.size());
  const auto weights = static_cast<double>(table.TotalWeights());
  wq::v1::UnitTable table_proto;
  table.ToProto(&table_proto);
  std::printf(
      "fits:      %.0f units, %.1fM weights in %.2f s: %.2f ms/unit, %.1f ns/weight, float32 "
      "weight %.3f GB/s = %.5f of copy bandwidth\n"
      "           fits held %.4f B/weight (%.0f B/unit); unit table on the wire %.1f B/unit\n",
      units, weights / 1e6, fit_s, 1e3 * fit_s / units, 1e9 * fit_s / weights,
      4 * weights / fit_s / 1e9, 4 * weights / fit_s / copy,
      static_cast<double>(fits->ParamBytes()) / weights,
      static_cast<double>(fits->ParamBytes()) / units,
      static_cast<double>(table_proto.ByteSizeLong()) / units);

  // Plans: every unit at 2 bits (action index 4), and a mix of all seven actions.
  std::vector<int> two_bit(table.units.size(), 4), mixed(table.units.size());
  for (size_t u = 0; u < mixed.size(); ++u) mixed[u] = static_cast<int>((u * 2654435761u) % 7);
  const wq::plan::Plan plan = wq::plan::Plan::Make(table, mixed, "rl", 2.0);
  wq::v1::Plan plan_proto;
  plan.ToProto(table, &plan_proto);

  // Forwards: FP, then each plan.
  auto model = std::make_shared<const wq::model::LlamaModel>(std::move(w));
  const wq::model::LlamaConfig& c = model->config();
  const at::Tensor hidden = at::randn({batch, seq, c.hidden_size});
  const double tokens = static_cast<double>(batch * seq);
  const double layer_params = weights / static_cast<double>(layers);
  const double flops =
      static_cast<double>(layers) *
      (2.0 * layer_params * tokens + 4.0 * batch * c.num_attention_heads * seq * seq * c.head_dim);
  wq::v1::HiddenStates wire;
  wq::transport::EncodeHiddenStates(hidden, 0, &wire);
  std::printf(
      "wire:      hidden states %.1f B/token (hidden %lld, float32); plan %.2f B/unit (%zu B for "
      "%.0f units)\n",
      static_cast<double>(wire.ByteSizeLong()) / tokens, static_cast<long long>(c.hidden_size),
      static_cast<double>(plan_proto.ByteSizeLong()) / units, plan_proto.ByteSizeLong(), units);

  struct Case {
    const char* name;
    const std::vector<int>* actions;
  };
  for (const Case& k : {Case{"FP (stored weights)", nullptr}, Case{"plan: all 2-bit", &two_bit},
                        Case{"plan: mixed actions", &mixed}}) {
    std::shared_ptr<const wq::model::LlamaModel> m = model;
    double apply_s = 0, first_s = 0;
    if (k.actions != nullptr) {
      auto actions = std::make_shared<const std::vector<int>>(*k.actions);
      m = OrDie(wq::quant::ApplyPlan(*model, fits, actions));
    }
    {  // The per-forward cost of a layer's linears alone (widen; decode the codes for a plan).
      c10::NoGradGuard no_grad;
      t0 = Now();  // the first forward's: a plan's codes are made here, once
      for (int64_t l = 0; l < layers; ++l) m->LayerLinears(l);
      first_s = Now() - t0;
      double best = 1e300;
      for (int i = 0; i < 3; ++i) {
        t0 = Now();
        for (int64_t l = 0; l < layers; ++l) m->LayerLinears(l);
        best = std::min(best, Now() - t0);
      }
      apply_s = best;
    }
    const double s = TimeForward(*m, hidden, static_cast<int>(iters));
    std::printf(
        "forward:   %-20s batch %lld seq %lld: %8.1f tokens/s %7.2f GFLOP/s = %5.1f%% of matmul; "
        "linears %.3f s/forward (%.2f G weights/s, %.2f GB/s FP32 written = %.3f of copy) = "
        "%.1f%% of the forward; first forward's linears %.3f s\n",
        k.name, static_cast<long long>(batch), static_cast<long long>(seq), tokens / s,
        flops / s / 1e9, 100 * flops / s / 1e9 / gemm, apply_s, weights / apply_s / 1e9,
        4 * weights / apply_s / 1e9, 4 * weights / apply_s / copy, 100 * apply_s / s, first_s);
    std::fflush(stdout);
  }
  return 0;
}
