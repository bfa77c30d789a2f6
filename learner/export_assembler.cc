#include "learner/export_assembler.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/export/export_layout.h"
#include "common/model/llama_config.h"
#include "common/model/safetensors_stream_writer.h"
#include "common/net/channel.h"
#include "common/net/status_convert.h"
#include "common/plan/effective_bits.h"
#include "common/plan/plan_io.h"
#include "common/transport/work_deadline.h"
#include "grpcpp/grpcpp.h"
#include "windquant/v1/actor.grpc.pb.h"

namespace windquant::learner {
namespace {

namespace fs = std::filesystem;

// Cancels `context` when Tick() has not been called for `stall`: a per-chunk deadline
// for a stream whose whole length follows the model.
class StallWatch {
 public:
  StallWatch(grpc::ClientContext* context, absl::Duration stall)
      : context_(context), stall_(stall), last_(absl::Now()), thread_([this] { Run(); }) {}
  ~StallWatch() {
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
    }
    thread_.join();
  }
  void Tick() {
    absl::MutexLock lock(&mu_);
    last_ = absl::Now();
  }
  bool fired() const {
    absl::MutexLock lock(&mu_);
    return fired_;
  }

 private:
  void Run() {
    absl::MutexLock lock(&mu_);
    while (!done_) {
      const absl::Duration left = last_ + stall_ - absl::Now();
      if (left <= absl::ZeroDuration()) {
        fired_ = true;
        context_->TryCancel();
        return;
      }
      mu_.AwaitWithTimeout(absl::Condition(&done_), std::min(left, absl::Seconds(1)));
    }
  }

  grpc::ClientContext* const context_;
  const absl::Duration stall_;
  mutable absl::Mutex mu_;
  absl::Time last_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool fired_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

struct StageSource {
  std::shared_ptr<grpc::Channel> channel;
  std::string name;
  exporter::ExportShare share;
};

// The first actor of each stage that answers with a fitted stage, and its layers.
absl::StatusOr<std::vector<StageSource>> PickStages(const ExportAssemblerOptions& o,
                                                    const std::vector<ExportStageActors>& stages,
                                                    int64_t num_layers) {
  std::vector<StageSource> out;
  for (size_t s = 0; s < stages.size(); ++s) {
    std::string why = "no actor";
    for (size_t r = 0; r < stages[s].channels.size() && out.size() == s; ++r) {
      const std::string name =
          r < stages[s].names.size() ? stages[s].names[r] : absl::StrCat("stage ", s);
      auto stub = v1::Actor::NewStub(stages[s].channels[r]);
      grpc::ClientContext ctx;
      net::ConfigureContext(ctx, o.rpc_deadline, /*wait_for_ready=*/true);
      v1::StageInfo info;
      const grpc::Status st = stub->GetStageInfo(&ctx, v1::StageInfoRequest(), &info);
      if (!st.ok()) {
        why = absl::StrCat(name, ": ", st.error_message());
      } else if (!info.unit_table_ready()) {
        why = absl::StrCat(name, ": not fitted");
      } else {
        out.push_back({stages[s].channels[r], name, {info.first_layer(), info.end_layer()}});
      }
    }
    if (out.size() == s) {
      return absl::FailedPreconditionError(
          absl::StrCat("export: no actor of stage ", s, " can export (", why, ")"));
    }
  }
  for (size_t s = 0; s < out.size(); ++s) {
    out[s].share.embeddings = s == 0;
    out[s].share.head = s + 1 == out.size();
    const int64_t expect = s == 0 ? 0 : out[s - 1].share.end_layer;
    if (out[s].share.first_layer != expect ||
        (s + 1 == out.size() && out[s].share.end_layer != num_layers)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "export: ", out[s].name, " owns layers [", out[s].share.first_layer, ", ",
          out[s].share.end_layer, "): the stages do not tile the model's ", num_layers));
    }
  }
  return out;
}

// Pulls one part from its stage into `out`; returns the bytes received.
absl::StatusOr<uint64_t> PullPart(const ExportAssemblerOptions& o, const StageSource& stage,
                                  exporter::ExportFile file, exporter::ExportPart part,
                                  const v1::Plan& plan, uint64_t expected, absl::Duration stall,
                                  absl::Duration whole, model::SafetensorsStreamWriter* out) {
  const std::string what = absl::StrCat(stage.name, " (", exporter::ExportFileName(file), " ",
                                        exporter::ExportPartName(part), ")");
  v1::ExportStageRequest req;
  req.set_file(file == exporter::ExportFile::kQuantized ? v1::ExportStageRequest::QUANTIZED
                                                        : v1::ExportStageRequest::FAKE_QUANT);
  req.set_part(part == exporter::ExportPart::kLayers ? v1::ExportStageRequest::LAYERS
                                                     : v1::ExportStageRequest::FIXED);
  *req.mutable_plan() = plan;
  req.set_first_layer(static_cast<int32_t>(stage.share.first_layer));
  req.set_end_layer(static_cast<int32_t>(stage.share.end_layer));
  req.set_embeddings(stage.share.embeddings);
  req.set_head(stage.share.head);
  req.set_chunk_bytes(o.chunk_bytes);
  auto stub = v1::Actor::NewStub(stage.channel);
  grpc::ClientContext ctx;
  net::ConfigureContext(ctx, whole);
  uint64_t received = 0;
  bool mismatch = false;
  v1::ExportStageChunk chunk;
  absl::Status write_error;
  grpc::Status st;
  {
    StallWatch watch(&ctx, stall);
    auto reader = stub->ExportStage(&ctx, req);
    while (reader->Read(&chunk)) {
      watch.Tick();
      if (chunk.part_bytes() != expected) {
        mismatch = true;
        ctx.TryCancel();
        break;
      }
      received += chunk.data().size();
      write_error = out->Append(chunk.data());
      if (!write_error.ok()) {
        ctx.TryCancel();
        break;
      }
    }
    st = reader->Finish();
    if (watch.fired()) {
      return absl::DeadlineExceededError(
          absl::StrCat("export: ", what, " sent nothing for ", absl::FormatDuration(stall)));
    }
  }
  if (mismatch) {
    return absl::FailedPreconditionError(absl::StrCat("export: ", what, " declares ",
                                                      chunk.part_bytes(), " bytes, the header ",
                                                      expected, " (another unit table?)"));
  }
  WQ_RETURN_IF_ERROR(write_error);
  if (!st.ok()) {
    return absl::Status(net::FromGrpcStatus(st).code(),
                        absl::StrCat("export: ", what, ": ", st.error_message()));
  }
  if (received != expected) {
    return absl::DataLossError(
        absl::StrCat("export: ", what, " sent ", received, " of ", expected, " bytes"));
  }
  return received;
}

// Removes a temporary folder unless released.
struct TempDir {
  fs::path path;
  bool keep = false;
  ~TempDir() {
    std::error_code ec;
    if (!keep) fs::remove_all(path, ec);
  }
};

absl::Status RenameInto(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::remove_all(to, ec);  // a complete earlier export of this run
  if (ec) return absl::InternalError(absl::StrCat(to.string(), ": cannot replace: ", ec.message()));
  fs::rename(from, to, ec);
  if (ec) return absl::InternalError(absl::StrCat(to.string(), ": rename failed: ", ec.message()));
  return absl::OkStatus();
}

struct FileJob {
  const ExportAssemblerOptions& o;
  const std::vector<StageSource>& stages;
  const model::LlamaConfig& config;
  const plan::UnitTable& table;
  const plan::Plan& plan;
  v1::Plan plan_proto;
};

// One folder, complete, in `tmp` (created); returns (file size, bytes pulled).
absl::StatusOr<std::pair<uint64_t, uint64_t>> WriteFolder(const FileJob& j,
                                                          exporter::ExportFile file,
                                                          const TempDir& tmp) {
  std::vector<exporter::ExportShare> shares;
  for (const StageSource& s : j.stages) shares.push_back(s.share);
  WQ_ASSIGN_OR_RETURN(std::vector<model::StreamTensor> tensors,
                      exporter::DeclareFile(file, shares, j.config, j.table, j.plan.actions));
  {
    std::error_code ec;
    fs::remove_all(tmp.path, ec);
    fs::create_directories(tmp.path, ec);
    if (ec) return absl::InternalError(absl::StrCat(tmp.path.string(), ": ", ec.message()));
  }
  WQ_ASSIGN_OR_RETURN(
      auto out, model::SafetensorsStreamWriter::Open(
                    (tmp.path / exporter::ExportTensorFile(file)).string(), std::move(tensors),
                    exporter::FileMetadata(file, j.table, j.plan)));
  const absl::Duration base = j.o.rpc_deadline;
  const int64_t layer = transport::LayerLinearWeights(j.config);
  const absl::Duration stall =
      transport::FitDeadline(base, std::max(layer, j.config.vocab_size * j.config.hidden_size));
  uint64_t pulled = 0;
  for (const auto& [s, part] : exporter::PartOrder(file, j.stages.size())) {
    const StageSource& stage = j.stages[s];
    WQ_ASSIGN_OR_RETURN(
        std::vector<model::StreamTensor> declared,
        exporter::DeclarePart(file, part, stage.share, j.config, j.table, j.plan.actions));
    uint64_t expected = 0;
    for (const model::StreamTensor& t : declared) expected += t.num_bytes();
    const int64_t layers = stage.share.end_layer - stage.share.first_layer;
    const absl::Duration whole = transport::FitDeadline(base, layers * layer) + 4 * stall;
    WQ_ASSIGN_OR_RETURN(const uint64_t got, PullPart(j.o, stage, file, part, j.plan_proto, expected,
                                                     stall, whole, out.get()));
    pulled += got;
  }
  WQ_RETURN_IF_ERROR(out->Finish());
  const uint64_t size = out->file_size();
  WQ_RETURN_IF_ERROR(base::WriteFileAtomic((tmp.path / "config.json").string(),
                                           exporter::ExportConfigJson(file, j.config)));
  if (file == exporter::ExportFile::kQuantized) {
    WQ_RETURN_IF_ERROR(base::WriteFileAtomic((tmp.path / "plan.json").string(),
                                             plan::PlanToJson(j.plan, j.table)));
  }
  WQ_RETURN_IF_ERROR(exporter::CopyTokenizerFiles(j.o.model_dir, tmp.path.string()));
  return std::make_pair(size, pulled);
}

}  // namespace

absl::StatusOr<ExportSummary> AssembleExport(const ExportAssemblerOptions& options,
                                             const std::vector<ExportStageActors>& stages,
                                             const plan::UnitTable& table, const plan::Plan& plan,
                                             const std::string& dir) {
  const absl::Time start = absl::Now();
  WQ_ASSIGN_OR_RETURN(const model::LlamaConfig config,
                      model::LlamaConfig::FromDirectory(options.model_dir));
  if (table.first_layer != 0 || table.end_layer != config.num_hidden_layers) {
    return absl::FailedPreconditionError(absl::StrCat("export: the unit table covers layers [",
                                                      table.first_layer, ", ", table.end_layer,
                                                      ") of ", config.num_hidden_layers));
  }
  if (table.fixed_param_bits != plan::FixedParamBits(config.torch_dtype)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "export: the unit table counts embeddings and norms at ", table.fixed_param_bits, " bits, ",
        options.model_dir, " stores them at ", plan::FixedParamBits(config.torch_dtype)));
  }
  WQ_RETURN_IF_ERROR(plan.Validate(table, absl::StrCat("plan ", plan.plan_id)));
  WQ_ASSIGN_OR_RETURN(const std::vector<StageSource> sources,
                      PickStages(options, stages, config.num_hidden_layers));
  FileJob job{options, sources, config, table, plan, {}};
  plan.ToProto(table, &job.plan_proto);
  ExportSummary summary;
  const std::array<exporter::ExportFile, 2> files = {exporter::ExportFile::kQuantized,
                                                     exporter::ExportFile::kFakeQuant};
  std::array<TempDir, 2> tmp;
  for (size_t f = 0; f < files.size(); ++f) {
    const exporter::ExportFile file = files[f];
    tmp[f].path =
        fs::path(dir) / absl::StrCat(".", exporter::ExportFileName(file), ".partial.", getpid());
    WQ_ASSIGN_OR_RETURN(const auto written, WriteFolder(job, file, tmp[f]));
    (file == exporter::ExportFile::kQuantized ? summary.quantized_bytes
                                              : summary.fake_quant_bytes) = written.first;
    summary.pulled_bytes += written.second;
    if (options.log) {
      options.log(
          absl::StrCat("export: ", (fs::path(dir) / exporter::ExportFileName(file)).string(),
                       " assembled from ", sources.size(), " stages (", written.first, " bytes)"));
    }
  }
  // Both complete: into place together.
  for (size_t f = 0; f < files.size(); ++f) {
    WQ_RETURN_IF_ERROR(RenameInto(tmp[f].path, fs::path(dir) / exporter::ExportFileName(files[f])));
    tmp[f].keep = true;
  }
  summary.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return summary;
}

}  // namespace windquant::learner
