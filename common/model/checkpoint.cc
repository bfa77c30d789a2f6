// Checkpoint over memory-mapped safetensors files. The header parsing and
// validation are in safetensors.cc (no torch); this file maps tensor names to
// files, checks dtypes/shapes against config.json, and copies the tensors out.
#include "common/model/checkpoint.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/model/safetensors.h"

namespace windquant::model {
namespace {

constexpr char kSingleFile[] = "model.safetensors";
constexpr char kIndexFile[] = "model.safetensors.index.json";

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// The safetensors dtype config.json's torch_dtype promises, if it names one.
std::optional<Dtype> ConfigDtype(const std::string& torch_dtype) {
  if (torch_dtype == "float32") return Dtype::kF32;
  if (torch_dtype == "float16") return Dtype::kF16;
  if (torch_dtype == "bfloat16") return Dtype::kBF16;
  return std::nullopt;
}

// NaN or Inf weights would only show up as a NaN perplexity much later.
// Checked in slices so the temporary mask stays small (kFiniteSlice bytes)
// even for a 70B model's 1G-value embedding.
constexpr int64_t kFiniteSlice = int64_t{1} << 24;

absl::Status CheckFinite(const at::Tensor& t, const std::string& where) {
  const at::Tensor flat = t.reshape({-1});
  for (int64_t begin = 0; begin < flat.numel(); begin += kFiniteSlice) {
    const at::Tensor part = flat.slice(0, begin, std::min(flat.numel(), begin + kFiniteSlice));
    if (!at::isfinite(part).all().item<bool>()) {
      return absl::InvalidArgumentError(absl::StrCat(where, "contains NaN or Inf values"));
    }
  }
  return absl::OkStatus();
}

// The number of decoder layers the tensor names describe (model.layers.N.*).
int64_t CheckpointLayers(const std::vector<std::string>& names) {
  constexpr std::string_view kPrefix = "model.layers.";
  int64_t layers = 0;
  for (const std::string& name : names) {
    if (name.rfind(kPrefix, 0) != 0) continue;
    int64_t n = 0;
    size_t i = kPrefix.size();
    for (; i < name.size() && name[i] >= '0' && name[i] <= '9' && n < (int64_t{1} << 40); ++i) {
      n = n * 10 + (name[i] - '0');
    }
    if (i < name.size() && name[i] == '.') layers = std::max(layers, n + 1);
  }
  return layers;
}

class SafetensorsCheckpoint final : public Checkpoint {
 public:
  SafetensorsCheckpoint(std::string dir, LlamaConfig config)
      : dir_(std::move(dir)), config_(std::move(config)) {}

  absl::Status OpenSingle() {
    const std::string path = absl::StrCat(dir_, "/", kSingleFile);
    WQ_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(path));
    for (const TensorInfo& t : file->tensors()) where_[t.name] = {0, &t};
    files_.push_back(std::move(file));
    return absl::OkStatus();
  }

  absl::Status OpenSharded() {
    sharded_ = true;
    const std::string index_path = absl::StrCat(dir_, "/", kIndexFile);
    WQ_ASSIGN_OR_RETURN(std::string text, base::ReadFile(index_path));
    nlohmann::json index;
    try {
      index = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      return absl::InvalidArgumentError(absl::StrCat(index_path, ": invalid JSON: ", e.what()));
    }
    auto map = index.is_object() ? index.find("weight_map") : index.end();
    if (map == index.end() || !map->is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(index_path, ": weight_map: missing or not an object"));
    }
    std::map<std::string, size_t> shard_index;
    for (auto it = map->begin(); it != map->end(); ++it) {
      const std::string& name = it.key();
      if (!it.value().is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat(index_path, ": weight_map.", name, ": expected a shard file name"));
      }
      const std::string shard = it.value().get<std::string>();
      if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..") {
        return absl::InvalidArgumentError(absl::StrCat(
            index_path, ": weight_map.", name, ": invalid shard file name \"", shard, "\""));
      }
      auto [pos, inserted] = shard_index.emplace(shard, files_.size());
      if (inserted) {
        const std::string path = absl::StrCat(dir_, "/", shard);
        auto file = SafetensorsFile::Open(path);
        if (!file.ok()) {
          if (absl::IsNotFound(file.status())) {
            return absl::NotFoundError(absl::StrCat(path, ": missing shard file (named by ",
                                                    kIndexFile, " for tensor ", name, ")"));
          }
          return file.status();
        }
        files_.push_back(std::move(file).value());
      }
      const SafetensorsFile& f = *files_[pos->second];
      const TensorInfo* info = f.Find(name);
      if (info == nullptr) {
        return absl::DataLossError(
            absl::StrCat(index_path, ": tensor ", name, ": not in its shard ", f.path()));
      }
      where_[name] = {pos->second, info};
    }
    return absl::OkStatus();
  }

  const LlamaConfig& config() const override { return config_; }
  const std::string& directory() const override { return dir_; }

  std::vector<std::string> TensorNames() const override {
    std::vector<std::string> names;
    names.reserve(where_.size());
    for (const auto& [name, loc] : where_) names.push_back(name);
    return names;
  }

  absl::StatusOr<at::Tensor> LoadTensor(const std::string& name,
                                        const std::vector<int64_t>& shape) const override {
    return Load(name, shape, std::nullopt, /*widen=*/true);
  }

  absl::StatusOr<LlamaWeights> LoadWeights(const LoadRequest& request) const override {
    const LlamaConfig& c = config_;
    const int64_t end = request.end_layer < 0 ? c.num_hidden_layers : request.end_layer;
    if (request.first_layer < 0 || request.first_layer > end || end > c.num_hidden_layers) {
      return absl::InvalidArgumentError(absl::StrCat(dir_, ": LoadRequest: layers [",
                                                     request.first_layer, ", ", request.end_layer,
                                                     ") outside [0, ", c.num_hidden_layers, ")"));
    }
    const std::optional<Dtype> want = ConfigDtype(c.torch_dtype);
    const int64_t h = c.hidden_size, q = c.num_attention_heads * c.head_dim,
                  kv = c.num_key_value_heads * c.head_dim, in = c.intermediate_size;
    const std::array<std::vector<int64_t>, kNumMatrices> shapes = {
        std::vector<int64_t>{q, h}, {kv, h}, {kv, h}, {h, q}, {in, h}, {in, h}, {h, in}};

    LlamaWeights w;
    w.config = c;
    w.first_layer = request.first_layer;
    auto Load = [&](const std::string& name, const std::vector<int64_t>& shape,
                    std::optional<Dtype> dtype) {
      return this->Load(name, shape, dtype, request.widen_to_float32);
    };
    for (int64_t layer = request.first_layer; layer < end; ++layer) {
      LayerWeights lw;
      for (int m = 0; m < kNumMatrices; ++m) {
        WQ_ASSIGN_OR_RETURN(lw.linear[m],
                            Load(LinearTensorName(layer, static_cast<Matrix>(m)), shapes[m], want));
      }
      const std::string prefix = absl::StrCat("model.layers.", layer, ".");
      WQ_ASSIGN_OR_RETURN(lw.input_layernorm, Load(prefix + "input_layernorm.weight", {h}, want));
      WQ_ASSIGN_OR_RETURN(lw.post_attention_layernorm,
                          Load(prefix + "post_attention_layernorm.weight", {h}, want));
      w.layers.push_back(std::move(lw));
    }
    const std::vector<int64_t> embed_shape = {c.vocab_size, h};
    if (request.embeddings) {
      WQ_ASSIGN_OR_RETURN(w.embed_tokens, Load("model.embed_tokens.weight", embed_shape, want));
    }
    if (request.head) {
      WQ_ASSIGN_OR_RETURN(w.final_norm, Load("model.norm.weight", {h}, want));
      if (!c.tie_word_embeddings) {
        WQ_ASSIGN_OR_RETURN(w.lm_head, Load("lm_head.weight", embed_shape, want));
      } else if (w.embed_tokens.defined()) {
        w.lm_head = w.embed_tokens;  // tied: the same storage
      } else {
        WQ_ASSIGN_OR_RETURN(w.lm_head, Load("model.embed_tokens.weight", embed_shape, want));
      }
    }
    return w;
  }

  int64_t bytes_read() const override { return bytes_read_.load(); }

 private:
  struct Location {
    size_t file = 0;
    const TensorInfo* info = nullptr;
  };

  // The file errors should name for `name`: its shard, or the index / the
  // single file when the tensor is missing.
  std::string SourceName() const {
    return sharded_ ? absl::StrCat(dir_, "/", kIndexFile) : absl::StrCat(dir_, "/", kSingleFile);
  }

  absl::StatusOr<at::Tensor> Load(const std::string& name, const std::vector<int64_t>& shape,
                                  std::optional<Dtype> want, bool widen) const {
    auto it = where_.find(name);
    if (it == where_.end()) {
      return absl::NotFoundError(
          absl::StrCat(SourceName(), ": tensor ", name, ": missing from the checkpoint"));
    }
    const SafetensorsFile& file = *files_[it->second.file];
    const TensorInfo& info = *it->second.info;
    const std::string where = absl::StrCat(file.path(), ": tensor ", name, ": ");
    at::ScalarType type;
    switch (info.dtype) {
      case Dtype::kF32:
        type = at::kFloat;
        break;
      case Dtype::kF16:
        type = at::kHalf;
        break;
      case Dtype::kBF16:
        type = at::kBFloat16;
        break;
      default:
        return absl::InvalidArgumentError(
            absl::StrCat(where, "dtype ", DtypeName(info.dtype),
                         " cannot be loaded as float32 (F32, F16, BF16)"));
    }
    if (want.has_value() && *want != info.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(where, "dtype ", DtypeName(info.dtype),
                                                     " disagrees with config.json torch_dtype ",
                                                     config_.torch_dtype));
    }
    if (!shape.empty() && shape != info.shape) {
      return absl::InvalidArgumentError(absl::StrCat(where, "shape ", ShapeString(info.shape),
                                                     " disagrees with the expected ",
                                                     ShapeString(shape), " (config.json)"));
    }
    try {
      std::string_view bytes = file.Data(info);
      at::Tensor raw = at::empty(info.shape, at::TensorOptions().dtype(type));
      if (!bytes.empty()) std::memcpy(raw.data_ptr(), bytes.data(), bytes.size());
      file.ReleasePages(info);
      bytes_read_.fetch_add(static_cast<int64_t>(bytes.size()));
      WQ_RETURN_IF_ERROR(CheckFinite(raw, where));
      return type == at::kFloat || !widen ? raw : raw.to(at::kFloat);
    } catch (const c10::Error& e) {
      return absl::InternalError(absl::StrCat(where, e.what_without_backtrace()));
    }
  }

  std::string dir_;
  LlamaConfig config_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, Location> where_;
  bool sharded_ = false;
  mutable std::atomic<int64_t> bytes_read_{0};
};

}  // namespace

absl::StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::Open(const std::string& dir) {
  WQ_ASSIGN_OR_RETURN(LlamaConfig config, LlamaConfig::FromDirectory(dir));
  auto ckpt = std::make_unique<SafetensorsCheckpoint>(dir, std::move(config));
  if (base::PathExists(absl::StrCat(dir, "/", kIndexFile))) {
    WQ_RETURN_IF_ERROR(ckpt->OpenSharded());
  } else if (base::PathExists(absl::StrCat(dir, "/", kSingleFile))) {
    WQ_RETURN_IF_ERROR(ckpt->OpenSingle());
  } else {
    return absl::NotFoundError(absl::StrCat(dir, ": neither ", kSingleFile, " nor ", kIndexFile));
  }
  const int64_t layers = CheckpointLayers(ckpt->TensorNames());
  if (layers != ckpt->config().num_hidden_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, "/config.json: num_hidden_layers: ", ckpt->config().num_hidden_layers,
                     ", the checkpoint's tensors hold ", layers, " layers"));
  }
  return std::unique_ptr<Checkpoint>(std::move(ckpt));
}

}  // namespace windquant::model
