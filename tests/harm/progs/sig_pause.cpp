// Waits with sigpause, System V's (glibc's __xpg_sigpause: the mask less SIGALRM) and BSD's
// (__sigpause with a mask), for a SIGALRM 150 ms away each time, and prints how many times each
// wait returned before the alarm came: 1 natively, whatever signals a profiler takes meanwhile.
#include <signal.h>
#include <sys/time.h>

#include <atomic>
#include <cstdio>

#include "sig_common.hpp"

extern "C" int __sigpause(int sig_or_mask, int is_sig);
extern "C" int __xpg_sigpause(int sig);

static std::atomic<int> g_alarms{0};

static void on_alarm(int) {
  g_alarms.fetch_add(1);
}

static int wait_for_alarm(bool bsd) {
  const int before = g_alarms.load();
  itimerval t{};
  t.it_value.tv_usec = 150000;
  setitimer(ITIMER_REAL, &t, nullptr);
  int returns = 0;
  while (g_alarms.load() == before && returns < 1000000) {
    // SIGALRM blocked outside the wait, as sigpause's users do.
    if (bsd)
      __sigpause(0, 0);  // an empty mask for the wait
    else
      __xpg_sigpause(SIGALRM);
    ++returns;
  }
  return returns;
}

int main() {
  set_signal(SIGALRM, on_alarm, SIG_BLOCK);
  std::printf("system v: %d\n", wait_for_alarm(false));
  std::printf("bsd: %d\n", wait_for_alarm(true));
  return 0;
}
