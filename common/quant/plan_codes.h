// LayerCodes: one decoder layer with a plan applied, held as the plan's codes on the device
// of the layer's stored weights (DESIGN.md section 3): per entry its INT8 level, per row and
// unit its step (and the offset of 1 bit), the INT8 salient values, and the FP16 values of
// the units at 16 bits. PlanLinears makes one per plan model and layer, once, with torch
// ops on that device; every forward then decodes it with a few elementwise ops on the
// device (Decode): no host copy, no host sync.
//
// The levels are the CPU kernels' (fit_kernels.h, fit_kernels_vec.inc's Code), from the
// stored weights x and each row's step s of the unit's action:
//   8/4/3/1.58: q = round_half_even(clamp(x / s, qmin, qmax))     value q * s
//   2:          q = floor(clamp(x / s, -2, 1)), stored as 2q + 1   value (2q + 1) * (s / 2)
//   1:          q = x >= beta ? 1 : -1                             value q * alpha + beta
// with the kernels' clamp (x / 0 = NaN goes to qmax) and no fused multiply-add (each op is
// its own kernel). (2q + 1) * (s / 2) is (q + 0.5) * s exactly: s / 2 is exact (s is an FP16
// value) and both products round the same real number. Salient entries get code * scale
// (a float product, as the kernels), units at 16 bits the FP16 rounding of x.
// So in float32 the decoded weights are the kernels' bit for bit, except the sign of zero:
// where a symmetric grid's code rounds to -0 (a small negative weight) the kernels write
// -0.0 and the INT8 code decodes to +0.0 (equal values, as the packed checkpoint's codes).
//
// With compensation (StageFits::compensation) the weights come from the host's
// CompensateLinear; FromValues takes them (float32) and finds each entry's level (the
// inverse of the operators) and checks that the codes give them back; a matrix whose
// codes do not is kept as its weights in the compute dtype instead (never seen so far).
//
// Memory on the device, per weight of the layer, for the object's life: 1 byte of codes,
// 4 bytes per row per unit of steps (+4 with a 1-bit unit in the matrix; 0.03 bytes per
// weight at chunk 256), 12 bytes per salient entry (0.06 at the default fraction 0.005),
// 2 more bytes per weight of a unit at 16 bits: ~1.1 bytes per weight. Making the codes
// holds a few float32 temporaries of a block of rows (<= 2^22 entries, ~16 MB each; with
// compensation also the layer's float32 values); Decode one float32 copy of one matrix
// (+ its copy in the compute dtype when that is not float32).
// Immutable after construction; Decode is thread-safe.
#ifndef WINDQUANT_COMMON_QUANT_PLAN_CODES_H_
#define WINDQUANT_COMMON_QUANT_PLAN_CODES_H_

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "common/model/llama_weights.h"
#include "common/quant/stage_fits.h"

namespace windquant::quant {

class LayerCodes {
 public:
  LayerCodes() = default;

  // From the layer's stored weights (any float dtype, on any device; `weights` are its
  // seven linears): the kernels' levels, computed on that device. `actions` (global unit
  // ids) must have passed fits.CheckPlan.
  static LayerCodes FromWeights(const StageFits& fits, const std::vector<int>& actions,
                                int64_t layer,
                                const std::array<at::Tensor, model::kNumMatrices>& weights);
  // From the layer's dequantized float32 weights `values` (what ApplyToLayer wrote, on
  // any device): the codes are made on `device`; a matrix they do not give back (at::equal)
  // is kept as `values` in `dtype` on `device`. Makes one host sync per matrix (the check).
  static LayerCodes FromValues(const StageFits& fits, const std::vector<int>& actions,
                               int64_t layer,
                               const std::array<at::Tensor, model::kNumMatrices>& values,
                               at::Device device, at::ScalarType dtype);

  // The layer's seven weights in `dtype`, on the codes' device: only device ops.
  std::array<at::Tensor, model::kNumMatrices> Decode(at::ScalarType dtype) const;
  // Bytes held on the device (what the header promises).
  int64_t Bytes() const;

 private:
  // Consecutive units of one matrix with the same width (a matrix has at most two runs:
  // its full chunks and a narrower last one).
  struct Run {
    int64_t col_begin = 0, unit_begin = 0, units = 0, width = 0;
  };
  struct Matrix {
    int64_t rows = 0, cols = 0;
    std::vector<Run> runs;
    at::Tensor codes;           // int8 [rows, cols]
    at::Tensor steps;           // float32 [rows, units]: s (s / 2 at 2 bits; 0 at 16)
    at::Tensor offsets;         // float32 [rows, units]: beta at 1 bit, -0.0 elsewhere
                                // (x + -0.0 == x); undefined without a 1-bit unit
    at::Tensor salient_index;   // int64 [k]: flat positions in [rows, cols]
    at::Tensor salient_values;  // float32 [k]: code * salient scale
    // Units at 16 bits, consecutive ones as one block: [col_begin, col_begin + width) on
    // the host, their FP16 values [rows, width] on the device.
    std::vector<std::pair<int64_t, int64_t>> half_blocks;
    std::vector<at::Tensor> halves;
    at::Tensor dense;  // the weights in the compute dtype, when codes fail
  };
  struct HostPlan;
  static HostPlan PlanOf(const StageFits& fits, const std::vector<int>& actions, int64_t layer,
                         int m, int64_t rows, int64_t cols);
  static Matrix Upload(const HostPlan& p, const at::Tensor& x, at::Device device);
  static void EncodeFromWeights(const HostPlan& p, const at::Tensor& x, Matrix* out);
  static void EncodeFromValues(const HostPlan& p, const at::Tensor& v, Matrix* out);
  static at::Tensor DecodeMatrix(const Matrix& m, at::ScalarType dtype);

  std::array<Matrix, model::kNumMatrices> matrices_;
};

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_PLAN_CODES_H_
