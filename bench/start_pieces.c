// Pieces of the agent's start in drain mode, each timed in a fresh process (thread CPU
// time, microseconds), for bench/start_pieces.sh:
//   start_pieces dup DIR      the first F_DUPFD_CLOEXEC of an fd to the top of RLIMIT_NOFILE's
//                             soft limit (less 256, where perf.cpp's place_fd puts it when
//                             soft = hard), then one to the lowest free fd: "high US low US"
//   start_pieces faults DIR   a file's 13 MB reserved (fallocate) and mapped shared, as the
//                             agent's region records are; the first write to six record pages
//                             with MADV_RANDOM (the agent's), without it, and six 1-byte
//                             pwrite()s instead: "random US readahead US pwrite US"
//   start_pieces proc-file    the header's command line read from /proc/self/cmdline, then the
//                             executable's path (readlink /proc/self/exe); then the threads
//                             found by reading /proc/self/task: "cmdline+exe US readdir US"
//   start_pieces proc-argv    the command line joined from argv, then the same readlink; then
//                             the thread count from a stat of /proc/self/task (its link count
//                             is 2 + threads): "argv+exe US stat US"
//   start_pieces wake DIR     the write() to a pipe that wakes a thread asleep in read() on the
//                             other CPU (idle for 200 us before it), then on the writer's own
//                             CPU, medians of 20: what an exiting process pays for each
//                             wake-up of the record parent: "other US same US" (two CPUs)
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static const size_t kBytes = 13275136;  // cmp-burn4's counters at 1-byte bins
static const long kPages[6] = {0x1ff8, 0xaff8, 0x17ff8, 0xd4ff8, 0xb7fff8, 0x100};

static double faults(const char* dir, int mode) {
  char name[4096];
  snprintf(name, sizeof name, "%s/start_pieces.%d", dir, (int)getpid());
  const int fd = open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 || fallocate(fd, 0, 0, (off_t)kBytes) != 0) exit(1);
  char* m = mmap(NULL, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) exit(1);
  if (mode != 1) madvise(m, kBytes, MADV_RANDOM);
  const double t0 = now_us();
  for (int i = 0; i < 6; ++i) {
    if (mode == 2) {
      const char b = 1;
      if (pwrite(fd, &b, 1, kPages[i]) != 1) exit(1);
    } else {
      m[kPages[i]] = 1;
    }
  }
  const double t = now_us() - t0;
  munmap(m, kBytes);
  close(fd);
  unlink(name);
  return t;
}

// The command line as the header keeps it, from /proc (file) or from argv; then the
// executable's path, as the agent's start reads them.
static double cmdline_and_exe(int file, int argc, char** argv) {
  char buf[3072], exe[4096];
  size_t got = 0;
  const double t0 = now_us();
  if (file) {
    const int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    ssize_t n;
    while (fd >= 0 && got < sizeof buf && (n = read(fd, buf + got, sizeof buf - got)) > 0)
      got += (size_t)n;
    if (fd >= 0) close(fd);
  } else {
    for (int k = 0; k < argc && got < sizeof buf; ++k) {
      size_t n = strlen(argv[k]) + 1;
      if (n > sizeof buf - got) n = sizeof buf - got;
      memcpy(buf + got, argv[k], n);
      got += n;
    }
  }
  if (readlink("/proc/self/exe", exe, sizeof exe) <= 0 || got == 0) exit(1);
  return now_us() - t0;
}

static int g_ping[2], g_pong[2];

static void pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  if (sched_setaffinity(0, sizeof s, &s) != 0) exit(2);
}

enum { kWakes = 21 };

static void* sleeper(void* cpu) {
  pin((int)(long)cpu);
  char c;
  for (int i = 0; i < kWakes; ++i)
    if (read(g_ping[0], &c, 1) != 1 || write(g_pong[1], &c, 1) != 1) exit(1);
  return NULL;
}

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

// The writer's CPU time for the write() that wakes a thread asleep on `cpu` (the writer runs
// on CPU 0), whose CPU idled for 200 us of wall time first: the median of kWakes - 1 wake-ups
// after the first (which costs less: a thread that has slept and been woken before is the
// record parent's case).
static double wake(int cpu) {
  pthread_t t;
  if (pipe(g_ping) != 0 || pipe(g_pong) != 0 ||
      pthread_create(&t, NULL, sleeper, (void*)(long)cpu) != 0)
    exit(1);
  double us[kWakes];
  for (int i = 0; i < kWakes; ++i) {
    struct timespec w0, w;
    clock_gettime(CLOCK_MONOTONIC, &w0);
    do clock_gettime(CLOCK_MONOTONIC, &w);
    while ((w.tv_sec - w0.tv_sec) * 1000000000L + (w.tv_nsec - w0.tv_nsec) < 200000);
    char c = 1;
    const double t0 = now_us();
    if (write(g_ping[1], &c, 1) != 1) exit(1);
    us[i] = now_us() - t0;
    if (read(g_pong[0], &c, 1) != 1) exit(1);
  }
  if (pthread_join(t, NULL) != 0) exit(1);
  for (int i = 0; i < 2; ++i) close(g_ping[i]), close(g_pong[i]);
  qsort(us + 1, kWakes - 1, sizeof *us, by_value);
  return us[1 + (kWakes - 1) / 2];
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  if (strcmp(argv[1], "wake") == 0) {
    pin(0);
    const double other = wake(1), same = wake(0);
    printf("other %.1f same %.1f\n", other, same);
    return 0;
  }
  if (strncmp(argv[1], "proc-", 5) == 0) {
    const int file = strcmp(argv[1], "proc-file") == 0;
    const double first = cmdline_and_exe(file, argc, argv);
    const double t0 = now_us();
    int threads = 0;
    if (file) {
      DIR* d = opendir("/proc/self/task");
      if (!d) return 1;
      for (struct dirent* e; (e = readdir(d));) threads += e->d_name[0] != '.';
      closedir(d);
    } else {
      struct stat st;
      if (stat("/proc/self/task", &st) != 0) return 1;
      threads = (int)st.st_nlink - 2;
    }
    const double t = now_us() - t0;
    if (threads != 1) return 1;
    printf(file ? "cmdline+exe %.1f readdir %.1f\n" : "argv+exe %.1f stat %.1f\n", first, t);
    return 0;
  }
  if (strcmp(argv[1], "dup") == 0) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < 1024) return 2;
    const double t0 = now_us();
    const int high = fcntl(0, F_DUPFD_CLOEXEC, (int)(rl.rlim_cur - 256));
    const double t1 = now_us();
    const int low = fcntl(0, F_DUPFD_CLOEXEC, 0);
    const double t2 = now_us();
    if (high < 0 || low < 0) return 1;
    printf("high %.1f low %.1f\n", t1 - t0, t2 - t1);
    return 0;
  }
  if (strcmp(argv[1], "faults") == 0) {
    const double r = faults(argv[2], 0), a = faults(argv[2], 1), w = faults(argv[2], 2);
    printf("random %.1f readahead %.1f pwrite %.1f\n", r, a, w);
    return 0;
  }
  return 2;
}
