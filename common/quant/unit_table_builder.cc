#include "common/quant/unit_table_builder.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/plan/effective_bits.h"
#include "common/quant/fit_kernels.h"

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

// Matrix-level normalisers of the features, in double, in a fixed order.
struct MatrixStats {
  double std = 0;     // unbiased standard deviation of W
  double absmax = 0;  // max |W|
  double s_mean = 0;  // mean activation scale of the input
  bool finite = true;
};

MatrixStats ComputeMatrixStats(const float* w, int64_t n, const float* s, int64_t in) {
  MatrixStats st;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(w[i])) st.finite = false;
    sum += w[i];
    st.absmax = std::max(st.absmax, static_cast<double>(std::fabs(w[i])));
  }
  const double mean = n > 0 ? sum / n : 0.0;
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += (w[i] - mean) * (w[i] - mean);
  st.std = n > 1 ? std::sqrt(ss / (n - 1)) : 0.0;
  double ssum = 0;
  for (int64_t j = 0; j < in; ++j) {
    if (!std::isfinite(s[j]) || s[j] < 0) st.finite = false;
    ssum += s[j];
  }
  st.s_mean = in > 0 ? ssum / in : 0.0;
  return st;
}

// Static features of one unit (normalisations documented in unit_table.h); the mass share
// holds the raw mass sum |W_ij| s_j until the layer's total is known.
void UnitFeatures(const UnitView& w, const float* s, const MatrixStats& ms, plan::Unit* u) {
  const double n = static_cast<double>(w.rows * w.cols);
  const double w_std = std::max(ms.std, 1e-12), w_var = w_std * w_std;
  const double w_absmax = std::max(ms.absmax, 1e-12), s_mean = std::max(ms.s_mean, 1e-12);
  const UnitStats st = UnitStatsKernel(w, s, static_cast<float>(0.01 * w_absmax));
  const double mean = st.sum / n, var = st.var;
  u->features[plan::kFeatWeightMean] = Clip(mean / w_std, -1, 1);
  u->features[plan::kFeatWeightVar] = Clip(std::log2(std::max(var, 1e-24) / w_var) / 4.0, -1, 1);
  u->features[plan::kFeatSparsity] = Clip(static_cast<double>(st.sparse) / n, 0, 1);
  u->features[plan::kFeatOutlierFrac] = Clip(10.0 * static_cast<double>(st.outliers) / n, 0, 1);
  u->features[plan::kFeatActMeanRel] =
      Clip(std::log2(std::max(st.s_sum / w.cols, 1e-12) / s_mean) / 4.0, -1, 1);
  u->features[plan::kFeatActMaxRel] =
      Clip(std::log2(std::max(st.s_max, 1e-12) / s_mean) / 4.0, -1, 1);
  u->features[plan::kFeatMassShare] = static_cast<float>(st.mass);
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

namespace {

// The table's header fields for the stage's layers [first, end).
plan::UnitTable NewTable(const model::LlamaConfig& cfg, int64_t first, int64_t end,
                         const UnitTableOptions& options, const std::string& fingerprint) {
  plan::UnitTable table;
  table.fingerprint = fingerprint;
  table.first_layer = static_cast<int32_t>(first);
  table.end_layer = static_cast<int32_t>(end);
  table.num_layers = static_cast<int32_t>(cfg.num_hidden_layers);
  table.chunk_size = static_cast<int32_t>(options.chunk_size);
  table.salient_fraction = options.salient_fraction;
  table.fixed_fp16_params = FixedFp16Params(cfg);
  table.fixed_param_bits = plan::FixedParamBits(cfg.torch_dtype);
  return table;
}

// Unit c of matrix m in layer l from its fit: position, bits and error per action, and
// the features that do not need the whole layer (mass share is raw until the layer ends).
void DescribeUnit(const UnitFit& fit, uint32_t id, int64_t l, int m, int64_t c, int64_t rows,
                  int64_t chunk_size, const model::LlamaConfig& cfg, plan::Unit* u) {
  u->id = id;
  u->layer = static_cast<int32_t>(l);
  u->matrix = m;
  u->chunk = static_cast<int32_t>(c);
  u->rows = rows;
  u->cols = fit.cols;
  u->col_begin = c * chunk_size;
  u->salient_count = fit.salient.count();
  for (int a = 0; a < plan::kNumActions; ++a) {
    const ActionFit* f = fit.Find(plan::kAllActions[a]);
    u->bits[a] = f->effective_bits;
    u->error[a] = f->error;
  }
  u->features[plan::kFeatIsAttention] = m <= static_cast<int>(model::Matrix::kO) ? 1.f : 0.f;
  u->features[plan::kFeatIsMlp] = m > static_cast<int>(model::Matrix::kO) ? 1.f : 0.f;
  u->features[plan::kFeatDepth] =
      cfg.num_hidden_layers > 1
          ? static_cast<float>(l) / static_cast<float>(cfg.num_hidden_layers - 1)
          : 0.f;
  const double e2 = u->error[plan::ActionIndex(plan::Action::k2)],
               e4 = u->error[plan::ActionIndex(plan::Action::k4)];
  u->features[plan::kFeatErrRatio] =
      Clip(std::log10(std::max(e2, 1e-12) / std::max(e4, 1e-12)) / 2.0, 0, 1);
}

// Mass share: unit mass / layer mass, times the units in the layer (1 = average unit),
// log2-scaled and clipped to [-1, 1].
void NormalizeMassShare(size_t layer_begin, double layer_mass, plan::UnitTable* table) {
  const double units_in_layer = static_cast<double>(table->units.size() - layer_begin);
  for (size_t i = layer_begin; i < table->units.size(); ++i) {
    float& f = table->units[i].features[plan::kFeatMassShare];
    const double share = layer_mass > 0 ? f / layer_mass * units_in_layer : 1.0;
    f = Clip(std::log2(std::max(share, 1e-6)) / 4.0, -1, 1);
  }
}

// The units being built for one stage.
struct StageBuild {
  const model::LlamaConfig& cfg;
  const UnitTableOptions& options;
  QuantizerOptions quantizer;
  int64_t per_layer;
  plan::UnitTable table;
  std::vector<StageFits::UnitParams> params;
};

// Fits every chunk of matrix m of layer l (units appended to build->table and build->params, their
// raw mass added to *layer_mass); returns the number of units.
absl::StatusOr<int64_t> FitMatrix(int64_t l, int m, const at::Tensor& stored,
                                  const LinearInputStats& st, size_t layer_begin,
                                  double* layer_mass, StageBuild* build) {
  const int64_t C = build->options.chunk_size;
  const std::string name = model::LinearTensorName(l, static_cast<model::Matrix>(m));
  if (!stored.defined() || stored.dim() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": missing or not 2-D"));
  }
  if (!st.mean_abs.defined() || st.mean_abs.numel() != stored.size(1)) {
    return absl::InvalidArgumentError(absl::StrCat("calibration statistics missing for ", name));
  }
  // The float32 matrix while its units are fitted (a copy only when stored otherwise).
  const at::Tensor W = stored.to(at::kCPU, at::kFloat).contiguous();
  const at::Tensor s = st.mean_abs.to(at::kCPU, at::kFloat).contiguous();
  const int64_t rows = W.size(0), in = W.size(1);
  const float* wp = W.data_ptr<float>();
  const float* sp = s.data_ptr<float>();
  const MatrixStats ms = ComputeMatrixStats(wp, rows * in, sp, in);
  if (!ms.finite) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": weights or calibration statistics contain NaN / Inf or a negative scale"));
  }
  const std::vector<plan::Action> all(plan::kAllActions.begin(), plan::kAllActions.end());
  const int64_t chunks = ChunksOf(in, C);
  std::vector<UnitFit> fits(chunks);
  std::vector<plan::Unit> units(chunks);
  at::parallel_for(0, chunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      const int64_t c0 = c * C, c1 = std::min<int64_t>(c0 + C, in);
      const UnitView view{wp + c0, in, rows, c1 - c0};
      fits[c] = FitUnitKernel(view, sp + c0, all, build->quantizer);
      UnitFeatures(view, sp + c0, ms, &units[c]);
    }
  });
  for (int64_t c = 0; c < chunks; ++c) {
    plan::Unit& u = units[c];
    const uint32_t id =
        static_cast<uint32_t>(l * build->per_layer + (build->table.units.size() - layer_begin));
    DescribeUnit(fits[c], id, l, m, c, rows, C, build->cfg, &u);
    *layer_mass += u.features[plan::kFeatMassShare];
    build->table.units.push_back(u);
    build->params.push_back(StageFits::Compact(fits[c]));
  }
  return chunks;
}

}  // namespace

absl::StatusOr<StageFits> BuildStageFits(const model::LlamaWeights& weights,
                                         const ActivationStats& stats,
                                         const UnitTableOptions& options,
                                         const std::string& fingerprint,
                                         const FitProgress& progress) {
  const model::LlamaConfig& cfg = weights.config;
  const int64_t C = options.chunk_size;
  if (C < 1) return absl::InvalidArgumentError(absl::StrCat("chunk_size: ", C, " < 1"));
  const int64_t first = weights.first_layer;
  const int64_t end = first + static_cast<int64_t>(weights.layers.size());
  if (stats.first_layer != first || static_cast<int64_t>(stats.layers.size()) != end - first) {
    return absl::InvalidArgumentError("calibration statistics cover other layers than the stage");
  }
  const int64_t per_layer = UnitsPerLayer(cfg, C);
  const int64_t total = per_layer * (end - first);

  StageBuild b{cfg,
               options,
               QuantizerFor(options),
               per_layer,
               NewTable(cfg, first, end, options, fingerprint),
               {}};
  b.params.reserve(total);
  c10::NoGradGuard no_grad;
  int64_t done = 0;
  for (int64_t l = first; l < end; ++l) {
    const size_t layer_begin = b.table.units.size();
    double layer_mass = 0;
    for (int m = 0; m < model::kNumMatrices; ++m) {
      WQ_ASSIGN_OR_RETURN(
          const int64_t chunks,
          FitMatrix(l, m, weights.layers[l - first].linear[m],
                    stats.at(l, static_cast<model::Matrix>(m)), layer_begin, &layer_mass, &b));
      done += chunks;
      if (progress) progress(done, total);
    }
    NormalizeMassShare(layer_begin, layer_mass, &b.table);
  }
  return StageFits::Create(std::move(b.table), std::move(b.params));
}

}  // namespace windquant::quant
