// dlopen/dlclose churn next to a forking thread:
//   agent_dlchurn PLUGIN CYCLES
// The main thread runs CYCLES dlopen/dlclose cycles of PLUGIN (calling into it each time)
// while a second thread forks (the child calls _exit at once: exit could deadlock on the
// loader's lock, held by the dlopen thread at the fork) and reaps, until the cycles are done or
// it forked kMaxForks times (each child under the agent leaves a FILE.PID behind: bounded).
// With CYCLES 0 the thread makes all its forks with no churn beside it.
// Prints the lines of /proc/self/maps after the first 1000 cycles and at the end, the cycles
// done and the forks per second.
#include <dlfcn.h>
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

static std::atomic<bool> g_done{false};
static std::atomic<long> g_forks{0};
static double g_fork_secs = 0;  // the time the forks took
constexpr long kMaxForks = 200;

static double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int maps_lines() {
  FILE* f = fopen("/proc/self/maps", "r");
  if (!f) return -1;
  int n = 0;
  for (int c; (c = fgetc(f)) != EOF;) n += c == '\n';
  fclose(f);
  return n;
}

static void* forker(void*) {
  const double t0 = now_s();
  while (!g_done.load() && g_forks.load() < kMaxForks) {
    const pid_t pid = fork();
    if (pid == 0) _exit(0);
    if (pid < 0) break;
    int st;
    waitpid(pid, &st, 0);
    g_forks.fetch_add(1);
  }
  g_fork_secs = now_s() - t0;
  return nullptr;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const long cycles = atol(argv[2]);
  pthread_t t;
  const double t0 = now_s();
  pthread_create(&t, nullptr, forker, nullptr);
  int maps_early = -1;
  long done = 0;
  for (; done < cycles; ++done) {
    void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      fprintf(stderr, "dlopen failed at cycle %ld: %s\n", done, dlerror());
      break;
    }
    auto work = reinterpret_cast<long (*)(long)>(dlsym(h, "agent_plugin_work"));
    if (work) work(100);
    dlclose(h);
    if (done == 1000) maps_early = maps_lines();
  }
  const double secs = now_s() - t0;
  if (cycles > 0) g_done.store(true);  // 0 cycles: the forks alone, all kMaxForks of them
  pthread_join(t, nullptr);
  printf("cycles %ld\nmaps_early %d\nmaps_end %d\nseconds %.3f\nforks_per_s %.1f\n", done,
         maps_early, maps_lines(), secs, g_forks.load() / g_fork_secs);
  return done == cycles ? 0 : 1;
}
