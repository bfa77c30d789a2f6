#include "actor/stage_exporter.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/model/checkpoint.h"

namespace windquant::actor {

absl::StatusOr<StageExportRequest> StageExportRequestFromProto(const v1::ExportStageRequest& r) {
  StageExportRequest out;
  out.file = r.file() == v1::ExportStageRequest::FAKE_QUANT ? exporter::ExportFile::kFakeQuant
                                                            : exporter::ExportFile::kQuantized;
  out.part = r.part() == v1::ExportStageRequest::FIXED ? exporter::ExportPart::kFixed
                                                       : exporter::ExportPart::kLayers;
  if (r.first_layer() < 0 || r.end_layer() <= r.first_layer()) {
    return absl::InvalidArgumentError(absl::StrCat("first_layer, end_layer: [", r.first_layer(),
                                                   ", ", r.end_layer(), ") is no layer range"));
  }
  out.share = {r.first_layer(), r.end_layer(), r.embeddings(), r.head()};
  if (r.chunk_bytes() != 0 &&
      (r.chunk_bytes() < kMinExportChunkBytes || r.chunk_bytes() > kMaxExportChunkBytes)) {
    return absl::InvalidArgumentError(absl::StrCat("chunk_bytes: ", r.chunk_bytes(), " outside [",
                                                   kMinExportChunkBytes, ", ", kMaxExportChunkBytes,
                                                   "]"));
  }
  if (r.chunk_bytes() != 0) out.chunk_bytes = static_cast<size_t>(r.chunk_bytes());
  out.actions.reserve(r.plan().actions_size());
  for (uint32_t a : r.plan().actions()) {
    if (a >= static_cast<uint32_t>(plan::kNumActions)) {
      return absl::InvalidArgumentError(absl::StrCat("plan.actions: action ", a, " out of range"));
    }
    out.actions.push_back(static_cast<int>(a));
  }
  return out;
}

absl::Status StageExporter::Export(const StageExportRequest& request, const ChunkSink& sink) const {
  const std::shared_ptr<const quant::QuantizedStage> stage = worker_->stage();
  if (stage == nullptr) {
    return absl::FailedPreconditionError("export: the stage is not fitted yet");
  }
  const exporter::ExportShare& share = request.share;
  if (share.first_layer != worker_->first_layer() || share.end_layer != worker_->end_layer()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "export: asked for layers [", share.first_layer, ", ", share.end_layer,
        ") of a stage that owns [", worker_->first_layer(), ", ", worker_->end_layer(), ")"));
  }
  WQ_RETURN_IF_ERROR(stage->fits().CheckPlan(request.actions));
  const model::LlamaConfig& config = worker_->config();
  WQ_ASSIGN_OR_RETURN(std::vector<model::StreamTensor> declared,
                      exporter::DeclarePart(request.file, request.part, share, config,
                                            stage->table(), request.actions));
  // Memory-mapped: only the headers are read until a fixed tensor is asked for.
  std::unique_ptr<model::Checkpoint> checkpoint;
  if (request.part == exporter::ExportPart::kFixed && (share.embeddings || share.head)) {
    WQ_ASSIGN_OR_RETURN(checkpoint, model::Checkpoint::Open(options_.model_dir));
  }
  exporter::PartSource source;
  source.config = &config;
  source.weights = &stage->model().weights();
  source.checkpoint = checkpoint.get();
  source.fits = &stage->fits();
  source.actions = &request.actions;
  uint64_t part_bytes = 0;
  exporter::PartSink out(
      std::move(declared),
      [&sink, &part_bytes](std::string_view bytes) { return sink(bytes, part_bytes); },
      request.chunk_bytes);
  part_bytes = out.bytes_declared();
  if (part_bytes == 0) return sink(std::string_view(), 0);  // the learner sees the size
  return exporter::StreamPart(request.file, request.part, share, source, &out);
}

}  // namespace windquant::actor
