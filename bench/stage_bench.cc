// stage_bench: what one stage of a LLaMA-shaped model costs on this machine, for the
// capacity model of docs/capacity.md and scripts/gpu-check.sh. On a synthetic stage with
// the decoder-layer shapes of LLaMA-3.2-1B (hidden 2048, intermediate 8192, 32/8 heads of
// 64), or of LLaMA-3-8B / 70B or a small shape (--shape; BF16 weights N(0, 0.02^2) with
// outlier channels, log-normal activation scales, as fit_bench), on --device in --dtype:
//  * fits: BuildStageFits (every action of every unit) in ms per unit and float32
//    weight bytes/s, the fits' bytes per weight (StageFits::ParamBytes), and the unit
//    table on the wire (windquant.v1.UnitTable) in bytes per unit;
//  * forward: ForwardLayers over [batch, seq, hidden] hidden states, with the
//    stored weights (FP: each layer widened to FP32) and with a plan applied
//    (quant::ApplyPlan: on the CPU each layer widened, then every unit dequantized from
//    its fits, per forward; on a GPU each layer's codes made on its first forward, then
//    decoded on every forward: quant/quantized_stage.h), in tokens/s and GFLOP/s against
//    a plain at::matmul of this run; with --plain also a plain decoder layer of the same
//    shape in bare ATen ops (weights already in the compute dtype on the device; PyTorch's
//    scaled_dot_product_attention where libtorch has it, >= 2.0), the anchor of
//    gpu-check's goal (windquant's forward at >= 0.5 of it);
//  * plan application alone (PlanLinears::Linears per layer, after the first) in
//    weights/s and in bytes/s of the FP32 layer written, against this run's memory-copy
//    bandwidth, and the first forward's (which makes a plan's codes where it holds them);
//  * wire: hidden states crossing a stage boundary (windquant.v1.HiddenStates, the
//    codec of the actor's Forward RPC) in bytes per token, and a plan (windquant.v1.Plan)
//    in bytes per unit.
// --json=FILE writes the forward figures as one JSON object (scripts/gpu-check.sh).
// FLOPs counted as forward_bench: 2 * linear parameters * tokens + attention
// 4 * batch * heads * seq^2 * head_dim per layer (the dense T x T score matrix).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/model/llama_model.h"
#include "common/model/synth_checkpoint.h"
#include "common/plan/plan.h"
#include "common/quant/calibration.h"
#include "common/quant/quantized_stage.h"
#include "common/quant/unit_table_builder.h"
#include "common/transport/hidden_states_codec.h"
#include "windquant/v1/types.pb.h"

namespace {

namespace wq = windquant;

constexpr char kUsage[] = R"(stage_bench: fits, FP and plan forward, plan application and wire
sizes of one stage of LLaMA-shaped decoder layers (see the file's header).

Usage: stage_bench [--shape=S] [--layers=N] [--chunk=C] [--batch=B] [--seq=T] [--iters=N]
                   [--threads=N] [--seed=S] [--device=D] [--dtype=T] [--plain]
                   [--json=FILE]

  --shape    1b (LLaMA-3.2-1B, default), 8b, 70b (LLaMA-3) or small (hidden 512)
  --layers   decoder layers of the stage (default 1)
  --chunk    unit width in columns (default 256, the real-model chunk_size)
  --batch    sequences per forward micro-batch (default 1)
  --seq      tokens per sequence (default 512)
  --iters    timed forwards per case, best taken (default 2)
  --threads  ATen threads (default 2)
  --seed     RNG seed (default 1)
  --device   where the stage computes: cpu (default), cuda or cuda:N
  --dtype    what it computes in: float32 (default) or bfloat16
  --plain    also time a plain decoder layer of the shape in bare ATen ops
  --json     write the forward figures to FILE as one JSON object
)";

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Waits for the work queued on t's device (a GPU runs asynchronously; a no-op on the CPU).
void Sync(const at::Tensor& t) {
  if (!t.device().is_cpu()) t.flatten()[0].item<float>();
}

// Copy bandwidth in bytes/s (read + write counted), best of five 512 MiB copies.
double CopyBandwidth(at::Device device) {
  const int64_t n = int64_t{512} * (1 << 20) / 4;
  at::Tensor src = at::rand({n}, at::TensorOptions().device(device));
  at::Tensor dst = at::empty_like(src);
  dst.copy_(src);
  Sync(dst);
  double best = 0;
  for (int r = 0; r < 5; ++r) {
    const double t0 = Now();
    dst.copy_(src);
    Sync(dst);
    best = std::max(best, 2.0 * n * 4 / (Now() - t0));
  }
  return best;
}

double MatmulGflops(at::Device device, at::ScalarType dtype) {
  const int64_t n = 2048;
  const auto o = at::TensorOptions().device(device).dtype(dtype);
  const at::Tensor a = at::randn({n, n}, o), b = at::randn({n, n}, o);
  Sync(at::matmul(a, b));
  double best = 1e300;
  for (int i = 0; i < 3; ++i) {
    const double t0 = Now();
    Sync(at::matmul(a, b));
    best = std::min(best, Now() - t0);
  }
  return 2.0 * n * n * n / best / 1e9;
}

template <typename T>
T OrDie(absl::StatusOr<T> v) {
  if (!v.ok()) {
    std::fprintf(stderr, "stage_bench: %s\n", std::string(v.status().message()).c_str());
    std::exit(1);
  }
  return *std::move(v);
}

// The decoder-layer shape of --shape (vocabulary cut to 2048: no embeddings here).
wq::model::LlamaConfig ShapeConfig(const std::string& shape) {
  const std::map<std::string, std::string> synth = {
      {"1b", "llama3.2-1b"}, {"8b", "llama3-8b"}, {"70b", "llama3-70b"}};
  wq::model::LlamaConfig c;
  if (shape == "small") {
    c.hidden_size = 512;
    c.intermediate_size = 1408;
    c.num_attention_heads = 8;
    c.num_key_value_heads = 2;
    c.head_dim = 64;
    c.rope_theta = 500000.0;
    c.max_position_embeddings = 8192;
  } else if (synth.count(shape) != 0) {
    c = OrDie(wq::model::SynthShapeConfig(synth.at(shape)));
  } else {
    std::fprintf(stderr, "stage_bench: --shape=%s: must be 1b, 8b, 70b or small\n", shape.c_str());
    std::exit(2);
  }
  c.vocab_size = 2048;
  c.tie_word_embeddings = true;
  return c;
}

// Decoder layers of `c`, BF16 on the CPU, with activation statistics for the fits.
void MakeStage(const wq::model::LlamaConfig& c, int64_t layers, wq::model::LlamaWeights* w,
               wq::quant::ActivationStats* stats) {
  w->config = c;
  w->config.num_hidden_layers = layers;
  const int64_t q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
  const int64_t h = c.hidden_size, i = c.intermediate_size;
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

// Best-of-`iters` seconds of one ForwardLayers over `hidden`.
double TimeForward(const wq::model::LlamaModel& model, const at::Tensor& hidden, int iters) {
  c10::NoGradGuard no_grad;
  Sync(model.ForwardLayers(hidden, model.first_layer(), model.end_layer()));  // warm-up
  double best = 1e300;
  for (int i = 0; i < iters; ++i) {
    const double t0 = Now();
    Sync(model.ForwardLayers(hidden, model.first_layer(), model.end_layer()));
    best = std::min(best, Now() - t0);
  }
  return best;
}

at::Tensor PlainRmsNorm(const at::Tensor& x, const at::Tensor& w, double eps) {
  const at::Tensor f = x.to(at::kFloat);
  return (f * at::rsqrt(f.pow(2).mean(-1, true) + eps)).to(x.scalar_type()) * w;
}

at::Tensor PlainRotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  const at::Tensor rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

// One decoder layer as plain PyTorch code writes it: `w` the seven linears and two norms
// already in the compute dtype on the device.
at::Tensor PlainLayer(const wq::model::LlamaConfig& c, const wq::model::LayerWeights& w,
                      const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t B = x.size(0), T = x.size(1), nh = c.num_attention_heads;
  const int64_t nkv = c.num_key_value_heads, hd = c.head_dim, rep = nh / nkv;
  const at::Tensor h = PlainRmsNorm(x, w.input_layernorm, c.rms_norm_eps);
  const at::Tensor q =
      PlainRotate(at::linear(h, w.linear[0]).view({B, T, nh, hd}).transpose(1, 2), cos, sin);
  const at::Tensor k =
      PlainRotate(at::linear(h, w.linear[1]).view({B, T, nkv, hd}).transpose(1, 2), cos, sin);
  const at::Tensor v = at::linear(h, w.linear[2]).view({B, T, nkv, hd}).transpose(1, 2);
  const at::Tensor kr = k.repeat_interleave(rep, 1), vr = v.repeat_interleave(rep, 1);
#if TORCH_VERSION_MAJOR >= 2
  at::Tensor attn = at::scaled_dot_product_attention(q, kr, vr, {}, 0.0, /*is_causal=*/true);
#else
  const at::Tensor mask =
      at::full({T, T}, -std::numeric_limits<float>::infinity(), q.options()).triu(1);
  const at::Tensor scores = at::matmul(q, kr.transpose(-2, -1)) / std::sqrt(double(hd)) + mask;
  at::Tensor attn = at::matmul(at::softmax(scores, -1, at::kFloat).to(q.scalar_type()), vr);
#endif
  attn = attn.transpose(1, 2).reshape({B, T, nh * hd});
  const at::Tensor x2 = x + at::linear(attn, w.linear[3]);
  const at::Tensor h2 = PlainRmsNorm(x2, w.post_attention_layernorm, c.rms_norm_eps);
  const at::Tensor m = at::silu(at::linear(h2, w.linear[4])) * at::linear(h2, w.linear[5]);
  return x2 + at::linear(m, w.linear[6]);
}

// Best-of-`iters` seconds of the plain layers over `hidden` (the model's stage).
double TimePlain(const wq::model::LlamaModel& model, const at::Tensor& hidden, int iters) {
  c10::NoGradGuard no_grad;
  const wq::model::LlamaConfig& c = model.config();
  const at::ScalarType dtype = hidden.scalar_type();
  std::vector<wq::model::LayerWeights> layers;
  for (const wq::model::LayerWeights& stored : model.weights().layers) {
    wq::model::LayerWeights w;
    for (int m = 0; m < 7; ++m) w.linear[m] = stored.linear[m].to(dtype);
    w.input_layernorm = stored.input_layernorm.to(dtype);
    w.post_attention_layernorm = stored.post_attention_layernorm.to(dtype);
    layers.push_back(w);
  }
  const int64_t T = hidden.size(1), half = c.head_dim / 2;
  const auto f = at::TensorOptions().device(hidden.device()).dtype(at::kFloat);
  const at::Tensor inv = at::pow(c.rope_theta, -at::arange(0, half, f) / half);
  const at::Tensor angles = at::outer(at::arange(0, T, f), inv).repeat({1, 2});
  const at::Tensor cos = angles.cos().to(dtype), sin = angles.sin().to(dtype);
  auto run = [&] {
    at::Tensor x = hidden;
    for (const wq::model::LayerWeights& w : layers) x = PlainLayer(c, w, x, cos, sin);
    Sync(x);
  };
  run();  // warm-up
  double best = 1e300;
  for (int i = 0; i < iters; ++i) {
    const double t0 = Now();
    run();
    best = std::min(best, Now() - t0);
  }
  return best;
}

struct Flags {
  int64_t layers = 1, chunk = 256, batch = 1, seq = 512, iters = 2, threads = 2, seed = 1;
  std::string shape = "1b", device = "cpu", dtype = "float32", json;
  bool plain = false;
};

// Parses --key=value flags; exits 0 on --help, 2 on a bad flag (naming it).
Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (a == "--plain") {
      f.plain = true;
      continue;
    }
    const size_t eq = a.find('=');
    const std::string key = a.substr(0, eq),
                      value = eq == std::string::npos ? "" : a.substr(eq + 1);
    std::string* text = key == "--shape"    ? &f.shape
                        : key == "--device" ? &f.device
                        : key == "--dtype"  ? &f.dtype
                        : key == "--json"   ? &f.json
                                            : nullptr;
    int64_t* number = key == "--layers"    ? &f.layers
                      : key == "--chunk"   ? &f.chunk
                      : key == "--batch"   ? &f.batch
                      : key == "--seq"     ? &f.seq
                      : key == "--iters"   ? &f.iters
                      : key == "--threads" ? &f.threads
                      : key == "--seed"    ? &f.seed
                                           : nullptr;
    int64_t v = 0;
    if (text != nullptr && !value.empty()) {
      *text = value;
    } else if (number != nullptr && absl::SimpleAtoi(value, &v) && v >= 1) {
      *number = v;
    } else {
      std::fprintf(stderr, "stage_bench: bad flag '%s' (see --help)\n", a.c_str());
      std::exit(2);
    }
  }
  if (!wq::model::ParseComputeDtype(f.dtype).has_value()) {
    std::fprintf(stderr, "stage_bench: --dtype=%s: must be float32 or bfloat16\n", f.dtype.c_str());
    std::exit(2);
  }
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = ParseFlags(argc, argv);
  const int64_t layers = flags.layers, batch = flags.batch, seq = flags.seq;
  const wq::model::LlamaConfig shape = ShapeConfig(flags.shape);
  at::set_num_threads(static_cast<int>(flags.threads));
  at::manual_seed(static_cast<uint64_t>(flags.seed));
  wq::model::ComputeOptions compute;
  compute.device = flags.device;
  compute.dtype = *wq::model::ParseComputeDtype(flags.dtype);
  const at::Device device = wq::model::TorchDevice(compute);
  const at::ScalarType dtype = wq::model::TorchDtype(compute);
  const double copy = CopyBandwidth(device);
  const double gemm = MatmulGflops(device, dtype);
  std::printf(
      "stage_bench: %lld layer(s) of shape %s, chunk %lld, %d threads, on %s in %s\n"
      "limits: at::matmul 2048^3 %.2f GFLOP/s; memory copy %.2f GB/s\n",
      static_cast<long long>(layers), flags.shape.c_str(), static_cast<long long>(flags.chunk),
      at::get_num_threads(), flags.device.c_str(), flags.dtype.c_str(), gemm, copy / 1e9);

  wq::model::LlamaWeights w;
  wq::quant::ActivationStats stats;
  MakeStage(shape, layers, &w, &stats);

  // Fits of every (unit, action).
  wq::quant::UnitTableOptions to;
  to.chunk_size = flags.chunk;
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
  auto model = std::make_shared<const wq::model::LlamaModel>(std::move(w), compute);
  const wq::model::LlamaConfig& c = model->config();
  const at::Tensor hidden =
      at::randn({batch, seq, c.hidden_size}, at::TensorOptions().device(device).dtype(dtype));
  const double tokens = static_cast<double>(batch * seq);
  const double layer_params = weights / static_cast<double>(layers);
  const double flops =
      static_cast<double>(layers) *
      (2.0 * layer_params * tokens + 4.0 * batch * c.num_attention_heads * seq * seq * c.head_dim);
  wq::v1::HiddenStates wire;
  wq::transport::EncodeHiddenStates(hidden.to(at::kCPU, at::kFloat), 0, &wire);
  std::printf(
      "wire:      hidden states %.1f B/token (hidden %lld, float32); plan %.2f B/unit (%zu B for "
      "%.0f units)\n",
      static_cast<double>(wire.ByteSizeLong()) / tokens, static_cast<long long>(c.hidden_size),
      static_cast<double>(plan_proto.ByteSizeLong()) / units, plan_proto.ByteSizeLong(), units);

  struct Case {
    const char* name;
    const char* key;  // in the JSON
    const std::vector<int>* actions;
  };
  std::string json = "{\"shape\": \"" + flags.shape + "\", \"device\": \"" + flags.device +
                     "\", \"dtype\": \"" + flags.dtype +
                     "\", \"layers\": " + std::to_string(layers) +
                     ", \"tokens\": " + std::to_string(batch * seq);
  for (const Case& k :
       {Case{"FP (stored weights)", "fp", nullptr}, Case{"plan: all 2-bit", "plan_2bit", &two_bit},
        Case{"plan: mixed actions", "plan_mixed", &mixed}}) {
    std::shared_ptr<const wq::model::LlamaModel> m = model;
    double apply_s = 0, first_s = 0;
    if (k.actions != nullptr) {
      auto actions = std::make_shared<const std::vector<int>>(*k.actions);
      m = OrDie(wq::quant::ApplyPlan(*model, fits, actions));
    }
    {  // The per-forward cost of a layer's linears alone (widen; apply a plan).
      c10::NoGradGuard no_grad;
      auto linears = [&] {
        for (int64_t l = 0; l < layers; ++l) Sync(m->LayerLinears(l)[6]);
      };
      t0 = Now();  // the first forward's: a plan's codes, if held, are made here, once
      linears();
      first_s = Now() - t0;
      double best = 1e300;
      for (int i = 0; i < 3; ++i) {
        t0 = Now();
        linears();
        best = std::min(best, Now() - t0);
      }
      apply_s = best;
    }
    const double s = TimeForward(*m, hidden, static_cast<int>(flags.iters));
    std::printf(
        "forward:   %-20s batch %lld seq %lld: %8.1f tokens/s %7.2f GFLOP/s = %5.1f%% of matmul; "
        "linears %.3f s/forward (%.2f G weights/s, %.2f GB/s FP32 written = %.3f of copy) = "
        "%.1f%% of the forward; first forward's linears %.3f s\n",
        k.name, static_cast<long long>(batch), static_cast<long long>(seq), tokens / s,
        flops / s / 1e9, 100 * flops / s / 1e9 / gemm, apply_s, weights / apply_s / 1e9,
        4 * weights / apply_s / 1e9, 4 * weights / apply_s / copy, 100 * apply_s / s, first_s);
    std::fflush(stdout);
    json += absl::StrCat(", \"", k.key, "_tokens_s\": ", tokens / s, ", \"", k.key,
                         "_first_linears_s\": ", first_s);
  }
  if (flags.plain) {
    const double s = TimePlain(*model, hidden, static_cast<int>(flags.iters));
    std::printf(
        "forward:   %-20s batch %lld seq %lld: %8.1f tokens/s %7.2f GFLOP/s = %5.1f%% of "
        "matmul (weights in %s on the device)\n",
        "plain decoder layers", static_cast<long long>(batch), static_cast<long long>(seq),
        tokens / s, flops / s / 1e9, 100 * flops / s / 1e9 / gemm, flags.dtype.c_str());
    json += absl::StrCat(", \"plain_tokens_s\": ", tokens / s);
  }
  if (!flags.json.empty()) {
    std::ofstream(flags.json) << json << "}\n";
  }
  return 0;
}
