// Waiting for one of the runtime's threads to have left the process. A join returns when the
// kernel clears the thread's tid, and a detached thread says it ended before it returns: both
// a moment before the kernel takes the thread out of its thread group, and until then the
// calls that need a process of one thread (unshare of a user namespace, setns into one: EINVAL)
// fail. Under load that moment was long enough to matter (src/clock/alone.cpp). Header-only,
// libc only.
#pragma once

#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "util/clock_ns.hpp"
#include "util/join.hpp"

namespace sprofil::util {

// Until thread tid of this process is no longer in its thread group (its /proc/self/task
// entry is gone, which the kernel removes as it unlinks the thread from the group), at most
// until `until_ns` of CLOCK_MONOTONIC. At once without /proc.
inline void wait_thread_gone(pid_t tid, uint64_t until_ns) {
  if (tid <= 0) return;
  char path[48];
  if (!Join(path, sizeof path).add("/proc/self/task/").add(static_cast<long>(tid)).ok()) return;
  while (access(path, F_OK) == 0 && clock_ns(CLOCK_MONOTONIC) < until_ns) {
    const timespec tick{0, 50 * 1000};
    nanosleep(&tick, nullptr);
  }
}

}  // namespace sprofil::util
