#include "common/model/pretrainer.h"

#include <c10/core/GradMode.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <random>
#include <system_error>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/files.h"
#include "common/base/progress.h"
#include "common/base/status_macros.h"
#include "common/model/safetensors_writer.h"
#include "common/model/torch_threads.h"
#include "nlohmann/json.hpp"

namespace windquant::model {
namespace {

namespace fs = std::filesystem;

constexpr double kInitStd = 0.02;
// Windows evaluated at once by HeldOutPerplexity inside Train().
constexpr int64_t kEvalBatch = 16;

absl::Status Field(bool ok, const std::string& field, const std::string& what) {
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("pretrain.", field, ": ", what));
}

// [n, seq_len + 1] int64 windows of `ids` starting at `starts`.
at::Tensor Windows(const std::vector<int32_t>& ids, const std::vector<int64_t>& starts,
                   int64_t seq_len) {
  at::Tensor out = at::empty({static_cast<int64_t>(starts.size()), seq_len + 1}, at::kLong);
  int64_t* p = out.data_ptr<int64_t>();
  for (size_t b = 0; b < starts.size(); ++b) {
    for (int64_t t = 0; t <= seq_len; ++t) *p++ = ids[starts[b] + t];
  }
  return out;
}

// Mean next-token cross-entropy of windows [B, T + 1].
at::Tensor WindowLoss(const LlamaModel& model, const at::Tensor& windows) {
  const int64_t T = windows.size(1) - 1;
  const at::Tensor inputs = windows.narrow(1, 0, T);
  const at::Tensor targets = windows.narrow(1, 1, T).reshape({-1});
  const at::Tensor logits = model.Logits(inputs);
  return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), targets);
}

std::vector<at::Tensor*> AllTensors(LlamaWeights& w) {
  std::vector<at::Tensor*> out = {&w.embed_tokens, &w.final_norm};
  for (LayerWeights& l : w.layers) {
    for (at::Tensor& t : l.linear) out.push_back(&t);
    out.push_back(&l.input_layernorm);
    out.push_back(&l.post_attention_layernorm);
  }
  return out;
}

}  // namespace

absl::Status PretrainConfig::Validate() const {
  WQ_RETURN_IF_ERROR(Field(layers > 0, "layers", "must be > 0"));
  WQ_RETURN_IF_ERROR(Field(hidden > 0, "hidden", "must be > 0"));
  WQ_RETURN_IF_ERROR(Field(intermediate >= 0, "intermediate", "must be >= 0 (0 = default)"));
  WQ_RETURN_IF_ERROR(Field(heads > 0 && hidden % heads == 0, "heads",
                           absl::StrCat("must be > 0 and divide hidden (", hidden, ")")));
  WQ_RETURN_IF_ERROR(Field((hidden / std::max<int64_t>(heads, 1)) % 2 == 0, "heads",
                           "hidden / heads (head_dim) must be even for RoPE"));
  WQ_RETURN_IF_ERROR(Field(kv_heads > 0 && heads % kv_heads == 0, "kv_heads",
                           absl::StrCat("must be > 0 and divide heads (", heads, ")")));
  WQ_RETURN_IF_ERROR(Field(vocab > 0, "vocab", "must be > 0"));
  WQ_RETURN_IF_ERROR(Field(seq_len > 0, "seq_len", "must be > 0"));
  WQ_RETURN_IF_ERROR(Field(batch > 0, "batch", "must be > 0"));
  WQ_RETURN_IF_ERROR(Field(steps > 0, "steps", "must be > 0"));
  WQ_RETURN_IF_ERROR(Field(lr > 0, "lr", "must be > 0"));
  WQ_RETURN_IF_ERROR(Field(warmup_steps >= 0, "warmup_steps", "must be >= 0"));
  WQ_RETURN_IF_ERROR(
      Field(min_lr_ratio >= 0 && min_lr_ratio <= 1, "min_lr_ratio", "must be in [0, 1]"));
  WQ_RETURN_IF_ERROR(Field(weight_decay >= 0, "weight_decay", "must be >= 0"));
  WQ_RETURN_IF_ERROR(Field(held_out_fraction > 0 && held_out_fraction < 1, "held_out_fraction",
                           "must be in (0, 1)"));
  WQ_RETURN_IF_ERROR(Field(eval_max_windows >= 0, "eval_max_windows", "must be >= 0"));
  WQ_RETURN_IF_ERROR(Field(threads >= 0, "threads", "must be >= 0 (0 = default)"));
  WQ_RETURN_IF_ERROR(
      Field(bos_id < vocab && eos_id < vocab, "bos_id", "bos_id / eos_id must be < vocab"));
  return absl::OkStatus();
}

LlamaConfig PretrainConfig::ToLlamaConfig() const {
  LlamaConfig c;
  c.hidden_size = hidden;
  c.intermediate_size = intermediate > 0 ? intermediate : DefaultIntermediateSize(hidden);
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv_heads;
  c.head_dim = hidden / heads;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = rope_theta;
  c.tie_word_embeddings = true;
  c.vocab_size = vocab;
  c.bos_token_id = bos_id;
  if (eos_id >= 0) c.eos_token_ids = {eos_id};
  // The model never saw positions beyond its training windows.
  c.max_position_embeddings = seq_len;
  c.torch_dtype = "float32";
  return c;
}

int64_t DefaultIntermediateSize(int64_t hidden) {
  const int64_t rounded = static_cast<int64_t>(std::llround(2.7 * hidden / 32.0)) * 32;
  return std::max<int64_t>(rounded, 32);
}

double LearningRateAt(const PretrainConfig& c, int64_t step) {
  if (step < c.warmup_steps) return c.lr * static_cast<double>(step + 1) / c.warmup_steps;
  const int64_t decay_steps = std::max<int64_t>(c.steps - c.warmup_steps - 1, 1);
  const double progress = std::min(1.0, static_cast<double>(step - c.warmup_steps) / decay_steps);
  // lr(p) = lr * (m + (1 - m) * (1 + cos(pi p)) / 2), p in [0, 1].
  const double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
  return c.lr * (c.min_lr_ratio + (1.0 - c.min_lr_ratio) * cosine);
}

LlamaWeights InitLlamaWeights(const LlamaConfig& c, uint64_t seed, bool requires_grad) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  const int64_t hd = c.head_dim > 0 ? c.head_dim : H / c.num_attention_heads;
  const int64_t q_out = c.num_attention_heads * hd, kv_out = c.num_key_value_heads * hd;
  auto normal = [&](std::vector<int64_t> shape) {
    return at::empty(shape, at::kFloat)
        .normal_(0.0, kInitStd, gen)
        .set_requires_grad(requires_grad);
  };
  auto ones = [&](int64_t n) { return at::ones({n}, at::kFloat).set_requires_grad(requires_grad); };
  LlamaWeights w;
  w.config = c;
  w.config.head_dim = hd;
  w.first_layer = 0;
  w.embed_tokens = normal({c.vocab_size, H});
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    LayerWeights l;
    l.at(Matrix::kQ) = normal({q_out, H});
    l.at(Matrix::kK) = normal({kv_out, H});
    l.at(Matrix::kV) = normal({kv_out, H});
    l.at(Matrix::kO) = normal({H, q_out});
    l.at(Matrix::kGate) = normal({I, H});
    l.at(Matrix::kUp) = normal({I, H});
    l.at(Matrix::kDown) = normal({H, I});
    l.input_layernorm = ones(H);
    l.post_attention_layernorm = ones(H);
    w.layers.push_back(std::move(l));
  }
  w.final_norm = ones(H);
  w.lm_head = c.tie_word_embeddings ? w.embed_tokens : normal({c.vocab_size, H});
  return w;
}

absl::StatusOr<double> HeldOutPerplexity(const LlamaModel& model, const std::vector<int32_t>& ids,
                                         int64_t seq_len, int64_t batch, int64_t max_windows) {
  const int64_t n = static_cast<int64_t>(ids.size());
  int64_t windows = n > seq_len ? (n - 1) / seq_len : 0;
  if (windows == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "held-out perplexity: ", n, " ids are fewer than seq_len + 1 = ", seq_len + 1));
  }
  if (max_windows > 0) windows = std::min(windows, max_windows);
  try {
    c10::NoGradGuard no_grad;
    double nll_sum = 0;
    int64_t count = 0;
    for (int64_t w0 = 0; w0 < windows; w0 += batch) {
      std::vector<int64_t> starts;
      for (int64_t w = w0; w < std::min(windows, w0 + batch); ++w) starts.push_back(w * seq_len);
      const at::Tensor win = Windows(ids, starts, seq_len);
      const int64_t predicted = win.size(0) * seq_len;
      nll_sum += WindowLoss(model, win).item<double>() * predicted;
      count += predicted;
    }
    return std::exp(nll_sum / count);
  } catch (const std::exception& e) {  // c10::Error and LlamaModel's invalid_argument
    return absl::InternalError(absl::StrCat("held-out perplexity: ", e.what()));
  }
}

namespace {

absl::Status CheckIds(const std::vector<int32_t>& ids, int64_t vocab) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat("pretrain: id ", ids[i], " at position ", i,
                                                     " is outside [0, vocab=", vocab, ")"));
    }
  }
  return absl::OkStatus();
}

// AdamW with weight decay on the matrices and embeddings (dim >= 2) only.
std::unique_ptr<torch::optim::AdamW> MakeOptimizer(const std::vector<at::Tensor>& decay,
                                                   const std::vector<at::Tensor>& no_decay,
                                                   const PretrainConfig& c) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(
      decay, std::make_unique<torch::optim::AdamWOptions>(
                 torch::optim::AdamWOptions(c.lr).betas({0.9, 0.95}).weight_decay(c.weight_decay)));
  groups.emplace_back(no_decay,
                      std::make_unique<torch::optim::AdamWOptions>(
                          torch::optim::AdamWOptions(c.lr).betas({0.9, 0.95}).weight_decay(0.0)));
  return std::make_unique<torch::optim::AdamW>(std::move(groups), torch::optim::AdamWOptions(c.lr));
}

// c.steps optimizer steps on seeded random windows of `train`, each step's loss appended
// to result->losses; INTERNAL when the loss stops being finite.
absl::Status RunSteps(const LlamaModel& model, torch::optim::AdamW& optimizer,
                      const std::vector<at::Tensor>& all, const std::vector<int32_t>& train,
                      const PretrainConfig& c, base::Progress& progress, PretrainResult* result) {
  const int64_t n_train = static_cast<int64_t>(train.size());
  std::mt19937_64 rng(c.seed ^ 0x9e3779b97f4a7c15ULL);
  std::uniform_int_distribution<int64_t> start_dist(0, n_train - c.seq_len - 1);
  const int64_t tokens_per_step = c.batch * c.seq_len;
  for (int64_t step = 0; step < c.steps; ++step) {
    const double lr = LearningRateAt(c, step);
    for (auto& group : optimizer.param_groups()) {
      static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
    }
    std::vector<int64_t> starts(c.batch);
    for (int64_t& s : starts) s = start_dist(rng);
    optimizer.zero_grad();
    at::Tensor loss = WindowLoss(model, Windows(train, starts, c.seq_len));
    loss.backward();
    if (c.grad_clip > 0) {
      torch::nn::utils::clip_grad_norm_(all, c.grad_clip);
    }
    optimizer.step();
    const float l = loss.item<float>();
    if (!std::isfinite(l)) {
      return absl::InternalError(
          absl::StrFormat("pretrain: loss became %f at step %d (lower --lr?)", l, step));
    }
    result->losses.push_back(l);
    progress.Update(static_cast<double>((step + 1) * tokens_per_step),
                    absl::StrFormat("step %d/%d loss %.3f lr %.2e", step + 1, c.steps, l, lr));
  }
  return absl::OkStatus();
}

// Mean of the last min(10, n) losses.
double TailMeanLoss(const std::vector<float>& losses) {
  const size_t tail = std::min<size_t>(10, losses.size());
  double sum = 0;
  for (size_t i = losses.size() - tail; i < losses.size(); ++i) sum += losses[i];
  return sum / tail;
}

// Detached copies of the model's weights that no longer require grad (tie preserved).
LlamaWeights DetachedWeights(const LlamaModel& model, const LlamaConfig& config) {
  LlamaWeights weights = model.weights();
  for (at::Tensor* t : AllTensors(weights)) *t = t->detach().clone();
  weights.lm_head =
      config.tie_word_embeddings ? weights.embed_tokens : model.weights().lm_head.detach().clone();
  weights.config = config;
  weights.config.head_dim = model.config().head_dim;
  return weights;
}

}  // namespace

Pretrainer::Pretrainer(PretrainConfig config) : config_(std::move(config)) {}

absl::StatusOr<PretrainResult> Pretrainer::Train(const std::vector<int32_t>& ids) const {
  const PretrainConfig& c = config_;
  WQ_RETURN_IF_ERROR(c.Validate());
  WQ_RETURN_IF_ERROR(CheckIds(ids, c.vocab));
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t n_held = static_cast<int64_t>(std::ceil(n * c.held_out_fraction));
  const int64_t n_train = n - n_held;
  if (n_train < c.seq_len + 2 || n_held < c.seq_len + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("pretrain: ", n, " ids are too few for seq_len ", c.seq_len, " (train split ",
                     n_train, ", held-out split ", n_held, " ids; each needs more than seq_len)"));
  }
  const std::vector<int32_t> train(ids.begin(), ids.begin() + n_train);
  const std::vector<int32_t> held(ids.begin() + n_train, ids.end());
  SetTorchThreads(c.threads);

  PretrainResult result;
  result.config = c.ToLlamaConfig();
  result.train_ids = n_train;
  result.held_out_ids = n_held;
  try {
    LlamaModel model(InitLlamaWeights(result.config, c.seed, /*requires_grad=*/true));
    // Parameters as the model holds them (its constructor keeps CPU float32
    // tensors as they are, so these are the leaves that require grad).
    std::vector<at::Tensor> decay, no_decay, all;
    for (at::Tensor* t : AllTensors(model.mutable_weights())) {
      (t->dim() >= 2 ? decay : no_decay).push_back(*t);
      all.push_back(*t);
    }
    WQ_ASSIGN_OR_RETURN(result.untrained_held_out_ppl,
                        HeldOutPerplexity(model, held, c.seq_len, kEvalBatch, c.eval_max_windows));

    std::unique_ptr<torch::optim::AdamW> optimizer = MakeOptimizer(decay, no_decay, c);
    const int64_t tokens_per_step = c.batch * c.seq_len;
    base::Progress progress("pretrain", static_cast<double>(c.steps * tokens_per_step), "tokens",
                            c.log_interval_s);
    const auto t0 = std::chrono::steady_clock::now();
    WQ_RETURN_IF_ERROR(RunSteps(model, *optimizer, all, train, c, progress, &result));
    result.train_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    result.tokens_trained = c.steps * tokens_per_step;
    result.first_loss = result.losses.front();
    result.final_loss = TailMeanLoss(result.losses);
    WQ_ASSIGN_OR_RETURN(result.held_out_ppl,
                        HeldOutPerplexity(model, held, c.seq_len, kEvalBatch, c.eval_max_windows));
    progress.Finish(absl::StrFormat("loss %.3f -> %.3f, held-out ppl %.1f -> %.1f",
                                    result.first_loss, result.final_loss,
                                    result.untrained_held_out_ppl, result.held_out_ppl));
    result.weights = DetachedWeights(model, result.config);
  } catch (const std::exception& e) {  // c10::Error and LlamaModel's invalid_argument
    return absl::InternalError(absl::StrCat("pretrain: ", e.what()));
  }
  return result;
}

namespace {

std::string Json(const nlohmann::json& j) { return j.dump(2) + "\n"; }

// config.json: LlamaConfig::ToJson plus the keys transformers needs to pick
// the class (added here when ToJson leaves them out).
absl::StatusOr<std::string> ConfigJson(const LlamaConfig& c) {
  nlohmann::json j = nlohmann::json::parse(c.ToJson(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InternalError("pretrain: LlamaConfig::ToJson returned invalid JSON");
  }
  if (!j.contains("architectures")) j["architectures"] = {"LlamaForCausalLM"};
  if (!j.contains("model_type")) j["model_type"] = "llama";
  return Json(j);
}

absl::Status AddWeights(const LlamaWeights& w, SafetensorsWriter* writer) {
  WQ_RETURN_IF_ERROR(writer->Add("model.embed_tokens.weight", w.embed_tokens));
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const int64_t layer = w.first_layer + static_cast<int64_t>(i);
    const LayerWeights& l = w.layers[i];
    for (int m = 0; m < kNumMatrices; ++m) {
      WQ_RETURN_IF_ERROR(writer->Add(LinearTensorName(layer, static_cast<Matrix>(m)), l.linear[m]));
    }
    const std::string prefix = absl::StrCat("model.layers.", layer, ".");
    WQ_RETURN_IF_ERROR(
        writer->Add(absl::StrCat(prefix, "input_layernorm.weight"), l.input_layernorm));
    WQ_RETURN_IF_ERROR(writer->Add(absl::StrCat(prefix, "post_attention_layernorm.weight"),
                                   l.post_attention_layernorm));
  }
  WQ_RETURN_IF_ERROR(writer->Add("model.norm.weight", w.final_norm));
  if (!w.config.tie_word_embeddings) WQ_RETURN_IF_ERROR(writer->Add("lm_head.weight", w.lm_head));
  return absl::OkStatus();
}

nlohmann::json Metadata(const PretrainConfig& c, const PretrainResult& r,
                        const PretrainedModelInfo& info) {
  nlohmann::json j;
  j["generator"] = "windquant pretrain";
  j["data_source"] = info.data_source;
  j["settings_stamp"] = info.settings_stamp;
  j["model"] = {{"layers", c.layers},
                {"hidden", c.hidden},
                {"intermediate", r.config.intermediate_size},
                {"heads", c.heads},
                {"kv_heads", c.kv_heads},
                {"vocab", c.vocab},
                {"seq_len", c.seq_len},
                {"tied_embeddings", true}};
  j["training"] = {{"steps", c.steps},
                   {"batch", c.batch},
                   {"lr", c.lr},
                   {"warmup_steps", c.warmup_steps},
                   {"min_lr_ratio", c.min_lr_ratio},
                   {"weight_decay", c.weight_decay},
                   {"grad_clip", c.grad_clip},
                   {"seed", c.seed},
                   {"threads", c.threads},
                   {"tokens_trained", r.tokens_trained},
                   {"train_seconds", r.train_seconds},
                   {"first_loss", r.first_loss},
                   {"final_loss", r.final_loss}};
  j["data"] = {{"train_ids", r.train_ids},
               {"held_out_ids", r.held_out_ids},
               {"held_out_fraction", c.held_out_fraction},
               {"held_out_split", "the last ids of the token stream"}};
  j["held_out_perplexity"] = {{"untrained", r.untrained_held_out_ppl}, {"trained", r.held_out_ppl}};
  return j;
}

std::string Readme(const PretrainConfig& c, const PretrainResult& r,
                   const PretrainedModelInfo& info) {
  return absl::StrFormat(
      "# windquant default model\n\n"
      "A small LLaMA (LlamaForCausalLM, float32, tied embeddings) trained from scratch by\n"
      "`windquant pretrain`, so that windquant runs without a downloaded model. It is a\n"
      "toy: useful to exercise quantization end to end, not to generate good text.\n\n"
      "- Training data: %s\n"
      "- Model: %d layers, hidden %d, intermediate %d, %d heads / %d kv heads, vocab %d "
      "(byte-level BPE, tokenizer.json), sequence length %d\n"
      "- Training: %d steps x %d windows x %d tokens = %d tokens, AdamW lr %g "
      "(warmup %d, cosine to %g x), weight decay %g, seed %d, %.0f s\n"
      "- Train loss: %.3f (step 1) -> %.3f (mean of the last steps)\n"
      "- Held-out perplexity (last %.0f%% of the token ids, never trained on): "
      "untrained %.1f, trained %.1f\n\n"
      "Details: pretrain.json.\n",
      info.data_source.empty() ? "(not recorded)" : info.data_source, c.layers, c.hidden,
      r.config.intermediate_size, c.heads, c.kv_heads, c.vocab, c.seq_len, c.steps, c.batch,
      c.seq_len, r.tokens_trained, c.lr, c.warmup_steps, c.min_lr_ratio, c.weight_decay, c.seed,
      r.train_seconds, r.first_loss, r.final_loss, 100.0 * c.held_out_fraction,
      r.untrained_held_out_ppl, r.held_out_ppl);
}

}  // namespace

absl::Status WritePretrainedModel(const std::string& dir, const PretrainConfig& config,
                                  const PretrainResult& result, const PretrainedModelInfo& info) {
  std::string out = dir;
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  const std::string tmp = out + ".tmp";
  const std::string old = out + ".old";
  std::error_code ec;
  fs::remove_all(tmp, ec);
  if (ec) return absl::InternalError(absl::StrCat(tmp, ": cannot remove: ", ec.message()));

  WQ_ASSIGN_OR_RETURN(const std::string config_json, ConfigJson(result.weights.config));
  WQ_RETURN_IF_ERROR(base::WriteFileAtomic(tmp + "/config.json", config_json));
  try {
    SafetensorsWriter writer;
    writer.SetMetadata("generator", "windquant pretrain");
    WQ_RETURN_IF_ERROR(AddWeights(result.weights, &writer));
    WQ_RETURN_IF_ERROR(writer.Write(tmp + "/model.safetensors"));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(tmp, "/model.safetensors: ", e.what()));
  }
  if (!info.tokenizer_json.empty()) {
    WQ_RETURN_IF_ERROR(base::WriteFileAtomic(tmp + "/tokenizer.json", info.tokenizer_json));
  }
  WQ_RETURN_IF_ERROR(
      base::WriteFileAtomic(tmp + "/pretrain.json", Json(Metadata(config, result, info))));
  WQ_RETURN_IF_ERROR(base::WriteFileAtomic(tmp + "/README.md", Readme(config, result, info)));

  // Swap in: dir -> dir.old, dir.tmp -> dir, drop dir.old. A reader sees the
  // old directory, briefly none, or the new one; never a partial one.
  fs::remove_all(old, ec);
  if (fs::exists(out)) {
    fs::rename(out, old, ec);
    if (ec) return absl::InternalError(absl::StrCat(out, ": cannot move aside: ", ec.message()));
  }
  fs::rename(tmp, out, ec);
  if (ec)
    return absl::InternalError(absl::StrCat(out, ": cannot rename ", tmp, ": ", ec.message()));
  fs::remove_all(old, ec);
  return absl::OkStatus();
}

}  // namespace windquant::model
