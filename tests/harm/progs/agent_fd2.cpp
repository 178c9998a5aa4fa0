// Closes its stderr and opens a data file of its own, which gets fd 2 (as a daemon may), then
// takes SIGPROF and sets ITIMER_PROF (100 Hz) for 100 ms of CPU: under sprofil's itimer clock
// that makes sprofil move to another clock and say so. The file must hold only the program's
// lines.
#include <fcntl.h>
#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstring>

#include "sig_common.hpp"

static volatile sig_atomic_t g_ticks = 0;
static void on_prof(int) {
  g_ticks = g_ticks + 1;
}

int main() {
  close(2);
  const int fd = open("data.txt", O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
  if (fd != 2) return 3;
  const char first[] = "first line of the program's data\n";
  if (write(fd, first, strlen(first)) < 0) return 4;
  struct sigaction sa {};
  sa.sa_handler = on_prof;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGPROF, &sa, nullptr);
  const itimerval it{{0, 10000}, {0, 10000}};
  setitimer(ITIMER_PROF, &it, nullptr);
  sig_burn(100000000);
  const itimerval off{};
  setitimer(ITIMER_PROF, &off, nullptr);
  const char last[] = "last line\n";
  if (write(fd, last, strlen(last)) < 0) return 5;
  return 0;
}
