// Error compensation when a plan is applied (DESIGN.md section 8, GPTQ: Frantar et al.
// 2022): each linear W [out, in] is quantized column by column, in input-column order,
// each column with the action of the unit (column chunk) it belongs to, and the rounding
// error of a quantized column is carried into the columns not yet quantized through the
// Hessian H = 2/N X^T X of the linear's calibration inputs:
//   e_r = (W_rj - Q(W_rj)) / U_jj,   W_rk -= e_r * U_jk   for every k > j,
// with U the upper Cholesky factor of (H + damp I)^-1 (damp = damp_fraction * mean diag H).
// Units chunk over input columns, so a unit's error flows into its own later columns and
// into the later units of the same linear; rows never mix.
//
// What stays as the unit table fitted it: every unit's per-row FP16 scales (and 1-bit
// offsets) and its INT8 salient entries (their values are fixed; the error between the
// compensated weight and that value is carried on like any other). Only the codes change:
// they are the codes of the compensated weights, so the packed export stores codes +
// the same scales + the same salient set, nothing new, and the effective bits are those
// of the plan without compensation.
//
// GptqFactors holds U per decoder layer per input kind (q/k/v share one input, gate/up
// share one, o and down have their own): plan-independent, computed once per stage from
// the calibration Hessians (hessians.h) and kept for the object's life, packed upper
// triangular in float32 (PackedUpper: the same values as the dense factor, half its
// bytes): 2 * (3 * hidden^2 + inter^2) bytes per layer (when the attention width equals
// hidden; + 2 * in per factor), i.e. 1.31 bytes per BF16 weight byte at LLaMA-3.2-1B
// (0.16 GB per layer), 1.17 at 8B (0.51 GB per layer), 1.20 at 70B (2.05 GB per layer).
// That is more than the weights' own bytes, so with GptqOptions::spill_dir set the
// factors live in an anonymous scratch file (common/base/scratch_file.h) and a plan
// reads one layer's back while it compensates that layer (Layer()): the process then
// holds one layer's factors at a time (a read of 0.16 / 0.51 / 2.05 GB per layer per
// plan, from the page cache when it has room, against seconds to minutes of
// compensation). Compensation reads the packed rows directly (no dense copy).
// Immutable; thread-safe; copies share the storage (in memory or in the file).
#ifndef WINDQUANT_COMMON_QUANT_GPTQ_H_
#define WINDQUANT_COMMON_QUANT_GPTQ_H_

#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/base/scratch_file.h"
#include "common/model/llama_model.h"
#include "common/model/llama_weights.h"
#include "common/plan/action.h"
#include "common/quant/gptq_kernels.h"
#include "common/quant/unit_fit.h"

namespace windquant::quant {

// The inputs of a decoder layer's linears: q/k/v read one, gate/up another.
enum class InputKind : int { kQkv = 0, kO, kGateUp, kDown };
inline constexpr int kNumInputKinds = 4;
InputKind InputKindOf(model::Matrix m);

// Per layer of a stage, per input kind: H = 2/N sum_t x_t x_t^T, float32 [in, in] (or
// float64 holding those float32 values: HessianCollector::TakeWidened).
struct StageHessians {
  int64_t first_layer = 0;
  std::vector<std::array<at::Tensor, kNumInputKinds>> layers;
  int64_t tokens = 0;
};

struct GptqOptions {
  double damp_fraction = 0.01;  // of the mean diagonal of H, added to the diagonal
  int64_t block_columns = 128;  // lazy-update block (changes speed only, not the values)
  int64_t row_group = 64;       // rows processed together (speed only)
  // The trailing-update kernel (gptq_kernels.h); null: the build for this CPU. The tests
  // and the benchmark pass the others (the values are the same).
  TrailingUpdateFn trailing = nullptr;
  // Compensate with torch ops (gptq_torch.h) on the CPU too; weights on another device
  // always are. Off: the CPU kernels above (their bits are the definition's).
  bool torch_ops = false;
  // Where the factors are kept (see the top of this file): empty = in memory; else a
  // directory for the scratch file (created when missing).
  std::string spill_dir;
};

// An upper-triangular float32 [n, n] matrix stored row by row from the diagonal on:
// row j holds columns [j, n), n (n + 1) / 2 floats in all. Copies share the storage.
class PackedUpper {
 public:
  PackedUpper() = default;
  // The upper triangle of u (float32 [n, n]; what lies below the diagonal is not read).
  static PackedUpper Pack(const at::Tensor& u);
  int64_t n() const { return n_; }
  bool empty() const { return n_ == 0; }
  // Row j indexed by column: RowBase(j)[k] = U[j][k] for k in [j, n) (the pointer itself
  // is inside the storage: j (2n - 1 - j) / 2 >= 0).
  const float* RowBase(int64_t j) const {
    return data_.data_ptr<float>() + j * (2 * n_ - 1 - j) / 2;
  }
  // The matrix whose packed rows are `data` ([n (n + 1) / 2] float32, contiguous).
  // INVALID_ARGUMENT when its length is not a triangular number.
  static absl::StatusOr<PackedUpper> FromData(at::Tensor data);
  const at::Tensor& data() const { return data_; }
  at::Tensor Dense() const;  // [n, n] float32, zeros below the diagonal
  int64_t Bytes() const { return n_ * (n_ + 1) / 2 * 4; }

 private:
  at::Tensor data_;  // [n (n + 1) / 2] float32
  int64_t n_ = 0;
};

// One unit of a linear as the compensation quantizes it: columns [col_begin, col_begin +
// cols), its action, its per-row scales / offsets (FP16 values as float; [rows]) and its
// salient set (flat indices within the unit, row-major over its `cols` columns).
struct ColumnUnit {
  int64_t col_begin = 0;
  int64_t cols = 0;
  plan::Action action = plan::Action::k16;
  const float* scales = nullptr;
  const float* offsets = nullptr;
  const SalientSet* salient = nullptr;
};

// The dequantized value of one entry x under action a with the row's scale / offset,
// bit for bit what DequantizeKernel writes for a non-salient entry (tested).
float QuantizeEntry(plan::Action a, float x, float scale, float offset);

// Quantizes, in place, the linear w ([rows, in] float32 contiguous) with error
// compensation: `units` cover [0, in) in column order; `u` is the [in, in] factor
// (packed, or dense for the tests).
// When `quantized_from` is not null ([rows, in] float32 contiguous) it receives the
// compensated weights each entry was quantized from: the exporter's codes are the codes
// of these (DequantizeKernel of them == the result, bit for bit). Parallel over row
// groups; the values do not depend on the threads, the block or the group size: every
// entry gets the same sequence of float32 operations as the one-column-at-a-time
// definition above (no reductions; built without FMA contraction).
// The trailing lazy update of each block runs in a register-blocked kernel (AVX2 where
// the CPU has it, gptq_kernels.h), a rounded product then a rounded difference per term.
void CompensateLinear(const std::vector<ColumnUnit>& units, const PackedUpper& u, at::Tensor* w,
                      at::Tensor* quantized_from, const GptqOptions& options = {});
void CompensateLinear(const std::vector<ColumnUnit>& units, const at::Tensor& u, at::Tensor* w,
                      at::Tensor* quantized_from, const GptqOptions& options = {});

// One decoder layer's factors, by input kind.
struct LayerFactors {
  std::array<PackedUpper, kNumInputKinds> kinds;
  const PackedUpper& Of(model::Matrix m) const { return kinds[static_cast<int>(InputKindOf(m))]; }
};

class GptqFactors {
 public:
  // Factors U of every (layer, kind) of `hessians`, each Hessian released (when this was
  // its last reference) once factored. INVALID_ARGUMENT naming the layer and input kind
  // when a Hessian is missing, not square, not finite, or not positive definite after
  // dampening; INTERNAL naming the directory when options.spill_dir cannot hold them.
  static absl::StatusOr<GptqFactors> Create(StageHessians hessians,
                                            const GptqOptions& options = {});
  // The factors of layers [first_layer, end_layer) of `model` from the hidden states
  // entering first_layer (`inputs`, [B, T, H] per calibration batch, consumed: each is
  // replaced by the next layer's input as the layers go), one layer at a time: a layer's
  // Hessians are collected (float64, 8 bytes * in^2 per input kind), each factored in its
  // own memory and dropped, before the next layer's. Besides the factors the peak is one
  // layer's collection (0.64 GB at LLaMA-3.2-1B, 2.0 GB at 8B, 8.2 GB at 70B) + the
  // packed factors of that layer; the inputs cost 4 * tokens * hidden bytes. The same
  // values as collecting all layers in one pass. Errors as Create; INTERNAL for a torch
  // error.
  static absl::StatusOr<GptqFactors> FromInputs(const model::LlamaModel& model, int64_t first_layer,
                                                int64_t end_layer, std::vector<at::Tensor> inputs,
                                                const GptqOptions& options = {});
  // The factors of consecutive stages as one (sharing their storage, memory or scratch
  // files). INVALID_ARGUMENT
  // when a part is null or the layers do not follow each other.
  static absl::StatusOr<GptqFactors> Concat(
      const std::vector<std::shared_ptr<const GptqFactors>>& parts);

  int64_t first_layer() const { return first_layer_; }
  int64_t end_layer() const { return first_layer_ + static_cast<int64_t>(factors_.size()); }
  // The factors of `layer` (in [first_layer, end_layer)), each [in, in] upper
  // triangular, packed: shared when in memory, read from the scratch file when spilled
  // (INTERNAL naming the file's directory on a read error).
  absl::StatusOr<LayerFactors> Layer(int64_t layer) const;
  const GptqOptions& options() const { return options_; }
  int64_t Bytes() const;          // what the header promises, wherever they are
  int64_t ResidentBytes() const;  // of those, the bytes held in memory

 private:
  // A layer's factors: in `memory`, or at `offset` in `file` (the kinds' packed rows
  // back to back, of sizes n[k]).
  struct Entry {
    LayerFactors memory;
    std::shared_ptr<base::ScratchFile> file;
    int64_t offset = 0;
    std::array<int64_t, kNumInputKinds> n{};
  };
  // Keeps `layer` as the options say (spilled: written to the file, opened on first use).
  absl::Status Keep(LayerFactors layer);
  int64_t first_layer_ = 0;
  std::vector<Entry> factors_;
  GptqOptions options_;
};

// Where a stage spills its factors: `cache_dir` (quant.cache_dir, a volume of the
// stage's own in the deployments) when set, else the system's temporary directory.
std::string FactorSpillDir(const std::string& cache_dir);

// U = upper Cholesky factor of (h + damp_fraction * mean(diag h) * I)^-1, computed in
// float64 and returned as float32 [in, in]. Transient memory: one float64 [in, in].
// INVALID_ARGUMENT (naming `what`) as Create.
absl::StatusOr<at::Tensor> InverseHessianFactor(const at::Tensor& h, double damp_fraction,
                                                const std::string& what);

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_GPTQ_H_
