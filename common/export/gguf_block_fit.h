// The exact mapping's arithmetic (issue 37, way (a); docs/gguf.md): the values one row of a
// unit takes under its action, whether a GGUF block type holds every one of them unchanged
// (FP16 block parameters, float arithmetic as llama.cpp's dequantize_row_* and gguf-py's
// quants.py compute them), and the bytes of one block of such a row.
//
// Fit checks every level of the row: the type's formula, evaluated in float on the chosen
// FP16 parameters and the level's code, must give the level bit for bit. Each product
// d * code (and Q2_K's dmin * m) is exact in float (FP16 mantissas of 11 bits times codes of
// at most 8 bits), so a fused multiply-add in the reader rounds the same way as a
// multiply then add: the check holds for every build of llama.cpp.
// Pure functions; thread-safe; no torch tensors.
#ifndef WINDQUANT_COMMON_EXPORT_GGUF_BLOCK_FIT_H_
#define WINDQUANT_COMMON_EXPORT_GGUF_BLOCK_FIT_H_

#include <cstdint>
#include <optional>

#include "common/export/gguf_format.h"
#include "common/plan/action.h"

namespace windquant::exporter {

// One row of a unit under its action (quantizer.h / unit_fit.h's formulas): FP16 values
// (action 16), the lattice step * k for integer k in [kmin, kmax] (every k, or the odd ones
// only: 2 bit s*(q+1/2) = (s/2) * {-3, -1, 1, 3}), or the two levels lo < hi of 1 bit
// with beta != 0.
struct RowGrid {
  bool fp16_values = false;
  bool symmetric = false;
  bool odd_only = false;
  float step = 0;
  int kmin = 0, kmax = 0;
  float lo = 0, hi = 0;  // 1 bit with beta != 0
};

RowGrid GridOf(plan::Action a, float s, float beta);

// A block type's parameters for a row: FP16 values held as float.
//   Q8_0 / Q4_0 / Q3_K / TQ1_0 / TQ2_0: d = the lattice step, code = k
//   Q4_1: d = the gap between levels, m = the lowest level, code = level index
//   Q2_K: d = the gap (every sub-block scale sc = 1), m = dmin and min_scale its 4-bit
//         multiplier (dmin * min_scale = -lowest level), code = level index
// Q3_K's sub-block scales are all 33 (sc - 32 = 1).
struct BlockParams {
  float d = 0, m = 0;
  int min_scale = 0;
};

// The parameters with which `t` holds every level of `g` exactly, or nullopt. F32 always
// fits; F16 when every level is an FP16 value.
std::optional<BlockParams> Fit(gguf::TensorType t, const RowGrid& g);

// One block (BlockValues(t) values, a block type) of a row: `target` the plan's values,
// `from` the weights they were quantized from and `salient` 1 where the plan keeps an INT8
// entry (re-rounded from `from` onto the block's grid, clamped to the type's codes);
// writes BlockBytes(t) bytes to `out`.
void EncodeBlock(gguf::TensorType t, const BlockParams& p, const float* target, const float* from,
                 const uint8_t* salient, uint8_t* out);

// The exact mapping's types in order of size (bits per weight): TQ1_0 1.6875, TQ2_0 2.0625,
// Q2_K 2.625, Q3_K 3.4375, Q4_0 4.5, Q4_1 5, Q8_0 8.5, F16, F32. TQ2_0 holds what TQ1_0
// holds (ternary), so it is never chosen; it stays listed for the order.
inline constexpr gguf::TensorType kCandidates[] = {
    gguf::TensorType::kTQ1_0, gguf::TensorType::kTQ2_0, gguf::TensorType::kQ2_K,
    gguf::TensorType::kQ3_K,  gguf::TensorType::kQ4_0,  gguf::TensorType::kQ4_1,
    gguf::TensorType::kQ8_0,  gguf::TensorType::kF16,   gguf::TensorType::kF32};

}  // namespace windquant::exporter

#endif  // WINDQUANT_COMMON_EXPORT_GGUF_BLOCK_FIT_H_
