// Integration tests: real multi-threaded programs profiled through each face. Every case runs
// in a forked child (a fresh process: no profiling, no threads) of the test process; the
// child's checks come back as text through a pipe.
#include <dlfcn.h>
#include <elf.h>
#include <gtest/gtest.h>
#include <link.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "../common/kernel_burn.hpp"
#include "helpers.hpp"
#include "sprofil/aix.h"
#include "sprofil/bsd.h"
#include "sprofil/hpux.h"
#include "sprofil/sysv.h"
#include "sprofil/tru64.h"
#include "sprofil/ultra64.h"

namespace sprofil::faces_test {

// The two workloads. Different constants keep the compiler from folding them into one;
// aligned, so that no bin holds the end of one and the start of the other in any build type.
extern "C" __attribute__((noinline, noipa, used, aligned(64))) void burn_a(double ms) {
  const double end = thread_cpu_ms() + ms;
  volatile uint64_t x = 1;
  do {
    for (int i = 0; i < 100000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  } while (thread_cpu_ms() < end);
}
extern "C" __attribute__((noinline, noipa, used, aligned(64))) void burn_b(double ms) {
  const double end = thread_cpu_ms() + ms;
  volatile uint64_t x = 3;
  do {
    for (int i = 0; i < 100000; ++i) x = x * 2862933555777941757ull + 3037000493ull;
  } while (thread_cpu_ms() < end);
}

namespace {

struct Range {
  uintptr_t lo, hi;  // [lo, hi)
};

Range range_of(void (*fn)(double)) {
  Dl_info info;
  ElfW(Sym)* sym = nullptr;
  if (!dladdr1(reinterpret_cast<void*>(fn), &info, reinterpret_cast<void**>(&sym),
               RTLD_DL_SYMENT) ||
      !sym || sym->st_size == 0)
    return {0, 0};
  const auto lo = reinterpret_cast<uintptr_t>(info.dli_saddr);
  return {lo, lo + sym->st_size};
}

enum class Face { kHpux, kHpuxProfil, kSysv, kBsd, kTru64, kTru64Ext, kAix1, kAix2, kN64 };
const char* face_name(Face f) {
  static const char* const names[] = {"HpuxSprofil", "HpuxProfil", "Sysv", "Bsd", "Tru64",
                                      "Tru64Ext",    "Aix1",       "Aix2", "N64"};
  return names[static_cast<int>(f)];
}

// One face set up over one text range [lo, hi), with that face's own formula for the
// counter a pc lands in.
class Profiler {
 public:
  Profiler(Face f, Range r)
      : f_(f), lo_(r.lo & ~uintptr_t{15}), hi_((r.hi + 15) & ~uintptr_t{15}) {}

  int start() {
    const uintptr_t len = hi_ - lo_;
    void* lo = reinterpret_cast<void*>(lo_);
    switch (f_) {
      case Face::kHpux: {
        alloc(4, len / 4);
        hpux_prof p{buf_.data(), static_cast<unsigned>(len), lo, 0x10000};
        return hpux_sprofil(&p, 1, nullptr, PROF_UINT);
      }
      case Face::kHpuxProfil:
        alloc(2, len / 2);
        return hpux_profil(buf_.data(), len, lo, 0x10000);
      case Face::kSysv:
        alloc(2, len / 2);
        return sysv_profil(reinterpret_cast<unsigned short*>(buf_.data()), len, lo_, 0x10000);
      case Face::kBsd:
        alloc(2, len / 2);
        return bsd_profil(reinterpret_cast<char*>(buf_.data()), len, lo_, 65536);
      case Face::kTru64:
        alloc(2, len / 2);
        return tru64_profil(buf_.data(), static_cast<unsigned>(len), lo, 0x10000);
      case Face::kTru64Ext: {
        alloc(4, len / 4);
        tru64_profil_args a{reinterpret_cast<unsigned*>(buf_.data()), reinterpret_cast<void*>(hi_),
                            lo, lo, 0x10000};
        return tru64_profil(&a, 1, reinterpret_cast<void*>(-1), 0);
      }
      case Face::kAix1:
        alloc(2, index(hi_ - 1) + 1);
        return aix_profil(buf_.data(), static_cast<int>(nelems_ * 2), lo_, 0xFFFF);
      case Face::kAix2: {
        alloc(2, len / 2);
        aix_prof p[2] = {
            {lo, reinterpret_cast<void*>(hi_), reinterpret_cast<unsigned short*>(buf_.data()),
             static_cast<int>(len), UINT_MAX},
            {}};
        return aix_profil(p, -1, 0, 0);
      }
      case Face::kN64: {
        alloc(2, len / 4);
        OSProf p{reinterpret_cast<u16*>(buf_.data()), static_cast<u32>(len / 4),
                 reinterpret_cast<u32*>(lo_), reinterpret_cast<u32*>(hi_ - 4)};
        osProfileInit(&p, 1);
        if (osProfileLastError()) return -1;
        osProfileStart(static_cast<u32>(tick_ns() / 1000));
        return osProfileLastError() ? -1 : 0;
      }
    }
    return -1;
  }

  void stop() {
    if (f_ == Face::kN64)
      osProfileStop();
    else
      hpux_sprofil(nullptr, 0, nullptr, PROF_USHORT);
  }

  // The face's formula: the counter index of pc.
  uint64_t index(uintptr_t pc) const {
    const uintptr_t d = pc - lo_;
    switch (f_) {
      case Face::kHpux:
      case Face::kTru64Ext:
      case Face::kN64:
        return d / 4;  // byte offset d * 0x10000 >> 16, 4-byte elements; N64: one per word
      case Face::kBsd:
        return (d / 2) * 65536 / 65536;
      case Face::kAix1:
        return ((static_cast<uint64_t>(d) * 0xFFFF) >> 16) / 2;
      default:
        return ((static_cast<uint64_t>(d) * 0x10000) >> 16) / 2;
    }
  }

  uint64_t at(uint64_t i) const {
    if (width_ == 2) {
      uint16_t v;
      memcpy(&v, buf_.data() + i * 2, 2);
      return v;
    }
    uint32_t v;
    memcpy(&v, buf_.data() + i * 4, 4);
    return v;
  }
  // Samples in the counters that the pcs of r map to.
  uint64_t count(Range r) const {
    std::set<uint64_t> bins;
    for (uintptr_t pc = r.lo; pc < r.hi; ++pc) bins.insert(index(pc));
    uint64_t s = 0;
    for (uint64_t i : bins)
      if (i < nelems_) s += at(i);
    return s;
  }
  uint64_t total() const {
    uint64_t s = 0;
    for (uint64_t i = 0; i < nelems_; ++i) s += at(i);
    return s;
  }
  bool disjoint(Range a, Range b) const {
    std::set<uint64_t> bins;
    for (uintptr_t pc = a.lo; pc < a.hi; ++pc) bins.insert(index(pc));
    for (uintptr_t pc = b.lo; pc < b.hi; ++pc)
      if (bins.count(index(pc))) return false;
    return true;
  }
  static uint64_t tick_ns() {
    const char* hz = getenv("SPROFIL_HZ");
    return 1000000000ull / (hz ? strtoull(hz, nullptr, 10) : 1000);
  }
  std::vector<unsigned char>& raw() { return buf_; }

 private:
  void alloc(uint8_t w, uint64_t n) {
    width_ = w;
    nelems_ = n;
    buf_.assign(n * w + 8, 0);
    if (preload16 && w == 2)
      for (uint64_t i = 0; i < n; ++i) memcpy(buf_.data() + 2 * i, &preload16, 2);
  }

 public:
  uint16_t preload16 = 0;  // the value every 16-bit counter starts at

 private:
  Face f_;
  uintptr_t lo_, hi_;
  uint8_t width_ = 2;
  uint64_t nelems_ = 0;
  std::vector<unsigned char> buf_;
};

Range both() {
  const Range a = range_of(burn_a), b = range_of(burn_b);
  return {std::min(a.lo, b.lo), std::max(a.hi, b.hi)};
}

struct Burn {
  void (*fn)(double);
  double ms;
};
void* burn_thread(void* arg) {
  auto* b = static_cast<Burn*>(arg);
  b->fn(b->ms);
  return nullptr;
}
// Runs the burns on new threads, one each, and joins them.
void run_threads(std::vector<Burn> burns) {
  std::vector<pthread_t> t(burns.size());
  for (size_t i = 0; i < burns.size(); ++i) pthread_create(&t[i], nullptr, burn_thread, &burns[i]);
  for (pthread_t x : t) pthread_join(x, nullptr);
}

double process_cpu_ms() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

std::string num(double v) {
  return std::to_string(v);
}

class FaceIntegration : public ::testing::TestWithParam<Face> {};

TEST_P(FaceIntegration, SymbolRangesAreKnownAndDisjoint) {
  const Range a = range_of(burn_a), b = range_of(burn_b);
  ASSERT_NE(a.lo, 0u);
  ASSERT_NE(b.lo, 0u);
  EXPECT_TRUE(a.hi <= b.lo || b.hi <= a.lo);
  Profiler p(GetParam(), both());
  EXPECT_TRUE(p.disjoint(a, b));
}

// One thread burns in burn_a: samples land only in burn_a's bins, none in burn_b's.
TEST_P(FaceIntegration, SamplesLandOnlyInTheBurningFunction) {
  const Face f = GetParam();
  EXPECT_EQ(in_child([f] {
              const Range a = range_of(burn_a), b = range_of(burn_b);
              Profiler p(f, both());
              CK(p.start() == 0);
              run_threads({{burn_a, 300}});  // a thread created after profiling started
              p.stop();
              CKM(p.count(a) >= 150, num(p.count(a)));
              CKM(p.count(b) == 0, num(p.count(b)));
              CKM(p.count(a) * 100 >= p.total() * 98, num(p.total()));
              return std::string();
            }),
            "");
}

// The clock of the tests that hold a thread's samples to its CPU time. The faces' default, the
// cpu clock, cannot be held to that on a loaded machine: its CPU-time timers are checked at the
// scheduler tick, and on this VM's kernel beside two busy loops a thread's timer went up to
// 160 ms of its CPU time without firing (raw POSIX timers, no sprofil: docs/architecture.md,
// "The cpu clock under load"); the overruns of the next signal make up for a gap in the middle,
// but the CPU time after a thread's last signal is never counted (one thread of two equal ones
// got 74 samples of 250). `auto` is the perf clock, or the sampler clock where perf events
// are denied: both count every period of a thread's CPU time.
constexpr const char* kExactClock = "auto";

// Two threads burning equal CPU in burn_a and burn_b get equal shares (within 10%), and
// count x tick matches the process CPU time (within 10%).
void shares_and_total(Face f, const char* clock, const char* hz, double ms, bool shares) {
  EXPECT_EQ(in_child([=] {
              setenv("SPROFIL_CLOCK", clock, 1);
              setenv("SPROFIL_HZ", hz, 1);
              const Range a = range_of(burn_a), b = range_of(burn_b);
              Profiler p(f, both());
              const double cpu0 = process_cpu_ms();
              CK(p.start() == 0);
              run_threads({{burn_a, ms}, {burn_b, ms}});
              p.stop();
              const double cpu = process_cpu_ms() - cpu0;
              const double ca = static_cast<double>(p.count(a));
              const double cb = static_cast<double>(p.count(b));
              const double est = static_cast<double>(p.total()) * Profiler::tick_ns() / 1e6;
              CKM(ca > 0 && cb > 0, num(ca) + " " + num(cb));
              CKM(!shares || std::abs(ca - cb) <= 0.1 * std::max(ca, cb),
                  num(ca) + " vs " + num(cb));
              CKM(std::abs(est - cpu) <= 0.1 * cpu,
                  "samples x tick " + num(est) + " ms, CPU " + num(cpu) + " ms");
              return std::string();
            }),
            "");
}

TEST_P(FaceIntegration, EqualSharesAndTotalMatchCpuTime) {
  shares_and_total(GetParam(), kExactClock, "1000", 400, true);
}

// ITIMER_PROF: one process-wide timer whose SIGPROF goes to whichever thread runs at the
// tick, so the split between the threads is only checked with the per-thread clock.
TEST_P(FaceIntegration, TotalMatchesCpuTimeItimer100Hz) {
  shares_and_total(GetParam(), "itimer", "100", 1000, false);
}

// Samples with a kernel part (the CPU-time timers' getrusage split) over counters the face
// set up in memory that malloc() had handed out before. The faces once built their regions
// in such memory without constructing them, and the first such sample wrote through the
// garbage in the regions' (unset) system-time pointer: SIGSEGV, seen in CI on the N64 face.
TEST_P(FaceIntegration, KernelTimeSamplesOverAReusedHeap) {
  if (!kInlineSyscall) GTEST_SKIP() << "no inline system call for this architecture here";
  const Face f = GetParam();
  EXPECT_EQ(in_child([f] {
              const Range s = range_of(burn_sys);
              poison_heap();
              Profiler p(f, s);
              CK(p.start() == 0);
              burn_sys(200);
              p.stop();
              // 200 ms at 1 kHz; most of it in the kernel, whose time the timers still see.
              CKM(p.count(s) >= 100, num(p.count(s)));
              return std::string();
            }),
            "");
}

struct Gate {
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
  bool open = false;
};
void* gated_burn(void* arg) {
  auto* g = static_cast<Gate*>(arg);
  pthread_mutex_lock(&g->mu);
  while (!g->open) pthread_cond_wait(&g->cv, &g->mu);
  pthread_mutex_unlock(&g->mu);
  burn_a(250);
  return nullptr;
}

// A thread that existed before profiling started is sampled, and so is one created after.
TEST_P(FaceIntegration, ThreadsBeforeAndAfterTheStartAreSampled) {
  const Face f = GetParam();
  EXPECT_EQ(in_child([f] {
              setenv("SPROFIL_CLOCK", kExactClock, 1);
              Gate g;
              pthread_t early;
              pthread_create(&early, nullptr, gated_burn, &g);
              usleep(20000);  // let it block
              Profiler p(f, both());
              CK(p.start() == 0);
              pthread_mutex_lock(&g.mu);
              g.open = true;
              pthread_cond_broadcast(&g.cv);
              pthread_mutex_unlock(&g.mu);
              pthread_join(early, nullptr);
              const uint64_t ca = p.count(range_of(burn_a));
              run_threads({{burn_b, 250}});
              p.stop();
              CKM(ca >= 120, "pre-existing thread: " + num(ca));
              const uint64_t cb = p.count(range_of(burn_b));
              CKM(cb >= 120, "new thread: " + num(cb));
              return std::string();
            }),
            "");
}

// After fork both keep profiling: the child's samples go to its own copy of the buffers.
TEST_P(FaceIntegration, ForkChildCountsIntoItsOwnCopy) {
  const Face f = GetParam();
  EXPECT_EQ(in_child([f] {
              const Range a = range_of(burn_a), b = range_of(burn_b);
              Profiler p(f, both());
              CK(p.start() == 0);
              int fds[2];
              CK(pipe(fds) == 0);
              const pid_t pid = fork();
              if (pid == 0) {
                run_threads({{burn_b, 200}});
                burn_b(100);  // and the forking thread itself
                const uint64_t cb = p.count(b);
                (void)!write(fds[1], &cb, sizeof cb);
                _exit(0);
              }
              uint64_t child_b = 0;
              CK(read(fds[0], &child_b, sizeof child_b) == sizeof child_b);
              int st = 0;
              waitpid(pid, &st, 0);
              CK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
              CKM(child_b >= 150, "child counted " + num(child_b));
              CKM(p.count(b) == 0, "parent got " + num(p.count(b)));
              burn_a(100);  // still on in the parent
              p.stop();
              CKM(p.count(a) >= 50, num(p.count(a)));
              return std::string();
            }),
            "");
}

// exec turns profiling off: the shell is never killed by a profiling signal.
TEST_P(FaceIntegration, ExecedShellExitsNormally) {
  const Face f = GetParam();
  for (const char* clock : {"cpu", "itimer"})
    for (int via = 0; via < 2; ++via)
      EXPECT_EQ(in_child([=] {
                  setenv("SPROFIL_CLOCK", clock, 1);
                  setenv("SPROFIL_HZ", "1000", 1);
                  Profiler p(f, both());
                  CK(p.start() == 0);
                  burn_a(20);
                  const pid_t pid = fork();  // the forked child execs with profiling on
                  if (pid == 0) {
                    burn_a(10);
                    if (via == 0)
                      execl("/bin/sh", "sh", "-c", "exit 0", static_cast<char*>(nullptr));
                    else {
                      char* const argv[] = {const_cast<char*>("sh"), const_cast<char*>("-c"),
                                            const_cast<char*>("exit 0"), nullptr};
                      execvp("sh", argv);
                    }
                    _exit(127);
                  }
                  int st = 0;
                  waitpid(pid, &st, 0);
                  CKM(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                      std::string(clock) + (via ? " execvp" : " execl") + " status " + num(st));
                  return std::string();
                }),
                "");
}

INSTANTIATE_TEST_SUITE_P(Faces, FaceIntegration,
                         ::testing::Values(Face::kHpux, Face::kHpuxProfil, Face::kSysv, Face::kBsd,
                                           Face::kTru64, Face::kTru64Ext, Face::kAix1, Face::kAix2,
                                           Face::kN64),
                         [](const ::testing::TestParamInfo<Face>& i) {
                           return std::string(face_name(i.param));
                         });

// The process that execs itself directly (not a forked child) with profiling on.
TEST(FaceExec, ProfiledProcessExecsShellDirectly) {
  for (const char* clock : {"cpu", "itimer"}) {
    const pid_t pid = fork();
    if (pid == 0) {
      setenv("SPROFIL_CLOCK", clock, 1);
      Profiler p(Face::kHpux, both());
      if (p.start() != 0) _exit(3);
      pthread_t t;  // a second thread still burning (and being sampled) during the exec
      static Burn burn{burn_b, 5000};
      pthread_create(&t, nullptr, burn_thread, &burn);
      burn_a(30);
      execl("/bin/sh", "sh", "-c", "exit 0", static_cast<char*>(nullptr));
      _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << clock << " status " << st;
  }
}

// System V: once a count reaches 32767 the whole profile stops (all counts frozen).
TEST(FaceSysv, ProfileStopsWhenACountReaches32767) {
  EXPECT_EQ(in_child([] {
              Profiler p(Face::kSysv, both());
              p.preload16 = 32760;
              CK(p.start() == 0);  // does not clear the buffer
              auto& raw = p.raw();
              const size_t n = (raw.size() - 8) / 2;
              auto max_bin = [&] {
                uint64_t m = 0;
                for (size_t i = 0; i < n; ++i) m = std::max(m, p.at(i));
                return m;
              };
              for (int i = 0; i < 200 && max_bin() < 32767; ++i) run_threads({{burn_a, 10}});
              CKM(max_bin() == 32767, num(max_bin()));
              const std::vector<unsigned char> frozen = raw;
              run_threads({{burn_b, 150}, {burn_a, 150}});
              CK(raw == frozen);
              p.stop();
              return std::string();
            }),
            "");
}

// N64: Start/Stop/Start resumes counting into the same counters; Flush's snapshot equals them.
TEST(FaceN64, StartStopStartResumesAndFlushSnapshotEqualsCounters) {
  EXPECT_EQ(in_child([] {
              const Range a = range_of(burn_a);
              Profiler p(Face::kN64, both());
              CK(p.start() == 0);
              run_threads({{burn_a, 150}});
              osProfileStop();
              CK(osProfileLastError() == 0);
              const uint64_t c1 = p.count(a);
              CKM(c1 >= 80, num(c1));
              run_threads({{burn_a, 100}});
              CK(p.count(a) == c1);  // stopped: the data stays, nothing is added
              osProfileStart(1000);
              CK(osProfileLastError() == 0);
              run_threads({{burn_a, 150}});
              osProfileFlush();
              osProfileStop();
              const uint64_t c2 = p.count(a);
              CKM(c2 >= c1 + 80, num(c1) + " -> " + num(c2));
              osProfileFlush();
              std::vector<unsigned char> snap(p.raw().size() - 8);
              CK(osProfileFlushSnapshot(snap.data(), static_cast<u32>(snap.size())) == snap.size());
              CK(memcmp(snap.data(), p.raw().data(), snap.size()) == 0);
              return std::string();
            }),
            "");
}

// AIX form 2 and Tru64 extended with two disjoint ranges, one thread burning in each.
TEST(FaceMultiRange, AixForm2AndTru64ExtendedTwoRanges) {
  for (int face = 0; face < 2; ++face)
    EXPECT_EQ(in_child([face] {
                setenv("SPROFIL_CLOCK", kExactClock, 1);
                Range a = range_of(burn_a), b = range_of(burn_b);
                a.lo &= ~uintptr_t{3};
                b.lo &= ~uintptr_t{3};
                a.hi = (a.hi + 3) & ~uintptr_t{3};
                b.hi = (b.hi + 3) & ~uintptr_t{3};
                const bool a_first = a.lo < b.lo;
                const Range r1 = a_first ? a : b, r2 = a_first ? b : a;  // ascending
                const size_t n1 = (r1.hi - r1.lo) / 4, n2 = (r2.hi - r2.lo) / 4;
                std::vector<unsigned> c32(n1 + n2);
                std::vector<unsigned short> c16(n1 * 2 + n2 * 2);
                if (face == 0) {
                  aix_prof pr[3] = {{reinterpret_cast<void*>(r1.lo), reinterpret_cast<void*>(r1.hi),
                                     c16.data(), static_cast<int>(n1 * 4), UINT_MAX},
                                    {reinterpret_cast<void*>(r2.lo), reinterpret_cast<void*>(r2.hi),
                                     c16.data() + n1 * 2, static_cast<int>(n2 * 4), UINT_MAX},
                                    {}};
                  CK(aix_profil(pr, -1, 0, 0) == 0);
                } else {
                  tru64_profil_args ar[2] = {
                      // decreasing lowpc
                      {c32.data() + n1, reinterpret_cast<void*>(r2.hi),
                       reinterpret_cast<void*>(r2.lo), reinterpret_cast<void*>(r2.lo), 0x10000},
                      {c32.data(), reinterpret_cast<void*>(r1.hi), reinterpret_cast<void*>(r1.lo),
                       reinterpret_cast<void*>(r1.lo), 0x10000}};
                  CK(tru64_profil(ar, 2, reinterpret_cast<void*>(-1), 0) == 0);
                }
                run_threads({{burn_a, 250}, {burn_b, 250}});
                hpux_sprofil(nullptr, 0, nullptr, PROF_USHORT);
                uint64_t s1 = 0, s2 = 0;
                if (face == 0) {
                  for (size_t i = 0; i < n1 * 2; ++i) s1 += c16[i];
                  for (size_t i = n1 * 2; i < c16.size(); ++i) s2 += c16[i];
                } else {
                  for (size_t i = 0; i < n1; ++i) s1 += c32[i];
                  for (size_t i = n1; i < c32.size(); ++i) s2 += c32[i];
                }
                CKM(s1 >= 120 && s2 >= 120, num(s1) + " " + num(s2));
                CKM(std::abs(static_cast<double>(s1) - static_cast<double>(s2)) <=
                        0.1 * static_cast<double>(std::max(s1, s2)),
                    num(s1) + " vs " + num(s2));
                return std::string();
              }),
              "");
}

}  // namespace

}  // namespace sprofil::faces_test
