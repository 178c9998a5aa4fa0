// The interposed mlockall and munlockall. A program that locks its memory (real-time audio,
// trading systems, key handling: mlockall(MCL_CURRENT | MCL_FUTURE)) locked the agent's
// mappings with its own: each object's record with its counter arrays (4 bytes per byte of
// text at 1-byte bins), whose pages the lock makes present. A small C program that locks
// itself and then loads libstdc++ held 17 MB locked at its lock instead of 2.4, and 33 MB
// instead of 5.6 after the dlopen: memory that can never be reclaimed, taken from the
// program's RLIMIT_MEMLOCK and the machine. So after the program's mlockall the agent
// unlocks its own mappings (the header and every record), and while MCL_FUTURE is in force
// it unlocks each new one as soon as it is mapped (unlock_new). Locks are not inherited by a
// forked child (fork.cpp forgets MCL_FUTURE) nor kept across an exec. The pages the lock
// made present stay in the page cache, reclaimable (tests/harm
// `NoHarm.LockedMemoryAsNatively`).
#include <sys/mman.h>

#include <atomic>
#include <cerrno>

#include "agent/state.hpp"
#include "clock/interpose.hpp"
#include "util/export.hpp"

namespace sprofil::agent {
namespace {
std::atomic<bool> g_lock_future{false};  // the program's MCL_FUTURE is in force
}  // namespace

void unlock_new(void* at, size_t len) {
  if (g_lock_future.load(std::memory_order_relaxed)) munlock(at, len);
}

void forget_lock_future() {
  g_lock_future.store(false, std::memory_order_relaxed);
}

namespace {
void after_mlockall(int flags) {
  Lock lock;
  g_lock_future.store((flags & MCL_FUTURE) != 0, std::memory_order_relaxed);
  if (!(flags & MCL_CURRENT) || !g_hdr) return;
  munlock(g_hdr, SPROF_PAGE);
  for (size_t i = 0; i < g_nregs; ++i) munlock(g_regs[i].rec, mapped_bytes(g_regs[i]));
}
}  // namespace

}  // namespace sprofil::agent

namespace {
std::atomic<int (*)(int)> g_mlockall{nullptr};
std::atomic<int (*)()> g_munlockall{nullptr};
}  // namespace

SPROFIL_EXPORT int mlockall(int flags) __THROW {
  const auto real = sprofil::rt::real_fn(g_mlockall, "mlockall");
  if (!real) return errno = ENOSYS, -1;
  const int rc = real(flags);
  if (rc == 0) {
    const int e = errno;
    sprofil::agent::after_mlockall(flags);
    errno = e;
  }
  return rc;
}

SPROFIL_EXPORT int munlockall() __THROW {
  const auto real = sprofil::rt::real_fn(g_munlockall, "munlockall");
  if (!real) return errno = ENOSYS, -1;
  const int rc = real();
  if (rc == 0) sprofil::agent::forget_lock_future();
  return rc;
}
