// 2000 short threads (or 2 x argv[1]), each burning 0.5 ms of CPU (half a period at 1000 Hz),
// two at a time. Reports the CPU time they measured themselves, and the process's.
#include <pthread.h>

#include <atomic>

#include "sig_common.hpp"

static std::atomic<uint64_t> g_cpu{0};

static void* shorty(void*) {
  sig_burn(500000);
  g_cpu.fetch_add(cpu_ns(CLOCK_THREAD_CPUTIME_ID), std::memory_order_relaxed);
  return nullptr;
}

int main(int argc, char** argv) {
  const int pairs = argc > 1 ? atoi(argv[1]) : 1000;
  for (int i = 0; i < pairs; ++i) {
    pthread_t a, b;
    pthread_create(&a, nullptr, shorty, nullptr);
    pthread_create(&b, nullptr, shorty, nullptr);
    pthread_join(a, nullptr);
    pthread_join(b, nullptr);
  }
  report("thread_cpu %llu process_cpu %llu\n", (unsigned long long)g_cpu.load(),
         (unsigned long long)cpu_ns(CLOCK_PROCESS_CPUTIME_ID));
  puts("done");
  return 0;
}
