// GgufExporter: a plan's model as one GGUF file that llama.cpp loads (docs/gguf.md), in
// the "exact" mapping of issue 37 (way (a)): each decoder linear takes the smallest GGUF
// type that holds every non-salient value the plan evaluates, unchanged; bits grow where
// the plan's per-unit grids do not nest in one type.
//
// Which grid nests where (per row of a unit; FP16 block parameters, float arithmetic as
// llama.cpp dequantizes; gguf_block_fit.h checks every level of every row):
//   1.58 bit        s*q, q in -1..1      TQ1_0 (d = s); also Q2_K (d = s, dmin = s, m = 1),
//                                        Q3_K, Q4_0, Q8_0 (d = s)
//   2 bit           s*(q+1/2)            Q2_K (sc = 1, d = s; dmin * m = 1.5 s: m = 1 when
//                                        1.5 s is an FP16 value, else m = 3, dmin = s/2);
//                                        Q3_K / Q4_0 / Q8_0 with d = s/2 (codes -3, -1, 1, 3)
//   3 bit           s*q, q in -4..3      Q3_K (every sub-block scale sc - 32 = 1, d = s),
//                                        Q4_0, Q8_0 (d = s)
//   4 / 8 bit       s*q                  Q4_0 (4 bit), Q8_0 (both; d = s)
//   1 bit           alpha*(+-1)+beta     Q2_K (d = the gap, dmin * m = -lower level) and
//                                        Q4_1 (m = lower level, d = the gap) when the levels
//                                        and their gap are FP16 values; all types when beta = 0
//   16 bit          FP16 values          F16
//   any             ...                  F16 when every level is an FP16 value, else F32
// A block type is tried only when its blocks fit the tensor and lie inside units: the row
// length and every chunk boundary are multiples of its block (32 for Q4_0 / Q4_1 / Q8_0,
// 256 for TQ1_0 / TQ2_0 / Q2_K / Q3_K: chunks of 256); otherwise the next type.
// Candidates in order of size: TQ1_0 (1.6875 bits), TQ2_0 (2.0625; never chosen, TQ1_0
// holds the same), Q2_K (2.625), Q3_K (3.4375), Q4_0 (4.5), Q4_1 (5), Q8_0 (8.5), F16, F32.
// The report's `why` lists what ruled the smaller types out.
//
// Salient entries (INT8 in the plan) have no place in a block: they are re-rounded onto
// their block's grid (round to nearest from the weight they were quantized from, clamped
// to the type's codes); F32 tensors keep them exactly, F16 tensors round them to FP16.
// The report counts them. Embeddings and lm_head keep the model's dtype (F32 / F16 /
// BF16), norms are F32 (as llama.cpp's converter writes them).
//
// Bits = bytes: GgufExportReport counts every tensor byte of the file (the bits per
// weight of the linears next to the plan's effective bits; the whole model's).
// Memory: one decoder layer in its stored dtype, its float32 plan weights and the weights
// they were quantized from, and one encoded tensor. Thread-compatible.
#ifndef WINDQUANT_COMMON_EXPORT_GGUF_EXPORTER_H_
#define WINDQUANT_COMMON_EXPORT_GGUF_EXPORTER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/export/exporter.h"
#include "common/export/gguf_format.h"

namespace windquant::exporter {

inline constexpr char kGgufFileName[] = "model.gguf";

struct GgufTensorReport {
  std::string name;  // GGUF name, e.g. "blk.0.attn_q.weight"
  gguf::TensorType type = gguf::TensorType::kF32;
  int64_t weights = 0;
  uint64_t bytes = 0;
  bool linear = false;   // a decoder linear (its units are in the plan)
  double plan_bits = 0;  // the plan's bits of its units (UnitEffectiveBits), linears
  std::string actions;   // the plan's actions in it, e.g. "2 x3, 3 x1"
  std::string why;       // why no smaller type holds it
};

struct GgufExportReport {
  std::vector<GgufTensorReport> tensors;
  int64_t linear_weights = 0;
  uint64_t linear_bytes = 0;
  double plan_linear_bits = 0;  // sum of the plan's bits of the linears
  int64_t all_weights = 0;
  uint64_t tensor_bytes = 0;      // every tensor's data bytes
  uint64_t file_bytes = 0;        // the file (header, metadata with the tokenizer, padding)
  int64_t salient_entries = 0;    // salient entries of the plan's units (all actions)
  int64_t salient_changed = 0;    // of which the file holds another value (VerifyGguf)
  double max_salient_change = 0;  // largest |file - plan| over them
  // linear_bytes * 8 / linear_weights (the plan's effective bits counterpart) and
  // tensor_bytes * 8 / all_weights (the plan's whole-model bits counterpart).
  double LinearBits() const;
  double WholeModelBits() const;
  double PlanBits() const;  // plan_linear_bits / linear_weights
  std::string ToJson() const;
  std::string ToText() const;  // one line per type and the totals
};

// Writes `path` (atomically). Errors: ExportInputs' checks, the tokenizer's
// (gguf_tokenizer.h), UNIMPLEMENTED for a config GGUF cannot carry yet, I/O.
absl::StatusOr<GgufExportReport> WriteGguf(const ExportInputs& in, const std::string& path);

// Reads `path` back with windquant's decoder and compares every linear, q/k rows put
// back, with the weights the plan applies: INTERNAL naming `shown` and the tensor when a
// non-salient entry differs; fills report->salient_changed / max_salient_change.
absl::Status VerifyGguf(const ExportInputs& in, const std::string& path, const std::string& shown,
                        GgufExportReport* report);

}  // namespace windquant::exporter

#endif  // WINDQUANT_COMMON_EXPORT_GGUF_EXPORTER_H_
