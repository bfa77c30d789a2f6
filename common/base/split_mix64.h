// SplitMix64 finaliser: a well-mixed 64-bit value of `x`. Seeds of generators
// go through it: the CPU generator (mt19937) keeps only the low 32 bits of its
// seed, so seeds that differ only in high bits (e.g. actor index << 48) would
// otherwise give identical sample streams.
#ifndef WINDQUANT_COMMON_BASE_SPLIT_MIX64_H_
#define WINDQUANT_COMMON_BASE_SPLIT_MIX64_H_

#include <cstdint>

namespace windquant::base {

inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace windquant::base

#endif  // WINDQUANT_COMMON_BASE_SPLIT_MIX64_H_
