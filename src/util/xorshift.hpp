// xorshift64 (Marsaglia, 13/7/17): the one small random generator of the runtime and the
// record parent (period jitter, random first phases). Plain arithmetic: signal-safe. A nonzero
// state never becomes 0.
#pragma once

#include <cstdint>

namespace sprofil::util {

constexpr uint64_t xorshift_next(uint64_t x) {
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return x;
}

// Advances *state and returns the new value.
inline uint64_t xorshift(uint64_t* state) {
  return *state = xorshift_next(*state);
}

}  // namespace sprofil::util
