#include "common/quant/stage_fits.h"

#include <ATen/Parallel.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/model/safetensors.h"
#include "common/model/safetensors_stream_writer.h"
#include "common/plan/plan.h"
#include "common/quant/fit_kernels.h"
#include "common/quant/gptq_torch.h"

namespace windquant::quant {
namespace {

constexpr char kFormat[] = "windquant.fits";
constexpr char kVersion[] = "2";
constexpr int kStoredActions = plan::kNumActions - 1;  // action indices 1..6

template <typename T>
std::string_view Bytes(const std::vector<T>& v) {
  return std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

}  // namespace

StageFits::StageFits(plan::UnitTable table, std::vector<UnitParams> params)
    : table_(std::move(table)), params_(std::move(params)) {
  layer_begin_.assign(table_.end_layer - table_.first_layer + 1, table_.units.size());
  for (size_t i = table_.units.size(); i-- > 0;) {
    layer_begin_[table_.units[i].layer - table_.first_layer] = i;
  }
  for (size_t l = layer_begin_.size() - 1; l-- > 0;) {
    layer_begin_[l] = std::min(layer_begin_[l], layer_begin_[l + 1]);
  }
}

absl::StatusOr<StageFits> StageFits::Create(plan::UnitTable table, std::vector<UnitParams> params) {
  if (params.size() != table.units.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("fits: ", params.size(), " units for a table of ", table.units.size()));
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const plan::Unit& u = table.units[i];
    const UnitParams& p = params[i];
    if (u.layer < table.first_layer || u.layer >= table.end_layer ||
        (i > 0 && u.layer < table.units[i - 1].layer)) {
      return absl::InvalidArgumentError(
          absl::StrCat("fits: ", plan::UnitName(u), ": layer outside the stage or out of order"));
    }
    if (static_cast<int64_t>(p.scales.size()) != kStoredActions * u.rows ||
        static_cast<int64_t>(p.offsets.size()) != u.rows || p.salient.count() != u.salient_count ||
        static_cast<int64_t>(p.salient.codes.size()) != u.salient_count) {
      return absl::InvalidArgumentError(
          absl::StrCat("fits: ", plan::UnitName(u), ": parameter sizes disagree with the table"));
    }
    for (int64_t k = 0; k < p.salient.count(); ++k) {
      const int32_t f = p.salient.index[k];
      if (f < 0 || f >= u.n() || (k > 0 && f <= p.salient.index[k - 1])) {
        return absl::InvalidArgumentError(absl::StrCat(
            "fits: ", plan::UnitName(u), ": salient index ", f, " out of range or order"));
      }
    }
  }
  return StageFits(std::move(table), std::move(params));
}

StageFits::UnitParams StageFits::Compact(const UnitFit& fit) {
  UnitParams p;
  p.salient = fit.salient;
  p.scales.assign(kStoredActions * fit.rows, 0);
  p.offsets.assign(fit.rows, 0);
  for (const ActionFit& f : fit.fits) {
    const int a = plan::ActionIndex(f.action);
    if (a == 0) continue;
    for (int64_t r = 0; r < fit.rows; ++r) p.scales[(a - 1) * fit.rows + r] = HalfBits(f.scales[r]);
    if (f.action == plan::Action::k1) {
      for (int64_t r = 0; r < fit.rows; ++r) p.offsets[r] = HalfBits(f.offsets[r]);
    }
  }
  return p;
}

int64_t StageFits::ParamBytes() const {
  int64_t n = 0;
  for (const UnitParams& p : params_) {
    n += static_cast<int64_t>(p.scales.size() * 2 + p.offsets.size() * 2 +
                              p.salient.index.size() * 4 + p.salient.codes.size() + 4);
  }
  return n;
}

absl::Status StageFits::CheckPlan(const std::vector<int>& actions) const {
  for (const plan::Unit& u : table_.units) {
    if (u.id >= actions.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "plan has ", actions.size(), " actions, but unit id ", u.id, " is in the table"));
    }
    const int a = actions[u.id];
    if (a < 0 || a >= plan::kNumActions) {
      return absl::InvalidArgumentError(
          absl::StrCat("unit ", u.id, ": action index ", a, " out of range"));
    }
  }
  return absl::OkStatus();
}

std::vector<float> StageFits::Scales(size_t i, int action) const {
  std::vector<float> out;
  if (action <= 0) return out;
  const int64_t rows = table_.units[i].rows;
  out.resize(rows);
  const uint16_t* s = params_[i].scales.data() + (action - 1) * rows;
  for (int64_t r = 0; r < rows; ++r) out[r] = FromHalfBits(s[r]);
  return out;
}

std::vector<float> StageFits::Offsets(size_t i, int action) const {
  std::vector<float> out;
  if (action != plan::ActionIndex(plan::Action::k1)) return out;
  for (uint16_t h : params_[i].offsets) out.push_back(FromHalfBits(h));
  return out;
}

void StageFits::ApplyToLayer(int64_t layer, const std::vector<int>& actions,
                             std::array<at::Tensor, model::kNumMatrices>* linears,
                             std::array<at::Tensor, model::kNumMatrices>* quantized_from) const {
  const size_t begin = layer_begin_[layer - table_.first_layer];
  const size_t end = layer_begin_[layer - table_.first_layer + 1];
  if (quantized_from != nullptr) {
    for (int m = 0; m < model::kNumMatrices; ++m) (*quantized_from)[m] = (*linears)[m].clone();
  }
  if (compensation_ != nullptr) {
    ApplyCompensated(layer, begin, end, actions, linears, quantized_from);
    return;
  }
  at::parallel_for(static_cast<int64_t>(begin), static_cast<int64_t>(end), 1,
                   [&](int64_t b, int64_t e) {
                     for (int64_t i = b; i < e; ++i) {
                       const plan::Unit& u = table_.units[i];
                       at::Tensor& w = (*linears)[u.matrix];
                       float* base = w.data_ptr<float>() + u.col_begin;
                       const UnitView view{base, w.size(1), u.rows, u.cols};
                       const int a = actions[u.id];
                       const std::vector<float> scales = Scales(i, a), offsets = Offsets(i, a);
                       DequantizeKernel(view, plan::kAllActions[a], scales.data(), offsets.data(),
                                        params_[i].salient, base, w.size(1));
                     }
                   });
}

void StageFits::ApplyCompensated(
    int64_t layer, size_t begin, size_t end, const std::vector<int>& actions,
    std::array<at::Tensor, model::kNumMatrices>* linears,
    std::array<at::Tensor, model::kNumMatrices>* quantized_from) const {
  // One layer's factors for the layer's seven linears (read back when spilled); a read
  // error surfaces as the forward's torch errors do.
  const absl::StatusOr<LayerFactors> factors = compensation_->Layer(layer);
  TORCH_CHECK(factors.ok(), std::string(factors.status().message()));
  for (int m = 0; m < model::kNumMatrices; ++m) {
    std::vector<std::vector<float>> scales, offsets;
    std::vector<ColumnUnit> units;
    for (size_t i = begin; i < end; ++i) {
      const plan::Unit& u = table_.units[i];
      if (u.matrix != m) continue;
      const int a = actions[u.id];
      scales.push_back(Scales(i, a));
      offsets.push_back(Offsets(i, a));
      units.push_back(
          {u.col_begin, u.cols, plan::kAllActions[a], nullptr, nullptr, &params_[i].salient});
    }
    for (size_t k = 0; k < units.size(); ++k) {
      units[k].scales = scales[k].empty() ? nullptr : scales[k].data();
      units[k].offsets = offsets[k].empty() ? nullptr : offsets[k].data();
    }
    if (units.empty()) continue;
    const GptqOptions& o = compensation_->options();
    at::Tensor* from = quantized_from ? &(*quantized_from)[m] : nullptr;
    const PackedUpper& u = factors->Of(static_cast<model::Matrix>(m));
    // A factor made on a device (gptq_torch.h) is not readable by the CPU kernels: the
    // torch ops take it (copied to the weights' device only if they are elsewhere).
    const bool factor_on_device = u.data().defined() && !u.data().device().is_cpu();
    if (o.torch_ops || factor_on_device || !(*linears)[m].device().is_cpu()) {
      CompensateLinearTorch(units, u, &(*linears)[m], from, o);
    } else {
      CompensateLinear(units, u, &(*linears)[m], from, o);
    }
  }
}

at::Tensor StageFits::DequantizeUnit(size_t i, int action, const at::Tensor& weight) const {
  const at::Tensor w = weight.contiguous();
  const plan::Unit& u = table_.units[i];
  at::Tensor out = at::empty({u.rows, u.cols}, at::kFloat);
  const std::vector<float> scales = Scales(i, action), offsets = Offsets(i, action);
  DequantizeKernel(UnitView{w.data_ptr<float>(), u.cols, u.rows, u.cols}, plan::kAllActions[action],
                   scales.data(), offsets.data(), params_[i].salient, out.data_ptr<float>(),
                   u.cols);
  return out;
}

std::vector<int8_t> StageFits::UnitCodes(size_t i, int action, const at::Tensor& weight) const {
  const at::Tensor w = weight.contiguous();
  const plan::Unit& u = table_.units[i];
  std::vector<int8_t> out(u.n());
  const std::vector<float> scales = Scales(i, action), offsets = Offsets(i, action);
  CodesKernel(UnitView{w.data_ptr<float>(), u.cols, u.rows, u.cols}, plan::kAllActions[action],
              scales.data(), offsets.data(), out.data());
  return out;
}

absl::Status StageFits::Save(const std::string& path) const {
  int64_t k = 0, rows = 0;
  for (const plan::Unit& u : table_.units) {
    k += u.salient_count;
    rows += u.rows;
  }
  const int64_t units = static_cast<int64_t>(params_.size());
  std::vector<model::StreamTensor> tensors = {
      {"salient_index", model::Dtype::kI32, {k}},
      {"salient_codes", model::Dtype::kI8, {k}},
      {"salient_scale", model::Dtype::kF32, {units}},
      {"scales", model::Dtype::kF16, {kStoredActions * rows}},
      {"offsets", model::Dtype::kF16, {rows}}};
  WQ_ASSIGN_OR_RETURN(auto w, model::SafetensorsStreamWriter::Open(
                                  path, std::move(tensors),
                                  {{"windquant_format", kFormat},
                                   {"windquant_format_version", kVersion},
                                   {"first_layer", absl::StrCat(table_.first_layer)},
                                   {"end_layer", absl::StrCat(table_.end_layer)},
                                   {"units", absl::StrCat(units)}}));
  for (const UnitParams& p : params_) WQ_RETURN_IF_ERROR(w->Append(Bytes(p.salient.index)));
  for (const UnitParams& p : params_) WQ_RETURN_IF_ERROR(w->Append(Bytes(p.salient.codes)));
  for (const UnitParams& p : params_) {
    WQ_RETURN_IF_ERROR(w->Append(
        std::string_view(reinterpret_cast<const char*>(&p.salient.scale), sizeof(float))));
  }
  for (const UnitParams& p : params_) WQ_RETURN_IF_ERROR(w->Append(Bytes(p.scales)));
  for (const UnitParams& p : params_) WQ_RETURN_IF_ERROR(w->Append(Bytes(p.offsets)));
  return w->Finish();
}

absl::StatusOr<StageFits> StageFits::Load(const std::string& path, plan::UnitTable table) {
  absl::StatusOr<std::unique_ptr<model::SafetensorsFile>> opened =
      model::SafetensorsFile::Open(path);
  if (!opened.ok()) return opened.status();
  const model::SafetensorsFile& f = **opened;
  auto meta = [&](const std::string& key) -> std::string {
    auto it = f.metadata().find(key);
    return it == f.metadata().end() ? "" : it->second;
  };
  if (meta("windquant_format") != kFormat || meta("windquant_format_version") != kVersion) {
    return absl::DataLossError(
        absl::StrCat(path, ": not a ", kFormat, " file of version ", kVersion));
  }
  int64_t k = 0, rows = 0;
  for (const plan::Unit& u : table.units) {
    k += u.salient_count;
    rows += u.rows;
  }
  const int64_t units = static_cast<int64_t>(table.units.size());
  auto get = [&](const char* name, model::Dtype dtype,
                 int64_t count) -> absl::StatusOr<std::string_view> {
    const model::TensorInfo* info = f.Find(name);
    if (info == nullptr || info->dtype != dtype || info->shape.size() != 1 ||
        info->shape[0] != count) {
      return absl::DataLossError(absl::StrCat(path, ": tensor ", name, " missing or not [", count,
                                              "] ", model::DtypeName(dtype),
                                              " (the table's size)"));
    }
    return f.Data(*info);
  };
  WQ_ASSIGN_OR_RETURN(const std::string_view index, get("salient_index", model::Dtype::kI32, k));
  WQ_ASSIGN_OR_RETURN(const std::string_view codes, get("salient_codes", model::Dtype::kI8, k));
  WQ_ASSIGN_OR_RETURN(const std::string_view sscale,
                      get("salient_scale", model::Dtype::kF32, units));
  WQ_ASSIGN_OR_RETURN(const std::string_view scales,
                      get("scales", model::Dtype::kF16, kStoredActions * rows));
  WQ_ASSIGN_OR_RETURN(const std::string_view offsets, get("offsets", model::Dtype::kF16, rows));
  std::vector<UnitParams> params(units);
  int64_t ko = 0, ro = 0;
  for (int64_t i = 0; i < units; ++i) {
    const plan::Unit& u = table.units[i];
    UnitParams& p = params[i];
    p.salient.index.resize(u.salient_count);
    p.salient.codes.resize(u.salient_count);
    if (u.salient_count > 0) {  // an empty vector's data() may be null: no memcpy then
      std::memcpy(p.salient.index.data(), index.data() + 4 * ko, 4 * u.salient_count);
      std::memcpy(p.salient.codes.data(), codes.data() + ko, u.salient_count);
    }
    std::memcpy(&p.salient.scale, sscale.data() + 4 * i, 4);
    p.scales.resize(kStoredActions * u.rows);
    p.offsets.resize(u.rows);
    std::memcpy(p.scales.data(), scales.data() + 2 * kStoredActions * ro,
                2 * kStoredActions * u.rows);
    std::memcpy(p.offsets.data(), offsets.data() + 2 * ro, 2 * u.rows);
    ko += u.salient_count;
    ro += u.rows;
  }
  absl::StatusOr<StageFits> out = Create(std::move(table), std::move(params));
  if (!out.ok()) return absl::DataLossError(absl::StrCat(path, ": ", out.status().message()));
  return out;
}

}  // namespace windquant::quant
