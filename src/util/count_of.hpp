// "1 sample", "3 samples": a count with its noun, singular or plural (host side: the reports'
// labels and record's summary line).
#pragma once

#include <cstdint>
#include <string>

namespace sprofil::util {

inline std::string count_of(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace sprofil::util
