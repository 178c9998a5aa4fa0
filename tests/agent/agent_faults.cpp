// agent_faults: a program whose time is half page faults, half computation, for the
// system-time tests. fault_work touches fresh anonymous pages (each first write faults into
// the kernel, which zeroes the page: system time charged at fault_work's store); compute_work
// is pure arithmetic. Bounded: fixed rounds, no timing.
//
//   agent_faults TRUTH ROUNDS [fork]
// writes "name lo hi" lines to TRUTH: the run-time extent of each function (from its dynamic
// symbol: the program is linked with -rdynamic). With `fork`, a child does the same work
// before the parent (its own profile file, FILE.PID).
#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" __attribute__((noinline)) unsigned long fault_work(int rounds) {
  constexpr size_t kBytes = 64u << 20;  // 16384 pages per round
  const long page = sysconf(_SC_PAGESIZE);
  unsigned long sum = 0;
  for (int r = 0; r < rounds; ++r) {
    auto* p = static_cast<volatile char*>(
        mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (p == MAP_FAILED) abort();
    madvise(const_cast<char*>(p), kBytes, MADV_NOHUGEPAGE);  // one fault per 4 KiB page
    for (size_t off = 0; off < kBytes; off += static_cast<size_t>(page)) p[off] = 1;
    sum += static_cast<unsigned long>(p[kBytes / 2]);
    munmap(const_cast<char*>(p), kBytes);
  }
  return sum;
}

extern "C" __attribute__((noinline)) unsigned long compute_work(long iterations) {
  unsigned long x = 88172645463325252ul;
  for (long i = 0; i < iterations; ++i) {  // xorshift: no memory traffic, no system calls
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
  }
  return x;
}

namespace {

void extent(FILE* f, const char* name, const void* fn) {
  Dl_info info;
  void* extra = nullptr;
  if (!dladdr1(fn, &info, &extra, RTLD_DL_SYMENT) || !extra) abort();
  const auto* sym = static_cast<const ElfW(Sym)*>(extra);
  const auto lo = reinterpret_cast<unsigned long>(info.dli_saddr);
  fprintf(f, "%s %lu %lu\n", name, lo, lo + static_cast<unsigned long>(sym->st_size));
}

int work(int rounds) {
  // Interleaved, so that both run under the same conditions.
  unsigned long sink = 0;
  for (int i = 0; i < rounds; ++i) {
    sink += fault_work(1);
    sink += compute_work(20000000);
  }
  return static_cast<int>(sink & 1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const int rounds = atoi(argv[2]);
  if (rounds <= 0 || rounds > 1000) return 2;
  if (argc > 3 && strcmp(argv[3], "fork") == 0) {
    const pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) _exit(work(rounds) == 2 ? 1 : 0);
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return 1;
  }
  const int r = work(rounds);
  FILE* f = fopen(argv[1], "w");
  if (!f) return 1;
  extent(f, "fault_work", reinterpret_cast<const void*>(&fault_work));
  extent(f, "compute_work", reinterpret_cast<const void*>(&compute_work));
  fclose(f);
  return r == 2 ? 1 : 0;
}
