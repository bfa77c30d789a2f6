// ExportAssembler: the learner's side of a distributed export (docs/quantized-format.md,
// "Export in a distributed job"). The learner owns no layers: it computes both files'
// safetensors headers from the model's config.json, the merged unit table and the plan
// (common/export/export_layout.h), then pulls every part, in file order, from the actor
// of the stage that owns it (Actor.ExportStage: the actor computes the bytes from its
// own fits and weights) and writes them into place. The files are the bytes a
// one-process `windquant export` of the same plan writes (same layout, same code).
//
// Writes <dir>/quantized (quantized.safetensors, config.json, plan.json, tokenizer
// files) and <dir>/fake_quant (model.safetensors, config.json, tokenizer files). Each
// folder is built under a temporary name beside it and renamed into place when
// complete, so a failure (an actor that dies or refuses mid-export, a full disk) leaves
// no half-written folder (a complete earlier one is replaced only by a complete one).
//
// Deadlines: GetStageInfo takes `rpc_deadline`; an ExportStage stream fails when no
// chunk arrives for `stall` (derived from one layer's work, transport::FitDeadline) and
// in any case after the work deadline of the stage's layers.
// Memory: one chunk (`chunk_bytes`) and the headers (~250 bytes per unit tensor).
// Thread-compatible.
#ifndef WINDQUANT_LEARNER_EXPORT_ASSEMBLER_H_
#define WINDQUANT_LEARNER_EXPORT_ASSEMBLER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/base/log.h"
#include "common/plan/plan.h"
#include "common/plan/unit_table.h"
#include "grpcpp/channel.h"

namespace windquant::learner {

struct ExportAssemblerOptions {
  std::string model_dir;  // config.json and the tokenizer files are read from here
  absl::Duration rpc_deadline = absl::Seconds(30);
  int64_t chunk_bytes = 4 << 20;  // asked of the actors
  base::LogSink log;
};

// The actors of one stage (its replicas); the first that answers GetStageInfo with a
// fitted stage exports it.
struct ExportStageActors {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::string> names;  // for messages, parallel to channels
};

struct ExportSummary {
  uint64_t quantized_bytes = 0, fake_quant_bytes = 0;  // file sizes
  uint64_t pulled_bytes = 0;                           // data bytes received from actors
  double seconds = 0;                                  // wall time of the whole export
};

// Writes the two folders for `plan` (of the merged `table`). FAILED_PRECONDITION when
// no actor of a stage answers, the stages do not tile the model, or a stage declares
// another size for a part than the header; an actor's error (one line naming it and the
// part); I/O errors naming the file.
absl::StatusOr<ExportSummary> AssembleExport(const ExportAssemblerOptions& options,
                                             const std::vector<ExportStageActors>& stages,
                                             const plan::UnitTable& table, const plan::Plan& plan,
                                             const std::string& dir);

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_EXPORT_ASSEMBLER_H_
