// The perf, cpu and wall clocks keep kernel time apart. The runtime is driven with
// an engine table of two regions, each with a system array: one function that faults in fresh pages
// (mostly kernel time: page faults and zeroing) and one that computes (user time only). The
// page-fault function's kernel time must land in its system array, the compute function's
// system array must stay near empty, and the system total must agree with the thread's
// kernel time as getrusage(RUSAGE_THREAD) measures it.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "clock/runtime.hpp"
#include "engine/engine.hpp"

namespace sprofil::clock_test {
// Each function sits in its own section; the linker provides the bounds.
extern "C" char __start_sprof_fault[], __stop_sprof_fault[];
extern "C" char __start_sprof_compute[], __stop_sprof_compute[];

namespace {

using namespace sprofil;

uint64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t thread_stime_ns() {
  rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  return static_cast<uint64_t>(ru.ru_stime.tv_sec) * 1000000000u +
         static_cast<uint64_t>(ru.ru_stime.tv_usec) * 1000u;
}

volatile uint64_t g_sink;
constexpr size_t kMap = size_t{32} << 20;  // 32 MiB of fresh pages per round

// Touches every page of a fresh anonymous mapping: the time goes to page faults (kernel).
// The loop's own instructions are few, so the user pc after each fault is in here.
__attribute__((noinline, section("sprof_fault"))) void touch_pages(char* p, size_t n) {
  for (size_t off = 0; off < n; off += 4096) static_cast<volatile char*>(p)[off] = 1;
}

__attribute__((noinline, section("sprof_compute"))) uint64_t compute(uint64_t iters) {
  uint64_t x = 1;
  for (uint64_t i = 0; i < iters; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x;
}

// Runs the page-fault function for about `ns` of thread CPU time (bounded rounds).
void fault_for(uint64_t ns) {
  const uint64_t t0 = thread_cpu_ns();
  for (int round = 0; round < 2000 && thread_cpu_ns() - t0 < ns; ++round) {
    void* m = mmap(nullptr, kMap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(m, MAP_FAILED);
    touch_pages(static_cast<char*>(m), kMap);
    munmap(m, kMap);
  }
}

void compute_for(uint64_t ns) {
  const uint64_t t0 = thread_cpu_ns();
  for (int round = 0; round < 100000 && thread_cpu_ns() - t0 < ns; ++round)
    g_sink = compute(200000);
}

struct Arrays {
  std::vector<uint32_t> counts, system;
};

engine::Region region_of(char* lo, char* hi, Arrays* a) {
  const size_t n = static_cast<size_t>(hi - lo);
  a->counts.assign(n, 0);
  a->system.assign(n, 0);
  engine::Region r;
  r.lo = reinterpret_cast<uintptr_t>(lo);
  r.last = reinterpret_cast<uintptr_t>(hi) - 1;
  r.map.base = r.lo;  // one counter per byte
  r.counters.base = a->counts.data();
  r.counters.nelems = n;
  r.counters.width = 4;
  r.system = a->system.data();
  return r;
}

uint64_t total(const std::vector<uint32_t>& v) {
  uint64_t s = 0;
  for (uint32_t x : v) s += x;
  return s;
}

}  // namespace

TEST(SystemTime, ClocksThatSplit) {
  EXPECT_TRUE(rt::clock_splits_system(rt::ClockKind::kPerf));
  EXPECT_TRUE(rt::clock_splits_system(rt::ClockKind::kCpu));
  EXPECT_TRUE(rt::clock_splits_system(rt::ClockKind::kWall));
  EXPECT_FALSE(rt::clock_splits_system(rt::ClockKind::kItimer));
}

// The clock and, for perf, its mode ("ring": the drainer credits the records).
struct Case {
  rt::ClockKind kind;
  const char* perf_mode;
};
class SystemTimeOf : public ::testing::TestWithParam<Case> {};

TEST_P(SystemTimeOf, PageFaultsGoToTheSystemArray) {
  const rt::ClockKind kind = GetParam().kind;
  setenv("SPROFIL_PERF_MODE", GetParam().perf_mode, 1);

  Arrays fault, comp;
  // Sorted by lo, as Table::create requires.
  engine::Region regs[2];
  const bool fault_first = reinterpret_cast<uintptr_t>(__start_sprof_fault) <
                           reinterpret_cast<uintptr_t>(__start_sprof_compute);
  regs[fault_first ? 0 : 1] = region_of(__start_sprof_fault, __stop_sprof_fault, &fault);
  regs[fault_first ? 1 : 0] = region_of(__start_sprof_compute, __stop_sprof_compute, &comp);
  engine::Table* table = nullptr;
  ASSERT_EQ(engine::Table::create(regs, 2, nullptr, nullptr, &table), engine::Error::kOk);

  const uint64_t interval = 500000;  // 2 kHz
  engine::Table* old = nullptr;
  const int e = rt::install(engine::kApiChannel, table, {kind, interval}, &old);
  if (kind == rt::ClockKind::kPerf && (e == EACCES || e == EPERM || e == ENOENT || e == ENOSYS)) {
    engine::Table::destroy(table);
    unsetenv("SPROFIL_PERF_MODE");
    GTEST_SKIP() << "perf_event_open denied here (" << strerror(e)
                 << "): see /proc/sys/kernel/perf_event_paranoid";
  }
  ASSERT_EQ(e, 0) << strerror(e);

  const uint64_t s0 = thread_stime_ns();
  fault_for(800000000);  // 0.8 s of CPU
  const uint64_t s1 = thread_stime_ns();
  compute_for(800000000);
  const uint64_t s2 = thread_stime_ns();

  ASSERT_EQ(rt::install(engine::kApiChannel, nullptr, {kind, interval}, &old), 0);
  unsetenv("SPROFIL_PERF_MODE");
  ASSERT_EQ(old, table);
  engine::Table::destroy(table);

  const uint64_t f_all = total(fault.counts), f_sys = total(fault.system);
  const uint64_t c_all = total(comp.counts), c_sys = total(comp.system);
  const double fault_kernel = static_cast<double>(s1 - s0) * 1e-9;
  const double compute_kernel = static_cast<double>(s2 - s1) * 1e-9;
  printf("fault: %llu samples, %llu system (%.3f s, getrusage stime %.3f s)\n",
         static_cast<unsigned long long>(f_all), static_cast<unsigned long long>(f_sys),
         static_cast<double>(f_sys) * interval * 1e-9, fault_kernel);
  printf("compute: %llu samples, %llu system (getrusage stime %.3f s)\n",
         static_cast<unsigned long long>(c_all), static_cast<unsigned long long>(c_sys),
         compute_kernel);

  // Per bin, the system part never exceeds the samples (the engine's invariant).
  for (size_t i = 0; i < fault.counts.size(); ++i) ASSERT_LE(fault.system[i], fault.counts[i]);
  for (size_t i = 0; i < comp.counts.size(); ++i) ASSERT_LE(comp.system[i], comp.counts[i]);

  // Enough samples to judge (0.8 s at 2 kHz is about 1600 per function; a loaded machine
  // gives fewer, never this few).
  ASSERT_GT(f_all, 200u);
  ASSERT_GT(c_all, 200u);
  // Faulting in fresh pages is largely kernel time: well over a quarter of the fault
  // function's samples are system, against under 8% for pure compute (below). Not a majority
  // on every machine: on the AMD EPYC VM of docs/benchmarks.md the kernel's own account
  // (getrusage) put 0.42-0.51 s of the 0.8 s phase in system time, and the samples 0.39-0.49 s,
  // so "more than half" failed in 1 run of 2 while sprofil agreed with the kernel (the
  // EXPECT_NEAR below is the check against the truth). (munmap's kernel time returns to libc,
  // outside both regions.) Not for the wall clock, whose samples also count the time the
  // thread waited for a CPU.
  if (kind != rt::ClockKind::kWall) {
    EXPECT_GT(static_cast<double>(f_sys) / static_cast<double>(f_all), 0.25);
  }
  // The system part agrees with the kernel's own account of the thread's system time in
  // that phase, within 35% of it (getrusage splits by tick sampling, and munmap's share is
  // charged outside the region).
  const double f_sys_s = static_cast<double>(f_sys) * interval * 1e-9;
  EXPECT_NEAR(f_sys_s, fault_kernel, 0.35 * fault_kernel);
  // Pure compute: the system part stays small, under 8% of the function's samples beyond
  // the system time the kernel itself charged to the phase. It is not 0: the sampling itself
  // is kernel time (signal delivery, the handler's read and ioctl: a few microseconds per
  // sample), plus the jittered periods' drift from P. Measured here on a shared 2-core VM:
  // 0.7% to 4.5% (without jitter, 0.7%). On a machine overloaded five times over (two busy
  // loops beside `ctest -j3`) the kernel charged the compute phase 0.17-0.21 s of system
  // time, and the cpu and wall clocks' samples put 19-21% of it there.
  const double c_kernel_samples = compute_kernel / (static_cast<double>(interval) * 1e-9);
  EXPECT_LT(static_cast<double>(c_sys), 0.08 * static_cast<double>(c_all) + c_kernel_samples)
      << "the kernel's own account: " << c_kernel_samples << " samples' worth";
}

INSTANTIATE_TEST_SUITE_P(Clocks, SystemTimeOf,
                         ::testing::Values(Case{rt::ClockKind::kPerf, "signal"},
                                           Case{rt::ClockKind::kPerf, "ring"},
                                           Case{rt::ClockKind::kCpu, ""},
                                           Case{rt::ClockKind::kWall, ""}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return std::string(rt::clock_name(i.param.kind)) + i.param.perf_mode;
                         });

}  // namespace sprofil::clock_test
