// What a kernel entry costs on this machine, the unit of a process's start-up cost: medians
// over ROUNDS rounds of 64 pages each, in microseconds of thread CPU: a first write to an
// anonymous page (a page fault that allocates), a first write to a page of a shared file
// mapping already in the page cache (the agent's records and header), a system call that does
// nothing (getppid), MADV_POPULATE_WRITE of anonymous pages (the same work without a fault
// each), and a first write to a page populated so (what is left: the TLB's refill). DIR is a
// directory on the file system the profiles go to. For docs/benchmarks.md.
// Usage: kernel_entry [DIR] [ROUNDS]   (defaults: /tmp, 21)
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

enum { kPages = 64, kMaxRounds = 101 };

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof *v, by_value);
  return v[n / 2];
}

static char* anon(void) {
  char* p = mmap(NULL, kPages * 4096L, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) exit(1);
  return p;
}

static double touch(char* p) {
  const double t0 = now_us();
  for (int i = 0; i < kPages; ++i) p[i * 4096L] = 1;
  return (now_us() - t0) / kPages;
}

int main(int argc, char** argv) {
  const char* dir = argc > 1 ? argv[1] : "/tmp";
  int rounds = argc > 2 ? atoi(argv[2]) : 21;
  if (rounds < 1 || rounds > kMaxRounds) rounds = 21;
  static double fault[kMaxRounds], shared[kMaxRounds], sys[kMaxRounds], pop[kMaxRounds],
      after[kMaxRounds];
  char path[4096];
  snprintf(path, sizeof path, "%s/kernel_entry.%d", dir, (int)getpid());
  const int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return 1;
  unlink(path);
  static char zero[4096];
  for (int i = 0; i < kPages; ++i)
    if (pwrite(fd, zero, sizeof zero, i * 4096L) != (ssize_t)sizeof zero) return 1;
  for (int r = 0; r < rounds; ++r) {
    char* a = anon();
    fault[r] = touch(a);
    munmap(a, kPages * 4096L);
    char* s = mmap(NULL, kPages * 4096L, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (s == MAP_FAILED) return 1;
    shared[r] = touch(s);
    munmap(s, kPages * 4096L);
    double t0 = now_us();
    for (int i = 0; i < kPages; ++i) getppid();
    sys[r] = (now_us() - t0) / kPages;
    char* q = anon();
    t0 = now_us();
    if (madvise(q, kPages * 4096L, MADV_POPULATE_WRITE) != 0) return 1;
    pop[r] = (now_us() - t0) / kPages;
    after[r] = touch(q);
    munmap(q, kPages * 4096L);
  }
  printf(
      "anonymous page fault %.2f us, shared file page fault %.2f us, getppid %.2f us, "
      "MADV_POPULATE_WRITE %.2f us a page, first write after it %.2f us (medians of %d "
      "rounds of %d pages)\n",
      median(fault, rounds), median(shared, rounds), median(sys, rounds), median(pop, rounds),
      median(after, rounds), rounds, kPages);
  return 0;
}
