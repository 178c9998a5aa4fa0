// drain_blocked MODE SECONDS: like `xz -T2`, blocks every signal before it creates its two
// worker threads (MODE "libc": pthread_sigmask; MODE "raw": the rt_sigprocmask system call,
// behind any interposer's back), then each worker burns SECONDS of its own CPU time in
// blocked_worker. Prints "worker_cpu_ns N" (both workers' CPU time, from their thread clocks).
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace {
long thread_cpu_ns() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1000000000L + t.tv_nsec;
}
double g_seconds = 0.5;
long g_used[2];
}  // namespace

extern "C" __attribute__((noinline)) double blocked_worker(long* used) {
  const long start = thread_cpu_ns(), end = start + static_cast<long>(g_seconds * 1e9);
  double x = 1;
  while (thread_cpu_ns() < end)
    for (int i = 0; i < 5000; ++i) x = x * 1.0000001 + 1e-9;
  *used = thread_cpu_ns() - start;
  return x;
}

static void* run(void* arg) {
  blocked_worker(static_cast<long*>(arg));
  return nullptr;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s libc|raw SECONDS\n", argv[0]);
    return 2;
  }
  g_seconds = std::atof(argv[2]);
  sigset_t all;
  sigfillset(&all);
  if (std::strcmp(argv[1], "raw") == 0) {
    if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, nullptr, 8) != 0) return 3;
  } else if (pthread_sigmask(SIG_BLOCK, &all, nullptr) != 0) {
    return 3;
  }
  pthread_t t[2];
  for (int i = 0; i < 2; ++i)
    if (pthread_create(&t[i], nullptr, run, &g_used[i]) != 0) return 4;
  for (pthread_t& th : t) pthread_join(th, nullptr);
  std::printf("worker_cpu_ns %ld\n", g_used[0] + g_used[1]);
  return 0;
}
