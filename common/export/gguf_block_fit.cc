#include "common/export/gguf_block_fit.h"

#include <algorithm>
#include <cmath>

namespace windquant::exporter {
namespace {

using gguf::TensorType;
constexpr int kMaxBlock = 256;
constexpr uint8_t kQ3Unit = 33;  // Q3_K's stored sub-block scale for sc - 32 = 1

// The levels of a row in ascending order: how many, and level j's lattice integer k
// (symmetric grids) and value as windquant's quantizer computes it.
int LevelCount(const RowGrid& g) {
  if (!g.symmetric) return 2;
  return g.odd_only ? (g.kmax - g.kmin) / 2 + 1 : g.kmax - g.kmin + 1;
}
int LatticeOf(const RowGrid& g, int j) { return g.kmin + j * (g.odd_only ? 2 : 1); }
float Level(const RowGrid& g, int j) {
  if (!g.symmetric) return j == 0 ? g.lo : g.hi;
  return g.step * static_cast<float>(LatticeOf(g, j));
}
// The distance between neighbouring levels (the affine types' d).
float Gap(const RowGrid& g) {
  if (!g.symmetric) return g.hi - g.lo;
  return g.odd_only ? g.step * 2.0f : g.step;
}

bool Affine(TensorType t) { return t == TensorType::kQ4_1 || t == TensorType::kQ2_K; }

// The codes a type stores (as its formula takes them).
void CodeRange(TensorType t, int* lo, int* hi) {
  switch (t) {
    case TensorType::kQ8_0:
      *lo = -128, *hi = 127;
      return;
    case TensorType::kQ4_0:
      *lo = -8, *hi = 7;
      return;
    case TensorType::kQ4_1:
      *lo = 0, *hi = 15;
      return;
    case TensorType::kQ2_K:
      *lo = 0, *hi = 3;
      return;
    case TensorType::kQ3_K:
      *lo = -4, *hi = 3;
      return;
    default:  // TQ1_0, TQ2_0
      *lo = -1, *hi = 1;
      return;
  }
}

// Code c's value as llama.cpp's dequantize_row_* computes it (float arithmetic).
float TypeValue(TensorType t, const BlockParams& p, int c) {
  const float q = static_cast<float>(c);
  switch (t) {
    case TensorType::kQ4_1:
      return q * p.d + p.m;
    case TensorType::kQ2_K:
      return (p.d * 1.0f) * q - p.m * static_cast<float>(p.min_scale);
    case TensorType::kQ3_K:
      return (p.d * static_cast<float>(kQ3Unit - 32)) * q;
    default:  // Q8_0, Q4_0, TQ1_0, TQ2_0
      return q * p.d;
  }
}

// The value an affine type's code counts from: Q4_1's m, Q2_K's -(dmin * min_scale).
float Base(TensorType t, const BlockParams& p) {
  if (t == TensorType::kQ4_1) return p.m;
  if (t == TensorType::kQ2_K) return -(p.m * static_cast<float>(p.min_scale));
  return 0.0f;
}

// Q2_K's dmin and its multiplier for a lowest level: the first min_scale in 1..15 with
// dmin = -lowest / min_scale an FP16 value (2 bit: -1.5 s = -(s/2) * 3 when 1.5 s is not).
std::optional<BlockParams> Q2KParams(float gap, float lowest) {
  if (lowest == 0.0f) return BlockParams{gap, 0.0f, 0};
  for (int k = 1; k <= 15; ++k) {
    const float dmin = -lowest / static_cast<float>(k);
    if (gguf::IsHalfExact(dmin) && dmin * static_cast<float>(k) == -lowest) {
      return BlockParams{gap, dmin, k};
    }
  }
  return std::nullopt;
}

std::optional<BlockParams> FitFloat(TensorType t, const RowGrid& g) {
  if (t == TensorType::kF32 || g.fp16_values) return BlockParams{};
  for (int j = 0; j < LevelCount(g); ++j) {
    if (!gguf::IsHalfExact(Level(g, j))) return std::nullopt;
  }
  return BlockParams{};
}

int8_t Code(float v, float d, int lo, int hi) {
  if (d == 0.0f) return 0;
  return static_cast<int8_t>(std::clamp(static_cast<int>(std::nearbyint(v / d)), lo, hi));
}

}  // namespace

RowGrid GridOf(plan::Action a, float s, float beta) {
  RowGrid g;
  g.symmetric = true;
  g.step = s;
  switch (a) {
    case plan::Action::k16:
      return RowGrid{true};
    case plan::Action::k8:
      g.kmin = -128, g.kmax = 127;
      break;
    case plan::Action::k4:
      g.kmin = -8, g.kmax = 7;
      break;
    case plan::Action::k3:
      g.kmin = -4, g.kmax = 3;
      break;
    case plan::Action::k1_58:
      g.kmin = -1, g.kmax = 1;
      break;
    case plan::Action::k2:  // s*(q+1/2), q in [-2, 1]
      g.step = s * 0.5f, g.kmin = -3, g.kmax = 3, g.odd_only = true;
      break;
    case plan::Action::k1:
      if (beta == 0.0f) {
        g.kmin = -1, g.kmax = 1, g.odd_only = true;
        break;
      }
      g.symmetric = false;
      g.lo = std::min(s * -1.0f + beta, s * 1.0f + beta);
      g.hi = std::max(s * -1.0f + beta, s * 1.0f + beta);
      break;
  }
  return g;
}

std::optional<BlockParams> Fit(TensorType t, const RowGrid& g) {
  if (t == TensorType::kF32 || t == TensorType::kF16) return FitFloat(t, g);
  if (g.fp16_values) return std::nullopt;
  int lo = 0, hi = 0;
  CodeRange(t, &lo, &hi);
  std::optional<BlockParams> p;
  if (t == TensorType::kQ2_K) {
    p = Q2KParams(Gap(g), Level(g, 0));
  } else if (t == TensorType::kQ4_1) {
    p = gguf::IsHalfExact(Level(g, 0)) ? std::optional(BlockParams{Gap(g), Level(g, 0)})
                                       : std::nullopt;
  } else if (g.symmetric) {
    p = BlockParams{g.step};
  }
  if (!p.has_value() || !gguf::IsHalfExact(p->d)) return std::nullopt;
  for (int j = 0; j < LevelCount(g); ++j) {
    const int c = Affine(t) ? j : LatticeOf(g, j);
    if (c < lo || c > hi || TypeValue(t, *p, c) != Level(g, j)) return std::nullopt;
  }
  return p;
}

void EncodeBlock(TensorType t, const BlockParams& p, const float* target, const float* from,
                 const uint8_t* salient, uint8_t* out) {
  const int n = static_cast<int>(gguf::BlockValues(t));
  int lo = 0, hi = 0;
  CodeRange(t, &lo, &hi);
  const float base = Base(t, p);
  int8_t codes[kMaxBlock];
  uint8_t ucodes[kMaxBlock];
  for (int j = 0; j < n; ++j) {
    codes[j] = Code((salient[j] ? from[j] : target[j]) - base, p.d, lo, hi);
    ucodes[j] = static_cast<uint8_t>(codes[j]);  // Q4_1 / Q2_K: 0..15
  }
  const uint16_t d = gguf::HalfBitsOf(p.d);
  uint8_t scales[16];
  switch (t) {
    case TensorType::kQ8_0:
      return gguf::EncodeQ8_0(d, codes, out);
    case TensorType::kQ4_0:
      return gguf::EncodeQ4_0(d, codes, out);
    case TensorType::kQ4_1:
      return gguf::EncodeQ4_1(d, gguf::HalfBitsOf(p.m), ucodes, out);
    case TensorType::kQ2_K:
      std::fill(scales, scales + 16, static_cast<uint8_t>(1 | (p.min_scale << 4)));
      return gguf::EncodeQ2_K(d, gguf::HalfBitsOf(p.m), scales, ucodes, out);
    case TensorType::kQ3_K:
      std::fill(scales, scales + 16, kQ3Unit);
      return gguf::EncodeQ3_K(d, scales, codes, out);
    case TensorType::kTQ2_0:
      return gguf::EncodeTQ2_0(d, codes, out);
    case TensorType::kTQ1_0:
      return gguf::EncodeTQ1_0(d, codes, out);
    default:
      return;  // F16 / F32: EncodeMatrix writes them whole
  }
}

}  // namespace windquant::exporter
