// Samples with a kernel part over counters in reused heap memory: burn_sys() spends its CPU
// time in system calls made from its own code, and poison_heap() leaves malloc's free lists
// full of 0xA5 bytes. Shared by the faces' and the API's tests of the regions a table is
// built from (engine::alloc_regions).
#pragma once

#include <sys/syscall.h>
#include <time.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#if defined(__x86_64__) || defined(__aarch64__)
constexpr bool kInlineSyscall = true;  // burn_sys below spells this architecture's call out
#else
constexpr bool kInlineSyscall = false;
#endif

// Burns `ms` of this thread's CPU time in getppid() calls made inline, so the pc of a sample
// taken at the return from the kernel lies in this function and the sample has a kernel part.
// Exported (the test binaries link with ENABLE_EXPORTS): found by its ELF symbol's extent.
extern "C" inline __attribute__((noinline, noipa, used, aligned(64))) void burn_sys(double ms) {
  const auto cpu_ms = [] {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
  };
  const double end = cpu_ms() + ms;
  do {
    for (int i = 0; i < 1000; ++i) {
#if defined(__x86_64__)
      long ret = SYS_getppid;
      asm volatile("syscall" : "+a"(ret) : : "rcx", "r11", "memory");
#elif defined(__aarch64__)
      register long x8 asm("x8") = SYS_getppid;
      register long x0 asm("x0");
      asm volatile("svc #0" : "=r"(x0) : "r"(x8) : "memory");
#endif
    }
  } while (kInlineSyscall && cpu_ms() < end);
}

// Fills the heap's free lists with chunks of every small size holding 0xA5 bytes: memory the
// runtime then takes from malloc() holds that, not zeros, as in a long-running program.
inline void poison_heap() {
  std::vector<void*> blocks;
  for (size_t size = 16; size <= 2048; size += 16)
    for (int i = 0; i < 16; ++i)
      if (void* p = malloc(size)) {
        memset(p, 0xA5, size);
        blocks.push_back(p);
      }
  for (void* p : blocks) free(p);
}
