#include "common/export/exporter.h"

#include <c10/core/GradMode.h>
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
#include "common/export/export_layout.h"
#include "common/export/packing.h"
#include "common/export/quantized_checkpoint.h"
#include "common/model/safetensors_stream_writer.h"
#include "common/plan/effective_bits.h"
#include "common/plan/plan_io.h"
#include "common/quant/quantization_session.h"

namespace windquant::exporter {

ExportInputs SessionExportInputs(const quant::QuantizationSession& session,
                                 const plan::Plan& plan) {
  ExportInputs in;
  in.weights = &session.model().weights();
  in.table = &session.table();
  in.fits = &session.fits();
  in.plan = &plan;
  in.model_dir = session.options().model_dir;
  return in;
}
const model::LlamaConfig& ExportConfig(const ExportInputs& in) {
  return in.weights != nullptr ? in.weights->config : in.checkpoint->config();
}

absl::Status CheckExportInputs(const ExportInputs& in) {
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
  const model::LlamaConfig& cfg = ExportConfig(in);
  if (in.table->first_layer != 0 || in.table->end_layer != in.table->num_layers ||
      in.table->num_layers != cfg.num_hidden_layers ||
      in.fits->table().units.size() != in.table->units.size() || in.fits->first_layer() != 0 ||
      in.fits->end_layer() != in.table->num_layers) {
    return absl::InvalidArgumentError("export: needs the global unit table and its fits");
  }
  // Bits = bytes: the table must count the fixed tensors as they will be written.
  if (in.table->fixed_param_bits != plan::FixedParamBits(cfg.torch_dtype)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "export: the unit table counts embeddings and norms at ", in.table->fixed_param_bits,
        " bits, the model stores them at ", plan::FixedParamBits(cfg.torch_dtype),
        " (torch_dtype \"", cfg.torch_dtype, "\"): a table of another model"));
  }
  WQ_RETURN_IF_ERROR(in.plan->Validate(*in.table, absl::StrCat("plan ", in.plan->plan_id)));
  return in.fits->CheckPlan(in.plan->actions);
}

absl::StatusOr<model::LayerWeights> ExportLayer(const ExportInputs& in, int64_t l) {
  if (in.weights != nullptr) return in.weights->layers[l];  // shares the storage
  model::LoadRequest r;
  r.first_layer = l;
  r.end_layer = l + 1;
  r.embeddings = false;
  r.head = false;
  WQ_ASSIGN_OR_RETURN(model::LlamaWeights w, in.checkpoint->LoadWeights(r));
  return std::move(w.layers[0]);
}
namespace {

// One file, written as its parts for one share (the whole model): the same code path
// and order as the assembly of a distributed job's stages (export_layout.h).
absl::Status WriteFile(const ExportInputs& in, ExportFile file, const std::string& dir) {
  WQ_RETURN_IF_ERROR(CheckExportInputs(in));
  const model::LlamaConfig& cfg = ExportConfig(in);
  const std::vector<ExportShare> shares = {WholeModelShare(cfg)};
  WQ_ASSIGN_OR_RETURN(std::vector<model::StreamTensor> tensors,
                      DeclareFile(file, shares, cfg, *in.table, in.plan->actions));
  const std::filesystem::path d(dir);
  WQ_ASSIGN_OR_RETURN(auto out, model::SafetensorsStreamWriter::Open(
                                    (d / ExportTensorFile(file)).string(), std::move(tensors),
                                    FileMetadata(file, *in.table, *in.plan)));
  PartSource source;
  source.config = &cfg;
  source.weights = in.weights;
  source.checkpoint = in.checkpoint;
  source.fits = in.fits;
  source.actions = &in.plan->actions;
  for (const auto& [s, part] : PartOrder(file, shares.size())) {
    WQ_ASSIGN_OR_RETURN(std::vector<model::StreamTensor> declared,
                        DeclarePart(file, part, shares[s], cfg, *in.table, in.plan->actions));
    PartSink sink(std::move(declared),
                  [w = out.get()](std::string_view bytes) { return w->Append(bytes); });
    WQ_RETURN_IF_ERROR(StreamPart(file, part, shares[s], source, &sink));
  }
  WQ_RETURN_IF_ERROR(out->Finish());
  WQ_RETURN_IF_ERROR(
      base::WriteFileAtomic((d / "config.json").string(), ExportConfigJson(file, cfg)));
  if (file == ExportFile::kQuantized) {
    WQ_RETURN_IF_ERROR(
        base::WriteFileAtomic((d / "plan.json").string(), plan::PlanToJson(*in.plan, *in.table)));
  }
  return CopyTokenizerFiles(in.model_dir, dir);
}

}  // namespace

absl::Status WriteQuantizedCheckpoint(const ExportInputs& in, const std::string& dir) {
  return WriteFile(in, ExportFile::kQuantized, dir);
}

absl::Status WriteFakeQuantCheckpoint(const ExportInputs& in, const std::string& dir) {
  return WriteFile(in, ExportFile::kFakeQuant, dir);
}

absl::Status VerifyQuantizedCheckpoint(const ExportInputs& in, const std::string& dir,
                                       const std::string& shown) {
  WQ_RETURN_IF_ERROR(CheckExportInputs(in));
  WQ_ASSIGN_OR_RETURN(const std::unique_ptr<QuantizedCheckpoint> back,
                      QuantizedCheckpoint::Open(dir));
  if (back->actions() != in.plan->actions) {
    return absl::InternalError(
        absl::StrCat(shown, ": the actions differ from plan ", in.plan->plan_id));
  }
  try {
    c10::NoGradGuard no_grad;
    for (int64_t l = 0; l < ExportConfig(in).num_hidden_layers; ++l) {
      WQ_ASSIGN_OR_RETURN(const auto decoded, back->DecodeLayer(l));
      std::array<at::Tensor, model::kNumMatrices> lin;
      {
        WQ_ASSIGN_OR_RETURN(const model::LayerWeights lw, ExportLayer(in, l));
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

}  // namespace windquant::exporter
