#include "profile/profile.hpp"

#include <iterator>

#include "profile/sprof_format.h"

namespace sprofil::profile {

namespace {
uint64_t sat_add(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}
}  // namespace

namespace {
struct ClockInfo {
  const char* name;
  const char* description;
};
#define SPROF_CLOCK_INFO_(NAME, id, name, description) {name, description},
constexpr ClockInfo kClocks[] = {SPROF_CLOCKS(SPROF_CLOCK_INFO_)};
#undef SPROF_CLOCK_INFO_
static_assert(uint32_t(Clock::kCpu) == SPROF_CLOCK_CPU &&
                  uint32_t(Clock::kItimer) == SPROF_CLOCK_ITIMER &&
                  uint32_t(Clock::kPerf) == SPROF_CLOCK_PERF &&
                  uint32_t(Clock::kWall) == SPROF_CLOCK_WALL,
              "profile::Clock follows SPROF_CLOCKS");
static_assert(std::size(kClocks) == SPROF_CLOCK_COUNT);
}  // namespace

const char* clock_name(Clock c) {
  return uint32_t(c) < SPROF_CLOCK_COUNT ? kClocks[uint32_t(c)].name : "unknown";
}

const char* clock_description(Clock c) {
  return uint32_t(c) < SPROF_CLOCK_COUNT ? kClocks[uint32_t(c)].description : "unknown clock";
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
