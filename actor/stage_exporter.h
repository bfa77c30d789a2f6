// StageExporter: the actor's side of a distributed export (docs/quantized-format.md,
// "Export in a distributed job"): produces the bytes of one part of an exported file
// (common/export/export_layout.h) for the stage's own layers, from the stage's own fits
// and weights (nothing is refitted, nothing reloaded: the quantized codes come from the
// kernel that produced the weights its Forward applies, the fake-quant linears are those
// weights), and the fixed tensors it is asked for from the memory-mapped checkpoint.
// The actor service streams them to the learner (ActorService::ExportStage), which
// assembles the files.
//
// Memory, during Export: one decoder layer's float32 copy (fake-quant) or one unit's
// float32 columns (quantized), one chunk (`chunk_bytes`), and for the embeddings / an
// untied lm_head one such tensor in its stored dtype; nothing after it returns.
// Thread-safe (const; the worker is).
#ifndef WINDQUANT_ACTOR_STAGE_EXPORTER_H_
#define WINDQUANT_ACTOR_STAGE_EXPORTER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/export/export_layout.h"
#include "common/stage/stage_worker.h"
#include "windquant/v1/actor.pb.h"

namespace windquant::actor {

struct StageExporterOptions {
  std::string model_dir;  // the checkpoint the stage was loaded from (fixed tensors)
};

struct StageExportRequest {
  exporter::ExportFile file = exporter::ExportFile::kQuantized;
  exporter::ExportPart part = exporter::ExportPart::kLayers;
  exporter::ExportShare share;  // must be the stage's layers
  std::vector<int> actions;     // one per global unit
  size_t chunk_bytes = 4 << 20;
};

inline constexpr int64_t kMinExportChunkBytes = 1 << 10;
inline constexpr int64_t kMaxExportChunkBytes = 16 << 20;

// The request of the proto, checked: INVALID_ARGUMENT naming the field (chunk_bytes,
// plan.actions, first_layer).
absl::StatusOr<StageExportRequest> StageExportRequestFromProto(const v1::ExportStageRequest& r);

class StageExporter {
 public:
  // Receives each chunk (at most chunk_bytes) and the part's declared size; an error
  // (the caller went away) stops the export with it.
  using ChunkSink = std::function<absl::Status(std::string_view chunk, uint64_t part_bytes)>;

  StageExporter(const stage::StageWorker* worker, StageExporterOptions options)
      : worker_(worker), options_(std::move(options)) {}

  // Streams the part. FAILED_PRECONDITION before the stage is fitted or when
  // `request.share` is not the stage's layers; INVALID_ARGUMENT for a plan that does not
  // cover the stage's units; the checkpoint's errors (fixed tensors); the sink's.
  absl::Status Export(const StageExportRequest& request, const ChunkSink& sink) const;

 private:
  const stage::StageWorker* worker_;
  const StageExporterOptions options_;
};

}  // namespace windquant::actor

#endif  // WINDQUANT_ACTOR_STAGE_EXPORTER_H_
