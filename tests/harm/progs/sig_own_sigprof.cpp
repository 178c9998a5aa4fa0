// The program's own profiling: a SIGPROF handler and ITIMER_PROF (100 Hz) installed in main,
// after sprofil's constructor. Mode "sigaction", "signal" (glibc's signal(), which does not
// go through the sigaction PLT entry) or "ign" (SIGPROF set to SIG_IGN, no timer). Reports
// the signals it got and its CPU time; prints what it reads back of its disposition.
#include <signal.h>
#include <string.h>
#include <sys/time.h>

#include <atomic>

#include "sig_common.hpp"

static std::atomic<int> g_signals{0}, g_foreign{0};
static void on_prof(int) {
  g_signals.fetch_add(1, std::memory_order_relaxed);
}
// The same, knowing where each signal came from: ITIMER_PROF's are SI_KERNEL.
static void on_prof_info(int, siginfo_t* si, void*) {
  (si->si_code == SI_KERNEL ? g_signals : g_foreign).fetch_add(1, std::memory_order_relaxed);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "sigaction";
  struct sigaction old;
  sigaction(SIGPROF, nullptr, &old);
  printf("before: %s\n", old.sa_handler == SIG_DFL ? "SIG_DFL" : "other");
  if (strcmp(mode, "ign") == 0) {
    signal(SIGPROF, SIG_IGN);
    sigaction(SIGPROF, nullptr, &old);
    printf("after: %s\n", old.sa_handler == SIG_IGN ? "SIG_IGN" : "other");
    const uint64_t t0 = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
    sig_burn(400000000);
    raise(SIGPROF);  // ignored: the program lives on
    report("cpu %llu\n", (unsigned long long)(cpu_ns(CLOCK_PROCESS_CPUTIME_ID) - t0));
    puts("survived");
    return 0;
  }
  if (strcmp(mode, "signal") == 0) {
    signal(SIGPROF, on_prof);
  } else {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_prof_info;
    sa.sa_flags = SA_RESTART | SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPROF, &sa, nullptr);
  }
  sigaction(SIGPROF, nullptr, &old);
  const bool own = old.sa_handler == on_prof || old.sa_sigaction == on_prof_info;
  printf("after: %s\n", own ? "own handler" : "other");
  const itimerval it{{0, 10000}, {0, 10000}};
  setitimer(ITIMER_PROF, &it, nullptr);
  itimerval back;
  getitimer(ITIMER_PROF, &back);
  printf("itimer interval: %ld us\n", static_cast<long>(back.it_interval.tv_usec));
  const uint64_t t0 = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
  sig_burn(600000000);
  const itimerval off{};
  setitimer(ITIMER_PROF, &off, nullptr);
  const uint64_t cpu = cpu_ns(CLOCK_PROCESS_CPUTIME_ID) - t0;
  report("signals %d cpu %llu\n", g_signals.load(), (unsigned long long)cpu);
  printf("signals not from its ITIMER_PROF: %d\n", g_foreign.load());
  return 0;
}
