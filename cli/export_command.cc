// `windquant export`: writes a plan's model as a quantized checkpoint (packed codes,
// docs/quantized-format.md) and as a fake-quant FP16 Hugging Face checkpoint, or as a
// GGUF file for llama.cpp (docs/gguf.md).
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/command.h"
#include "common/base/files.h"
#include "common/base/location_check.h"
#include "common/base/output_dir.h"
#include "common/base/status_macros.h"
#include "common/config/run_config.h"
#include "common/export/export_layout.h"
#include "common/export/exporter.h"
#include "common/export/gguf_exporter.h"
#include "common/export/llama_quantize_types.h"
#include "common/export/quantized_checkpoint.h"
#include "common/model/checkpoint.h"
#include "common/plan/plan_io.h"
#include "common/quant/quantization_session.h"
#include "job/node_options.h"
#include "job/open_session.h"

namespace windquant::cli {
namespace {

constexpr char kUsage[] =
    "usage: windquant export --config FILE --plan PLAN --out DIR [--format F]\n"
    "                        [--fake-quant-only] [--force]\n\n"
    "Writes the model of FILE with PLAN (plan.json or plan.bin, made for the same unit\n"
    "table) applied:\n"
    "  DIR/quantized/   quantized.safetensors (packed codes, FP16 scales, INT8 salient\n"
    "                   values), config.json, tokenizer files, plan.json\n"
    "  DIR/fake_quant/  Hugging Face checkpoint (config.json torch_dtype float16,\n"
    "                   model.safetensors F16, tokenizer files)\n"
    "The quantized checkpoint is read back and checked to equal the evaluated weights.\n"
    "With --format gguf instead:\n"
    "  DIR/gguf/        model.gguf (llama.cpp's format: each linear in the smallest GGUF\n"
    "                   type that holds its units' values exactly; salient entries\n"
    "                   re-rounded onto their block's grid; docs/gguf.md), the tokenizer\n"
    "                   files, gguf_export.json (types, bytes, bits per weight),\n"
    "                   llama-quantize-tensor-types.txt (the linears' types as\n"
    "                   llama-quantize --tensor-type overrides), the GGUF file\n"
    "                   read back and checked to equal the evaluated weights outside the\n"
    "                   salient entries; its bits per weight are printed beside the plan's.\n"
    "With the unit table in the cache (quant.cache_dir) the model is read one decoder layer\n"
    "at a time (peak memory ~ one layer in float32, not the model); without it the whole\n"
    "model is loaded to calibrate and fit it first.\n\n"
    "flags:\n"
    "  --config FILE        run config (YAML), required\n"
    "  --set K=V            config override (repeatable)\n"
    "  --plan PLAN          plan file, required\n"
    "  --out DIR            output directory, required\n"
    "  --format F           safetensors (DIR/quantized and DIR/fake_quant; the default)\n"
    "                       or gguf (DIR/gguf)\n"
    "  --fake-quant-only    write only DIR/fake_quant (safetensors)\n"
    "  --force              replace an existing non-empty DIR whole (refused otherwise)\n"
    "  --no-cache           ignore the unit-table cache\n";

// DIR/gguf of --format gguf inside the temporary `tmp` of --out `out`.
absl::StatusOr<exporter::GgufExportReport> WriteGgufDir(const exporter::ExportInputs& in,
                                                        const std::string& tmp,
                                                        const std::string& out) {
  const std::string dir = tmp + "/gguf";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = dir + "/" + exporter::kGgufFileName;
  WQ_ASSIGN_OR_RETURN(exporter::GgufExportReport report, exporter::WriteGguf(in, path));
  WQ_RETURN_IF_ERROR(
      exporter::VerifyGguf(in, path, out + "/gguf/" + exporter::kGgufFileName, &report));
  WQ_RETURN_IF_ERROR(exporter::CopyTokenizerFiles(in.model_dir, dir));
  WQ_RETURN_IF_ERROR(base::WriteFileAtomic(dir + "/gguf_export.json", report.ToJson()));
  WQ_RETURN_IF_ERROR(exporter::WriteLlamaQuantizeTensorTypes(report, *in.plan, dir));
  return report;
}

// Writes --out (all or nothing: the files are written and checked in a temporary folder
// that becomes `out` only when everything worked) and says what it wrote.
absl::Status WriteExport(const exporter::ExportInputs& in, const std::string& out, bool force,
                         bool gguf, bool fake_only) {
  exporter::GgufExportReport gguf_report;
  WQ_RETURN_IF_ERROR(base::WriteDirAtomic(out, force, [&](const std::string& tmp) -> absl::Status {
    if (gguf) {
      WQ_ASSIGN_OR_RETURN(gguf_report, WriteGgufDir(in, tmp, out));
      return absl::OkStatus();
    }
    if (!fake_only) {
      const std::string qdir = tmp + "/quantized";
      WQ_RETURN_IF_ERROR(exporter::WriteQuantizedCheckpoint(in, qdir));
      WQ_RETURN_IF_ERROR(exporter::VerifyQuantizedCheckpoint(in, qdir, out + "/quantized"));
    }
    return exporter::WriteFakeQuantCheckpoint(in, tmp + "/fake_quant");
  }));
  if (gguf) {
    std::printf(
        "wrote %s/gguf/%s (read back: equal to the evaluated weights outside the "
        "salient entries)\n%swrote %s/gguf/%s (the linears' types as llama-quantize "
        "--tensor-type overrides)\n",
        out.c_str(), exporter::kGgufFileName, gguf_report.ToText().c_str(), out.c_str(),
        exporter::kLlamaQuantizeTypesFileName);
  } else if (!fake_only) {
    std::error_code ec;
    const auto bytes =
        std::filesystem::file_size(out + "/quantized/" + exporter::kQuantizedFileName, ec);
    std::printf("wrote %s/quantized (%ju bytes; read back bit-exact)\n", out.c_str(),
                static_cast<uintmax_t>(ec ? 0 : bytes));
  }
  if (!gguf) std::printf("wrote %s/fake_quant (Hugging Face layout, F16)\n", out.c_str());
  return absl::OkStatus();
}

absl::Status RunExport(Args& args) {
  const std::string config_path = args.Get("config");
  const std::vector<std::string> sets = args.GetAll("set");
  const std::string plan_path = args.Get("plan");
  const std::string out = args.Get("out");
  const std::string format = args.Get("format", "safetensors");
  const bool fake_only = args.Has("fake-quant-only"), no_cache = args.Has("no-cache"),
             force = args.Has("force");
  WQ_RETURN_IF_ERROR(args.Finish());
  if (config_path.empty() || plan_path.empty() || out.empty()) {
    return absl::InvalidArgumentError("--config, --plan and --out are required (see --help)");
  }
  if (format != "safetensors" && format != "gguf") {
    return absl::InvalidArgumentError(
        absl::StrCat("--format: '", format, "', must be safetensors or gguf"));
  }
  const bool gguf = format == "gguf";
  if (gguf && fake_only) {
    return absl::InvalidArgumentError("--fake-quant-only: only with --format safetensors");
  }
  WQ_RETURN_IF_ERROR(base::CheckOutputParent(out, "--out"));
  WQ_RETURN_IF_ERROR(base::CheckOutputDir(out, force));  // before the long part
  WQ_ASSIGN_OR_RETURN(config::RunConfig cfg, config::LoadRunConfig(config_path, sets));
  WQ_RETURN_IF_ERROR(base::CheckInputDir(cfg.model.dir, "model.dir"));
  // With the unit table cached, the model is streamed from its checkpoint one layer at a
  // time; otherwise a session loads it whole to calibrate and fit it.
  WQ_ASSIGN_OR_RETURN(const std::unique_ptr<model::Checkpoint> checkpoint,
                      model::Checkpoint::Open(cfg.model.dir));
  // Error compensation needs the calibration Hessians, hence the model: a session.
  const bool stream = !no_cache && cfg.quant.compensation == quant::Compensation::kNone;
  absl::StatusOr<quant::StageFits> cached =
      absl::NotFoundError(no_cache ? "--no-cache" : "quant.compensation");
  if (stream)
    cached = quant::QuantizationSession::LoadCachedFits(job::SessionOptionsFrom(cfg), *checkpoint);
  std::unique_ptr<quant::QuantizationSession> session;
  if (!cached.ok()) {
    if (!absl::IsNotFound(cached.status())) {
      std::fprintf(stderr, "warning: unit table cache entry unusable: %s\n",
                   std::string(cached.status().message()).c_str());
    }
    std::fprintf(stderr, "%s: loading the whole model\n",
                 stream ? "unit table not cached" : "error compensation or --no-cache");
    WQ_ASSIGN_OR_RETURN(session, job::OpenSession(cfg, !no_cache, /*load_eval_text=*/false));
  }
  const plan::UnitTable& table = session != nullptr ? session->table() : cached->table();
  WQ_ASSIGN_OR_RETURN(const plan::Plan plan, plan::ReadPlanFile(plan_path, table));
  exporter::ExportInputs in;
  if (session != nullptr) {
    in = exporter::SessionExportInputs(*session, plan);
  } else {
    in.checkpoint = checkpoint.get();
    in.table = &table;
    in.fits = &*cached;
    in.plan = &plan;
    in.model_dir = cfg.model.dir;
  }
  const plan::PlanTotals totals = plan.Totals(table);
  WQ_RETURN_IF_ERROR(WriteExport(in, out, force, gguf, fake_only));
  std::printf("plan %s: effective bits %.4f (quantized linears), %.4f (whole model)\n",
              plan.plan_id.c_str(), totals.effective_bits, totals.whole_model_bits);
  return absl::OkStatus();
}

}  // namespace

WQ_REGISTER_COMMAND(export_, "export",
                    "write a plan's quantized checkpoint and a fake-quant FP16 checkpoint, or GGUF",
                    kUsage, RunExport);

}  // namespace windquant::cli
