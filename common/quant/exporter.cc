#include "common/quant/exporter.h"

#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/model/safetensors_stream_writer.h"
#include "common/model/safetensors_writer.h"
#include "common/quant/effective_bits.h"
#include "common/quant/packing.h"
#include "common/quant/plan_io.h"
#include "common/quant/quantized_checkpoint.h"

namespace windquant::quant {
namespace {

absl::Status CheckInputs(const ExportInputs& in) {
  if (in.weights == nullptr || in.table == nullptr || in.plan == nullptr || in.fits == nullptr) {
    return absl::InvalidArgumentError("export: missing weights, table, fits or plan");
  }
  if (!in.weights->embed_tokens.defined() ||
      static_cast<int64_t>(in.weights->layers.size()) != in.weights->config.num_hidden_layers) {
    return absl::InvalidArgumentError(
        "export: needs the whole model (every layer and the embeddings)");
  }
  if (in.table->first_layer != 0 || in.table->end_layer != in.table->num_layers ||
      in.fits->table().units.size() != in.table->units.size() || in.fits->first_layer() != 0 ||
      in.fits->end_layer() != in.table->num_layers) {
    return absl::InvalidArgumentError("export: needs the global unit table and its fits");
  }
  WQ_RETURN_IF_ERROR(in.plan->Validate(*in.table, absl::StrCat("plan ", in.plan->plan_id)));
  return in.fits->CheckPlan(in.plan->actions);
}

// The fixed tensors (embeddings, norms, lm_head when untied) in file order, F16.
std::vector<std::pair<std::string, const at::Tensor*>> FixedTensors(const model::LlamaWeights& w) {
  std::vector<std::pair<std::string, const at::Tensor*>> out;
  out.emplace_back("model.embed_tokens.weight", &w.embed_tokens);
  for (size_t l = 0; l < w.layers.size(); ++l) {
    out.emplace_back(absl::StrCat("model.layers.", l, ".input_layernorm.weight"),
                     &w.layers[l].input_layernorm);
    out.emplace_back(absl::StrCat("model.layers.", l, ".post_attention_layernorm.weight"),
                     &w.layers[l].post_attention_layernorm);
  }
  out.emplace_back("model.norm.weight", &w.final_norm);
  if (!w.config.tie_word_embeddings) out.emplace_back("lm_head.weight", &w.lm_head);
  return out;
}

// The dtype of the fixed tensors in the quantized checkpoint: the model's own
// (config.json torch_dtype: float32, bfloat16), so that the checkpoint reads back to
// exactly the weights the evaluator used; F16 when it says float16 or nothing.
model::Dtype FixedDtype(const model::LlamaConfig& c) {
  if (c.torch_dtype == "float32") return model::Dtype::kF32;
  if (c.torch_dtype == "bfloat16") return model::Dtype::kBF16;
  return model::Dtype::kF16;
}

std::string HalfBytes(const at::Tensor& t) {
  const at::Tensor h = t.detach().to(at::kCPU, at::kHalf).contiguous();
  return std::string(static_cast<const char*>(h.data_ptr()), h.numel() * sizeof(uint16_t));
}

template <typename T>
std::string RawBytes(const T* data, size_t n) {
  return std::string(reinterpret_cast<const char*>(data), n * sizeof(T));
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

// One unit's tensors (docs/quantized-format.md): the codes of its non-salient
// entries, the salient positions at IndexBits(n) bits each, their INT8 values and
// scale, the per-row FP16 parameters; FP16 values for action 16.
absl::Status AddUnit(const StageFits& fits, size_t i, Action action, const std::string& prefix,
                     const at::Tensor& W, model::SafetensorsWriter* out) {
  if (action == Action::k16) return out->Add(prefix + ".weight", W, model::Dtype::kF16);
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
  WQ_ASSIGN_OR_RETURN(std::vector<uint8_t> packed, PackCodes(action, kept));
  WQ_RETURN_IF_ERROR(out->AddRaw(prefix + ".codes", model::Dtype::kU8,
                                 {static_cast<int64_t>(packed.size())},
                                 std::string(packed.begin(), packed.end())));
  WQ_RETURN_IF_ERROR(out->AddRaw(prefix + ".scales", model::Dtype::kF16, {u.rows},
                                 RawBytes(p.scales.data() + (a - 1) * u.rows, u.rows)));
  if (action == Action::k1) {
    WQ_RETURN_IF_ERROR(out->AddRaw(prefix + ".offsets", model::Dtype::kF16, {u.rows},
                                   RawBytes(p.offsets.data(), p.offsets.size())));
  }
  if (sal.count() == 0) return absl::OkStatus();
  const std::vector<uint32_t> index(sal.index.begin(), sal.index.end());
  WQ_ASSIGN_OR_RETURN(std::vector<uint8_t> positions, PackUint(index, IndexBits(u.n())));
  WQ_RETURN_IF_ERROR(out->AddRaw(prefix + ".salient_index", model::Dtype::kU8,
                                 {static_cast<int64_t>(positions.size())},
                                 std::string(positions.begin(), positions.end())));
  WQ_RETURN_IF_ERROR(out->AddRaw(prefix + ".salient_values", model::Dtype::kI8, {sal.count()},
                                 RawBytes(sal.codes.data(), sal.codes.size())));
  return out->Add(prefix + ".salient_scale", at::full({1}, sal.scale), model::Dtype::kF16);
}

}  // namespace

absl::Status WriteQuantizedCheckpoint(const ExportInputs& in, const std::string& dir) {
  WQ_RETURN_IF_ERROR(CheckInputs(in));
  const model::LlamaWeights& w = *in.weights;
  const UnitTable& t = *in.table;
  const StageFits& fits = *in.fits;
  model::SafetensorsWriter out;
  try {
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < t.units.size(); ++i) {
      const Unit& u = t.units[i];
      const int a = in.plan->actions[u.id];
      const Action action = kAllActions[a];
      const std::string prefix = UnitTensorPrefix(u.layer, u.matrix, u.chunk);
      const at::Tensor W = w.layers[u.layer]
                               .linear[u.matrix]
                               .slice(1, u.col_begin, u.col_begin + u.cols)
                               .to(at::kCPU, at::kFloat)
                               .contiguous();
      WQ_RETURN_IF_ERROR(AddUnit(fits, i, action, prefix, W, &out));
    }
    for (const auto& [name, tensor] : FixedTensors(w)) {
      WQ_RETURN_IF_ERROR(out.Add(name, *tensor, FixedDtype(w.config)));
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("export: ", e.what_without_backtrace()));
  }
  std::vector<std::string> names;
  for (int a : in.plan->actions) names.emplace_back(ActionName(kAllActions[a]));
  out.SetMetadata("windquant_format", kQuantizedFormat);
  out.SetMetadata("windquant_format_version", kQuantizedFormatVersion);
  out.SetMetadata("chunk_size", absl::StrCat(t.chunk_size));
  out.SetMetadata("salient_fraction", absl::StrCat(t.salient_fraction));
  out.SetMetadata("plan_id", in.plan->plan_id);
  out.SetMetadata("model_fingerprint", t.fingerprint);
  out.SetMetadata("effective_bits", absl::StrCat(in.plan->Totals(t).effective_bits));
  out.SetMetadata("actions", absl::StrJoin(names, ","));
  const std::filesystem::path d(dir);
  WQ_RETURN_IF_ERROR(out.Write((d / kQuantizedFileName).string()));
  model::LlamaConfig cfg = w.config;
  if (FixedDtype(w.config) == model::Dtype::kF16) cfg.torch_dtype = "float16";
  WQ_RETURN_IF_ERROR(base::WriteFileAtomic((d / "config.json").string(), cfg.ToJson()));
  WQ_RETURN_IF_ERROR(base::WriteFileAtomic((d / "plan.json").string(), PlanToJson(*in.plan, t)));
  return CopyTokenizerFiles(in.model_dir, dir);
}

absl::Status WriteFakeQuantCheckpoint(const ExportInputs& in, const std::string& dir) {
  WQ_RETURN_IF_ERROR(CheckInputs(in));
  const model::LlamaWeights& w = *in.weights;
  const std::filesystem::path d(dir);
  const auto fixed = FixedTensors(w);
  std::vector<model::StreamTensor> tensors;
  for (const auto& [name, tensor] : fixed) {
    tensors.push_back({name, model::Dtype::kF16, tensor->sizes().vec()});
  }
  for (size_t l = 0; l < w.layers.size(); ++l) {
    for (int m = 0; m < model::kNumMatrices; ++m) {
      tensors.push_back({model::LinearTensorName(l, static_cast<model::Matrix>(m)),
                         model::Dtype::kF16, w.layers[l].linear[m].sizes().vec()});
    }
  }
  WQ_ASSIGN_OR_RETURN(auto out, model::SafetensorsStreamWriter::Open(
                                    (d / "model.safetensors").string(), std::move(tensors),
                                    {{"windquant_plan_id", in.plan->plan_id}}));
  try {
    at::NoGradGuard no_grad;
    for (const auto& [name, tensor] : fixed) WQ_RETURN_IF_ERROR(out->Append(HalfBytes(*tensor)));
    for (size_t l = 0; l < w.layers.size(); ++l) {
      // One layer's plan weights at a time, exactly as the evaluator computes them.
      std::array<at::Tensor, model::kNumMatrices> lin;
      for (int m = 0; m < model::kNumMatrices; ++m) {
        lin[m] = w.layers[l]
                     .linear[m]
                     .to(at::kCPU, at::kFloat, /*non_blocking=*/false, /*copy=*/true)
                     .contiguous();
      }
      in.fits->ApplyToLayer(static_cast<int64_t>(l), in.plan->actions, &lin);
      for (int m = 0; m < model::kNumMatrices; ++m)
        WQ_RETURN_IF_ERROR(out->Append(HalfBytes(lin[m])));
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("export: ", e.what_without_backtrace()));
  }
  WQ_RETURN_IF_ERROR(out->Finish());
  model::LlamaConfig cfg = w.config;
  cfg.torch_dtype = "float16";
  WQ_RETURN_IF_ERROR(base::WriteFileAtomic((d / "config.json").string(), cfg.ToJson()));
  return CopyTokenizerFiles(in.model_dir, dir);
}

}  // namespace windquant::quant
