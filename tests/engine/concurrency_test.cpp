// Engine concurrency: exact totals under contention, and table exchange under load.
// Synthetic pcs, no signals, no timing thresholds.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "engine/engine.hpp"

namespace sprofil::engine_test {
using namespace engine;  // the internals under test

namespace {

constexpr int kThreads = 4;
constexpr int kPerThread = 250000;

template <class T>
void hammer(uint8_t width, bool neighbours, Policy policy, uint64_t expect_mod) {
  alignas(8) T mem[kThreads] = {};
  // One element per 8 bytes of text for any width: base byte offset d -> d >> 3.
  const uint8_t post = 3;
  Region r{0x1000, 0x1000 + 8 * kThreads - 1, BinMap{0x1000, 65536, 0, post},
           Counters{mem, kThreads, width, policy, 0}};
  Table* t = nullptr;
  ASSERT_EQ(Table::create(&r, 1, nullptr, nullptr, &t), Error::kOk);
  std::vector<std::thread> th;
  for (int k = 0; k < kThreads; ++k) {
    th.emplace_back([t, k, neighbours] {
      uint64_t hint = 0;
      const uintptr_t pc = 0x1000 + (neighbours ? 8 * static_cast<uintptr_t>(k) : 0);
      for (int i = 0; i < kPerThread; ++i) t->record(pc + (i & 7), 1, &hint);
    });
  }
  for (auto& x : th) x.join();
  const uint64_t total = uint64_t{kThreads} * kPerThread;
  if (neighbours) {
    for (int k = 0; k < kThreads; ++k) EXPECT_EQ(uint64_t{mem[k]}, kPerThread % expect_mod);
  } else {
    EXPECT_EQ(uint64_t{mem[0]}, total % expect_mod);
  }
  EXPECT_EQ(t->tallies().delivered, total);
  EXPECT_EQ(t->tallies().lost, 0u);
  EXPECT_EQ(t->tallies().overflow, 0u);
  Table::destroy(t);
}

TEST(Concurrency, SameBinU32Exact) {
  hammer<uint32_t>(4, false, Policy::kSaturate, uint64_t{1} << 32);
}
TEST(Concurrency, SameBinU64Exact) {
  hammer<uint64_t>(8, false, Policy::kSaturate, UINT64_MAX);
}
TEST(Concurrency, NeighbouringBinsU32Exact) {
  hammer<uint32_t>(4, true, Policy::kSaturate, uint64_t{1} << 32);
}
TEST(Concurrency, NeighbouringBinsU64Exact) {
  hammer<uint64_t>(8, true, Policy::kSaturate, UINT64_MAX);
}
TEST(Concurrency, SameBinU16WrapIsExactModulo65536) {
  hammer<uint16_t>(2, false, Policy::kWrap, 65536);  // 1,000,000 % 65536 = 16960
}
TEST(Concurrency, NeighbouringBinsU16WrapIsExactModulo65536) {
  hammer<uint16_t>(2, true, Policy::kWrap, 65536);  // 250,000 % 65536 = 53392
}

TEST(Concurrency, SaturateUnderContentionIsExact) {
  // 4 threads push one u16 counter past its limit: it ends exactly at 65535 and every other
  // sample is lost.
  uint16_t mem[1] = {};
  Region r{0x1000, 0x1001, BinMap{0x1000, 65536, 0, 1}, Counters{mem, 1, 2, Policy::kSaturate, 0}};
  Table* t = nullptr;
  ASSERT_EQ(Table::create(&r, 1, nullptr, nullptr, &t), Error::kOk);
  std::vector<std::thread> th;
  for (int k = 0; k < kThreads; ++k)
    th.emplace_back([t] {
      uint64_t hint = 0;
      for (int i = 0; i < 50000; ++i) t->record(0x1000, 1 + (i % 3), &hint);
    });
  for (auto& x : th) x.join();
  EXPECT_EQ(mem[0], 65535u);
  // Per thread: 50000 samples of weights 1,2,3 cycling -> 16667*1 + 16667*2 + 16666*3.
  const uint64_t offered = uint64_t{kThreads} * (16667 + 2 * 16667 + 3 * 16666);
  EXPECT_EQ(t->tallies().delivered, offered);
  EXPECT_EQ(t->tallies().lost, offered - 65535);
  Table::destroy(t);
}

TEST(Concurrency, ExchangeWithNoReaderReturnsOldImmediately) {
  Engine eng;
  uint32_t mem[4] = {};
  Region r{0x1000, 0x1003, BinMap{0x1000, 65536, 0, 0}, Counters{mem, 4, 4, Policy::kSaturate, 0}};
  Table *a = nullptr, *b = nullptr;
  ASSERT_EQ(Table::create(&r, 1, nullptr, nullptr, &a), Error::kOk);
  ASSERT_EQ(Table::create(&r, 1, nullptr, nullptr, &b), Error::kOk);
  EXPECT_EQ(eng.exchange(kFaceChannel, a), nullptr);  // nothing before
  EXPECT_EQ(eng.current(kFaceChannel), a);
  EXPECT_EQ(eng.exchange(kFaceChannel, b), a);
  EXPECT_EQ(eng.exchange(kFaceChannel, nullptr), b);
  EXPECT_EQ(eng.exchange(kFaceChannel, nullptr), nullptr);
  Table::destroy(a);
  Table::destroy(b);
}

// Three threads sample while the main thread exchanges tables that share the same counters
// and tallies. Every table handed back by exchange() is immediately redirected to a trap
// array (its counters.base rewritten): a handler still reading it after exchange() returned
// would count there. Totals must equal the samples offered, the trap must stay at zero.
TEST(Concurrency, SampleWhileExchangingTables) {
  Engine eng;
  constexpr int kSamplers = 3;
  constexpr int kSamples = 200000;
  constexpr uintptr_t kLo = 0x40000, kLen = 256;
  static uint32_t mem[kLen];
  static uint32_t trap[kLen];
  for (auto& m : mem) m = 0;
  for (auto& m : trap) m = 0;
  Tallies tallies;
  auto make = [&](int variant) {
    // Alternate between one region and two adjacent halves: same pcs, same counters.
    std::vector<Region> rs;
    const Counters c{mem, kLen, 4, Policy::kSaturate, 0};
    if (variant == 0) {
      rs.push_back(Region{kLo, kLo + kLen - 1, BinMap{kLo, 65536, 0, 0}, c});
    } else {
      rs.push_back(Region{kLo, kLo + kLen / 2 - 1, BinMap{kLo, 65536, 0, 0}, c});
      rs.push_back(Region{kLo + kLen / 2, kLo + kLen - 1, BinMap{kLo, 65536, 0, 0}, c});
    }
    Table* t = nullptr;
    EXPECT_EQ(Table::create(rs.data(), rs.size(), nullptr, &tallies, &t), Error::kOk);
    return t;
  };
  ASSERT_EQ(eng.exchange(kApiChannel, make(0)), nullptr);

  std::atomic<int> done{0};
  std::vector<std::thread> th;
  for (int k = 0; k < kSamplers; ++k)
    th.emplace_back([&eng, &done, k] {
      uint64_t x = 88172645463325252ull + static_cast<uint64_t>(k);
      for (int i = 0; i < kSamples; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        eng.sample(kLo + x % kLen, 1);
        // A little work between samples, as between signals: readers are not always inside.
        for (int s = 0; s < 16; ++s) asm volatile("" ::: "memory");
      }
      done.fetch_add(1);
    });

  std::vector<Table*> retired;
  int exchanges = 0, reclaimed = 0;
  while (done.load() < kSamplers) {
    Table* old = eng.exchange(kApiChannel, make(++exchanges & 1));
    if (old) {
      ++reclaimed;
      for (size_t i = 0; i < old->size(); ++i)
        const_cast<Region&>(old->region(i)).counters.base = trap;
      retired.push_back(old);
    }
  }
  for (auto& x : th) x.join();
  Table* last = eng.exchange(kApiChannel, nullptr);
  ASSERT_NE(last, nullptr);
  retired.push_back(last);

  uint64_t counted = 0, trapped = 0;
  for (uint32_t m : mem) counted += m;
  for (uint32_t m : trap) trapped += m;
  EXPECT_EQ(trapped, 0u) << "a table was handed back while a reader still used it";
  EXPECT_EQ(counted, uint64_t{kSamplers} * kSamples);
  EXPECT_EQ(tallies.delivered, uint64_t{kSamplers} * kSamples);
  EXPECT_EQ(tallies.overflow, 0u);
  EXPECT_EQ(tallies.lost, 0u);
  EXPECT_GT(exchanges, 0);
  EXPECT_GT(reclaimed, 0);
  for (Table* t : retired) Table::destroy(t);
}

}  // namespace
}  // namespace sprofil::engine_test
