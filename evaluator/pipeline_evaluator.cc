#include "evaluator/pipeline_evaluator.h"

#include <c10/core/GradMode.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/model/checkpoint.h"
#include "common/quant/calibration.h"
#include "common/quant/table_fingerprint.h"
#include "common/transport/work_deadline.h"
#include "evaluator/pipeline_plan_backend.h"

namespace windquant::evaluator {
namespace {

using transport::ActivationTransport;
using transport::MicroBatch;
using transport::PassSpec;
using transport::StageStream;

absl::Status Prefix(const absl::Status& s, const std::string& where) {
  return absl::Status(s.code(), absl::StrCat(where, ": ", s.message()));
}

using InputFn = std::function<absl::StatusOr<at::Tensor>(int64_t)>;
using SinkFn = std::function<absl::Status(int64_t, const at::Tensor&)>;

// The first error of one pass, shared by its threads, prefixed with where it happened.
class PassErrors {
 public:
  void Fail(const absl::Status& s, const std::string& where) {
    absl::MutexLock lock(&mu_);
    if (first_.ok()) first_ = Prefix(s, where);
    failed_ = true;
  }
  bool failed() const { return failed_; }
  absl::Status first() const {
    absl::MutexLock lock(&mu_);
    return first_;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Status first_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> failed_{false};
};

// The first `n` ids are token ids of a vocabulary of `vocab_size`.
absl::Status CheckTokenIds(const std::vector<int32_t>& ids, int64_t n, int64_t vocab_size) {
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", ids[i], " at position ", i, " is outside the vocabulary"));
    }
  }
  return absl::OkStatus();
}

// One stream per stage; when one cannot be opened, those opened are closed and drained
// (so their workers finish) and the error names the stage.
absl::StatusOr<std::vector<std::unique_ptr<StageStream>>> OpenStreams(
    const std::vector<ActivationTransport*>& stages, const PassSpec& spec) {
  std::vector<std::unique_ptr<StageStream>> streams;
  for (ActivationTransport* t : stages) {
    absl::StatusOr<std::unique_ptr<StageStream>> s = t->Open(spec);
    if (!s.ok()) {
      for (auto& open : streams) open->CloseSend().IgnoreError();
      for (auto& open : streams) {
        while (open->Receive().ok()) {
        }
      }
      return Prefix(s.status(), t->Name());
    }
    streams.push_back(*std::move(s));
  }
  return streams;
}

// Sends micro-batches 0..count-1 from `make_input` into stage 0 until a failure, then
// closes it.
void Feed(StageStream* first, const std::string& name, int64_t count, const InputFn& make_input,
          PassErrors* errors) {
  for (int64_t i = 0; i < count && !errors->failed(); ++i) {
    absl::StatusOr<at::Tensor> in = make_input(i);
    if (!in.ok()) {
      errors->Fail(in.status(), "input");
      break;
    }
    absl::Status s = first->Send(MicroBatch{static_cast<int32_t>(i), *std::move(in)});
    if (!s.ok()) {
      errors->Fail(s, name);
      break;
    }
  }
  first->CloseSend().IgnoreError();
}

// Forwards every output of stage `s - 1` to stage `s`. After a failure it keeps draining
// (so no remote stage blocks on flow control) but sends nothing more.
void Forward(const std::vector<ActivationTransport*>& stages,
             const std::vector<std::unique_ptr<StageStream>>& streams, size_t s,
             PassErrors* errors) {
  while (true) {
    absl::StatusOr<MicroBatch> mb = streams[s - 1]->Receive();
    if (!mb.ok()) {
      if (!absl::IsOutOfRange(mb.status())) errors->Fail(mb.status(), stages[s - 1]->Name());
      break;
    }
    if (errors->failed()) continue;
    absl::Status st = streams[s]->Send(*std::move(mb));
    if (!st.ok()) errors->Fail(st, stages[s]->Name());
  }
  streams[s]->CloseSend().IgnoreError();
}

// Hands the last stage's outputs, in order, to `sink` until the stream ends; returns how
// many arrived in order.
int64_t Collect(StageStream* last, const std::string& name, const SinkFn& sink,
                PassErrors* errors) {
  int64_t expected = 0;
  while (true) {
    absl::StatusOr<MicroBatch> mb = last->Receive();
    if (!mb.ok()) {
      if (!absl::IsOutOfRange(mb.status())) errors->Fail(mb.status(), name);
      break;
    }
    if (errors->failed()) continue;
    if (mb->index != expected) {
      errors->Fail(absl::DataLossError(
                       absl::StrCat("micro-batch ", mb->index, " arrived, expected ", expected)),
                   name);
      continue;
    }
    ++expected;
    absl::Status s = sink(mb->index, mb->hidden);
    if (!s.ok()) errors->Fail(s, "head");
  }
  return expected;
}

}  // namespace

PipelineEvaluator::PipelineEvaluator(model::LlamaWeights head_weights,
                                     const PipelineEvaluatorOptions& options,
                                     std::vector<int32_t> calibration_ids,
                                     std::vector<int32_t> evaluation_ids)
    : options_(options),
      head_(std::move(head_weights), options.compute),
      calibration_ids_(std::move(calibration_ids)),
      evaluation_ids_(std::move(evaluation_ids)),
      core_(options.result_cache_size) {}

absl::StatusOr<std::unique_ptr<PipelineEvaluator>> PipelineEvaluator::Create(
    const std::string& model_dir, const PipelineEvaluatorOptions& options,
    std::vector<int32_t> calibration_ids, std::vector<int32_t> evaluation_ids) {
  WQ_ASSIGN_OR_RETURN(auto checkpoint, model::Checkpoint::Open(model_dir));
  model::LoadRequest request;
  request.first_layer = 0;
  request.end_layer = 0;  // no decoder layer: the actors own them
  request.embeddings = true;
  request.head = true;
  WQ_ASSIGN_OR_RETURN(model::LlamaWeights weights, checkpoint->LoadWeights(request));
  return FromWeights(std::move(weights), options, std::move(calibration_ids),
                     std::move(evaluation_ids));
}

absl::StatusOr<std::unique_ptr<PipelineEvaluator>> PipelineEvaluator::FromWeights(
    model::LlamaWeights head_weights, const PipelineEvaluatorOptions& options,
    std::vector<int32_t> calibration_ids, std::vector<int32_t> evaluation_ids) {
  if (!head_weights.embed_tokens.defined() || !head_weights.final_norm.defined() ||
      !head_weights.lm_head.defined()) {
    return absl::InvalidArgumentError("evaluator needs embeddings, final norm and lm_head");
  }
  if (options.context < 2) return absl::InvalidArgumentError("evaluation.context: must be >= 2");
  if (options.batch_size < 1) return absl::InvalidArgumentError("evaluation.batch: must be >= 1");
  if (options.calibration_batch < 1) {
    return absl::InvalidArgumentError("calibration batch: must be >= 1");
  }
  const int64_t vocab = head_weights.config.vocab_size;
  for (const auto* ids : {&calibration_ids, &evaluation_ids}) {
    for (size_t i = 0; i < ids->size(); ++i) {
      if ((*ids)[i] < 0 || (*ids)[i] >= vocab) {
        return absl::InvalidArgumentError(
            absl::StrCat(ids == &calibration_ids ? "calibration" : "evaluation", " token ", i,
                         ": id ", (*ids)[i], " outside the vocabulary"));
      }
    }
  }
  return std::unique_ptr<PipelineEvaluator>(new PipelineEvaluator(
      std::move(head_weights), options, std::move(calibration_ids), std::move(evaluation_ids)));
}

absl::Status PipelineEvaluator::CheckChain(const std::vector<ActivationTransport*>& stages) const {
  if (stages.empty()) return absl::InvalidArgumentError("no stages");
  int64_t next = 0;
  for (ActivationTransport* t : stages) {
    WQ_ASSIGN_OR_RETURN(auto layers, t->Layers());
    if (layers.first != next) {
      return absl::InvalidArgumentError(absl::StrCat(t->Name(), " holds layers [", layers.first,
                                                     ", ", layers.second,
                                                     "), expected to start at ", next));
    }
    next = layers.second;
  }
  if (next != config().num_hidden_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("stages end at layer ", next, ", the model has ", config().num_hidden_layers));
  }
  return absl::OkStatus();
}

absl::Status PipelineEvaluator::RunPipeline(const std::vector<ActivationTransport*>& stages,
                                            const PassSpec& spec, int64_t count,
                                            const InputFn& make_input, const SinkFn& sink) {
  WQ_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<StageStream>> streams, OpenStreams(stages, spec));
  PassErrors errors;
  // Stage 0 is fed by its own thread; each later stage by a forwarder that drains the
  // previous one; this thread collects the last.
  std::vector<std::thread> threads;
  threads.emplace_back(
      [&] { Feed(streams[0].get(), stages[0]->Name(), count, make_input, &errors); });
  for (size_t s = 1; s < stages.size(); ++s) {
    threads.emplace_back([&, s] { Forward(stages, streams, s, &errors); });
  }
  const int64_t collected = Collect(streams.back().get(), stages.back()->Name(), sink, &errors);
  for (auto& t : threads) t.join();
  WQ_RETURN_IF_ERROR(errors.first());
  if (collected != count) {
    return absl::DataLossError(
        absl::StrCat("pipeline returned ", collected, " of ", count, " micro-batches"));
  }
  return absl::OkStatus();
}

absl::StatusOr<model::PerplexityResult> PipelineEvaluator::Perplexity(
    const std::vector<ActivationTransport*>& stages, const PassSpec& spec,
    const std::vector<int32_t>& ids, int64_t max_tokens) {
  WQ_RETURN_IF_ERROR(CheckChain(stages));
  const model::LlamaConfig& c = config();
  int64_t n = static_cast<int64_t>(ids.size());
  if (max_tokens > 0) n = std::min(n, max_tokens);
  WQ_RETURN_IF_ERROR(CheckTokenIds(ids, n, c.vocab_size));
  WQ_ASSIGN_OR_RETURN(model::PerplexityResult r,
                      model::PerplexityWindows(n, options_.context, c.max_position_embeddings));
  const int64_t context = r.context, chunk = context - 1, windows = r.windows;
  const int64_t batch = options_.batch_size;
  const int64_t count = (windows + batch - 1) / batch;
  // Micro-batch i holds windows [i * batch, i * batch + nb): inputs are their
  // first `chunk` tokens, targets their last `chunk`.
  auto window_rows = [&](int64_t i) {
    const int64_t w0 = i * batch;
    return model::WindowRows(ids, w0, std::min(batch, windows - w0), context, c.bos_token_id);
  };
  double total = 0;
  const auto start = std::chrono::steady_clock::now();
  PassSpec sized = spec;
  sized.weights = c.num_hidden_layers * transport::LayerLinearWeights(c);
  sized.tokens = windows * context;
  absl::Status s = RunPipeline(
      stages, sized, count,
      [&](int64_t i) -> absl::StatusOr<at::Tensor> {
        try {
          c10::NoGradGuard no_grad;
          return head_.Embed(window_rows(i).narrow(1, 0, chunk));
        } catch (const c10::Error& e) {
          return absl::InternalError(absl::StrCat("embed: ", e.what_without_backtrace()));
        }
      },
      [&](int64_t i, const at::Tensor& hidden) -> absl::Status {
        try {
          c10::NoGradGuard no_grad;
          const at::Tensor targets = window_rows(i).narrow(1, 1, chunk);
          if (hidden.dim() != 3 || hidden.size(0) != targets.size(0) || hidden.size(1) != chunk) {
            return absl::DataLossError("stage output has the wrong shape");
          }
          total += model::SumTargetNll(head_.Head(hidden), targets);
          return absl::OkStatus();
        } catch (const c10::Error& e) {
          return absl::InternalError(absl::StrCat("head: ", e.what_without_backtrace()));
        }
      });
  WQ_RETURN_IF_ERROR(s);
  WQ_RETURN_IF_ERROR(model::FinishPerplexity(
      total, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), &r));
  return r;
}

absl::StatusOr<std::vector<plan::UnitTable>> PipelineEvaluator::Calibrate(
    const std::vector<ActivationTransport*>& stages, const std::string& fingerprint) {
  WQ_RETURN_IF_ERROR(CheckChain(stages));
  WQ_ASSIGN_OR_RETURN(at::Tensor windows, quant::SampleCalibrationWindows(
                                              calibration_ids_, options_.calibration_samples,
                                              options_.calibration_seq_len,
                                              options_.calibration_seed, config().bos_token_id));
  const int64_t batch = options_.calibration_batch;
  const int64_t count = (windows.size(0) + batch - 1) / batch;
  PassSpec spec;
  spec.mode = transport::PassMode::kCalibrate;
  spec.model_fingerprint = fingerprint;
  spec.weights = config().num_hidden_layers * transport::LayerLinearWeights(config());
  spec.tokens = windows.numel();
  WQ_RETURN_IF_ERROR(RunPipeline(
      stages, spec, count,
      [&](int64_t i) -> absl::StatusOr<at::Tensor> {
        try {
          c10::NoGradGuard no_grad;
          return head_.Embed(
              windows.slice(0, i * batch, std::min((i + 1) * batch, windows.size(0))));
        } catch (const c10::Error& e) {
          return absl::InternalError(absl::StrCat("embed: ", e.what_without_backtrace()));
        }
      },
      [](int64_t, const at::Tensor&) { return absl::OkStatus(); }));
  std::vector<plan::UnitTable> tables;
  for (ActivationTransport* t : stages) {
    absl::StatusOr<plan::UnitTable> table = t->FinishCalibration(fingerprint);
    if (!table.ok()) return Prefix(table.status(), t->Name());
    tables.push_back(*std::move(table));
  }
  return tables;
}

std::string PipelineEvaluator::CalibrationFingerprint() const {
  return quant::CalibrationKey(options_.calibration_samples, options_.calibration_seq_len,
                               options_.calibration_seed, calibration_ids_);
}

absl::Status PipelineEvaluator::SetHeldOut(std::vector<int32_t> ids) {
  if (static_cast<int64_t>(ids.size()) < options_.context) {
    return absl::InvalidArgumentError(absl::StrCat("evaluation.heldout: ", ids.size(),
                                                   " tokens, shorter than one window of ",
                                                   options_.context));
  }
  WQ_RETURN_IF_ERROR(CheckTokenIds(ids, static_cast<int64_t>(ids.size()), config().vocab_size));
  heldout_ids_ = std::move(ids);
  return absl::OkStatus();
}

absl::StatusOr<PlanEvaluation> PipelineEvaluator::HeldOutPerplexity(
    const std::vector<ActivationTransport*>& stages, const plan::Plan& plan) {
  if (heldout_ids_.empty()) {
    return absl::FailedPreconditionError("evaluation.heldout: the evaluator has no held-out text");
  }
  WQ_ASSIGN_OR_RETURN(const model::PerplexityResult r,
                      Perplexity(stages, PlanPass(&plan), heldout_ids_, 0));
  PlanEvaluation e;
  e.eval_nll = r.nll;
  e.eval_ppl = r.perplexity;
  e.tokens = r.tokens;
  e.seconds = r.seconds;
  return e;
}

PassSpec PipelineEvaluator::PlanPass(const plan::Plan* plan) {
  PassSpec spec;  // empty plan id: full precision
  if (plan != nullptr) {
    spec.plan_id = PlanKey(*plan);
    spec.model_fingerprint = plan->model_fingerprint;
    spec.actions = std::make_shared<const std::vector<int>>(plan->actions);
  }
  return spec;
}

std::string PipelineEvaluator::PlanKey(const plan::Plan& plan) {
  std::string bytes = plan.model_fingerprint;
  bytes.push_back('\n');
  for (int a : plan.actions) bytes.push_back(static_cast<char>('0' + a));
  return base::Sha256Hex(bytes).substr(0, 32);
}

absl::StatusOr<PlanEvaluation> PipelineEvaluator::Reference(
    const std::vector<ActivationTransport*>& stages) {
  PipelinePlanBackend backend(this, stages);
  return core_.Reference(backend);
}

absl::StatusOr<PlanEvaluation> PipelineEvaluator::Evaluate(
    const std::vector<ActivationTransport*>& stages, const plan::Plan& plan) {
  PipelinePlanBackend backend(this, stages);
  return core_.Evaluate(backend, plan);
}

}  // namespace windquant::evaluator
