// Granularity: what one unit of a decoder linear spans (the run config's quant.granularity;
// docs/gguf.md, issue 37 way (b)). Parsed once, when the config loads
// (common/config/run_config.cc, which names the key in its error), and resolved there into
// quant.chunk_size, so that no other component knows the word: a unit is a column chunk
// spanning all rows, and a chunk at least as wide as a linear's input is the whole linear
// (the unit table builder's last, narrow chunk), one action per tensor. The unit table,
// the quantizer, plans, the RL environment, the searches, the baselines and the exporters
// already handle such units; the GGUF exact export then holds the plan itself wherever the
// action's type fits the rows (rows of 256 for the K and ternary types). No torch here.
#ifndef WINDQUANT_COMMON_QUANT_GRANULARITY_H_
#define WINDQUANT_COMMON_QUANT_GRANULARITY_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace windquant::quant {

enum class Granularity {
  // Units of quant.chunk_size input columns (DESIGN.md's unit).
  kChunk,
  // One unit per linear: quant.chunk_size becomes kTensorChunkSize, whatever it was.
  kTensor,
};

// The chunk size of `granularity: tensor`: wider than any linear's input (LLaMA-3-70B's
// widest has 28,672 columns), within the unit table's int32 field, and small enough that
// chunk arithmetic in int64 (c0 + chunk_size) never overflows. Any chunk_size >= a linear's
// in_features gives that linear one unit; this one value keeps the run's digest one.
inline constexpr int64_t kTensorChunkSize = int64_t{1} << 30;

// The config spelling: "chunk" / "tensor".
constexpr std::string_view GranularityName(Granularity g) {
  return g == Granularity::kTensor ? "tensor" : "chunk";
}

// The value of a config spelling; nullopt for any other.
constexpr std::optional<Granularity> ParseGranularity(std::string_view name) {
  if (name == "chunk") return Granularity::kChunk;
  if (name == "tensor") return Granularity::kTensor;
  return std::nullopt;
}

// The granularity a table of `chunk_size` has: tensor from kTensorChunkSize on.
constexpr Granularity GranularityOf(int64_t chunk_size) {
  return chunk_size >= kTensorChunkSize ? Granularity::kTensor : Granularity::kChunk;
}

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_GRANULARITY_H_
