// siglongjmp out of the program's own signal handler, with signals arriving while sprofil's
// handler may run; then dlopen/dlclose cycles (each one a table exchange in the agent).
// Reports the engine's exchange counters (sprofil_debug_engine_stats, when loaded).
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

#include <atomic>

#include "sig_common.hpp"

static sigjmp_buf g_jmp;
static std::atomic<bool> g_stop{false};
static std::atomic<int> g_jumps{0};
static pthread_t g_main;

static volatile sig_atomic_t g_armed = 0;  // g_jmp is complete and its frame alive

static void on_usr1(int) {
  if (!g_armed) return;
  g_armed = 0;
  siglongjmp(g_jmp, 1);
}

static void* pester(void*) {
  for (int i = 0; i < 2000000 && !g_stop.load(); ++i) pthread_kill(g_main, SIGUSR1);
  return nullptr;
}

int main(int argc, char** argv) {
  g_main = pthread_self();
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // with SA_NODEFER a storm of nested SIGUSR1 overflowed the stack
  sigaction(SIGUSR1, &sa, nullptr);
  pthread_t t;
  pthread_create(&t, nullptr, pester, nullptr);
  const uint64_t end = cpu_ns(CLOCK_THREAD_CPUTIME_ID) + 300000000;
  while (cpu_ns(CLOCK_THREAD_CPUTIME_ID) < end) {
    if (sigsetjmp(g_jmp, 1)) g_jumps.fetch_add(1, std::memory_order_relaxed);
    g_armed = 1;
    sig_burn(100000);
    g_armed = 0;
  }
  g_stop.store(true);
  pthread_join(t, nullptr);
  signal(SIGUSR1, SIG_IGN);
  const char* lib = argc > 1 ? argv[1] : "libz.so.1";
  int cycles = 0;
  for (int i = 0; i < 5; ++i) {
    void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) break;
    dlclose(h);
    ++cycles;
  }
  printf("cycles %d\n", cycles);
  using stats_fn = int (*)(uint64_t*);
  if (auto f = reinterpret_cast<stats_fn>(dlsym(RTLD_DEFAULT, "sprofil_debug_engine_stats"))) {
    uint64_t s[3] = {0, 0, 0};
    f(s);
    report("exchanges %llu retired %llu leaked %llu jumps %d\n", (unsigned long long)s[0],
           (unsigned long long)s[1], (unsigned long long)s[2], g_jumps.load());
  }
  return 0;
}
