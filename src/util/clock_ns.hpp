// A clock's time in nanoseconds: the one conversion from clock_gettime for the runtime and
// the host tools. clock_gettime is async-signal-safe, so this is too.
#pragma once

#include <time.h>

#include <cstdint>

namespace sprofil::util {

// The time of clock c in ns, 0 if it cannot be read (a CPU clock of a thread or process
// that is gone).
inline uint64_t clock_ns(clockid_t c) {
  timespec ts;
  if (clock_gettime(c, &ts) != 0) return 0;
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace sprofil::util
