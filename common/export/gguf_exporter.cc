#include "common/export/gguf_exporter.h"

#include <c10/core/GradMode.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <utility>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "common/export/export_layout.h"
#include "common/export/gguf_block_fit.h"
#include "common/export/gguf_file.h"
#include "common/export/gguf_llama.h"
#include "common/export/gguf_tokenizer.h"
#include "common/plan/action.h"

namespace windquant::exporter {
namespace {

using gguf::TensorType;

// The units of one linear, in column order, with their rows' grids.
struct MatrixPlan {
  int64_t layer = 0;
  int matrix = 0;
  int64_t rows = 0, cols = 0;
  std::vector<size_t> units;                // indices into the table
  std::vector<std::vector<RowGrid>> grids;  // per unit, per (Hugging Face) row
  TensorType type = TensorType::kF32;
  std::vector<std::vector<BlockParams>> params;  // per unit, per row, for `type`
};

// Whether `block`-value blocks lie inside the units of `mp` (the row length and every chunk
// boundary multiples of `block`); else why not.
bool BlocksFit(const plan::UnitTable& table, const MatrixPlan& mp, int64_t block,
               std::string* why) {
  if (mp.cols % block != 0) {
    *why = absl::StrCat("rows of ", mp.cols, " values: not a multiple of ", block);
    return false;
  }
  for (size_t i : mp.units) {
    const plan::Unit& u = table.units[i];
    if (u.col_begin % block != 0 || u.cols % block != 0) {
      *why = absl::StrCat("chunk of ", u.cols, " columns at ", u.col_begin, " is not whole ", block,
                          "-value blocks");
      return false;
    }
  }
  return true;
}

// Every row's parameters for `t`, or nullopt when a row does not fit.
std::optional<std::vector<std::vector<BlockParams>>> FitAll(TensorType t, const MatrixPlan& mp) {
  std::vector<std::vector<BlockParams>> params;
  for (const std::vector<RowGrid>& unit : mp.grids) {
    params.emplace_back();
    for (const RowGrid& g : unit) {
      const std::optional<BlockParams> p = Fit(t, g);
      if (!p.has_value()) return std::nullopt;
      params.back().push_back(*p);
    }
  }
  return params;
}

// The smallest candidate that holds every row of every unit; `why` says what ruled the
// smaller types out (block sizes that do not fit, types that are not exact).
void ChooseType(const plan::UnitTable& table, MatrixPlan* mp, std::string* why) {
  std::vector<std::string> reasons;
  std::map<int64_t, bool> blocks_fit;  // per block size
  for (TensorType t : kCandidates) {
    const int64_t block = gguf::BlockValues(t);
    if (block > 1) {
      auto [it, fresh] = blocks_fit.try_emplace(block, false);
      if (fresh) {
        std::string reason;
        it->second = BlocksFit(table, *mp, block, &reason);
        if (!it->second) reasons.push_back(std::move(reason));
      }
      if (!it->second) continue;
    }
    std::optional<std::vector<std::vector<BlockParams>>> params = FitAll(t, *mp);
    if (!params.has_value()) {
      reasons.push_back(absl::StrCat("not exact in ", gguf::TensorTypeName(t)));
      continue;
    }
    mp->type = t;
    mp->params = *std::move(params);
    *why = absl::StrJoin(reasons, "; ");
    return;
  }
}

std::string ActionsOf(const MatrixPlan& mp, const std::vector<int>& actions,
                      const plan::UnitTable& table) {
  std::map<int, int> count;
  for (size_t i : mp.units) count[actions[table.units[i].id]]++;
  std::vector<std::string> parts;
  for (const auto& [a, n] : count) {
    parts.push_back(absl::StrCat(std::string(plan::ActionName(plan::kAllActions[a])), " x", n));
  }
  return absl::StrJoin(parts, ", ");
}

// Every linear's plan: units, row grids and type (from the plan and the fits alone).
std::vector<MatrixPlan> PlanMatrices(const ExportInputs& in, GgufExportReport* report) {
  const model::LlamaConfig& c = ExportConfig(in);
  const plan::UnitTable& table = *in.table;
  std::vector<MatrixPlan> out(static_cast<size_t>(c.num_hidden_layers) * model::kNumMatrices);
  for (size_t i = 0; i < table.units.size(); ++i) {
    const plan::Unit& u = table.units[i];
    MatrixPlan& mp = out[static_cast<size_t>(u.layer) * model::kNumMatrices + u.matrix];
    mp.layer = u.layer;
    mp.matrix = u.matrix;
    mp.rows = u.rows;
    mp.cols = std::max(mp.cols, u.col_begin + u.cols);
    mp.units.push_back(i);
    const int a = in.plan->actions[u.id];
    const std::vector<float> s = in.fits->Scales(i, a), beta = in.fits->Offsets(i, a);
    std::vector<RowGrid> grids;
    for (int64_t r = 0; r < u.rows; ++r) {
      grids.push_back(
          GridOf(plan::kAllActions[a], s.empty() ? 0.0f : s[r], beta.empty() ? 0.0f : beta[r]));
    }
    mp.grids.push_back(std::move(grids));
  }
  for (MatrixPlan& mp : out) {
    // The table lists a matrix's chunks in column order (its global order), so the
    // units and their grids are in column order.
    GgufTensorReport t;
    t.name = gguf::LinearName(mp.layer, mp.matrix);
    ChooseType(table, &mp, &t.why);
    t.type = mp.type;
    t.weights = mp.rows * mp.cols;
    t.bytes = *gguf::RowBytes(mp.type, mp.cols) * static_cast<uint64_t>(mp.rows);
    t.linear = true;
    for (size_t i : mp.units)
      t.plan_bits += table.units[i].bits[in.plan->actions[table.units[i].id]];
    t.actions = ActionsOf(mp, in.plan->actions, table);
    report->tensors.push_back(std::move(t));
  }
  return out;
}

// The bytes of a linear: `target` the plan's weights, `from` what they were quantized from
// (both [rows, cols] float32 contiguous, Hugging Face rows), GGUF row order.
std::string EncodeMatrix(const ExportInputs& in, const MatrixPlan& mp, const at::Tensor& target,
                         const at::Tensor& from) {
  const float* tv = target.data_ptr<float>();
  const float* fv = from.data_ptr<float>();
  if (mp.type == TensorType::kF32 || mp.type == TensorType::kF16) {
    std::string out;
    const int64_t heads = gguf::PermutedHeads(ExportConfig(in), mp.matrix);
    for (int64_t g = 0; g < mp.rows; ++g) {
      const float* row = tv + gguf::HfRowOf(g, mp.rows, heads) * mp.cols;
      for (int64_t c = 0; c < mp.cols; ++c) {
        if (mp.type == TensorType::kF32) {
          out.append(reinterpret_cast<const char*>(row + c), 4);
        } else {
          const uint16_t h = gguf::HalfBitsOf(row[c]);
          out.append(reinterpret_cast<const char*>(&h), 2);
        }
      }
    }
    return out;
  }
  const uint64_t row_bytes = *gguf::RowBytes(mp.type, mp.cols);
  std::string out(row_bytes * static_cast<uint64_t>(mp.rows), '\0');
  const int64_t heads = gguf::PermutedHeads(ExportConfig(in), mp.matrix);
  const int64_t block = gguf::BlockValues(mp.type);
  std::vector<uint8_t> salient(static_cast<size_t>(mp.cols));
  for (int64_t g = 0; g < mp.rows; ++g) {
    const int64_t hf = gguf::HfRowOf(g, mp.rows, heads);
    uint8_t* row_out = reinterpret_cast<uint8_t*>(out.data()) + g * row_bytes;
    std::fill(salient.begin(), salient.end(), 0);
    for (size_t k = 0; k < mp.units.size(); ++k) {
      const plan::Unit& u = in.table->units[mp.units[k]];
      for (int32_t e : in.fits->params(mp.units[k]).salient.index) {
        if (e / u.cols == hf) salient[u.col_begin + e % u.cols] = 1;
      }
    }
    for (size_t k = 0; k < mp.units.size(); ++k) {
      const plan::Unit& u = in.table->units[mp.units[k]];
      for (int64_t c = u.col_begin; c < u.col_begin + u.cols; c += block) {
        EncodeBlock(mp.type, mp.params[k][hf], tv + hf * mp.cols + c, fv + hf * mp.cols + c,
                    salient.data() + c, row_out + c / block * gguf::BlockBytes(mp.type));
      }
    }
  }
  return out;
}

// A fixed tensor (embeddings, norms) in `type` (F32, F16 or BF16), row-major as stored.
std::string FixedBytes(const at::Tensor& t, TensorType type) {
  const at::ScalarType st = type == TensorType::kF32   ? at::kFloat
                            : type == TensorType::kF16 ? at::kHalf
                                                       : at::kBFloat16;
  const at::Tensor c = t.detach().to(at::kCPU, st).contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
}

TensorType EmbeddingType(const model::LlamaConfig& c) {
  const model::Dtype d = FixedDtype(c);
  return d == model::Dtype::kF32    ? TensorType::kF32
         : d == model::Dtype::kBF16 ? TensorType::kBF16
                                    : TensorType::kF16;
}

absl::StatusOr<model::LlamaWeights> FixedOf(const ExportInputs& in) {
  if (in.weights != nullptr) return *in.weights;  // shares the storage
  model::LoadRequest r;
  r.first_layer = 0;
  r.end_layer = 0;
  r.embeddings = true;
  r.head = true;
  return in.checkpoint->LoadWeights(r);
}

// The file's tensors in write order: embeddings, head, then per layer its norms and linears.
std::vector<gguf::TensorInfo> Declare(const model::LlamaConfig& c,
                                      const std::vector<MatrixPlan>& mats,
                                      GgufExportReport* report) {
  std::vector<gguf::TensorInfo> out;
  const TensorType et = EmbeddingType(c);
  out.push_back({gguf::kEmbeddingName, {c.hidden_size, c.vocab_size}, et});
  out.push_back({gguf::kFinalNormName, {c.hidden_size}, TensorType::kF32});
  if (!c.tie_word_embeddings) out.push_back({gguf::kHeadName, {c.hidden_size, c.vocab_size}, et});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    out.push_back({gguf::NormName(l, false), {c.hidden_size}, TensorType::kF32});
    out.push_back({gguf::NormName(l, true), {c.hidden_size}, TensorType::kF32});
    for (int m = 0; m < model::kNumMatrices; ++m) {
      const MatrixPlan& mp = mats[static_cast<size_t>(l) * model::kNumMatrices + m];
      out.push_back({gguf::LinearName(l, m), {mp.cols, mp.rows}, mp.type});
    }
  }
  for (const gguf::TensorInfo& t : out) {
    if (t.name.rfind("blk.", 0) == 0 && t.dims.size() == 2) continue;  // linears: PlanMatrices
    GgufTensorReport r;
    r.name = t.name;
    r.type = t.type;
    r.weights = t.values();
    r.bytes = t.bytes().value_or(0);
    report->tensors.push_back(std::move(r));
  }
  return out;
}

void Totals(GgufExportReport* r) {
  for (const GgufTensorReport& t : r->tensors) {
    r->all_weights += t.weights;
    r->tensor_bytes += t.bytes;
    if (!t.linear) continue;
    r->linear_weights += t.weights;
    r->linear_bytes += t.bytes;
    r->plan_linear_bits += t.plan_bits;
  }
}

// The plan's weights of layer l and the weights they were quantized from (float32).
absl::Status PlanLayer(const ExportInputs& in, int64_t l,
                       std::array<at::Tensor, model::kNumMatrices>* lin,
                       std::array<at::Tensor, model::kNumMatrices>* from) {
  WQ_ASSIGN_OR_RETURN(const model::LayerWeights lw, ExportLayer(in, l));
  for (int m = 0; m < model::kNumMatrices; ++m) {
    (*lin)[m] = lw.linear[m].to(at::kCPU, at::kFloat, false, /*copy=*/true).contiguous();
  }
  in.fits->ApplyToLayer(l, in.plan->actions, lin, from);
  for (int m = 0; m < model::kNumMatrices; ++m) (*from)[m] = (*from)[m].contiguous();
  return absl::OkStatus();
}

absl::Status WriteData(const ExportInputs& in, const std::vector<MatrixPlan>& mats,
                       gguf::GgufWriter* w) {
  const model::LlamaConfig& c = ExportConfig(in);
  {
    WQ_ASSIGN_OR_RETURN(const model::LlamaWeights fixed, FixedOf(in));
    WQ_RETURN_IF_ERROR(
        w->AppendTensor(gguf::kEmbeddingName, FixedBytes(fixed.embed_tokens, EmbeddingType(c))));
    WQ_RETURN_IF_ERROR(
        w->AppendTensor(gguf::kFinalNormName, FixedBytes(fixed.final_norm, TensorType::kF32)));
    if (!c.tie_word_embeddings) {
      WQ_RETURN_IF_ERROR(
          w->AppendTensor(gguf::kHeadName, FixedBytes(fixed.lm_head, EmbeddingType(c))));
    }
  }
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    std::array<at::Tensor, model::kNumMatrices> lin, from;
    WQ_RETURN_IF_ERROR(PlanLayer(in, l, &lin, &from));
    WQ_ASSIGN_OR_RETURN(const model::LayerWeights lw, ExportLayer(in, l));
    WQ_RETURN_IF_ERROR(w->AppendTensor(gguf::NormName(l, false),
                                       FixedBytes(lw.input_layernorm, TensorType::kF32)));
    WQ_RETURN_IF_ERROR(w->AppendTensor(gguf::NormName(l, true),
                                       FixedBytes(lw.post_attention_layernorm, TensorType::kF32)));
    for (int m = 0; m < model::kNumMatrices; ++m) {
      const MatrixPlan& mp = mats[static_cast<size_t>(l) * model::kNumMatrices + m];
      WQ_RETURN_IF_ERROR(
          w->AppendTensor(gguf::LinearName(l, m), EncodeMatrix(in, mp, lin[m], from[m])));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GgufExportReport> WriteGguf(const ExportInputs& in, const std::string& path) {
  WQ_RETURN_IF_ERROR(CheckExportInputs(in));
  const model::LlamaConfig& c = ExportConfig(in);
  gguf::Metadata md;
  const std::string name = std::filesystem::path(in.model_dir).filename().string();
  WQ_RETURN_IF_ERROR(gguf::AddLlamaMetadata(c, name.empty() ? "windquant" : name, &md));
  WQ_RETURN_IF_ERROR(gguf::AddTokenizerMetadata(in.model_dir, c, &md));
  const plan::PlanTotals totals = in.plan->Totals(*in.table);
  md.AddString("windquant.plan_id", in.plan->plan_id);
  md.AddF32("windquant.effective_bits", static_cast<float>(totals.effective_bits));
  md.AddString("windquant.mapping", "exact");
  GgufExportReport report;
  const std::vector<MatrixPlan> mats = PlanMatrices(in, &report);
  std::vector<gguf::TensorInfo> tensors = Declare(c, mats, &report);
  Totals(&report);
  // Every unit's salient entries: with error compensation the plan gives action-16 units
  // their INT8 values too (gptq.cc), without it they are FP16 values like the rest.
  for (const plan::Unit& u : in.table->units) report.salient_entries += u.salient_count;
  try {
    c10::NoGradGuard no_grad;
    WQ_ASSIGN_OR_RETURN(auto w, gguf::GgufWriter::Open(path, md, std::move(tensors)));
    WQ_RETURN_IF_ERROR(WriteData(in, mats, w.get()));
    WQ_RETURN_IF_ERROR(w->Finish());
    report.file_bytes = w->file_bytes();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("GGUF export: ", e.what_without_backtrace()));
  }
  return report;
}

absl::Status VerifyGguf(const ExportInputs& in, const std::string& path, const std::string& shown,
                        GgufExportReport* report) {
  WQ_RETURN_IF_ERROR(CheckExportInputs(in));
  WQ_ASSIGN_OR_RETURN(const std::unique_ptr<gguf::GgufFile> file, gguf::GgufFile::Open(path));
  WQ_ASSIGN_OR_RETURN(const model::LlamaWeights back, gguf::ReadLlamaWeights(*file));
  report->salient_changed = 0;
  report->max_salient_change = 0;
  try {
    c10::NoGradGuard no_grad;
    for (int64_t l = 0; l < ExportConfig(in).num_hidden_layers; ++l) {
      std::array<at::Tensor, model::kNumMatrices> lin, from;
      WQ_RETURN_IF_ERROR(PlanLayer(in, l, &lin, &from));
      for (int m = 0; m < model::kNumMatrices; ++m) {
        at::Tensor salient = at::zeros(lin[m].sizes(), at::kBool);
        auto mark = salient.accessor<bool, 2>();
        for (size_t i = 0; i < in.table->units.size(); ++i) {
          const plan::Unit& u = in.table->units[i];
          if (u.layer != l || u.matrix != m) continue;
          for (int32_t e : in.fits->params(i).salient.index) {
            mark[e / u.cols][u.col_begin + e % u.cols] = true;
          }
        }
        const at::Tensor differs = back.layers[l].linear[m].ne(lin[m]);
        if (differs.logical_and(salient.logical_not()).any().item<bool>()) {
          return absl::InternalError(absl::StrCat(shown, ": ", gguf::LinearName(l, m),
                                                  " differs from the plan's weights outside the "
                                                  "salient entries"));
        }
        const at::Tensor changed = differs.logical_and(salient);
        report->salient_changed += changed.sum().item<int64_t>();
        if (changed.any().item<bool>()) {
          const double max =
              (back.layers[l].linear[m] - lin[m]).abs().masked_select(changed).max().item<double>();
          report->max_salient_change = std::max(report->max_salient_change, max);
        }
      }
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(shown, ": ", e.what_without_backtrace()));
  }
  return absl::OkStatus();
}

double GgufExportReport::LinearBits() const {
  return linear_weights > 0 ? 8.0 * static_cast<double>(linear_bytes) / linear_weights : 0;
}
double GgufExportReport::WholeModelBits() const {
  return all_weights > 0 ? 8.0 * static_cast<double>(tensor_bytes) / all_weights : 0;
}
double GgufExportReport::PlanBits() const {
  return linear_weights > 0 ? plan_linear_bits / linear_weights : 0;
}

std::string GgufExportReport::ToJson() const {
  nlohmann::json j;
  j["mapping"] = "exact";
  j["linear_weights"] = linear_weights;
  j["linear_bytes"] = linear_bytes;
  j["linear_bits_per_weight"] = LinearBits();
  j["plan_bits_per_weight"] = PlanBits();
  j["all_weights"] = all_weights;
  j["tensor_bytes"] = tensor_bytes;
  j["whole_model_bits_per_weight"] = WholeModelBits();
  j["file_bytes"] = file_bytes;
  j["salient_entries"] = salient_entries;
  j["salient_changed"] = salient_changed;
  j["max_salient_change"] = max_salient_change;
  for (const GgufTensorReport& t : tensors) {
    nlohmann::json e = {{"name", t.name},
                        {"type", gguf::TensorTypeName(t.type)},
                        {"weights", t.weights},
                        {"bytes", t.bytes}};
    if (t.linear) {
      e["plan_bits"] = t.plan_bits;
      e["actions"] = t.actions;
      if (!t.why.empty()) e["why"] = t.why;
    }
    j["tensors"].push_back(std::move(e));
  }
  return j.dump(1) + "\n";
}

std::string GgufExportReport::ToText() const {
  std::map<std::string, std::pair<int, int64_t>> by_type;  // linears: tensors, weights
  for (const GgufTensorReport& t : tensors) {
    if (!t.linear) continue;
    auto& e = by_type[gguf::TensorTypeName(t.type)];
    e.first++;
    e.second += t.weights;
  }
  std::string out = "linears by GGUF type:";
  for (const auto& [name, e] : by_type) {
    absl::StrAppend(
        &out, " ", name, " ", e.first, " tensors (",
        absl::StrFormat("%.1f", 100.0 * e.second / std::max<int64_t>(linear_weights, 1)),
        "% of weights);");
  }
  absl::StrAppend(&out, "\n",
                  absl::StrFormat("GGUF bits per weight %.4f (linears; the plan's %.4f), %.4f "
                                  "(whole model, every tensor byte); file %d bytes\n",
                                  LinearBits(), PlanBits(), WholeModelBits(), file_bytes));
  absl::StrAppend(&out, absl::StrFormat("salient entries: %d, %d of them re-rounded onto their "
                                        "block's grid (max change %.4g)\n",
                                        salient_entries, salient_changed, max_salient_change));
  return out;
}

}  // namespace windquant::exporter
