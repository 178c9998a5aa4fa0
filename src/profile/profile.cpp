#include "profile/profile.hpp"

#include "profile/sprof_format.h"

namespace sprofil::profile {

namespace {
uint64_t sat_add(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}
}  // namespace

const char* clock_name(Clock c) {
  switch (c) {
    case Clock::kCpu:
      return "cpu";
    case Clock::kItimer:
      return "itimer";
    case Clock::kPerf:
      return "perf";
    case Clock::kWall:
      return "wall";
  }
  return "unknown";
}

uint64_t Region::total() const {
  uint64_t t = 0;
  for (uint64_t c : counts) t = sat_add(t, c);
  return t;
}

bool Profile::finished() const {
  return (flags & SPROF_F_FINISHED) != 0;
}

uint64_t Profile::total_samples() const {
  uint64_t t = overflow;
  for (const Region& r : regions) t = sat_add(t, r.total());
  return t;
}

}  // namespace sprofil::profile
