// The handler's work without the signal: Engine::sample (reader count, table load,
// Table::record: lookup + atomic increment + tallies) for tables of 1 to 100,000 regions,
// with a hot pc (last-hit hint) and with random pcs across every region (binary search),
// and the counter increment under contention (1 vs 2 threads on one bin).
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "engine/engine.hpp"

namespace {
using namespace sprofil::engine;

constexpr uintptr_t kBase = 0x400000;
constexpr uintptr_t kRegionBytes = 64;  // 16 u32 counters of 4 bytes of text
constexpr uintptr_t kGap = 64;

struct Fixture {
  Engine eng;
  std::vector<uint32_t> mem;
  std::vector<uintptr_t> pcs;  // random pcs, all inside some region
  Table* table = nullptr;

  explicit Fixture(size_t n) : mem(n * kRegionBytes / 4) {
    std::vector<Region> rs(n);
    for (size_t i = 0; i < n; ++i) {
      const uintptr_t lo = kBase + i * (kRegionBytes + kGap);
      rs[i] =
          Region{lo, lo + kRegionBytes - 1, BinMap{lo, 65536, 0, 2},
                 Counters{&mem[i * kRegionBytes / 4], kRegionBytes / 4, 4, Policy::kSaturate, 0}};
    }
    if (Table::create(rs.data(), n, nullptr, nullptr, &table) != Error::kOk) std::abort();
    eng.exchange(kApiChannel, table);
    std::mt19937_64 rng(42);
    pcs.resize(1 << 16);
    for (auto& pc : pcs) pc = kBase + (rng() % n) * (kRegionBytes + kGap) + rng() % kRegionBytes;
  }
  ~Fixture() { Table::destroy(eng.exchange(kApiChannel, nullptr)); }
};

void BM_SampleHotPc(benchmark::State& state) {
  Fixture f(static_cast<size_t>(state.range(0)));
  const uintptr_t pc = f.pcs[0];
  for (auto _ : state) f.eng.sample(pc, 1);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SampleHotPc)->Arg(1)->Arg(100)->Arg(10000)->Arg(100000);

void BM_SampleRandomPc(benchmark::State& state) {
  Fixture f(static_cast<size_t>(state.range(0)));
  size_t i = 0;
  for (auto _ : state) {
    f.eng.sample(f.pcs[i], 1);
    i = (i + 1) & (f.pcs.size() - 1);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SampleRandomPc)->Arg(1)->Arg(100)->Arg(10000)->Arg(100000);

// The lookup alone (no counters, no engine), for the breakdown.
void BM_FindRandomPc(benchmark::State& state) {
  Fixture f(static_cast<size_t>(state.range(0)));
  uint64_t hint = 0;
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(f.table->find(f.pcs[i], &hint));
    i = (i + 1) & (f.pcs.size() - 1);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_FindRandomPc)->Arg(1)->Arg(100)->Arg(10000)->Arg(100000);

// Contention: every thread samples the same pc (one bin, one tallies block).
std::unique_ptr<Fixture> g_shared;

void BM_SampleSameBinThreads(benchmark::State& state) {
  if (state.thread_index() == 0) g_shared = std::make_unique<Fixture>(1);
  // Google Benchmark starts all threads' timing together after this setup barrier.
  for (auto _ : state) g_shared->eng.sample(kBase, 1);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SampleSameBinThreads)->Threads(1)->Threads(2)->UseRealTime();

// The increment alone (saturating CAS loop on a u32): one shared bin vs a bin per thread on
// its own cache line.
alignas(64) uint32_t g_bins[2][16];

void BM_BumpSameBin(benchmark::State& state) {
  const Counters c{&g_bins[0][0], 1, 4, Policy::kSaturate, 0};
  bool at_limit = false;
  for (auto _ : state) benchmark::DoNotOptimize(bump(c, 0, 1, &at_limit));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BumpSameBin)->Threads(1)->Threads(2)->UseRealTime();

void BM_BumpOwnBin(benchmark::State& state) {
  const Counters c{&g_bins[state.thread_index() & 1][0], 1, 4, Policy::kSaturate, 0};
  bool at_limit = false;
  for (auto _ : state) benchmark::DoNotOptimize(bump(c, 0, 1, &at_limit));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BumpOwnBin)->Threads(1)->Threads(2)->UseRealTime();

// What a kernel/user split would add per sample on the timer clocks (cpu, wall, itimer), which
// have no counter of their own that excludes the kernel: getrusage(RUSAGE_THREAD) for the
// stime delta since the last sample, against the engine's own cost above.
void BM_GetrusageThread(benchmark::State& state) {
  rusage ru;
  for (auto _ : state) {
    getrusage(RUSAGE_THREAD, &ru);
    benchmark::DoNotOptimize(ru.ru_stime.tv_usec);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_GetrusageThread);

}  // namespace

BENCHMARK_MAIN();
