#include "util/message.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace sprofil::util {
namespace {

// fd 2 when the runtime loaded (a forked child inherits the table and these; an exec'd image
// loads the runtime again).
bool g_had_stderr = false;
dev_t g_dev = 0;
ino_t g_ino = 0;

__attribute__((constructor(101))) void note_stderr() {
  struct stat st;
  g_had_stderr = fstat(2, &st) == 0;
  g_dev = st.st_dev;
  g_ino = st.st_ino;
}

// Writes to fd 2 without a SIGPIPE: where the reader of the program's stderr has gone (`prog
// 2>&1 | head` after head ended), the write raises SIGPIPE, which killed a program that never
// wrote there itself. SIGPIPE is blocked in this thread for the write (the kernel's calls: the
// runtime interposes the libc ones), and the one the write raised (EPIPE) is taken back, unless
// one was pending before (the program's own, left as it is). Nothing is written where the
// block fails.
void write_without_sigpipe(const char* line, size_t n) {
  constexpr size_t kSigsetBytes = 8;  // the kernel's sigset
  const uint64_t pipe = uint64_t{1} << (SIGPIPE - 1);
  uint64_t old = 0, pending = 0;
  if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, &pipe, &old, kSigsetBytes) != 0) return;
  const bool was_pending =
      syscall(SYS_rt_sigpending, &pending, kSigsetBytes) != 0 || (pending & pipe) != 0;
  if (write(2, line, n) < 0 && errno == EPIPE && !was_pending) {
    const timespec now{0, 0};
    syscall(SYS_rt_sigtimedwait, &pipe, nullptr, &now, kSigsetBytes);
  }
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, nullptr, kSigsetBytes);
}

}  // namespace

void message(const char* line, size_t n) {
  const int saved = errno;
  struct stat st;
  if (g_had_stderr && fstat(2, &st) == 0 && st.st_dev == g_dev && st.st_ino == g_ino)
    write_without_sigpipe(line, n);
  errno = saved;
}

}  // namespace sprofil::util
