// Mode "nofile": with a small RLIMIT_NOFILE (set by the caller), starts two threads, then
// opens /dev/null until EMFILE and prints how many it got. Reports the fds that were open at
// main's start other than perf events (the agent's own; not the clock's business).
// Mode "sysexit": 50 threads that end with a raw SYS_exit (no key destructor); counts the
// process's fds and POSIX timers before and after: prints the differences.
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sig_common.hpp"

static int count_fds(bool skip_perf) {
  DIR* d = opendir("/proc/self/fd");
  int n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const int fd = atoi(e->d_name);
    if (fd <= 2 || fd == dirfd(d)) continue;
    char path[64], target[256] = "";
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    const ssize_t k = readlink(path, target, sizeof target - 1);
    if (k > 0) target[k] = '\0';
    if (skip_perf && strstr(target, "perf_event")) continue;
    ++n;
  }
  closedir(d);
  return n;
}

static int count_timers() {
  FILE* f = fopen("/proc/self/timers", "re");
  if (!f) return 0;
  char line[256];
  int n = 0;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "ID:", 3) == 0) ++n;
  fclose(f);
  return n;
}

static int g_raw;

static void* burn_then_exit(void* raw) {
  sig_burn(2000000);
  if (raw) syscall(SYS_exit, 0);
  return nullptr;
}

static void* idle(void*) {
  sleep(1);
  return nullptr;
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "nofile") == 0) {
    const int others = count_fds(true);
    pthread_t t[2];
    for (pthread_t& x : t) pthread_create(&x, nullptr, idle, nullptr);
    int opened = 0, fds[4096];
    for (int i = 0; i < 4096; ++i) {
      if ((fds[i] = open("/dev/null", O_RDONLY)) < 0) break;
      ++opened;
    }
    for (int i = 0; i < opened; ++i) close(fds[i]);
    for (pthread_t& x : t) pthread_join(x, nullptr);
    report("opened %d others %d\n", opened, others);
    return 0;
  }
  pthread_t t;
  pthread_create(&t, nullptr, burn_then_exit, nullptr);
  pthread_join(t, nullptr);
  const int fds0 = count_fds(false), timers0 = count_timers();
  for (int i = 0; i < 50; ++i) {
    pthread_create(&t, nullptr, burn_then_exit, &g_raw);
    pthread_join(t, nullptr);
  }
  const timespec ts{0, 50000000};  // the last ones are surely gone from the kernel
  nanosleep(&ts, nullptr);
  pthread_create(&t, nullptr, burn_then_exit, nullptr);
  pthread_join(t, nullptr);
  printf("fds leaked %d, timers leaked %d\n", count_fds(false) - fds0, count_timers() - timers0);
  return 0;
}
