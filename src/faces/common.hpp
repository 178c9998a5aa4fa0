// What the faces share: validation helpers, the region builder for the seeds' scaled
// formulas, and installing a face's table on the engine's face channel. Every face call runs
// under FaceLock, so the faces never race each other.
#pragma once

#include <cerrno>
#include <cstdint>

#include "clock/runtime.hpp"
#include "engine/engine.hpp"
#include "util/memcheck.hpp"

namespace sprofil::faces {

// Which interface (and form) last turned profiling on through the face channel.
enum class Owner : uint8_t { kNone, kHpux, kSysv, kBsd, kTru64, kTru64Ext, kAix1, kAix2, kN64 };

struct FaceLock {
  FaceLock();
  ~FaceLock();
  FaceLock(const FaceLock&) = delete;
  FaceLock& operator=(const FaceLock&) = delete;
};

// The face channel's current owner (guarded by FaceLock).
Owner owner();

inline int fail(int e) {
  errno = e;
  return -1;
}

// The clock the faces use unless a face sets its own interval: SPROFIL_CLOCK (cpu, itimer,
// wall) and SPROFIL_HZ (default 1000) from the environment.
rt::ClockRequest default_clock();

// Publishes the regions (and optional overflow counter) on the face channel for `who`;
// with no region and no overflow it disables profiling instead. Returns 0 or an errno value
// (EINVAL for a table the engine rejects); on error nothing changes.
int apply(Owner who, const engine::Region* regions, size_t n, const engine::Counters* overflow,
          const rt::ClockRequest& clock);

// Turns face profiling off (the counters keep their values).
void disable();

// A region for the seeds' scaled formula: element = ((((pc - offset) >> pre_shift) * scale)
// >> 16) >> post_shift over `nelems` counters of `width` bytes at `base`, clipped to
// [clip_lo, clip_hi). scale 0 maps every pc of the clip range to element 0. Returns false
// when no pc maps into the buffer.
bool scaled_region(uintptr_t offset, uint64_t scale, uint8_t pre_shift, uint8_t post_shift,
                   void* base, uint64_t nelems, uint8_t width, engine::Policy policy,
                   uint64_t limit, uintptr_t clip_lo, uintptr_t clip_hi, engine::Region* out);

}  // namespace sprofil::faces
