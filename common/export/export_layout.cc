#include "common/export/export_layout.h"

#include <c10/core/GradMode.h>
#include <algorithm>
#include <array>
#include <filesystem>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/export/packing.h"
#include "common/export/quantized_checkpoint.h"
#include "common/plan/action.h"
#include "common/plan/effective_bits.h"

namespace windquant::exporter {
namespace {

// Tensors are converted and appended in blocks of this many elements, so that a large
// one (embeddings) is never copied whole.
constexpr int64_t kConvertBlock = 1 << 22;

at::ScalarType ScalarTypeOf(model::Dtype d) {
  return d == model::Dtype::kF32    ? at::kFloat
         : d == model::Dtype::kBF16 ? at::kBFloat16
                                    : at::kHalf;
}

template <typename T>
std::string_view BytesOf(const std::vector<T>& v) {
  return std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

absl::Status AppendBytes(PartSink* out, const std::string& name, std::string_view bytes) {
  WQ_RETURN_IF_ERROR(out->Expect(name, bytes.size()));
  return out->Append(bytes);
}

// `t` converted to `dtype` (F32, F16, BF16) a block at a time.
absl::Status AppendTensor(PartSink* out, const std::string& name, const at::Tensor& t,
                          model::Dtype dtype) {
  WQ_RETURN_IF_ERROR(out->Expect(name, static_cast<uint64_t>(t.numel()) * DtypeSize(dtype)));
  const at::Tensor flat = t.detach().reshape({-1});
  for (int64_t b = 0; b < flat.numel(); b += kConvertBlock) {
    const at::Tensor piece = flat.slice(0, b, std::min(b + kConvertBlock, flat.numel()))
                                 .to(at::kCPU, ScalarTypeOf(dtype))
                                 .contiguous();
    WQ_RETURN_IF_ERROR(out->Append(std::string_view(static_cast<const char*>(piece.data_ptr()),
                                                    piece.numel() * piece.element_size())));
  }
  return absl::OkStatus();
}

std::vector<int64_t> LinearShape(const model::LlamaConfig& c, int m) {
  const int64_t h = c.hidden_size, q = c.num_attention_heads * c.head_dim,
                kv = c.num_key_value_heads * c.head_dim, inter = c.intermediate_size;
  const std::array<std::vector<int64_t>, model::kNumMatrices> shapes = {
      std::vector<int64_t>{q, h}, {kv, h}, {kv, h}, {h, q}, {inter, h}, {inter, h}, {h, inter}};
  return shapes[m];
}

// One unit's tensors (docs/quantized-format.md) in file order: the codes of its
// non-salient entries, the per-row FP16 parameters, the salient positions at
// IndexBits(n) bits each, their INT8 values and scale; FP16 values for action 16.
absl::StatusOr<std::vector<model::StreamTensor>> UnitTensors(const plan::Unit& u,
                                                             plan::Action action) {
  const std::string prefix = UnitTensorPrefix(u.layer, u.matrix, u.chunk);
  if (action == plan::Action::k16) {
    return std::vector<model::StreamTensor>{
        {prefix + ".weight", model::Dtype::kF16, {u.rows, u.cols}}};
  }
  const int64_t k = u.salient_count;
  WQ_ASSIGN_OR_RETURN(const int64_t codes, PackedCodesBytes(action, u.n() - k));
  std::vector<model::StreamTensor> out = {{prefix + ".codes", model::Dtype::kU8, {codes}},
                                          {prefix + ".scales", model::Dtype::kF16, {u.rows}}};
  if (action == plan::Action::k1)
    out.push_back({prefix + ".offsets", model::Dtype::kF16, {u.rows}});
  if (k == 0) return out;
  out.push_back(
      {prefix + ".salient_index", model::Dtype::kU8, {PackedUintBytes(k, plan::IndexBits(u.n()))}});
  out.push_back({prefix + ".salient_values", model::Dtype::kI8, {k}});
  out.push_back({prefix + ".salient_scale", model::Dtype::kF16, {1}});
  return out;
}

// The bytes of UnitTensors (unit `i` of the fits), from the unit's float32 columns W.
absl::Status AppendUnit(const quant::StageFits& fits, size_t i, plan::Action action,
                        const at::Tensor& W, PartSink* out) {
  const plan::Unit& u = fits.table().units[i];
  const std::string prefix = UnitTensorPrefix(u.layer, u.matrix, u.chunk);
  if (action == plan::Action::k16)
    return AppendTensor(out, prefix + ".weight", W, model::Dtype::kF16);
  const int a = plan::ActionIndex(action);
  const quant::StageFits::UnitParams& p = fits.params(i);
  const quant::SalientSet& sal = p.salient;
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
  WQ_ASSIGN_OR_RETURN(const std::vector<uint8_t> packed, PackCodes(action, kept));
  WQ_RETURN_IF_ERROR(AppendBytes(out, prefix + ".codes", BytesOf(packed)));
  const std::vector<uint16_t> scales(p.scales.begin() + (a - 1) * u.rows,
                                     p.scales.begin() + a * u.rows);
  WQ_RETURN_IF_ERROR(AppendBytes(out, prefix + ".scales", BytesOf(scales)));
  if (action == plan::Action::k1) {
    WQ_RETURN_IF_ERROR(AppendBytes(out, prefix + ".offsets", BytesOf(p.offsets)));
  }
  if (sal.count() == 0) return absl::OkStatus();
  const std::vector<uint32_t> index(sal.index.begin(), sal.index.end());
  WQ_ASSIGN_OR_RETURN(const std::vector<uint8_t> positions,
                      PackUint(index, plan::IndexBits(u.n())));
  WQ_RETURN_IF_ERROR(AppendBytes(out, prefix + ".salient_index", BytesOf(positions)));
  WQ_RETURN_IF_ERROR(AppendBytes(out, prefix + ".salient_values", BytesOf(sal.codes)));
  return AppendTensor(out, prefix + ".salient_scale", at::full({1}, sal.scale), model::Dtype::kF16);
}

std::string NormName(int64_t l, bool post) {
  return absl::StrCat("model.layers.", l,
                      post ? ".post_attention_layernorm.weight" : ".input_layernorm.weight");
}

// Reads what a part needs from PartSource: `weights` when it holds the tensor, else
// the checkpoint.
class SourceReader {
 public:
  explicit SourceReader(const PartSource& s) : s_(s) {}

  absl::StatusOr<model::LayerWeights> Layer(int64_t l) const {
    const model::LlamaWeights* w = s_.weights;
    if (w != nullptr && l >= w->first_layer &&
        l < w->first_layer + static_cast<int64_t>(w->layers.size())) {
      return w->layers[l - w->first_layer];  // shares the storage
    }
    WQ_RETURN_IF_ERROR(NeedCheckpoint(absl::StrCat("decoder layer ", l)));
    model::LoadRequest r;
    r.first_layer = l;
    r.end_layer = l + 1;
    r.embeddings = false;
    r.head = false;
    WQ_ASSIGN_OR_RETURN(model::LlamaWeights loaded, s_.checkpoint->LoadWeights(r));
    return std::move(loaded.layers[0]);
  }
  absl::StatusOr<at::Tensor> Norm(int64_t l, bool post) const {
    const model::LlamaWeights* w = s_.weights;
    if (w != nullptr && l >= w->first_layer &&
        l < w->first_layer + static_cast<int64_t>(w->layers.size())) {
      const model::LayerWeights& lw = w->layers[l - w->first_layer];
      return post ? lw.post_attention_layernorm : lw.input_layernorm;
    }
    WQ_RETURN_IF_ERROR(NeedCheckpoint(NormName(l, post)));
    return s_.checkpoint->LoadTensor(NormName(l, post), {s_.config->hidden_size});
  }
  // Embeddings (head = false) or the final norm and lm_head (head = true; lm_head
  // undefined when tied).
  absl::StatusOr<model::LlamaWeights> Fixed(bool head) const {
    const model::LlamaWeights* w = s_.weights;
    if (w != nullptr && (head ? w->final_norm.defined() : w->embed_tokens.defined())) return *w;
    WQ_RETURN_IF_ERROR(NeedCheckpoint(head ? "model.norm" : "model.embed_tokens"));
    if (head && s_.config->tie_word_embeddings) {
      model::LlamaWeights out;
      WQ_ASSIGN_OR_RETURN(out.final_norm,
                          s_.checkpoint->LoadTensor("model.norm.weight", {s_.config->hidden_size}));
      return out;
    }
    model::LoadRequest r;
    r.first_layer = 0;
    r.end_layer = 0;
    r.embeddings = !head;
    r.head = head;
    return s_.checkpoint->LoadWeights(r);
  }

 private:
  absl::Status NeedCheckpoint(const std::string& what) const {
    if (s_.checkpoint != nullptr) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("export: ", what, " is neither held nor in a checkpoint"));
  }
  const PartSource& s_;
};

absl::Status StreamFixed(ExportFile file, const ExportShare& share, const SourceReader& src,
                         const model::LlamaConfig& cfg, PartSink* out) {
  const model::Dtype dtype = file == ExportFile::kQuantized ? FixedDtype(cfg) : model::Dtype::kF16;
  if (share.embeddings) {
    WQ_ASSIGN_OR_RETURN(const model::LlamaWeights w, src.Fixed(/*head=*/false));
    WQ_RETURN_IF_ERROR(AppendTensor(out, "model.embed_tokens.weight", w.embed_tokens, dtype));
  }
  for (int64_t l = share.first_layer; l < share.end_layer; ++l) {
    for (bool post : {false, true}) {
      WQ_ASSIGN_OR_RETURN(const at::Tensor t, src.Norm(l, post));
      WQ_RETURN_IF_ERROR(AppendTensor(out, NormName(l, post), t, dtype));
    }
  }
  if (!share.head) return absl::OkStatus();
  WQ_ASSIGN_OR_RETURN(const model::LlamaWeights w, src.Fixed(/*head=*/true));
  WQ_RETURN_IF_ERROR(AppendTensor(out, "model.norm.weight", w.final_norm, dtype));
  if (cfg.tie_word_embeddings) return absl::OkStatus();
  return AppendTensor(out, "lm_head.weight", w.lm_head, dtype);
}

absl::Status StreamLayers(ExportFile file, const ExportShare& share, const PartSource& s,
                          const SourceReader& src, PartSink* out) {
  const quant::StageFits& fits = *s.fits;
  const std::vector<plan::Unit>& units = fits.table().units;
  size_t i = 0;
  while (i < units.size() && units[i].layer < share.first_layer) ++i;
  for (int64_t l = share.first_layer; l < share.end_layer; ++l) {
    WQ_ASSIGN_OR_RETURN(model::LayerWeights lw, src.Layer(l));
    if (file == ExportFile::kQuantized && fits.compensation() != nullptr) {
      // With error compensation the codes are those of the compensated weights each
      // entry was quantized from, as the plan's evaluation computes them.
      std::array<at::Tensor, model::kNumMatrices> lin, from;
      for (int m = 0; m < model::kNumMatrices; ++m) {
        lin[m] = lw.linear[m].to(at::kCPU, at::kFloat, /*non_blocking=*/false, /*copy=*/true);
        lin[m] = lin[m].contiguous();
      }
      fits.ApplyToLayer(l, *s.actions, &lin, &from);
      for (int m = 0; m < model::kNumMatrices; ++m) lw.linear[m] = from[m];
    }
    if (file == ExportFile::kQuantized) {
      for (; i < units.size() && units[i].layer == l; ++i) {
        const plan::Unit& u = units[i];
        const at::Tensor W = lw.linear[u.matrix]
                                 .slice(1, u.col_begin, u.col_begin + u.cols)
                                 .to(at::kCPU, at::kFloat)
                                 .contiguous();
        WQ_RETURN_IF_ERROR(AppendUnit(fits, i, plan::kAllActions[(*s.actions)[u.id]], W, out));
      }
      continue;
    }
    // One layer's plan weights at a time, exactly as the evaluator computes them.
    std::array<at::Tensor, model::kNumMatrices> lin;
    for (int m = 0; m < model::kNumMatrices; ++m) {
      lin[m] = lw.linear[m].to(at::kCPU, at::kFloat, /*non_blocking=*/false, /*copy=*/true);
      lin[m] = lin[m].contiguous();
    }
    fits.ApplyToLayer(l, *s.actions, &lin);
    for (int m = 0; m < model::kNumMatrices; ++m) {
      WQ_RETURN_IF_ERROR(AppendTensor(out,
                                      model::LinearTensorName(l, static_cast<model::Matrix>(m)),
                                      lin[m], model::Dtype::kF16));
    }
  }
  return absl::OkStatus();
}

}  // namespace

const char* ExportFileName(ExportFile file) {
  return file == ExportFile::kQuantized ? "quantized" : "fake_quant";
}
const char* ExportPartName(ExportPart part) {
  return part == ExportPart::kLayers ? "layers" : "fixed";
}

ExportShare WholeModelShare(const model::LlamaConfig& config) {
  return {0, config.num_hidden_layers, true, true};
}

std::vector<std::pair<size_t, ExportPart>> PartOrder(ExportFile file, size_t num_shares) {
  std::vector<std::pair<size_t, ExportPart>> out;
  const ExportPart first =
      file == ExportFile::kQuantized ? ExportPart::kLayers : ExportPart::kFixed;
  const ExportPart second = first == ExportPart::kLayers ? ExportPart::kFixed : ExportPart::kLayers;
  for (size_t s = 0; s < num_shares; ++s) out.emplace_back(s, first);
  for (size_t s = 0; s < num_shares; ++s) out.emplace_back(s, second);
  return out;
}

model::Dtype FixedDtype(const model::LlamaConfig& c) {
  if (c.torch_dtype == "float32") return model::Dtype::kF32;
  if (c.torch_dtype == "bfloat16") return model::Dtype::kBF16;
  return model::Dtype::kF16;
}

absl::StatusOr<std::vector<model::StreamTensor>> DeclarePart(ExportFile file, ExportPart part,
                                                             const ExportShare& share,
                                                             const model::LlamaConfig& c,
                                                             const plan::UnitTable& table,
                                                             const std::vector<int>& actions) {
  if (share.first_layer < 0 || share.end_layer < share.first_layer ||
      share.end_layer > c.num_hidden_layers) {
    return absl::InvalidArgumentError(absl::StrCat("export: layers [", share.first_layer, ", ",
                                                   share.end_layer, ") outside the model's ",
                                                   c.num_hidden_layers));
  }
  std::vector<model::StreamTensor> out;
  if (part == ExportPart::kFixed) {
    const model::Dtype dtype = file == ExportFile::kQuantized ? FixedDtype(c) : model::Dtype::kF16;
    if (share.embeddings) {
      out.push_back({"model.embed_tokens.weight", dtype, {c.vocab_size, c.hidden_size}});
    }
    for (int64_t l = share.first_layer; l < share.end_layer; ++l) {
      out.push_back({NormName(l, false), dtype, {c.hidden_size}});
      out.push_back({NormName(l, true), dtype, {c.hidden_size}});
    }
    if (share.head) {
      out.push_back({"model.norm.weight", dtype, {c.hidden_size}});
      if (!c.tie_word_embeddings) {
        out.push_back({"lm_head.weight", dtype, {c.vocab_size, c.hidden_size}});
      }
    }
    return out;
  }
  if (file == ExportFile::kFakeQuant) {
    for (int64_t l = share.first_layer; l < share.end_layer; ++l) {
      for (int m = 0; m < model::kNumMatrices; ++m) {
        out.push_back({model::LinearTensorName(l, static_cast<model::Matrix>(m)),
                       model::Dtype::kF16, LinearShape(c, m)});
      }
    }
    return out;
  }
  for (const plan::Unit& u : table.units) {
    if (u.layer < share.first_layer || u.layer >= share.end_layer) continue;
    if (u.id >= actions.size() || actions[u.id] < 0 || actions[u.id] >= plan::kNumActions) {
      return absl::InvalidArgumentError(absl::StrCat("export: no valid action for unit ", u.id,
                                                     " (plan of ", actions.size(), " units)"));
    }
    WQ_ASSIGN_OR_RETURN(std::vector<model::StreamTensor> ut,
                        UnitTensors(u, plan::kAllActions[actions[u.id]]));
    for (model::StreamTensor& t : ut) out.push_back(std::move(t));
  }
  return out;
}

absl::StatusOr<std::vector<model::StreamTensor>> DeclareFile(ExportFile file,
                                                             const std::vector<ExportShare>& shares,
                                                             const model::LlamaConfig& config,
                                                             const plan::UnitTable& table,
                                                             const std::vector<int>& actions) {
  int64_t next = 0;
  for (size_t s = 0; s < shares.size(); ++s) {
    if (shares[s].first_layer != next || shares[s].embeddings != (s == 0) ||
        shares[s].head != (s + 1 == shares.size())) {
      return absl::InvalidArgumentError(absl::StrCat("export: share ", s, " (layers [",
                                                     shares[s].first_layer, ", ",
                                                     shares[s].end_layer, ")) out of order"));
    }
    next = shares[s].end_layer;
  }
  if (next != config.num_hidden_layers) {
    return absl::InvalidArgumentError(absl::StrCat("export: the shares cover ", next, " of ",
                                                   config.num_hidden_layers, " layers"));
  }
  std::vector<model::StreamTensor> out;
  for (const auto& [s, part] : PartOrder(file, shares.size())) {
    WQ_ASSIGN_OR_RETURN(std::vector<model::StreamTensor> p,
                        DeclarePart(file, part, shares[s], config, table, actions));
    for (model::StreamTensor& t : p) out.push_back(std::move(t));
  }
  return out;
}

std::map<std::string, std::string> FileMetadata(ExportFile file, const plan::UnitTable& t,
                                                const plan::Plan& plan) {
  if (file == ExportFile::kFakeQuant) return {{"windquant_plan_id", plan.plan_id}};
  std::vector<std::string> names;
  for (int a : plan.actions) names.emplace_back(plan::ActionName(plan::kAllActions[a]));
  return {{"windquant_format", kQuantizedFormat},
          {"windquant_format_version", kQuantizedFormatVersion},
          {"chunk_size", absl::StrCat(t.chunk_size)},
          {"salient_fraction", absl::StrCat(t.salient_fraction)},
          {"plan_id", plan.plan_id},
          {"model_fingerprint", t.fingerprint},
          {"effective_bits", absl::StrCat(plan.Totals(t).effective_bits)},
          {"actions", absl::StrJoin(names, ",")}};
}

std::string ExportConfigJson(ExportFile file, const model::LlamaConfig& cfg) {
  model::LlamaConfig config = cfg;
  if (file == ExportFile::kFakeQuant || FixedDtype(cfg) == model::Dtype::kF16) {
    config.torch_dtype = "float16";
  }
  return config.ToJson();
}

std::string ExportTensorFile(ExportFile file) {
  return file == ExportFile::kQuantized ? kQuantizedFileName : "model.safetensors";
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

PartSink::PartSink(std::vector<model::StreamTensor> declared, Out out, size_t piece_bytes)
    : declared_(std::move(declared)), out_(std::move(out)), piece_bytes_(piece_bytes) {
  uint64_t end = 0;
  for (const model::StreamTensor& t : declared_) ends_.push_back(end += t.num_bytes());
  while (cursor_ < ends_.size() && ends_[cursor_] == 0) ++cursor_;
}

absl::Status PartSink::Expect(const std::string& name, uint64_t bytes) const {
  if (bytes == 0) return absl::OkStatus();
  const model::StreamTensor* t = cursor_ < ends_.size() ? &declared_[cursor_] : nullptr;
  const uint64_t start = cursor_ == 0 ? 0 : ends_[cursor_ - 1];
  if (t == nullptr || t->name != name || t->num_bytes() != bytes || written_ != start) {
    return absl::InternalError(absl::StrCat(
        "export: tensor ", name, " (", bytes, " bytes) where the declaration has ",
        t == nullptr ? "nothing" : t->name, " (", t == nullptr ? 0 : t->num_bytes(), " bytes)"));
  }
  return absl::OkStatus();
}

absl::Status PartSink::Append(std::string_view bytes) {
  if (written_ + bytes.size() > bytes_declared()) {
    return absl::InternalError(absl::StrCat("export: ", written_ + bytes.size(),
                                            " bytes for a part declared with ", bytes_declared()));
  }
  written_ += bytes.size();
  while (cursor_ < ends_.size() && written_ >= ends_[cursor_]) ++cursor_;
  if (piece_bytes_ == 0) return out_(bytes);
  while (!bytes.empty()) {
    const size_t take = std::min(bytes.size(), piece_bytes_ - buffer_.size());
    buffer_.append(bytes.data(), take);
    bytes.remove_prefix(take);
    if (buffer_.size() == piece_bytes_) {
      WQ_RETURN_IF_ERROR(out_(buffer_));
      buffer_.clear();
    }
  }
  return absl::OkStatus();
}

absl::Status PartSink::Finish() {
  if (written_ != bytes_declared()) {
    return absl::FailedPreconditionError(
        absl::StrCat("export: ", bytes_declared() - written_, " bytes of the part missing (tensor ",
                     cursor_ < declared_.size() ? declared_[cursor_].name : "?", ")"));
  }
  if (!buffer_.empty()) WQ_RETURN_IF_ERROR(out_(buffer_));
  buffer_.clear();
  return absl::OkStatus();
}

absl::Status StreamPart(ExportFile file, ExportPart part, const ExportShare& share,
                        const PartSource& source, PartSink* sink) {
  if (source.config == nullptr ||
      (part == ExportPart::kLayers && (source.fits == nullptr || source.actions == nullptr))) {
    return absl::InvalidArgumentError("export: a part needs the config, and fits and plan");
  }
  if (part == ExportPart::kLayers && (share.first_layer < source.fits->first_layer() ||
                                      share.end_layer > source.fits->end_layer())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "export: fits of layers [", source.fits->first_layer(), ", ", source.fits->end_layer(),
        ") cannot export layers [", share.first_layer, ", ", share.end_layer, ")"));
  }
  const SourceReader src(source);
  try {
    c10::NoGradGuard no_grad;
    if (part == ExportPart::kFixed) {
      WQ_RETURN_IF_ERROR(StreamFixed(file, share, src, *source.config, sink));
    } else {
      WQ_RETURN_IF_ERROR(StreamLayers(file, share, source, src, sink));
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("export: ", e.what_without_backtrace()));
  }
  return sink->Finish();
}

}  // namespace windquant::exporter
