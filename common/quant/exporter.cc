#include "common/quant/exporter.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <map>
#include <memory>
#include <system_error>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/model/safetensors_stream_writer.h"
#include "common/quant/effective_bits.h"
#include "common/quant/packing.h"
#include "common/quant/plan_io.h"
#include "common/quant/quantized_checkpoint.h"

namespace windquant::quant {
namespace {

// Tensors are converted and appended in blocks of this many elements, so that a large
// one (embeddings) is never copied whole.
constexpr int64_t kConvertBlock = 1 << 22;

// The model's tensors one decoder layer at a time, from memory or from a checkpoint
// (then each call loads, in the stored dtype, and the caller owns the result).
class ModelSource {
 public:
  explicit ModelSource(const ExportInputs& in) : in_(in) {}

  const model::LlamaConfig& config() const {
    return in_.weights != nullptr ? in_.weights->config : in_.checkpoint->config();
  }
  absl::StatusOr<model::LayerWeights> Layer(int64_t l) const {
    if (in_.weights != nullptr) return in_.weights->layers[l];  // shares the storage
    model::LoadRequest r;
    r.first_layer = l;
    r.end_layer = l + 1;
    r.embeddings = false;
    r.head = false;
    WQ_ASSIGN_OR_RETURN(model::LlamaWeights w, in_.checkpoint->LoadWeights(r));
    return std::move(w.layers[0]);
  }
  // Embeddings, final norm, lm_head (no decoder layers).
  absl::StatusOr<model::LlamaWeights> Head() const {
    if (in_.weights != nullptr) {
      model::LlamaWeights w;
      w.config = in_.weights->config;
      w.embed_tokens = in_.weights->embed_tokens;
      w.final_norm = in_.weights->final_norm;
      w.lm_head = in_.weights->lm_head;
      return w;
    }
    model::LoadRequest r;
    r.first_layer = 0;
    r.end_layer = 0;
    return in_.checkpoint->LoadWeights(r);
  }
  // Every layer's (input_layernorm, post_attention_layernorm).
  absl::StatusOr<std::vector<std::pair<at::Tensor, at::Tensor>>> Norms() const {
    std::vector<std::pair<at::Tensor, at::Tensor>> out;
    const int64_t h = config().hidden_size;
    for (int64_t l = 0; l < config().num_hidden_layers; ++l) {
      if (in_.weights != nullptr) {
        out.emplace_back(in_.weights->layers[l].input_layernorm,
                         in_.weights->layers[l].post_attention_layernorm);
        continue;
      }
      const std::string prefix = absl::StrCat("model.layers.", l, ".");
      WQ_ASSIGN_OR_RETURN(at::Tensor a,
                          in_.checkpoint->LoadTensor(prefix + "input_layernorm.weight", {h}));
      WQ_ASSIGN_OR_RETURN(at::Tensor b, in_.checkpoint->LoadTensor(
                                            prefix + "post_attention_layernorm.weight", {h}));
      out.emplace_back(std::move(a), std::move(b));
    }
    return out;
  }

 private:
  const ExportInputs& in_;
};

absl::Status CheckInputs(const ExportInputs& in) {
  if (in.table == nullptr || in.plan == nullptr || in.fits == nullptr ||
      (in.weights == nullptr && in.checkpoint == nullptr)) {
    return absl::InvalidArgumentError("export: missing weights, table, fits or plan");
  }
  if (in.weights != nullptr &&
      (!in.weights->embed_tokens.defined() || in.weights->first_layer != 0 ||
       static_cast<int64_t>(in.weights->layers.size()) != in.weights->config.num_hidden_layers)) {
    return absl::InvalidArgumentError(
        "export: needs the whole model (every layer and the embeddings)");
  }
  const model::LlamaConfig& cfg = ModelSource(in).config();
  if (in.table->first_layer != 0 || in.table->end_layer != in.table->num_layers ||
      in.table->num_layers != cfg.num_hidden_layers ||
      in.fits->table().units.size() != in.table->units.size() || in.fits->first_layer() != 0 ||
      in.fits->end_layer() != in.table->num_layers) {
    return absl::InvalidArgumentError("export: needs the global unit table and its fits");
  }
  // Bits = bytes: the table must count the fixed tensors as they will be written.
  if (in.table->fixed_param_bits != FixedParamBits(cfg.torch_dtype)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "export: the unit table counts embeddings and norms at ", in.table->fixed_param_bits,
        " bits, the model stores them at ", FixedParamBits(cfg.torch_dtype), " (torch_dtype \"",
        cfg.torch_dtype, "\"): a table of another model"));
  }
  WQ_RETURN_IF_ERROR(in.plan->Validate(*in.table, absl::StrCat("plan ", in.plan->plan_id)));
  return in.fits->CheckPlan(in.plan->actions);
}

// The dtype of the fixed tensors in the quantized checkpoint: the model's own
// (config.json torch_dtype: float32, bfloat16), so that the checkpoint reads back to
// exactly the weights the evaluator used; F16 when it says float16 or nothing. Its bits
// are FixedParamBits (effective_bits.h), which the unit table counts.
model::Dtype FixedDtype(const model::LlamaConfig& c) {
  if (c.torch_dtype == "float32") return model::Dtype::kF32;
  if (c.torch_dtype == "bfloat16") return model::Dtype::kBF16;
  return model::Dtype::kF16;
}

at::ScalarType ScalarTypeOf(model::Dtype d) {
  return d == model::Dtype::kF32    ? at::kFloat
         : d == model::Dtype::kBF16 ? at::kBFloat16
                                    : at::kHalf;
}

// The next declared tensor must be `name` with `bytes` bytes.
absl::Status Expect(const model::SafetensorsStreamWriter& out, const std::string& name,
                    uint64_t bytes) {
  if (bytes == 0) return absl::OkStatus();  // current() skips empty tensors
  const model::StreamTensor* t = out.current();
  if (t == nullptr || t->name != name || t->num_bytes() != bytes) {
    return absl::InternalError(absl::StrCat(
        "export: tensor ", name, " (", bytes, " bytes) where the header declares ",
        t == nullptr ? "nothing" : t->name, " (", t == nullptr ? 0 : t->num_bytes(), " bytes)"));
  }
  return absl::OkStatus();
}

absl::Status AppendBytes(model::SafetensorsStreamWriter* out, const std::string& name,
                         std::string_view bytes) {
  WQ_RETURN_IF_ERROR(Expect(*out, name, bytes.size()));
  return out->Append(bytes);
}

template <typename T>
std::string_view BytesOf(const std::vector<T>& v) {
  return std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// `t` converted to `dtype` (F32, F16, BF16) a block at a time.
absl::Status AppendTensor(model::SafetensorsStreamWriter* out, const std::string& name,
                          const at::Tensor& t, model::Dtype dtype) {
  WQ_RETURN_IF_ERROR(Expect(*out, name, static_cast<uint64_t>(t.numel()) * DtypeSize(dtype)));
  const at::Tensor flat = t.detach().reshape({-1});
  for (int64_t b = 0; b < flat.numel(); b += kConvertBlock) {
    const at::Tensor piece = flat.slice(0, b, std::min(b + kConvertBlock, flat.numel()))
                                 .to(at::kCPU, ScalarTypeOf(dtype))
                                 .contiguous();
    WQ_RETURN_IF_ERROR(out->Append(std::string_view(static_cast<const char*>(piece.data_ptr()),
                                                    piece.numel() * piece.element_size())));
  }
  return absl::OkStatus();
}

absl::Status CopyTokenizerFiles(const std::string& model_dir, const std::string& dir) {
  bool any = false;
  for (const char* f :
       {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model"}) {
    const std::string src = (std::filesystem::path(model_dir) / f).string();
    if (!base::PathExists(src)) continue;
    WQ_ASSIGN_OR_RETURN(const std::string bytes, base::ReadFile(src));
    WQ_RETURN_IF_ERROR(base::WriteFileAtomic((std::filesystem::path(dir) / f).string(), bytes));
    any |= std::string(f) == "tokenizer.json";
  }
  if (!any) return absl::NotFoundError(absl::StrCat(model_dir, ": no tokenizer.json to copy"));
  return absl::OkStatus();
}

// One unit's tensors (docs/quantized-format.md) as declared up front, in file order: the
// codes of its non-salient entries, the per-row FP16 parameters, the salient positions
// at IndexBits(n) bits each, their INT8 values and scale; FP16 values for action 16.
absl::StatusOr<std::vector<model::StreamTensor>> UnitTensors(const StageFits& fits, size_t i,
                                                             Action action,
                                                             const std::string& prefix) {
  const Unit& u = fits.table().units[i];
  if (action == Action::k16) {
    return std::vector<model::StreamTensor>{
        {prefix + ".weight", model::Dtype::kF16, {u.rows, u.cols}}};
  }
  const int64_t k = fits.params(i).salient.count();
  WQ_ASSIGN_OR_RETURN(const int64_t codes, PackedCodesBytes(action, u.n() - k));
  std::vector<model::StreamTensor> out = {{prefix + ".codes", model::Dtype::kU8, {codes}},
                                          {prefix + ".scales", model::Dtype::kF16, {u.rows}}};
  if (action == Action::k1) out.push_back({prefix + ".offsets", model::Dtype::kF16, {u.rows}});
  if (k == 0) return out;
  out.push_back(
      {prefix + ".salient_index", model::Dtype::kU8, {PackedUintBytes(k, IndexBits(u.n()))}});
  out.push_back({prefix + ".salient_values", model::Dtype::kI8, {k}});
  out.push_back({prefix + ".salient_scale", model::Dtype::kF16, {1}});
  return out;
}

// The bytes of UnitTensors, computed from the unit's full-precision columns W.
absl::Status AppendUnit(const StageFits& fits, size_t i, Action action, const std::string& prefix,
                        const at::Tensor& W, model::SafetensorsStreamWriter* out) {
  if (action == Action::k16) return AppendTensor(out, prefix + ".weight", W, model::Dtype::kF16);
  const int a = ActionIndex(action);
  const Unit& u = fits.table().units[i];
  const StageFits::UnitParams& p = fits.params(i);
  const SalientSet& sal = p.salient;
  const std::vector<int8_t> codes = fits.UnitCodes(i, a, W);
  std::vector<int8_t> kept;
  kept.reserve(codes.size() - sal.index.size());
  size_t next = 0;  // salient positions are ascending
  for (size_t e = 0; e < codes.size(); ++e) {
    if (next < sal.index.size() && static_cast<size_t>(sal.index[next]) == e) {
      ++next;
      continue;
    }
    kept.push_back(codes[e]);
  }
  WQ_ASSIGN_OR_RETURN(const std::vector<uint8_t> packed, PackCodes(action, kept));
  WQ_RETURN_IF_ERROR(AppendBytes(out, prefix + ".codes", BytesOf(packed)));
  const std::vector<uint16_t> scales(p.scales.begin() + (a - 1) * u.rows,
                                     p.scales.begin() + a * u.rows);
  WQ_RETURN_IF_ERROR(AppendBytes(out, prefix + ".scales", BytesOf(scales)));
  if (action == Action::k1) {
    WQ_RETURN_IF_ERROR(AppendBytes(out, prefix + ".offsets", BytesOf(p.offsets)));
  }
  if (sal.count() == 0) return absl::OkStatus();
  const std::vector<uint32_t> index(sal.index.begin(), sal.index.end());
  WQ_ASSIGN_OR_RETURN(const std::vector<uint8_t> positions, PackUint(index, IndexBits(u.n())));
  WQ_RETURN_IF_ERROR(AppendBytes(out, prefix + ".salient_index", BytesOf(positions)));
  WQ_RETURN_IF_ERROR(AppendBytes(out, prefix + ".salient_values", BytesOf(sal.codes)));
  return AppendTensor(out, prefix + ".salient_scale", at::full({1}, sal.scale), model::Dtype::kF16);
}

// The fixed tensors (embeddings, norms, lm_head when untied) in file order.
std::vector<model::StreamTensor> FixedTensors(const model::LlamaConfig& c, model::Dtype dtype) {
  std::vector<model::StreamTensor> out;
  out.push_back({"model.embed_tokens.weight", dtype, {c.vocab_size, c.hidden_size}});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    out.push_back(
        {absl::StrCat("model.layers.", l, ".input_layernorm.weight"), dtype, {c.hidden_size}});
    out.push_back({absl::StrCat("model.layers.", l, ".post_attention_layernorm.weight"),
                   dtype,
                   {c.hidden_size}});
  }
  out.push_back({"model.norm.weight", dtype, {c.hidden_size}});
  if (!c.tie_word_embeddings)
    out.push_back({"lm_head.weight", dtype, {c.vocab_size, c.hidden_size}});
  return out;
}

// The bytes of FixedTensors.
absl::Status AppendFixed(const ModelSource& src, model::Dtype dtype,
                         model::SafetensorsStreamWriter* out) {
  WQ_ASSIGN_OR_RETURN(const model::LlamaWeights head, src.Head());
  WQ_ASSIGN_OR_RETURN(const auto norms, src.Norms());
  WQ_RETURN_IF_ERROR(AppendTensor(out, "model.embed_tokens.weight", head.embed_tokens, dtype));
  for (size_t l = 0; l < norms.size(); ++l) {
    WQ_RETURN_IF_ERROR(AppendTensor(
        out, absl::StrCat("model.layers.", l, ".input_layernorm.weight"), norms[l].first, dtype));
    WQ_RETURN_IF_ERROR(
        AppendTensor(out, absl::StrCat("model.layers.", l, ".post_attention_layernorm.weight"),
                     norms[l].second, dtype));
  }
  WQ_RETURN_IF_ERROR(AppendTensor(out, "model.norm.weight", head.final_norm, dtype));
  if (!src.config().tie_word_embeddings) {
    WQ_RETURN_IF_ERROR(AppendTensor(out, "lm_head.weight", head.lm_head, dtype));
  }
  return absl::OkStatus();
}

std::map<std::string, std::string> QuantizedMetadata(const ExportInputs& in) {
  const UnitTable& t = *in.table;
  std::vector<std::string> names;
  for (int a : in.plan->actions) names.emplace_back(ActionName(kAllActions[a]));
  return {{"windquant_format", kQuantizedFormat},
          {"windquant_format_version", kQuantizedFormatVersion},
          {"chunk_size", absl::StrCat(t.chunk_size)},
          {"salient_fraction", absl::StrCat(t.salient_fraction)},
          {"plan_id", in.plan->plan_id},
          {"model_fingerprint", t.fingerprint},
          {"effective_bits", absl::StrCat(in.plan->Totals(t).effective_bits)},
          {"actions", absl::StrJoin(names, ",")}};
}

// The units' tensors, one decoder layer at a time (units are in layer order).
absl::Status AppendUnits(const ExportInputs& in, const ModelSource& src,
                         model::SafetensorsStreamWriter* out) {
  const UnitTable& t = *in.table;
  size_t i = 0;
  for (int64_t l = 0; l < t.num_layers; ++l) {
    WQ_ASSIGN_OR_RETURN(model::LayerWeights lw, src.Layer(l));
    if (in.fits->compensation() != nullptr) {
      // With error compensation the codes are those of the compensated weights each
      // entry was quantized from, as the plan's evaluation computes them.
      std::array<at::Tensor, model::kNumMatrices> lin, from;
      for (int m = 0; m < model::kNumMatrices; ++m) {
        lin[m] = lw.linear[m].to(at::kCPU, at::kFloat, false, /*copy=*/true).contiguous();
      }
      in.fits->ApplyToLayer(l, in.plan->actions, &lin, &from);
      for (int m = 0; m < model::kNumMatrices; ++m) lw.linear[m] = from[m];
    }
    for (; i < t.units.size() && t.units[i].layer == l; ++i) {
      const Unit& u = t.units[i];
      const at::Tensor W = lw.linear[u.matrix]
                               .slice(1, u.col_begin, u.col_begin + u.cols)
                               .to(at::kCPU, at::kFloat)
                               .contiguous();
      WQ_RETURN_IF_ERROR(AppendUnit(*in.fits, i, kAllActions[in.plan->actions[u.id]],
                                    UnitTensorPrefix(u.layer, u.matrix, u.chunk), W, out));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteQuantizedCheckpoint(const ExportInputs& in, const std::string& dir) {
  WQ_RETURN_IF_ERROR(CheckInputs(in));
  const ModelSource src(in);
  const model::LlamaConfig& cfg = src.config();
  const UnitTable& t = *in.table;
  std::vector<model::StreamTensor> tensors;
  for (size_t i = 0; i < t.units.size(); ++i) {
    const Unit& u = t.units[i];
    WQ_ASSIGN_OR_RETURN(std::vector<model::StreamTensor> ut,
                        UnitTensors(*in.fits, i, kAllActions[in.plan->actions[u.id]],
                                    UnitTensorPrefix(u.layer, u.matrix, u.chunk)));
    for (model::StreamTensor& x : ut) tensors.push_back(std::move(x));
  }
  for (model::StreamTensor& x : FixedTensors(cfg, FixedDtype(cfg))) tensors.push_back(std::move(x));
  const std::filesystem::path d(dir);
  WQ_ASSIGN_OR_RETURN(
      auto out, model::SafetensorsStreamWriter::Open((d / kQuantizedFileName).string(),
                                                     std::move(tensors), QuantizedMetadata(in)));
  try {
    at::NoGradGuard no_grad;
    WQ_RETURN_IF_ERROR(AppendUnits(in, src, out.get()));
    WQ_RETURN_IF_ERROR(AppendFixed(src, FixedDtype(cfg), out.get()));
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("export: ", e.what_without_backtrace()));
  }
  WQ_RETURN_IF_ERROR(out->Finish());
  model::LlamaConfig config = cfg;
  if (FixedDtype(cfg) == model::Dtype::kF16) config.torch_dtype = "float16";
  WQ_RETURN_IF_ERROR(base::WriteFileAtomic((d / "config.json").string(), config.ToJson()));
  WQ_RETURN_IF_ERROR(base::WriteFileAtomic((d / "plan.json").string(), PlanToJson(*in.plan, t)));
  return CopyTokenizerFiles(in.model_dir, dir);
}

absl::Status WriteFakeQuantCheckpoint(const ExportInputs& in, const std::string& dir) {
  WQ_RETURN_IF_ERROR(CheckInputs(in));
  const ModelSource src(in);
  const model::LlamaConfig& cfg = src.config();
  const std::filesystem::path d(dir);
  std::vector<model::StreamTensor> tensors = FixedTensors(cfg, model::Dtype::kF16);
  const int64_t h = cfg.hidden_size, q = cfg.num_attention_heads * cfg.head_dim,
                kv = cfg.num_key_value_heads * cfg.head_dim, inter = cfg.intermediate_size;
  const std::array<std::vector<int64_t>, model::kNumMatrices> shapes = {
      std::vector<int64_t>{q, h}, {kv, h}, {kv, h}, {h, q}, {inter, h}, {inter, h}, {h, inter}};
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    for (int m = 0; m < model::kNumMatrices; ++m) {
      tensors.push_back({model::LinearTensorName(l, static_cast<model::Matrix>(m)),
                         model::Dtype::kF16, shapes[m]});
    }
  }
  WQ_ASSIGN_OR_RETURN(auto out, model::SafetensorsStreamWriter::Open(
                                    (d / "model.safetensors").string(), std::move(tensors),
                                    {{"windquant_plan_id", in.plan->plan_id}}));
  try {
    at::NoGradGuard no_grad;
    WQ_RETURN_IF_ERROR(AppendFixed(src, model::Dtype::kF16, out.get()));
    for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
      // One layer's plan weights at a time, exactly as the evaluator computes them.
      std::array<at::Tensor, model::kNumMatrices> lin;
      {
        WQ_ASSIGN_OR_RETURN(const model::LayerWeights lw, src.Layer(l));
        for (int m = 0; m < model::kNumMatrices; ++m) {
          lin[m] = lw.linear[m]
                       .to(at::kCPU, at::kFloat, /*non_blocking=*/false, /*copy=*/true)
                       .contiguous();
        }
      }
      in.fits->ApplyToLayer(l, in.plan->actions, &lin);
      for (int m = 0; m < model::kNumMatrices; ++m) {
        WQ_RETURN_IF_ERROR(AppendTensor(out.get(),
                                        model::LinearTensorName(l, static_cast<model::Matrix>(m)),
                                        lin[m], model::Dtype::kF16));
      }
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("export: ", e.what_without_backtrace()));
  }
  WQ_RETURN_IF_ERROR(out->Finish());
  model::LlamaConfig config = cfg;
  config.torch_dtype = "float16";
  WQ_RETURN_IF_ERROR(base::WriteFileAtomic((d / "config.json").string(), config.ToJson()));
  return CopyTokenizerFiles(in.model_dir, dir);
}

absl::Status VerifyQuantizedCheckpoint(const ExportInputs& in, const std::string& dir,
                                       const std::string& shown) {
  WQ_RETURN_IF_ERROR(CheckInputs(in));
  const ModelSource src(in);
  WQ_ASSIGN_OR_RETURN(const std::unique_ptr<QuantizedCheckpoint> back,
                      QuantizedCheckpoint::Open(dir));
  if (back->actions() != in.plan->actions) {
    return absl::InternalError(
        absl::StrCat(shown, ": the actions differ from plan ", in.plan->plan_id));
  }
  try {
    at::NoGradGuard no_grad;
    for (int64_t l = 0; l < src.config().num_hidden_layers; ++l) {
      WQ_ASSIGN_OR_RETURN(const auto decoded, back->DecodeLayer(l));
      std::array<at::Tensor, model::kNumMatrices> lin;
      {
        WQ_ASSIGN_OR_RETURN(const model::LayerWeights lw, src.Layer(l));
        for (int m = 0; m < model::kNumMatrices; ++m) {
          lin[m] = lw.linear[m].to(at::kCPU, at::kFloat, false, /*copy=*/true).contiguous();
        }
      }
      in.fits->ApplyToLayer(l, in.plan->actions, &lin);
      for (int m = 0; m < model::kNumMatrices; ++m) {
        if (!at::equal(decoded[m], lin[m])) {
          return absl::InternalError(absl::StrCat(
              shown, ": read-back of ", model::LinearTensorName(l, static_cast<model::Matrix>(m)),
              " differs from the evaluated weights"));
        }
      }
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(shown, ": ", e.what_without_backtrace()));
  }
  return absl::OkStatus();
}

}  // namespace windquant::quant
