#include "common/quant/unit_table_builder.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace windquant::quant {
namespace {

float Clip(double v, double lo, double hi) { return static_cast<float>(std::clamp(v, lo, hi)); }

int64_t ChunksOf(int64_t cols, int64_t chunk_size) { return (cols + chunk_size - 1) / chunk_size; }

// In-features of each decoder linear: q,k,v,gate,up read the hidden state,
// o reads the attention output (heads * head_dim), down reads the MLP product.
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

}  // namespace

int64_t UnitsPerLayer(const model::LlamaConfig& config, int64_t chunk_size) {
  int64_t n = 0;
  for (int m = 0; m < model::kNumMatrices; ++m) n += ChunksOf(InFeatures(config, m), chunk_size);
  return n;
}

int64_t FixedFp16Params(const model::LlamaConfig& c) {
  int64_t n = c.vocab_size * c.hidden_size;                       // embed_tokens
  if (!c.tie_word_embeddings) n += c.vocab_size * c.hidden_size;  // lm_head
  n += c.hidden_size * (2 * c.num_hidden_layers + 1);             // RMSNorm weights
  return n;
}

absl::StatusOr<StageQuantization> BuildStageQuantization(const model::LlamaWeights& weights,
                                                         const ActivationStats& stats,
                                                         const UnitTableOptions& options,
                                                         const std::string& fingerprint) {
  const model::LlamaConfig& cfg = weights.config;
  const int64_t C = options.chunk_size;
  if (C < 1) return absl::InvalidArgumentError("quant.chunk_size: must be >= 1");
  const int64_t first = weights.first_layer;
  const int64_t end = first + static_cast<int64_t>(weights.layers.size());
  if (stats.first_layer != first || static_cast<int64_t>(stats.layers.size()) != end - first) {
    return absl::InvalidArgumentError("calibration statistics cover other layers than the stage");
  }
  const int64_t per_layer = UnitsPerLayer(cfg, C);
  const int64_t total = per_layer * (end - first);

  StageQuantization out;
  UnitTable& table = out.table;
  table.fingerprint = fingerprint;
  table.first_layer = static_cast<int32_t>(first);
  table.end_layer = static_cast<int32_t>(end);
  table.num_layers = static_cast<int32_t>(cfg.num_hidden_layers);
  table.chunk_size = static_cast<int32_t>(C);
  table.salient_fraction = options.quantizer.salient_fraction;
  table.fixed_fp16_params = FixedFp16Params(cfg);
  out.weights.first_layer = first;
  out.weights.layers.resize(end - first);

  std::vector<Action> all(kAllActions.begin(), kAllActions.end());
  at::NoGradGuard no_grad;
  int64_t done = 0;
  for (int64_t l = first; l < end; ++l) {
    const size_t layer_begin = table.units.size();
    double layer_mass = 0;
    for (int m = 0; m < model::kNumMatrices; ++m) {
      const at::Tensor W = weights.layers[l - first].linear[m].to(at::kFloat).contiguous();
      const LinearInputStats& st = stats.at(l, static_cast<model::Matrix>(m));
      if (!st.mean_abs.defined() || st.mean_abs.numel() != W.size(1)) {
        return absl::InvalidArgumentError(
            absl::StrCat("calibration statistics missing for ",
                         model::LinearTensorName(l, static_cast<model::Matrix>(m))));
      }
      const at::Tensor s = st.mean_abs;
      // Matrix-level normalisers.
      const double w_std = std::max(W.std().item<double>(), 1e-12);
      const double w_var = w_std * w_std;
      const double w_absmax = std::max(W.abs().max().item<double>(), 1e-12);
      const double s_mean = std::max(s.mean().item<double>(), 1e-12);
      std::array<at::Tensor, kNumActions>& dq = out.weights.layers[l - first][m];
      for (int a = 0; a < kNumActions; ++a) dq[a] = at::empty_like(W);

      const int64_t chunks = ChunksOf(W.size(1), C);
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t c0 = c * C, c1 = std::min<int64_t>(c0 + C, W.size(1));
        const at::Tensor Wu = W.slice(1, c0, c1).contiguous();
        const at::Tensor su = s.slice(0, c0, c1).contiguous();
        WQ_ASSIGN_OR_RETURN(UnitFit fit, FitUnit(Wu, su, all, options.quantizer));
        Unit u;
        u.id = static_cast<uint32_t>(l * per_layer + (table.units.size() - layer_begin));
        u.layer = static_cast<int32_t>(l);
        u.matrix = m;
        u.chunk = static_cast<int32_t>(c);
        u.rows = Wu.size(0);
        u.cols = Wu.size(1);
        u.col_begin = c0;
        u.salient_count = fit.salient.count;
        for (int a = 0; a < kNumActions; ++a) {
          const ActionFit* f = fit.Find(kAllActions[a]);
          u.bits[a] = f->effective_bits;
          u.error[a] = f->error;
          dq[a].slice(1, c0, c1).copy_(f->dequant);
        }
        // Static features (normalisations documented in unit_table.h).
        const double mean = Wu.mean().item<double>();
        const double var = Wu.var(/*unbiased=*/false).item<double>();
        const double ustd = std::sqrt(std::max(var, 1e-24));
        u.features[kFeatWeightMean] = Clip(mean / w_std, -1, 1);
        u.features[kFeatWeightVar] = Clip(std::log2(std::max(var, 1e-24) / w_var) / 4.0, -1, 1);
        u.features[kFeatSparsity] =
            Clip((Wu.abs() < 0.01 * w_absmax).to(at::kFloat).mean().item<double>(), 0, 1);
        u.features[kFeatOutlierFrac] = Clip(
            10.0 * ((Wu - mean).abs() > 3.0 * ustd).to(at::kFloat).mean().item<double>(), 0, 1);
        u.features[kFeatActMeanRel] =
            Clip(std::log2(std::max(su.mean().item<double>(), 1e-12) / s_mean) / 4.0, -1, 1);
        u.features[kFeatActMaxRel] =
            Clip(std::log2(std::max(su.max().item<double>(), 1e-12) / s_mean) / 4.0, -1, 1);
        const double mass = (Wu.abs() * su.unsqueeze(0)).sum().item<double>();
        u.features[kFeatMassShare] = static_cast<float>(mass);  // normalised per layer below
        layer_mass += mass;
        u.features[kFeatIsAttention] = m <= static_cast<int>(model::Matrix::kO) ? 1.f : 0.f;
        u.features[kFeatIsMlp] = m > static_cast<int>(model::Matrix::kO) ? 1.f : 0.f;
        u.features[kFeatDepth] =
            cfg.num_hidden_layers > 1
                ? static_cast<float>(l) / static_cast<float>(cfg.num_hidden_layers - 1)
                : 0.f;
        const double e2 = u.error[ActionIndex(Action::k2)], e4 = u.error[ActionIndex(Action::k4)];
        u.features[kFeatErrRatio] =
            Clip(std::log10(std::max(e2, 1e-12) / std::max(e4, 1e-12)) / 2.0, 0, 1);
        table.units.push_back(u);
        if (options.progress) options.progress(++done, total);
      }
    }
    // Mass share: unit mass / layer mass, times the units in the layer (1 = average unit),
    // log2-scaled and clipped to [-1, 1].
    const double units_in_layer = static_cast<double>(table.units.size() - layer_begin);
    for (size_t i = layer_begin; i < table.units.size(); ++i) {
      float& f = table.units[i].features[kFeatMassShare];
      const double share = layer_mass > 0 ? f / layer_mass * units_in_layer : 1.0;
      f = Clip(std::log2(std::max(share, 1e-6)) / 4.0, -1, 1);
    }
  }
  return out;
}

}  // namespace windquant::quant
