// Seeded pseudo-random bytes for tests that move opaque files (stores, streams).
#ifndef WINDQUANT_COMMON_TESTING_RANDOM_BYTES_H_
#define WINDQUANT_COMMON_TESTING_RANDOM_BYTES_H_

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>

namespace windquant::testing {

// `n` bytes from std::mt19937 seeded with `seed`: the same bytes on every machine.
inline std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

}  // namespace windquant::testing

#endif  // WINDQUANT_COMMON_TESTING_RANDOM_BYTES_H_
