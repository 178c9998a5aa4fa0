// Two pieces of the agent's start in drain mode, each timed in a fresh process (thread CPU
// time, microseconds), for bench/start_pieces.sh:
//   start_pieces dup DIR      the first F_DUPFD_CLOEXEC of an fd to the top of RLIMIT_NOFILE's
//                             soft limit (less 256, where perf.cpp's place_fd puts it when
//                             soft = hard), then one to the lowest free fd: "high US low US"
//   start_pieces faults DIR   a file's 13 MB reserved (fallocate) and mapped shared, as the
//                             agent's region records are; the first write to six record pages
//                             with MADV_RANDOM (the agent's), without it, and six 1-byte
//                             pwrite()s instead: "random US readahead US pwrite US"
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
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

int main(int argc, char** argv) {
  if (argc < 3) return 2;
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
