// What the faces share: validation helpers, the region builder for the seeds' scaled
// formulas, and installing a face's table on the engine's face channel. Every face call runs
// under FaceLock, so the faces never race each other.
#pragma once

#include <cerrno>
#include <cstdint>

#include "clock/runtime.hpp"
#include "engine/engine.hpp"
#include "util/memcheck.hpp"
#include "util/mutex.hpp"

namespace sprofil::faces {

// Which interface (and form) last turned profiling on through the face channel.
enum class Owner : uint8_t { kNone, kHpux, kSysv, kBsd, kTru64, kTru64Ext, kAix1, kAix2, kN64 };

struct FaceLock : util::MutexGuard {
  FaceLock();
};

// The face channel's current owner (guarded by FaceLock).
Owner owner();

inline int fail(int e) {
  errno = e;
  return -1;
}

// The clock the faces use unless a face sets its own interval, from the environment:
// SPROFIL_CLOCK (auto or the name of any row of SPROF_CLOCKS: cpu, itimer, perf, wall,
// sampler; rt::parse_clock's names; unset or another word: cpu) and SPROFIL_HZ (default 1000;
// a bad value is said once on stderr and ignored: the rule is util::hz_from_env's).
rt::ClockRequest default_clock();

// Publishes the regions (and optional overflow counter) on the face channel for `who`;
// with no region and no overflow it disables profiling instead. Returns 0 or an errno value
// (EINVAL for a table the engine rejects); on error nothing changes.
int apply(Owner who, const engine::Region* regions, size_t n, const engine::Counters* overflow,
          const rt::ClockRequest& clock);

// Turns face profiling off (the counters keep their values).
void disable();

// A region for the seeds' scaled formula: element = ((((pc - map.base) >> map.pre_shift) *
// map.scale) >> 16) >> map.post_shift over `counters`, clipped to [clip_lo, clip_hi) (the
// whole address space by default). Scale 0 maps every pc of the clip range to element 0.
// Returns false when no pc maps into the buffer.
bool scaled_region(const engine::BinMap& map, const engine::Counters& counters, engine::Region* out,
                   uintptr_t clip_lo = 0, uintptr_t clip_hi = UINTPTR_MAX);

}  // namespace sprofil::faces
