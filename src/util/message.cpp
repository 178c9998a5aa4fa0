#include "util/message.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

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

}  // namespace

void message(const char* line, size_t n) {
  const int saved = errno;
  struct stat st;
  if (g_had_stderr && fstat(2, &st) == 0 && st.st_dev == g_dev && st.st_ino == g_ino)
    (void)!write(2, line, n);
  errno = saved;
}

}  // namespace sprofil::util
