// The program of tests/interop's export checks (interop_test.cpp), by its first argument:
//   sys SECONDS   for SECONDS of CPU, in turn: reads of /dev/zero by the program's own syscall
//                 instruction (no libc wrapper: their kernel time is charged to this
//                 program's text, its system part), a loop of user time, and the library's
//                 testlib::lib_work (report_testlib): a known system share, and samples in two
//                 objects;
//   spin SECONDS  one x86 `loop` instruction for SECONDS of CPU: its samples at one address, one
//                 bin that outgrows gprof's 16-bit counters at a high rate;
//   lib N         testlib::lib_work(N) and nothing else: every sample in the library, none in
//                 the program's own text.
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace testlib {
long lib_work(long n);
}

namespace {

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

char buffer[1 << 16];

// read(2) by the system call instruction itself, so that the pc the kernel returns to is here.
__attribute__((noinline)) long raw_read(int fd, void* buf, unsigned long n) {
#if defined(__x86_64__)
  long ret;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "0"(long(SYS_read)), "D"(long(fd)), "S"(buf), "d"(n)
                   : "rcx", "r11", "memory");
  return ret;
#elif defined(__aarch64__)
  register long x0 __asm__("x0") = fd;
  register long x1 __asm__("x1") = long(buf);
  register long x2 __asm__("x2") = long(n);
  register long x8 __asm__("x8") = SYS_read;
  __asm__ volatile("svc #0" : "+r"(x0) : "r"(x1), "r"(x2), "r"(x8) : "memory");
  return x0;
#else
  return ::syscall(SYS_read, fd, buf, n);
#endif
}

__attribute__((noinline)) long read_zeros(int fd, int reads) {
  long sum = 0;
  for (int i = 0; i < reads; ++i) sum += raw_read(fd, buffer, sizeof buffer);
  return sum;
}

__attribute__((noinline)) unsigned long compute(long n) {
  unsigned long x = 88172645463325252ull;
  for (long i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
  }
  return x;
}

// n iterations of one instruction.
__attribute__((noinline)) void spin(unsigned long n) {
#if defined(__x86_64__)
  __asm__ volatile("1: loop 1b" : "+c"(n));
#else
  __asm__ volatile("1: subs %0, %0, #1\n\tb.ne 1b" : "+r"(n));
#endif
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s sys|spin SECONDS | lib N\n", argv[0]);
    return 2;
  }
  const char* mode = argv[1];
  if (std::strcmp(mode, "lib") == 0) return int(testlib::lib_work(std::atol(argv[2])) & 1);
  const double end = cpu_seconds() + std::atof(argv[2]);
  long sink = 0;
  if (std::strcmp(mode, "spin") == 0) {
    while (cpu_seconds() < end) spin(100000000);
  } else if (std::strcmp(mode, "sys") == 0) {
    const int fd = ::open("/dev/zero", O_RDONLY);
    if (fd < 0) return 1;
    while (cpu_seconds() < end) {
      sink += read_zeros(fd, 2500);
      sink += long(compute(3000000));
      sink += testlib::lib_work(3000000);
    }
    ::close(fd);
  } else {
    return 2;
  }
  std::printf("%ld\n", sink & 1);
  return 0;
}
