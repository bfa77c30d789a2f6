#include "common/export/quantized_checkpoint.h"

#include <c10/core/GradMode.h>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/status_macros.h"
#include "common/export/packing.h"
#include "common/model/safetensors.h"
#include "common/plan/action.h"
#include "common/plan/effective_bits.h"

namespace windquant::exporter {
namespace {

int64_t InFeatures(const model::LlamaConfig& c, int m) {
  switch (static_cast<model::Matrix>(m)) {
    case model::Matrix::kO:
      return c.num_attention_heads * c.head_dim;
    case model::Matrix::kDown:
      return c.intermediate_size;
    default:
      return c.hidden_size;
  }
}
int64_t OutFeatures(const model::LlamaConfig& c, int m) {
  switch (static_cast<model::Matrix>(m)) {
    case model::Matrix::kQ:
      return c.num_attention_heads * c.head_dim;
    case model::Matrix::kK:
    case model::Matrix::kV:
      return c.num_key_value_heads * c.head_dim;
    case model::Matrix::kGate:
    case model::Matrix::kUp:
      return c.intermediate_size;
    default:
      return c.hidden_size;
  }
}

class Reader {
 public:
  explicit Reader(const model::SafetensorsFile& f) : f_(f) {}

  absl::StatusOr<const model::TensorInfo*> Get(const std::string& name, model::Dtype dtype,
                                               const std::vector<int64_t>& shape) const {
    const model::TensorInfo* info = f_.Find(name);
    if (info == nullptr)
      return absl::DataLossError(absl::StrCat(f_.path(), ": tensor ", name, " missing"));
    if (info->dtype != dtype || info->shape != shape) {
      return absl::DataLossError(
          absl::StrCat(f_.path(), ": tensor ", name, " has dtype ", model::DtypeName(info->dtype),
                       " or shape other than expected (", model::DtypeName(dtype), ")"));
    }
    return info;
  }
  // F16 tensor as float32.
  absl::StatusOr<at::Tensor> Half(const std::string& name,
                                  const std::vector<int64_t>& shape) const {
    WQ_ASSIGN_OR_RETURN(const model::TensorInfo* info, Get(name, model::Dtype::kF16, shape));
    at::Tensor h = at::empty(shape, at::kHalf);
    std::memcpy(h.data_ptr(), f_.Data(*info).data(), info->num_bytes());
    return h.to(at::kFloat);
  }
  // A tensor stored F16, BF16 or F32 (the embeddings and norms: the model's own
  // dtype) as float32.
  absl::StatusOr<at::Tensor> Float(const std::string& name,
                                   const std::vector<int64_t>& shape) const {
    const model::TensorInfo* found = f_.Find(name);
    model::Dtype dtype = model::Dtype::kF16;  // what Get names when it is another
    if (found != nullptr &&
        (found->dtype == model::Dtype::kF32 || found->dtype == model::Dtype::kBF16)) {
      dtype = found->dtype;
    }
    WQ_ASSIGN_OR_RETURN(const model::TensorInfo* info, Get(name, dtype, shape));
    const at::ScalarType type = dtype == model::Dtype::kF32    ? at::kFloat
                                : dtype == model::Dtype::kBF16 ? at::kBFloat16
                                                               : at::kHalf;
    at::Tensor t = at::empty(shape, type);
    std::memcpy(t.data_ptr(), f_.Data(*info).data(), info->num_bytes());
    return t.to(at::kFloat);
  }
  template <typename T>
  absl::StatusOr<std::vector<T>> Raw(const std::string& name, model::Dtype dtype,
                                     int64_t count) const {
    WQ_ASSIGN_OR_RETURN(const model::TensorInfo* info, Get(name, dtype, {count}));
    std::vector<T> out(count);
    std::memcpy(out.data(), f_.Data(*info).data(), info->num_bytes());
    return out;
  }

 private:
  const model::SafetensorsFile& f_;
};

// The unit's salient positions (ascending, in [0, n)) and their values; none when
// the unit has no salient tensors.
struct Salient {
  std::vector<int64_t> index;
  at::Tensor values;  // float32 [k]: INT8 code * FP16 scale
};

absl::StatusOr<Salient> ReadSalient(const model::SafetensorsFile& file, const Reader& r,
                                    const std::string& path, const std::string& prefix, int64_t n) {
  Salient out;
  const model::TensorInfo* values = file.Find(prefix + ".salient_values");
  if (values == nullptr) return out;
  const int64_t k = values->num_elements();
  const int bits = plan::IndexBits(n);
  if (k > n || bits < 1) {
    return absl::DataLossError(
        absl::StrCat(path, ": ", prefix, ".salient_values: ", k, " entries in a unit of ", n));
  }
  WQ_ASSIGN_OR_RETURN(
      const std::vector<uint8_t> packed,
      r.Raw<uint8_t>(prefix + ".salient_index", model::Dtype::kU8, PackedUintBytes(k, bits)));
  absl::StatusOr<std::vector<uint32_t>> index = UnpackUint(packed, bits, k);
  if (!index.ok()) {
    return absl::DataLossError(
        absl::StrCat(path, ": ", prefix, ".salient_index: ", index.status().message()));
  }
  for (int64_t j = 0; j < k; ++j) {
    const int64_t p = (*index)[j];
    if (p >= n || (j > 0 && p <= out.index.back())) {
      return absl::DataLossError(
          absl::StrCat(path, ": ", prefix, ".salient_index: ", p, " out of range or order"));
    }
    out.index.push_back(p);
  }
  WQ_ASSIGN_OR_RETURN(std::vector<int8_t> vals,
                      r.Raw<int8_t>(prefix + ".salient_values", model::Dtype::kI8, k));
  WQ_ASSIGN_OR_RETURN(const at::Tensor scale, r.Half(prefix + ".salient_scale", {1}));
  out.values = at::from_blob(vals.data(), {k}, at::kChar).to(at::kFloat) * scale.item<float>();
  return out;
}

// Dequantizes one unit exactly as the fits do (stage_fits.h): levels * scale (+ offset)
// for the non-salient entries, then the salient ones (INT8 code * FP16 scale).
absl::StatusOr<at::Tensor> ReadUnit(const model::SafetensorsFile& file, const Reader& r,
                                    const std::string& path, const std::string& prefix,
                                    plan::Action a, int64_t rows, int64_t cols) {
  if (a == plan::Action::k16) return r.Half(prefix + ".weight", {rows, cols});
  const int64_t n = rows * cols;
  WQ_ASSIGN_OR_RETURN(const Salient salient, ReadSalient(file, r, path, prefix, n));
  const int64_t kept = n - static_cast<int64_t>(salient.index.size());
  WQ_ASSIGN_OR_RETURN(const int64_t nbytes, PackedCodesBytes(a, kept));
  WQ_ASSIGN_OR_RETURN(const std::vector<uint8_t> packed,
                      r.Raw<uint8_t>(prefix + ".codes", model::Dtype::kU8, nbytes));
  absl::StatusOr<std::vector<int8_t>> codes = UnpackCodes(a, packed, kept);
  if (!codes.ok())
    return absl::DataLossError(
        absl::StrCat(path, ": ", prefix, ".codes: ", codes.status().message()));
  // Every entry's code; salient positions get one of the action's codes (1), overwritten below.
  std::vector<int8_t> all(n, 1);
  for (int64_t e = 0, c = 0, s = 0; e < n; ++e) {
    if (s < static_cast<int64_t>(salient.index.size()) && salient.index[s] == e) {
      ++s;
      continue;
    }
    all[e] = (*codes)[c++];
  }
  const at::Tensor q = at::from_blob(all.data(), {rows, cols}, at::kChar).to(at::kFloat);
  WQ_ASSIGN_OR_RETURN(const at::Tensor scales, r.Half(prefix + ".scales", {rows}));
  at::Tensor w;
  if (a == plan::Action::k1) {
    WQ_ASSIGN_OR_RETURN(const at::Tensor offsets, r.Half(prefix + ".offsets", {rows}));
    w = q * scales.unsqueeze(1) + offsets.unsqueeze(1);
  } else if (a == plan::Action::k2) {
    w = (q + 0.5) * scales.unsqueeze(1);
  } else {
    w = q * scales.unsqueeze(1);
  }
  if (!salient.index.empty()) {
    const at::Tensor index = at::from_blob(const_cast<int64_t*>(salient.index.data()),
                                           {static_cast<int64_t>(salient.index.size())}, at::kLong);
    w.view({-1}).index_put_({index}, salient.values);
  }
  return w;
}

// The metadata's comma-separated action names as action indices.
absl::StatusOr<std::vector<int>> ParseActions(const std::string& path, const std::string& names) {
  std::vector<int> out;
  for (const std::string& name :
       std::vector<std::string>(absl::StrSplit(names, ',', absl::SkipEmpty()))) {
    absl::StatusOr<plan::Action> a = plan::ParseAction(name);
    if (!a.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": metadata actions: unit ", out.size(),
                                                     ": unknown action \"", name, "\""));
    }
    out.push_back(plan::ActionIndex(*a));
  }
  return out;
}

// Checks (without decoding) that unit `prefix` has the tensors its action implies, with
// their dtypes and sizes.
absl::Status CheckUnit(const model::SafetensorsFile& file, const Reader& r, const std::string& path,
                       const std::string& prefix, plan::Action a, int64_t rows, int64_t cols) {
  if (a == plan::Action::k16)
    return r.Get(prefix + ".weight", model::Dtype::kF16, {rows, cols}).status();
  const int64_t n = rows * cols;
  int64_t k = 0;
  if (const model::TensorInfo* values = file.Find(prefix + ".salient_values"); values != nullptr) {
    k = values->num_elements();
    if (k > n || plan::IndexBits(n) < 1) {
      return absl::DataLossError(
          absl::StrCat(path, ": ", prefix, ".salient_values: ", k, " entries in a unit of ", n));
    }
    WQ_RETURN_IF_ERROR(r.Get(prefix + ".salient_values", model::Dtype::kI8, {k}).status());
    WQ_RETURN_IF_ERROR(r.Get(prefix + ".salient_index", model::Dtype::kU8,
                             {PackedUintBytes(k, plan::IndexBits(n))})
                           .status());
    WQ_RETURN_IF_ERROR(r.Get(prefix + ".salient_scale", model::Dtype::kF16, {1}).status());
  }
  WQ_ASSIGN_OR_RETURN(const int64_t nbytes, PackedCodesBytes(a, n - k));
  WQ_RETURN_IF_ERROR(r.Get(prefix + ".codes", model::Dtype::kU8, {nbytes}).status());
  WQ_RETURN_IF_ERROR(r.Get(prefix + ".scales", model::Dtype::kF16, {rows}).status());
  if (a == plan::Action::k1) {
    WQ_RETURN_IF_ERROR(r.Get(prefix + ".offsets", model::Dtype::kF16, {rows}).status());
  }
  return absl::OkStatus();
}

// Columns chunk by chunk of matrix m: the number of units of one matrix.
int64_t Chunks(int64_t in, int64_t chunk) { return (in + chunk - 1) / chunk; }

// model::LinearSource of a quantized checkpoint: each layer decoded when a forward
// reaches it. Open validated every tensor, so a failure here is corrupt code data.
class DecodedLinears : public model::LinearSource {
 public:
  explicit DecodedLinears(std::shared_ptr<const QuantizedCheckpoint> ckpt)
      : ckpt_(std::move(ckpt)) {}
  std::array<at::Tensor, model::kNumMatrices> Linears(
      int64_t layer, const model::LayerWeights& /*stored*/) const override {
    absl::StatusOr<std::array<at::Tensor, model::kNumMatrices>> out = ckpt_->DecodeLayer(layer);
    if (!out.ok()) throw std::runtime_error(std::string(out.status().message()));
    return *std::move(out);
  }

 private:
  std::shared_ptr<const QuantizedCheckpoint> ckpt_;
};

}  // namespace

std::string UnitTensorPrefix(int64_t layer, int matrix, int64_t chunk) {
  std::string name = model::LinearTensorName(layer, static_cast<model::Matrix>(matrix));
  name.resize(name.size() - std::string(".weight").size());
  return absl::StrCat(name, ".chunk.", chunk);
}

QuantizedCheckpoint::~QuantizedCheckpoint() = default;

std::string QuantizedCheckpoint::plan_id() const {
  auto it = metadata_.find("plan_id");
  return it == metadata_.end() ? "" : it->second;
}

absl::StatusOr<std::unique_ptr<QuantizedCheckpoint>> QuantizedCheckpoint::Open(
    const std::string& dir) {
  std::unique_ptr<QuantizedCheckpoint> out(new QuantizedCheckpoint());
  out->path_ = (std::filesystem::path(dir) / kQuantizedFileName).string();
  const std::string& path = out->path_;
  WQ_ASSIGN_OR_RETURN(out->config_, model::LlamaConfig::FromDirectory(dir));
  WQ_ASSIGN_OR_RETURN(out->file_, model::SafetensorsFile::Open(path));
  out->metadata_ = out->file_->metadata();
  auto meta = [&](const std::string& key) -> std::string {
    auto it = out->metadata_.find(key);
    return it == out->metadata_.end() ? "" : it->second;
  };
  if (meta("windquant_format") != kQuantizedFormat ||
      meta("windquant_format_version") != kQuantizedFormatVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not a ", kQuantizedFormat, " file (version ", kQuantizedFormatVersion, ")"));
  }
  if (!absl::SimpleAtoi(meta("chunk_size"), &out->chunk_size_) || out->chunk_size_ < 1) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": metadata chunk_size: bad value"));
  }
  WQ_ASSIGN_OR_RETURN(out->actions_, ParseActions(path, meta("actions")));
  const model::LlamaConfig& cfg = out->config_;
  int64_t per_layer = 0;
  for (int m = 0; m < model::kNumMatrices; ++m) {
    per_layer += Chunks(InFeatures(cfg, m), out->chunk_size_);
  }
  const int64_t units = per_layer * cfg.num_hidden_layers;
  if (static_cast<int64_t>(out->actions_.size()) != units) {
    return absl::InvalidArgumentError(absl::StrCat(path,
                                                   ": metadata actions: ", out->actions_.size(),
                                                   " entries, the model has ", units, " units"));
  }
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    out->layer_first_unit_.push_back(l * per_layer);
  }
  WQ_RETURN_IF_ERROR(out->CheckTensors());
  return out;
}

absl::Status QuantizedCheckpoint::CheckTensors() const {
  const Reader r(*file_);
  const model::LlamaConfig& cfg = config_;
  size_t unit = 0;
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    for (int m = 0; m < model::kNumMatrices; ++m) {
      const int64_t rows = OutFeatures(cfg, m), in = InFeatures(cfg, m);
      for (int64_t c = 0, c0 = 0; c0 < in; ++c, c0 += chunk_size_) {
        const int64_t cols = std::min(chunk_size_, in - c0);
        WQ_RETURN_IF_ERROR(CheckUnit(*file_, r, path_, UnitTensorPrefix(l, m, c),
                                     plan::kAllActions[actions_[unit++]], rows, cols));
      }
    }
  }
  try {
    // The fixed tensors are small next to the linears; reading them checks them.
    WQ_RETURN_IF_ERROR(FixedWeights().status());
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(path_, ": ", e.what_without_backtrace()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::array<at::Tensor, model::kNumMatrices>> QuantizedCheckpoint::DecodeLayer(
    int64_t l) const {
  const model::LlamaConfig& cfg = config_;
  if (l < 0 || l >= cfg.num_hidden_layers) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": no decoder layer ", l));
  }
  const Reader r(*file_);
  std::array<at::Tensor, model::kNumMatrices> out;
  size_t unit = layer_first_unit_[l];
  // The layer's tensors are contiguous in the file: release their pages at the end.
  model::TensorInfo span;
  span.begin = UINT64_MAX;
  try {
    c10::NoGradGuard no_grad;
    for (int m = 0; m < model::kNumMatrices; ++m) {
      const int64_t rows = OutFeatures(cfg, m), in = InFeatures(cfg, m);
      at::Tensor full = at::empty({rows, in}, at::kFloat);
      for (int64_t c = 0, c0 = 0; c0 < in; ++c, c0 += chunk_size_) {
        const int64_t cols = std::min(chunk_size_, in - c0);
        const plan::Action a = plan::kAllActions[actions_[unit++]];
        const std::string prefix = UnitTensorPrefix(l, m, c);
        WQ_ASSIGN_OR_RETURN(at::Tensor u, ReadUnit(*file_, r, path_, prefix, a, rows, cols));
        full.slice(1, c0, c0 + cols).copy_(u);
        const model::TensorInfo* first =
            file_->Find(prefix + (a == plan::Action::k16 ? ".weight" : ".codes"));
        span.begin = std::min(span.begin, first->begin);
        span.end = std::max(span.end, first->end);
      }
      out[m] = full;
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(path_, ": ", e.what_without_backtrace()));
  }
  if (span.begin < span.end) file_->ReleasePages(span);
  return out;
}

absl::StatusOr<model::LlamaWeights> QuantizedCheckpoint::FixedWeights() const {
  const model::LlamaConfig& cfg = config_;
  const Reader r(*file_);
  model::LlamaWeights w;
  w.config = cfg;
  w.first_layer = 0;
  try {
    c10::NoGradGuard no_grad;
    for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
      model::LayerWeights lw;
      WQ_ASSIGN_OR_RETURN(
          lw.input_layernorm,
          r.Float(absl::StrCat("model.layers.", l, ".input_layernorm.weight"), {cfg.hidden_size}));
      WQ_ASSIGN_OR_RETURN(
          lw.post_attention_layernorm,
          r.Float(absl::StrCat("model.layers.", l, ".post_attention_layernorm.weight"),
                  {cfg.hidden_size}));
      w.layers.push_back(std::move(lw));
    }
    WQ_ASSIGN_OR_RETURN(w.embed_tokens,
                        r.Float("model.embed_tokens.weight", {cfg.vocab_size, cfg.hidden_size}));
    WQ_ASSIGN_OR_RETURN(w.final_norm, r.Float("model.norm.weight", {cfg.hidden_size}));
    if (cfg.tie_word_embeddings) {
      w.lm_head = w.embed_tokens;
    } else {
      WQ_ASSIGN_OR_RETURN(w.lm_head, r.Float("lm_head.weight", {cfg.vocab_size, cfg.hidden_size}));
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(path_, ": ", e.what_without_backtrace()));
  }
  return w;
}

absl::StatusOr<model::LlamaWeights> QuantizedCheckpoint::ReadAll() const {
  WQ_ASSIGN_OR_RETURN(model::LlamaWeights w, FixedWeights());
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
    WQ_ASSIGN_OR_RETURN(w.layers[l].linear, DecodeLayer(l));
  }
  return w;
}

absl::StatusOr<std::shared_ptr<const model::LlamaModel>> QuantizedCheckpoint::Model(
    std::shared_ptr<const QuantizedCheckpoint> checkpoint, const model::ComputeOptions& compute) {
  WQ_ASSIGN_OR_RETURN(model::LlamaWeights fixed, checkpoint->FixedWeights());
  const std::string path = checkpoint->path_;
  try {
    return std::make_shared<const model::LlamaModel>(
        std::move(fixed), compute, std::make_shared<const DecodedLinears>(std::move(checkpoint)));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot build the model: ", e.what()));
  }
}

}  // namespace windquant::exporter
