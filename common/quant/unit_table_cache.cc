#include "common/quant/unit_table_cache.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/model/safetensors.h"
#include "common/model/safetensors_writer.h"
#include "nlohmann/json.hpp"
#include "windquant/v1/types.pb.h"

namespace windquant::quant {
namespace {

constexpr char kTableFile[] = "unit_table.pb";
constexpr char kFitsFile[] = "fits.safetensors";
constexpr char kStatsFile[] = "act_stats.safetensors";
constexpr char kManifestFile[] = "manifest.json";

// Incremental SHA-256 (base::Sha256Hex only hashes one buffer).
class Hasher {
 public:
  Hasher() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr);
  }
  void Add(const void* data, size_t n) { EVP_DigestUpdate(ctx_.get(), data, n); }
  // Length-prefixed, so that field boundaries are unambiguous.
  void AddField(std::string_view s) {
    const uint64_t n = s.size();
    Add(&n, sizeof(n));
    Add(s.data(), s.size());
  }
  void AddNumber(double v) { AddField(absl::StrCat(v)); }
  void AddTensor(const std::string& name, const at::Tensor& t) {
    AddField(name);
    if (!t.defined()) {
      AddField("undefined");
      return;
    }
    std::string shape;
    for (int64_t d : t.sizes()) absl::StrAppend(&shape, d, ",");
    AddField(shape);
    // The float32 bytes (the same fingerprint for a model stored F32 or widened),
    // converted a block at a time so that a large tensor is never copied whole.
    const at::Tensor flat = t.detach().reshape({-1});
    const uint64_t n = flat.numel() * sizeof(float);
    Add(&n, sizeof(n));
    constexpr int64_t kBlock = 1 << 22;
    for (int64_t b = 0; b < flat.numel(); b += kBlock) {
      const at::Tensor c = flat.slice(0, b, std::min(b + kBlock, flat.numel()))
                               .to(at::kCPU, at::kFloat)
                               .contiguous();
      Add(c.data_ptr<float>(), c.numel() * sizeof(float));
    }
  }
  std::string Hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_.get(), md, &len);
    static const char* kHex = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < len; ++i) {
      out.push_back(kHex[md[i] >> 4]);
      out.push_back(kHex[md[i] & 15]);
    }
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
};

std::string StatsName(int64_t layer, int matrix) {
  return absl::StrCat("layers.", layer, ".", model::kMatrixNames[matrix]);
}

}  // namespace

namespace {

void HashLayer(Hasher& h, int64_t l, const model::LayerWeights& lw) {
  for (int m = 0; m < model::kNumMatrices; ++m) {
    h.AddTensor(model::LinearTensorName(l, static_cast<model::Matrix>(m)), lw.linear[m]);
  }
  h.AddTensor(absl::StrCat("model.layers.", l, ".input_layernorm.weight"), lw.input_layernorm);
  h.AddTensor(absl::StrCat("model.layers.", l, ".post_attention_layernorm.weight"),
              lw.post_attention_layernorm);
}

// Everything after the decoder layers: `head`'s embeddings / final norm / lm_head, the
// calibration and the quant config.
std::string HashRest(Hasher& h, const model::LlamaWeights& head, const FingerprintInputs& in) {
  h.AddTensor("model.embed_tokens.weight", head.embed_tokens);
  h.AddTensor("model.norm.weight", head.final_norm);
  h.AddTensor("lm_head.weight", head.lm_head);
  h.AddField(in.calibration_text_sha256);
  h.AddNumber(in.calibration.samples);
  h.AddNumber(in.calibration.seq_len);
  h.AddField(absl::StrCat(in.calibration.seed));
  h.AddNumber(static_cast<double>(in.chunk_size));
  const QuantizerOptions& q = in.quantizer;
  for (double v :
       {q.salient_fraction, static_cast<double>(q.clip_grid_points), q.clip_min_ratio,
        static_cast<double>(q.ternary_grid_points), q.ternary_min_ratio, q.ternary_max_ratio,
        static_cast<double>(q.refine_steps), static_cast<double>(q.binarize_steps), q.switch_margin,
        static_cast<double>(q.fp16_neighbors)}) {
    // %.17g: two configs that differ in any bit hash differently.
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.17g", v);
    h.AddField(buf);
  }
  return h.Hex();
}

}  // namespace

absl::StatusOr<std::string> UnitTableFingerprint(const FingerprintInputs& in) {
  if (in.weights == nullptr) return absl::InvalidArgumentError("fingerprint: no weights");
  try {
    Hasher h;
    h.AddField("windquant.unit_table.v2");
    h.AddField(in.config_json);
    const model::LlamaWeights& w = *in.weights;
    h.AddNumber(static_cast<double>(w.first_layer));
    for (size_t i = 0; i < w.layers.size(); ++i) {
      HashLayer(h, w.first_layer + static_cast<int64_t>(i), w.layers[i]);
    }
    return HashRest(h, w, in);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("fingerprint: ", e.what_without_backtrace()));
  }
}

absl::StatusOr<std::string> UnitTableFingerprint(const FingerprintInputs& in,
                                                 const model::Checkpoint& checkpoint) {
  try {
    Hasher h;
    h.AddField("windquant.unit_table.v2");
    h.AddField(in.config_json);
    h.AddNumber(0.0);
    for (int64_t l = 0; l < checkpoint.config().num_hidden_layers; ++l) {
      model::LoadRequest r;
      r.first_layer = l;
      r.end_layer = l + 1;
      r.embeddings = false;
      r.head = false;
      WQ_ASSIGN_OR_RETURN(const model::LlamaWeights w, checkpoint.LoadWeights(r));
      HashLayer(h, l, w.layers[0]);
    }
    model::LoadRequest r;
    r.first_layer = 0;
    r.end_layer = 0;
    WQ_ASSIGN_OR_RETURN(const model::LlamaWeights head, checkpoint.LoadWeights(r));
    return HashRest(h, head, in);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("fingerprint: ", e.what_without_backtrace()));
  }
}

std::string FitCacheKey(const std::string& identity, int64_t first_layer, int64_t end_layer) {
  return base::Sha256Hex(
      absl::StrCat("windquant.fit_cache.v3\n", identity, "\nlayers=", first_layer, ",", end_layer));
}

std::string UnitTableCache::EntryDir(const std::string& key) const {
  return (std::filesystem::path(dir_) / key).string();
}

absl::StatusOr<CachedQuantization> UnitTableCache::Load(const std::string& key, int64_t first_layer,
                                                        int64_t end_layer) const {
  const std::filesystem::path d(EntryDir(key));
  const std::string manifest_path = (d / kManifestFile).string();
  if (!base::PathExists(manifest_path)) {
    return absl::NotFoundError(absl::StrCat("unit table cache: no entry ", d.string()));
  }
  WQ_ASSIGN_OR_RETURN(const std::string manifest_text, base::ReadFile(manifest_path));
  nlohmann::json manifest = nlohmann::json::parse(manifest_text, nullptr, false);
  if (manifest.is_discarded() || !manifest.is_object()) {
    return absl::DataLossError(absl::StrCat(manifest_path, ": not a JSON object"));
  }
  if (!manifest.contains("key") || !manifest["key"].is_string() ||
      manifest["key"].get<std::string>() != key) {
    return absl::DataLossError(absl::StrCat(manifest_path, ": holds another key"));
  }
  // Every file must hash to what the manifest says before anything parses it.
  for (const char* f : {kTableFile, kFitsFile, kStatsFile}) {
    const std::string path = (d / f).string();
    absl::StatusOr<std::string> bytes = base::ReadFile(path);
    if (!bytes.ok())
      return absl::DataLossError(absl::StrCat(path, ": unreadable: ", bytes.status().message()));
    if (!manifest.contains(f) || !manifest[f].is_string() ||
        manifest[f].get<std::string>() != base::Sha256Hex(*bytes)) {
      return absl::DataLossError(absl::StrCat(path, ": checksum does not match ", kManifestFile));
    }
  }
  plan::UnitTable table;
  {
    WQ_ASSIGN_OR_RETURN(const std::string bytes, base::ReadFile((d / kTableFile).string()));
    v1::UnitTable proto;
    if (!proto.ParseFromString(bytes)) {
      return absl::DataLossError(
          absl::StrCat((d / kTableFile).string(), ": not a windquant.v1.UnitTable"));
    }
    if (proto.fixed_param_bits() == 0) {  // counted the fixed tensors at 16 bits: refit
      return absl::NotFoundError(
          absl::StrCat((d / kTableFile).string(), ": a table without fixed_param_bits"));
    }
    absl::StatusOr<plan::UnitTable> t = plan::UnitTable::FromProto(proto);
    if (!t.ok())
      return absl::DataLossError(
          absl::StrCat((d / kTableFile).string(), ": ", t.status().message()));
    if (t->first_layer != first_layer || t->end_layer != end_layer) {
      return absl::DataLossError(absl::StrCat((d / kTableFile).string(), ": holds layers [",
                                              t->first_layer, ", ", t->end_layer, "), not [",
                                              first_layer, ", ", end_layer, ")"));
    }
    table = *std::move(t);
  }
  absl::StatusOr<StageFits> fits = StageFits::Load((d / kFitsFile).string(), std::move(table));
  if (!fits.ok()) return absl::DataLossError(fits.status().message());
  CachedQuantization out{*std::move(fits), {}};
  absl::StatusOr<std::unique_ptr<model::SafetensorsFile>> sf =
      model::SafetensorsFile::Open((d / kStatsFile).string());
  if (!sf.ok()) return absl::DataLossError(sf.status().message());
  out.stats.first_layer = first_layer;
  out.stats.layers.resize(end_layer - first_layer);
  for (int64_t l = first_layer; l < end_layer; ++l) {
    for (int m = 0; m < model::kNumMatrices; ++m) {
      const model::TensorInfo* info = (*sf)->Find(StatsName(l, m));
      if (info == nullptr || info->dtype != model::Dtype::kF32 || info->shape.size() != 1) {
        return absl::DataLossError(absl::StrCat((d / kStatsFile).string(), ": tensor ",
                                                StatsName(l, m), " missing or not 1-D F32"));
      }
      const std::string_view bytes = (*sf)->Data(*info);
      at::Tensor t = at::empty({info->shape[0]}, at::kFloat);
      std::memcpy(t.data_ptr<float>(), bytes.data(), bytes.size());
      out.stats.layers[l - first_layer][m].mean_abs = t;
    }
  }
  return out;
}

absl::Status UnitTableCache::Store(const std::string& key, const StageFits& fits,
                                   const ActivationStats& stats) const {
  const plan::UnitTable& table = fits.table();
  const std::filesystem::path d(EntryDir(key));
  v1::UnitTable proto;
  table.ToProto(&proto);
  const std::string table_bytes = proto.SerializeAsString();
  WQ_RETURN_IF_ERROR(base::WriteFileAtomic((d / kTableFile).string(), table_bytes));
  WQ_RETURN_IF_ERROR(fits.Save((d / kFitsFile).string()));
  model::SafetensorsWriter stats_file;
  for (size_t i = 0; i < stats.layers.size(); ++i) {
    for (int m = 0; m < model::kNumMatrices; ++m) {
      WQ_RETURN_IF_ERROR(
          stats_file.Add(StatsName(stats.first_layer + i, m), stats.layers[i][m].mean_abs));
    }
  }
  WQ_RETURN_IF_ERROR(stats_file.Write((d / kStatsFile).string()));
  nlohmann::json manifest = nlohmann::json::object();
  for (const char* f : {kTableFile, kFitsFile, kStatsFile}) {
    WQ_ASSIGN_OR_RETURN(const std::string bytes, base::ReadFile((d / f).string()));
    manifest[f] = base::Sha256Hex(bytes);
  }
  manifest["key"] = key;
  manifest["fingerprint"] = table.fingerprint;
  return base::WriteFileAtomic((d / kManifestFile).string(), manifest.dump(1) + "\n");
}

}  // namespace windquant::quant
