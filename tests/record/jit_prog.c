// A tiny JIT: copies a counting loop into the first and the third page of three of anonymous
// memory, makes them executable, names the two copies jit_hot and jit_cold in
// /tmp/perf-PID.map (unless "nomap"), writes the middle page as a JIT does (writable, then
// executable again: the kernel reports a new executable mapping of that page alone), and
// runs the two in turn, jit_hot with twice the count. Prints the CPU each took (its own measure, in
// seconds) as "jit_hot S\njit_cold S\n" on stdout. x86-64 only.
//
//   jit_prog ITERATIONS [nomap]
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s ITERATIONS [nomap]\n", argv[0]);
    return 2;
  }
  const long n = atol(argv[1]);
  // mov %rdi,%rax; 1: dec %rax; jnz 1b; ret
  static const unsigned char loop[] = {0x48, 0x89, 0xf8, 0x48, 0xff, 0xc8, 0x75, 0xfb, 0xc3};
  const long page = sysconf(_SC_PAGESIZE);
  unsigned char* code =
      mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (code == MAP_FAILED) return 1;
  unsigned char* const hot_at = code;
  unsigned char* const cold_at = code + 2 * page;
  memcpy(hot_at, loop, sizeof loop);
  memcpy(cold_at, loop, sizeof loop);
  if (mprotect(code, 3 * page, PROT_READ | PROT_EXEC) != 0) return 1;
  if (mprotect(code + page, page, PROT_READ | PROT_WRITE) != 0) return 1;
  memcpy(code + page, loop, sizeof loop);
  if (mprotect(code + page, page, PROT_READ | PROT_EXEC) != 0) return 1;
  if (argc < 3 || strcmp(argv[2], "nomap") != 0) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
    FILE* f = fopen(path, "w");
    if (f == NULL) return 1;
    fprintf(f, "%lx %zx jit_hot\n%lx %zx jit_cold\n", (unsigned long)hot_at, sizeof loop,
            (unsigned long)cold_at, sizeof loop);
    fclose(f);
  }
  long (*hot)(long) = (long (*)(long))(void*)hot_at;
  long (*cold)(long) = (long (*)(long))(void*)cold_at;
  double t_hot = 0, t_cold = 0;
  long sum = 0;
  for (int k = 0; k < 20; ++k) {
    double t0 = cpu_now();
    sum += hot(2 * n / 20);
    double t1 = cpu_now();
    sum += cold(n / 20);
    t_hot += t1 - t0;
    t_cold += cpu_now() - t1;
  }
  printf("jit_hot %.6f\njit_cold %.6f\n", t_hot, t_cold);
  return sum == 0 ? 0 : 1;
}
