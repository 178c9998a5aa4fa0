// Mode "workers": blocks every signal before creating two workers that burn CPU (like
// `xz -T2`), then reads its mask back. Mode "sigwait": a thread waits in sigtimedwait on a
// full set while main (all signals blocked) burns CPU; it must never receive a signal.
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "sig_common.hpp"

static void* worker(void*) {
  sig_burn(300000000);
  return nullptr;
}

static int g_received = 0;
static void* waiter(void*) {
  sigset_t all;
  sigfillset(&all);
  for (int i = 0; i < 6; ++i) {
    siginfo_t si;
    const timespec ts{0, 100000000};
    const int s = sigtimedwait(&all, &si, &ts);
    if (s > 0) {
      ++g_received;
      report("received %d\n", s);
    }
  }
  return nullptr;
}

int main(int argc, char** argv) {
  const bool wait_mode = argc > 1 && strcmp(argv[1], "sigwait") == 0;
  sigset_t all, back;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, nullptr);
  const uint64_t t0 = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
  if (wait_mode) {
    pthread_t t;
    pthread_create(&t, nullptr, waiter, nullptr);
    sig_burn(400000000);
    pthread_join(t, nullptr);
    printf("received %d\n", g_received);
  } else {
    pthread_t t[2];
    for (pthread_t& x : t) pthread_create(&x, nullptr, worker, nullptr);
    for (pthread_t& x : t) pthread_join(x, nullptr);
  }
  pthread_sigmask(SIG_BLOCK, nullptr, &back);
  int blocked = 0;
  for (int s = 1; s < NSIG; ++s) blocked += sigismember(&back, s) == 1;
  int full = 0;
  for (int s = 1; s < NSIG; ++s) full += sigismember(&all, s) == 1;
  printf("mask reads back full: %s\n", blocked == full ? "yes" : "no");
  report("cpu %llu\n", (unsigned long long)(cpu_ns(CLOCK_PROCESS_CPUTIME_ID) - t0));
  return 0;
}
