// Nintendo 64 osProfile* validation (seed 004, with the BUGS wishes of include/sprofil/ultra64.h).
#include <cstdlib>
#include <cstring>

#include "fixture.hpp"

namespace sprofil::faces_test {

namespace {

constexpr u32 kWords = 0x4000;  // 64 KiB of text: one counter per 32-bit word

u32* word(uintptr_t a) {
  return reinterpret_cast<u32*>(a);
}

struct Seg {
  alignas(4) u16 h[kWords] = {};
  alignas(4) u32 h32[kWords] = {};
  OSProf p{h, kWords, word(catch_offset()), word(catch_offset() + 4 * (kWords - 1))};
  uint64_t total() const {
    uint64_t s = 0;
    for (u16 v : h) s += v;
    return s;
  }
};

TEST_F(FaceTest, N64StartAndStopBeforeInit) {
  // A fresh process: nothing has called osProfileInit.
  EXPECT_EQ(in_child([] {
              osProfileStart(1000);
              CK(osProfileLastError() == ERR_OSPROFILESTART_INIT);
              osProfileStop();
              CK(osProfileLastError() == ERR_OSPROFILESTOP_TIMER);
              osProfileFlush();  // safe before Init, and a success
              CK(osProfileLastError() == 0);
              CK(osProfileFlushCount() == 0);
              return std::string();
            }),
            "");
}

TEST_F(FaceTest, N64InitErrors) {
  static Seg s;
  osProfileInit(&s.p, 0);
  EXPECT_EQ(osProfileLastError(), ERR_OSPROFILEINIT_CNT);
  osProfileInit(&s.p, PROF_MAX_SEGMENTS + 1);
  EXPECT_EQ(osProfileLastError(), ERR_OSPROFILEINIT_CNT);
  osProfileInit(static_cast<OSProf*>(faces_test::unmapped_page()), 1);
  EXPECT_EQ(osProfileLastError(), ERR_OSPROFILEINIT_CNT);

  OSProf p = s.p;
  p.histo_base = reinterpret_cast<u16*>(reinterpret_cast<char*>(s.h) + 2);
  p.histo_size = kWords - 1;
  osProfileInit(&p, 1);
  EXPECT_EQ(osProfileLastError(), ERR_OSPROFILEINIT_ALN);

  p = s.p;
  p.text_end = p.text_start;
  osProfileInit(&p, 1);
  EXPECT_EQ(osProfileLastError(), ERR_OSPROFILEINIT_ORD);
  p.text_end = p.text_start - 1;
  osProfileInit(&p, 1);
  EXPECT_EQ(osProfileLastError(), ERR_OSPROFILEINIT_ORD);

  p = s.p;
  p.histo_size = 0;
  osProfileInit(&p, 1);
  EXPECT_EQ(osProfileLastError(), ERR_OSPROFILEINIT_SIZ);
  p.histo_size = kWords - 1;  // one counter short of the segment
  osProfileInit(&p, 1);
  EXPECT_EQ(osProfileLastError(), ERR_OSPROFILEINIT_SIZ);
  p = s.p;
  p.histo_base = static_cast<u16*>(faces_test::readonly_page());
  p.histo_size = 8;
  p.text_end = p.text_start + 7;
  osProfileInit(&p, 1);
  EXPECT_EQ(osProfileLastError(), ERR_OSPROFILEINIT_SIZ);

  // Overlapping segments (the BUGS wish).
  OSProf two[2] = {s.p, s.p};
  two[1].histo_base = s.h + 0;  // the buffers may even be the same; the text overlaps
  two[1].text_start = s.p.text_start + 16;
  two[1].histo_size = kWords;
  osProfileInit(two, 2);
  EXPECT_EQ(osProfileLastError(), ERR_OSPROFILEINIT_OVL);

  osProfileInit(&s.p, 1);
  EXPECT_EQ(osProfileLastError(), 0);
}

TEST_F(FaceTest, N64StartStopErrors) {
  static Seg s;
  osProfileInit(&s.p, 1);
  ASSERT_EQ(osProfileLastError(), 0);
  osProfileStart(PROF_MIN_INTERVAL - 1);
  EXPECT_EQ(osProfileLastError(), ERR_OSPROFILESTART_TIME);
  osProfileStop();
  EXPECT_EQ(osProfileLastError(), ERR_OSPROFILESTOP_FLAG);  // never started
  osProfileStart(1000);
  EXPECT_EQ(osProfileLastError(), 0);
  osProfileStart(1000);
  EXPECT_EQ(osProfileLastError(), ERR_OSPROFILESTART_FLAG);
  osProfileInit(&s.p, 1);
  EXPECT_EQ(osProfileLastError(), ERR_OSPROFILEINIT_STR);
  osProfileStop();
  EXPECT_EQ(osProfileLastError(), 0);
  osProfileStop();
  EXPECT_EQ(osProfileLastError(), ERR_OSPROFILESTOP_FLAG);
}

TEST_F(FaceTest, N64FailingCallChangesNothing) {
  static Seg s;
  osProfileInit(&s.p, 1);
  osProfileStart(1000);
  ASSERT_EQ(osProfileLastError(), 0);
  EXPECT_TRUE(faces_test::burn_until([&] { return s.total() > 0; }));
  const uint64_t c0 = s.total();
  EXPECT_GT(c0, 0u);
  static Seg other;
  osProfileInit(&other.p, 1);  // running: refused, the counters are not cleared
  EXPECT_EQ(osProfileLastError(), ERR_OSPROFILEINIT_STR);
  osProfileStart(10);
  EXPECT_EQ(osProfileLastError(), ERR_OSPROFILESTART_FLAG);
  EXPECT_TRUE(faces_test::burn_until([&] { return s.total() > c0 + 10; }));
  EXPECT_GT(s.total(), c0 + 10);
  EXPECT_EQ(osProfileLastError(), ERR_OSPROFILESTART_FLAG);      // reads do not reset it
  setenv("SPROFIL_GPERF_SOCKET", "/nonexistent/gperf.sock", 1);  // no host tool
  osProfileFlush();
  // The last call's own error: no host tool took the snapshot (docs/live.md).
  EXPECT_EQ(osProfileLastError(), ERR_OSPROFILEFLUSH_HOST);
}

TEST_F(FaceTest, N64InitClearsTheCounters) {
  static Seg s;
  for (u32 i = 0; i < kWords; ++i) s.h[i] = 7;
  osProfileInit(&s.p, 1);
  ASSERT_EQ(osProfileLastError(), 0);
  EXPECT_EQ(s.total(), 0u);
}

TEST_F(FaceTest, N64OverflowCounterCountsPcsOutsideEverySegment) {
  static Seg s;
  OSProf far = s.p;  // a segment 1 MiB below the burn loop
  far.text_start = word(catch_offset() - 0x100000);
  far.text_end = far.text_start + kWords - 1;
  osProfileInit(&far, 1);
  osProfileStart(1000);
  EXPECT_TRUE(faces_test::burn_for(40, [] { return osProfileOverflowCount() >= 20; }));
  osProfileStop();
  EXPECT_GE(osProfileOverflowCount(), 20u);
  EXPECT_EQ(s.total(), 0u);
}

TEST_F(FaceTest, N64SixteenBitCountersWrap) {
  static Seg s;
  osProfileInit(&s.p, 1);
  ASSERT_EQ(osProfileLastError(), 0);
  for (u32 i = 0; i < kWords; ++i) s.h[i] = 65535;  // after Init, which clears
  const auto wrapped = [] {
    u32 n = 0;
    for (u32 i = 0; i < kWords; ++i) n += s.h[i] < 1000;
    return n;
  };
  osProfileStart(1000);
  EXPECT_TRUE(faces_test::burn_for(30, [&] { return wrapped() > 0; }));
  osProfileStop();
  EXPECT_GT(wrapped(), 0u);
}

TEST_F(FaceTest, N64InitExGivesThirtyTwoBitCounters) {
  static Seg s;
  OSProf p{reinterpret_cast<u16*>(s.h32), kWords, s.p.text_start, s.p.text_end};
  osProfileInitEx(&p, 1, OS_PROFILE_U32);
  ASSERT_EQ(osProfileLastError(), 0);
  for (u32 i = 0; i < kWords; ++i) s.h32[i] = 65535;
  const auto above = [] {
    uint64_t n = 0;
    for (u32 i = 0; i < kWords; ++i) n += s.h32[i] > 65535 ? s.h32[i] - 65535 : 0;
    return n;
  };
  osProfileStart(1000);
  EXPECT_TRUE(faces_test::burn_for(30, [&] { return above() > 10; }));
  osProfileStop();
  EXPECT_GT(above(), 10u);
  osProfileInitEx(&p, 1, 0x2);  // unknown flag
  EXPECT_EQ(osProfileLastError(), ERR_OSPROFILEINIT_CNT);
}

TEST_F(FaceTest, N64FlushSnapshotEqualsTheCounters) {
  static Seg s;
  osProfileInit(&s.p, 1);
  osProfileStart(1000);
  EXPECT_TRUE(faces_test::burn_for(30, [] { return s.total() > 0; }));
  setenv("SPROFIL_GPERF_SOCKET", "/nonexistent/gperf.sock", 1);  // no host tool
  osProfileFlush();  // safe while running; the snapshot is taken even with no host tool
  EXPECT_EQ(osProfileLastError(), ERR_OSPROFILEFLUSH_HOST);
  osProfileStop();
  osProfileFlush();
  EXPECT_EQ(osProfileFlushCount(), 2u);
  static u16 snap[kWords];
  ASSERT_EQ(osProfileFlushSnapshot(snap, sizeof snap), sizeof snap);
  EXPECT_EQ(memcmp(snap, s.h, sizeof snap), 0);
  EXPECT_GT(s.total(), 0u);
}

}  // namespace

}  // namespace sprofil::faces_test
