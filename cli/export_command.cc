// `windquant export`: writes a plan's model as a quantized checkpoint (packed codes,
// docs/quantized-format.md) and as a fake-quant FP16 Hugging Face checkpoint.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/command.h"
#include "common/base/location_check.h"
#include "common/base/output_dir.h"
#include "common/base/status_macros.h"
#include "common/config/run_config.h"
#include "common/export/exporter.h"
#include "common/export/quantized_checkpoint.h"
#include "common/model/checkpoint.h"
#include "common/plan/plan_io.h"
#include "common/quant/quantization_session.h"
#include "job/node_options.h"
#include "job/open_session.h"

namespace windquant::cli {
namespace {

constexpr char kUsage[] =
    "usage: windquant export --config FILE --plan PLAN --out DIR [--fake-quant-only]\n"
    "                        [--force]\n\n"
    "Writes the model of FILE with PLAN (plan.json or plan.bin, made for the same unit\n"
    "table) applied:\n"
    "  DIR/quantized/   quantized.safetensors (packed codes, FP16 scales, INT8 salient\n"
    "                   values), config.json, tokenizer files, plan.json\n"
    "  DIR/fake_quant/  Hugging Face checkpoint (config.json torch_dtype float16,\n"
    "                   model.safetensors F16, tokenizer files)\n"
    "The quantized checkpoint is read back and checked to equal the evaluated weights.\n"
    "With the unit table in the cache (quant.cache_dir) the model is read one decoder layer\n"
    "at a time (peak memory ~ one layer in float32, not the model); without it the whole\n"
    "model is loaded to calibrate and fit it first.\n\n"
    "flags:\n"
    "  --config FILE        run config (YAML), required\n"
    "  --set K=V            config override (repeatable)\n"
    "  --plan PLAN          plan file, required\n"
    "  --out DIR            output directory, required\n"
    "  --fake-quant-only    write only DIR/fake_quant\n"
    "  --force              replace an existing non-empty DIR whole (refused otherwise)\n"
    "  --no-cache           ignore the unit-table cache\n";

absl::Status RunExport(Args& args) {
  const std::string config_path = args.Get("config");
  const std::vector<std::string> sets = args.GetAll("set");
  const std::string plan_path = args.Get("plan");
  const std::string out = args.Get("out");
  const bool fake_only = args.Has("fake-quant-only"), no_cache = args.Has("no-cache"),
             force = args.Has("force");
  WQ_RETURN_IF_ERROR(args.Finish());
  if (config_path.empty() || plan_path.empty() || out.empty()) {
    return absl::InvalidArgumentError("--config, --plan and --out are required (see --help)");
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
  // All or nothing: both checkpoints are written and checked in a temporary
  // folder that becomes --out only when everything worked.
  WQ_RETURN_IF_ERROR(base::WriteDirAtomic(out, force, [&](const std::string& tmp) -> absl::Status {
    if (!fake_only) {
      const std::string qdir = tmp + "/quantized";
      WQ_RETURN_IF_ERROR(exporter::WriteQuantizedCheckpoint(in, qdir));
      WQ_RETURN_IF_ERROR(exporter::VerifyQuantizedCheckpoint(in, qdir, out + "/quantized"));
    }
    return exporter::WriteFakeQuantCheckpoint(in, tmp + "/fake_quant");
  }));
  if (!fake_only) {
    std::error_code ec;
    const auto bytes =
        std::filesystem::file_size(out + "/quantized/" + exporter::kQuantizedFileName, ec);
    std::printf("wrote %s/quantized (%ju bytes; read back bit-exact)\n", out.c_str(),
                static_cast<uintmax_t>(ec ? 0 : bytes));
  }
  std::printf("wrote %s/fake_quant (Hugging Face layout, F16)\n", out.c_str());
  std::printf("plan %s: effective bits %.4f (quantized linears), %.4f (whole model)\n",
              plan.plan_id.c_str(), totals.effective_bits, totals.whole_model_bits);
  return absl::OkStatus();
}

}  // namespace

WQ_REGISTER_COMMAND(export_, "export",
                    "write a plan's quantized checkpoint and a fake-quant FP16 checkpoint", kUsage,
                    RunExport);

}  // namespace windquant::cli
