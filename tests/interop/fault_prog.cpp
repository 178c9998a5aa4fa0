// Two functions of known character: fault_pages() spends most of its time in the kernel
// (first-touch page faults on fresh anonymous memory), compute() only in user space. Runs for
// argv[1] seconds of CPU and prints the kernel's user/system split of its time on stderr.
#include <sys/mman.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace {

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

double thread_system() {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  return double(ru.ru_stime.tv_sec) + double(ru.ru_stime.tv_usec) / 1e6;
}

}  // namespace

__attribute__((noinline)) long fault_pages(int rounds) {
  const size_t size = 8u << 20;
  long sum = 0;
  for (int r = 0; r < rounds; ++r) {
    auto* p = static_cast<volatile char*>(
        mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (p == MAP_FAILED) std::abort();
    for (size_t i = 0; i < size; i += 4096) p[i] = char(i);
    for (size_t i = 0; i < size; i += 4096) sum += p[i];
    munmap(const_cast<char*>(p), size);
  }
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

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
  long sink = 0;
  const double end = cpu_seconds() + seconds;
  double fault_cpu = 0, fault_system = 0;  // fault_pages' CPU time and its kernel part
  while (cpu_seconds() < end) {
    const double c0 = thread_seconds(), s0 = thread_system();
    sink += fault_pages(4);
    fault_cpu += thread_seconds() - c0;
    fault_system += thread_system() - s0;
    sink += long(compute(3000000));
  }
  std::printf("%ld\n", sink & 1);
  // The kernel's own split, for the test to compare with: "user SECONDS system SECONDS".
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::fprintf(stderr, "user %.6f system %.6f\n",
               double(ru.ru_utime.tv_sec) + double(ru.ru_utime.tv_usec) / 1e6,
               double(ru.ru_stime.tv_sec) + double(ru.ru_stime.tv_usec) / 1e6);
  // And fault_pages' own: its thread CPU time and the kernel's part of it (RUSAGE_THREAD's
  // system time, tick-sampled: accurate over the many calls of a run).
  std::fprintf(stderr, "fault_pages cpu %.6f system %.6f\n", fault_cpu, fault_system);
  return 0;
}
