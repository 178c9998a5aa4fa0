// A program to look at while it runs (tests/live). Burns CPU in burn() for SECONDS of wall
// time (bounded: it stops then whatever happens) and prints a line when the live service is up.
//   live_prog n64 SECONDS [HOLD] the N64 face: osProfileInit/Start over burn()'s text
//   live_prog api SECONDS [HOLD] the modern API session over this program, sprofil_live_serve
//                                With HOLD (a path): after the profile is stopped, print
//                                "stopped" and wait (at most 20 s) for HOLD to exist, so that
//                                the final counts can be fetched from the live service.
//   live_prog plain SECONDS      no profiling calls (run it under `sprofil record --live`)
//   live_prog n64fork SECONDS    the N64 face, then fork: the child prints "ready CHILD PARENT"
//                                and burns; the parent waits for it
//   live_prog n64flush           N64: profile 0.5 s, Stop, then one osProfileFlush, and print
//                                "flush err=E us=T sum=S" (S: the counters' sum the snapshot has)
//   live_prog fd SECONDS         no profiling calls: after SECONDS, open /dev/null and print
//                                "fd N", the lowest free number it got
//   live_prog umask              the modern API session served (sprofil_live_serve), then print
//                                "umask calls N": the calls of umask() made meanwhile, counted
//                                by this program's own umask, which comes first in every
//                                library's lookup (the process's umask is every thread's)
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "sprofil/sprofil.h"
#include "sprofil/ultra64.h"

int g_umask_calls = 0;

extern "C" mode_t umask(mode_t mask) noexcept {
  ++g_umask_calls;
  return static_cast<mode_t>(syscall(SYS_umask, mask));
}

namespace {

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

volatile unsigned long g_sink;

double cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

// burn() spends two thirds of its CPU time in burn_hot and one third in burn_cold (slices of
// 20 and 10 ms of the thread's CPU time): two functions whose shares the tests compare between
// a snapshot and the final profile. Each stops at the wall-clock `end` too.
__attribute__((noinline)) void burn_hot(double cpu_until, double end) {
  unsigned long x = 1;
  while (cpu_s() < cpu_until && now_s() < end)
    for (int i = 0; i < 20000; ++i) x = x * 6364136223846793005ul + 1442695040888963407ul;
  g_sink = x;
}
__attribute__((noinline)) void burn_cold(double cpu_until, double end) {
  unsigned long x = 3;
  while (cpu_s() < cpu_until && now_s() < end)
    for (int i = 0; i < 20000; ++i) x = x * 2862933555777941757ul + 3037000493ul;
  g_sink = x;
}
__attribute__((noinline)) void burn(double seconds) {
  const double end = now_s() + seconds;
  while (now_s() < end) {
    burn_hot(cpu_s() + 0.020, end);
    burn_cold(cpu_s() + 0.010, end);
  }
}

// With a HOLD path: say so and wait for it (bounded).
void hold(const char* path) {
  if (!path) return;
  printf("stopped\n");
  fflush(stdout);
  for (int i = 0; i < 2000 && access(path, F_OK) != 0; ++i) usleep(10000);
}

constexpr u32 kWords = 16384;  // 64 KiB of text from the page of the first burn function
alignas(4) u16 g_histo[kWords];

OSProf segment() {
  uintptr_t first = reinterpret_cast<uintptr_t>(&burn);
  for (auto* f : {&burn_hot, &burn_cold})
    if (reinterpret_cast<uintptr_t>(f) < first) first = reinterpret_cast<uintptr_t>(f);
  const auto lo = first & ~uintptr_t{4095};
  return OSProf{g_histo, kWords, reinterpret_cast<u32*>(lo),
                reinterpret_cast<u32*>(lo + 4 * (kWords - 1))};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const char* mode = argv[1];
  const double seconds = argc > 2 ? atof(argv[2]) : 1;
  const char* hold_path = argc > 3 ? argv[3] : nullptr;
  if (strcmp(mode, "fd") == 0) {
    const timespec wait{static_cast<time_t>(seconds),
                        static_cast<long>((seconds - static_cast<time_t>(seconds)) * 1e9)};
    nanosleep(&wait, nullptr);
    printf("fd %d\n", open("/dev/null", O_RDONLY));
    return 0;
  }
  if (strcmp(mode, "n64") == 0) {
    OSProf p = segment();
    osProfileInit(&p, 1);
    osProfileStart(1000);
    if (osProfileLastError()) return 3;
    printf("ready %d\n", getpid());
    fflush(stdout);
    burn(seconds);
    osProfileStop();
    hold(hold_path);
  } else if (strcmp(mode, "n64fork") == 0) {
    OSProf p = segment();
    osProfileInit(&p, 1);
    osProfileStart(1000);
    if (osProfileLastError()) return 3;
    fflush(stdout);
    const pid_t child = fork();
    if (child < 0) return 4;
    if (child == 0) {
      printf("ready %d %d\n", getpid(), getppid());
      fflush(stdout);
      burn(seconds);
      printf("child done\n");
      return 0;
    }
    int st = 0;
    if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return 5;
    osProfileStop();
  } else if (strcmp(mode, "api") == 0) {
    // The auto clock (perf where it works): the cpu clock's attribution skews on a loaded
    // machine and drifts with the load, which would blur the comparison of a snapshot's
    // shares with the final ones (tests/live).
    sprofil_options o;
    sprofil_options_init(&o);
    o.clock = SPROFIL_CLOCK_AUTO;
    sprofil_session* s = sprofil_create(&o);
    if (!s || sprofil_add_object(s, reinterpret_cast<const void*>(&burn)) != 0 ||
        sprofil_start(s) != 0 || sprofil_live_serve(s) != 0)
      return 3;
    printf("ready %d\n", getpid());
    fflush(stdout);
    burn(seconds);
    sprofil_stop(s);
    hold(hold_path);
    sprofil_destroy(s);
  } else if (strcmp(mode, "umask") == 0) {
    sprofil_options o;
    sprofil_options_init(&o);
    sprofil_session* s = sprofil_create(&o);
    if (!s || sprofil_add_object(s, reinterpret_cast<const void*>(&burn)) != 0) return 3;
    g_umask_calls = 0;
    if (sprofil_live_serve(s) != 0) return 4;
    printf("umask calls %d\n", g_umask_calls);
    sprofil_live_serve(nullptr);
    sprofil_destroy(s);
  } else if (strcmp(mode, "plain") == 0) {
    printf("ready %d\n", getpid());
    fflush(stdout);
    burn(seconds);
  } else if (strcmp(mode, "n64flush") == 0) {
    OSProf p = segment();
    osProfileInit(&p, 1);
    osProfileStart(1000);
    burn(0.5);
    osProfileStop();
    const double t0 = now_s();
    osProfileFlush();
    const double t1 = now_s();
    const int err = osProfileLastError();
    static u16 snap[kWords];
    osProfileFlushSnapshot(snap, sizeof snap);
    unsigned long long sum = 0;
    for (u16 v : snap) sum += v;
    printf("flush err=%d us=%lld sum=%llu\n", err, static_cast<long long>((t1 - t0) * 1e6), sum);
  } else {
    return 2;
  }
  printf("done\n");
  return 0;
}
