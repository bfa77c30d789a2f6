#include "common/quant/exporter.h"

#include <filesystem>
#include <system_error>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/model/safetensors_writer.h"
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
  if (in.table->first_layer != 0 || in.table->end_layer != in.table->num_layers) {
    return absl::InvalidArgumentError("export: needs the global unit table");
  }
  return in.plan->Validate(*in.table, absl::StrCat("plan ", in.plan->plan_id));
}

// Embeddings, norms and lm_head (untied only) as F16, Hugging Face names.
absl::Status AddFixedTensors(const model::LlamaWeights& w, model::SafetensorsWriter* out) {
  WQ_RETURN_IF_ERROR(out->Add("model.embed_tokens.weight", w.embed_tokens, model::Dtype::kF16));
  for (size_t l = 0; l < w.layers.size(); ++l) {
    WQ_RETURN_IF_ERROR(out->Add(absl::StrCat("model.layers.", l, ".input_layernorm.weight"),
                                w.layers[l].input_layernorm, model::Dtype::kF16));
    WQ_RETURN_IF_ERROR(
        out->Add(absl::StrCat("model.layers.", l, ".post_attention_layernorm.weight"),
                 w.layers[l].post_attention_layernorm, model::Dtype::kF16));
  }
  WQ_RETURN_IF_ERROR(out->Add("model.norm.weight", w.final_norm, model::Dtype::kF16));
  if (!w.config.tie_word_embeddings) {
    WQ_RETURN_IF_ERROR(out->Add("lm_head.weight", w.lm_head, model::Dtype::kF16));
  }
  return absl::OkStatus();
}

template <typename T>
std::string RawBytes(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return std::string(reinterpret_cast<const char*>(c.data_ptr<T>()), c.numel() * sizeof(T));
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

}  // namespace

absl::Status WriteQuantizedCheckpoint(const ExportInputs& in, const std::string& dir) {
  WQ_RETURN_IF_ERROR(CheckInputs(in));
  if (in.stats == nullptr)
    return absl::InvalidArgumentError("export: missing activation statistics");
  const model::LlamaWeights& w = *in.weights;
  const UnitTable& t = *in.table;
  model::SafetensorsWriter out;
  try {
    at::NoGradGuard no_grad;
    for (const Unit& u : t.units) {
      const int a = in.plan->actions[u.id];
      const Action action = kAllActions[a];
      const std::string prefix = UnitTensorPrefix(u.layer, u.matrix, u.chunk);
      const at::Tensor W = w.layers[u.layer]
                               .linear[u.matrix]
                               .to(at::kCPU, at::kFloat)
                               .slice(1, u.col_begin, u.col_begin + u.cols)
                               .contiguous();
      const at::Tensor s = in.stats->at(u.layer, static_cast<model::Matrix>(u.matrix))
                               .mean_abs.slice(0, u.col_begin, u.col_begin + u.cols)
                               .contiguous();
      const Action one[] = {action};
      WQ_ASSIGN_OR_RETURN(UnitFit fit, FitUnit(W, s, one, in.quantizer));
      const ActionFit& f = fit.fits[0];
      const at::Tensor cached =
          in.fits->at(u.layer, u.matrix, a).slice(1, u.col_begin, u.col_begin + u.cols);
      if (!at::equal(f.dequant, cached)) {
        return absl::InternalError(absl::StrCat(
            "export: re-fit of ", UnitName(u), " action ", std::string(ActionName(action)),
            " differs from the cached fit (different quantizer options?)"));
      }
      if (action == Action::k16) {
        WQ_RETURN_IF_ERROR(out.Add(prefix + ".weight", W, model::Dtype::kF16));
        continue;
      }
      const at::Tensor codes = f.codes.contiguous();
      WQ_ASSIGN_OR_RETURN(
          std::vector<uint8_t> packed,
          PackCodes(action, absl::MakeConstSpan(codes.data_ptr<int8_t>(), codes.numel())));
      const int64_t nbytes = static_cast<int64_t>(packed.size());
      WQ_RETURN_IF_ERROR(out.AddRaw(prefix + ".codes", model::Dtype::kU8, {nbytes},
                                    std::string(packed.begin(), packed.end())));
      WQ_RETURN_IF_ERROR(out.Add(prefix + ".scales", f.scales, model::Dtype::kF16));
      if (f.offsets.defined())
        WQ_RETURN_IF_ERROR(out.Add(prefix + ".offsets", f.offsets, model::Dtype::kF16));
      const SalientSet& sal = fit.salient;
      if (sal.count > 0) {
        WQ_RETURN_IF_ERROR(out.AddRaw(prefix + ".salient_index", model::Dtype::kI32, {sal.count},
                                      RawBytes<int32_t>(sal.index.to(at::kInt))));
        WQ_RETURN_IF_ERROR(out.AddRaw(prefix + ".salient_values", model::Dtype::kI8, {sal.count},
                                      RawBytes<int8_t>(sal.codes)));
        WQ_RETURN_IF_ERROR(
            out.Add(prefix + ".salient_scale", at::full({1}, sal.scale), model::Dtype::kF16));
      }
    }
    WQ_RETURN_IF_ERROR(AddFixedTensors(w, &out));
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("export: ", e.what_without_backtrace()));
  }
  std::vector<std::string> names;
  for (int a : in.plan->actions) names.emplace_back(ActionName(kAllActions[a]));
  out.SetMetadata("windquant_format", kQuantizedFormat);
  out.SetMetadata("windquant_format_version", "1");
  out.SetMetadata("chunk_size", absl::StrCat(t.chunk_size));
  out.SetMetadata("salient_fraction", absl::StrCat(t.salient_fraction));
  out.SetMetadata("plan_id", in.plan->plan_id);
  out.SetMetadata("model_fingerprint", t.fingerprint);
  out.SetMetadata("effective_bits", absl::StrCat(in.plan->Totals(t).effective_bits));
  out.SetMetadata("actions", absl::StrJoin(names, ","));
  const std::filesystem::path d(dir);
  WQ_RETURN_IF_ERROR(out.Write((d / kQuantizedFileName).string()));
  model::LlamaConfig cfg = w.config;
  cfg.torch_dtype = "float16";
  WQ_RETURN_IF_ERROR(base::WriteFileAtomic((d / "config.json").string(), cfg.ToJson()));
  WQ_RETURN_IF_ERROR(base::WriteFileAtomic((d / "plan.json").string(), PlanToJson(*in.plan, t)));
  return CopyTokenizerFiles(in.model_dir, dir);
}

absl::Status WriteFakeQuantCheckpoint(const ExportInputs& in, const std::string& dir) {
  WQ_RETURN_IF_ERROR(CheckInputs(in));
  model::LlamaWeights w = *in.weights;
  model::SafetensorsWriter out;
  try {
    for (auto& layer : w.layers) {
      for (auto& m : layer.linear) m = m.clone();
    }
    WQ_RETURN_IF_ERROR(in.fits->Apply(*in.table, in.plan->actions, &w));
    WQ_RETURN_IF_ERROR(AddFixedTensors(w, &out));
    for (size_t l = 0; l < w.layers.size(); ++l) {
      for (int m = 0; m < model::kNumMatrices; ++m) {
        WQ_RETURN_IF_ERROR(out.Add(model::LinearTensorName(l, static_cast<model::Matrix>(m)),
                                   w.layers[l].linear[m], model::Dtype::kF16));
      }
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("export: ", e.what_without_backtrace()));
  }
  out.SetMetadata("windquant_plan_id", in.plan->plan_id);
  const std::filesystem::path d(dir);
  WQ_RETURN_IF_ERROR(out.Write((d / "model.safetensors").string()));
  model::LlamaConfig cfg = w.config;
  cfg.torch_dtype = "float16";
  WQ_RETURN_IF_ERROR(base::WriteFileAtomic((d / "config.json").string(), cfg.ToJson()));
  return CopyTokenizerFiles(in.model_dir, dir);
}

}  // namespace windquant::quant
