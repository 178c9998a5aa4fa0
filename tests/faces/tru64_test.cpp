// Tru64 profil(2), traditional and extended forms, validation (seed 002, second part).
#include <climits>

#include "fixture.hpp"
#include "sprofil/tru64.h"

namespace sprofil::faces_test {

namespace {

void* toff() {
  return reinterpret_cast<void*>(catch_offset());
}
void* at(uintptr_t a) {
  return reinterpret_cast<void*>(a);
}
void stop() {
  tru64_profil(nullptr, 0, nullptr, 0);
}

TEST_F(FaceTest, Tru64ScaleTwoMapsEveryPcOntoTheFirstElement) {
  unsigned short c[8] = {};
  // The offset does not matter with scale 2 (here: far above the text).
  ASSERT_EQ(tru64_profil(c, sizeof c, at(UINTPTR_MAX - 4096), 2), 0);
  EXPECT_TRUE(faces_test::burn_until([&] { return c[0] > 0; }));
  stop();
  EXPECT_GT(c[0], 0);
  EXPECT_EQ(sum(c), c[0]);
}

TEST_F(FaceTest, Tru64TraditionalByteOffsetFormula) {
  // index = ((pc - off) * scale) >> 16 as a byte offset: with scale 4 the burn loop, 32 KiB
  // above off, is at byte 2, element 1 (or the next one if the loop is long).
  unsigned short c[16] = {};
  const uintptr_t pc = reinterpret_cast<uintptr_t>(&burn_cpu_ms);
  const size_t expect = (((pc - catch_offset()) * 4) >> 16) / 2;
  ASSERT_EQ(expect, 1u);
  ASSERT_EQ(tru64_profil(c, sizeof c, toff(), 4), 0);
  EXPECT_TRUE(faces_test::burn_for(30, [&] { return c[expect] + c[expect + 1] > 0; }));
  stop();
  EXPECT_GT(c[expect] + c[expect + 1], 0);
}

TEST_F(FaceTest, Tru64ScaleZeroOrOneStops) {
  for (unsigned long s : {0ul, 1ul}) {
    unsigned short c[8] = {};
    ASSERT_EQ(tru64_profil(c, sizeof c, toff(), 2), 0);
    EXPECT_TRUE(faces_test::burn_until([&] { return sum(c) > 0; }));
    EXPECT_EQ(tru64_profil(c, sizeof c, toff(), s), 0);
    const uint64_t before = sum(c);
    EXPECT_GT(before, 0u);
    burn_cpu_ms(20);
    EXPECT_EQ(sum(c), before);
  }
}

TEST_F(FaceTest, Tru64TraditionalSaturates) {
  unsigned short c[2] = {65530, 0};
  ASSERT_EQ(tru64_profil(c, sizeof c, toff(), 2), 0);
  EXPECT_TRUE(faces_test::burn_for(50, [&] { return c[0] == 65535; }));
  burn_cpu_ms(10);  // more samples: they must not wrap
  stop();
  EXPECT_EQ(c[0], 65535);
}

TEST_F(FaceTest, Tru64TraditionalErrors) {
  alignas(4) unsigned short c[9] = {};
  EXPECT_ERRNO(tru64_profil(reinterpret_cast<char*>(c) + 1, 16, toff(), 2), EINVAL);
  EXPECT_ERRNO(tru64_profil(faces_test::unmapped_page(), 16, toff(), 2), EFAULT);
  EXPECT_ERRNO(tru64_profil(faces_test::readonly_page(), 16, toff(), 2), EFAULT);
}

// Extended form helpers: a range of the burn loop's text and one far below it.
struct Ext {
  unsigned int hot[64] = {};
  unsigned int cold[64] = {};
  tru64_profil_args a[2];
  Ext() {
    const uintptr_t lo = catch_offset();
    // hot: [lo, lo + 64 KiB) with scale 2 -> 4-byte elements, all pcs to element 0..
    a[0] = {hot, at(lo + 0x10000), at(lo), at(lo), 0x100};
    // cold: 1 MiB lower, 4 KiB long.
    a[1] = {cold, at(lo - 0x100000 + 0x1000), at(lo - 0x100000), at(lo - 0x100000), 0x100};
  }
};

TEST_F(FaceTest, Tru64ExtendedCountsIntoUnsignedInts) {
  Ext e;
  ASSERT_EQ(tru64_profil(e.a, 2, at(UINTPTR_MAX), 0), 0);
  EXPECT_TRUE(faces_test::burn_for(40, [&] { return sum(e.hot) > 20; }));
  stop();
  EXPECT_GT(sum(e.hot), 20u);
  EXPECT_EQ(sum(e.cold), 0u);
}

TEST_F(FaceTest, Tru64ExtendedErrors) {
  Ext e;
  void* ext = at(UINTPTR_MAX);
  EXPECT_ERRNO(tru64_profil(e.a, 2, ext, 1), EINVAL);  // flags must be 0
  EXPECT_ERRNO(tru64_profil(e.a, TRU64_PROFIL_MAX_ARGS + 1, ext, 0), EINVAL);
  tru64_profil_args inc[2] = {e.a[1], e.a[0]};  // increasing lowpc
  EXPECT_ERRNO(tru64_profil(inc, 2, ext, 0), EINVAL);
  tru64_profil_args ovl[2] = {e.a[0], e.a[0]};
  ovl[1].lowpc = at(reinterpret_cast<uintptr_t>(e.a[0].lowpc) - 16);  // highpc above a[0].lowpc
  ovl[1].offset = ovl[1].lowpc;
  ovl[1].buffer = e.cold;
  EXPECT_ERRNO(tru64_profil(ovl, 2, ext, 0), EINVAL);
  EXPECT_ERRNO(tru64_profil(faces_test::unmapped_page(), 2, ext, 0), EFAULT);
  tru64_profil_args badbuf[2] = {e.a[0], e.a[1]};
  badbuf[0].buffer = static_cast<unsigned int*>(faces_test::unmapped_page());
  EXPECT_ERRNO(tru64_profil(badbuf, 2, ext, 0), EFAULT);
  badbuf[0].buffer = static_cast<unsigned int*>(faces_test::readonly_page());
  EXPECT_ERRNO(tru64_profil(badbuf, 2, ext, 0), EFAULT);
  badbuf[0].buffer = reinterpret_cast<unsigned int*>(reinterpret_cast<char*>(e.hot) + 2);
  EXPECT_ERRNO(tru64_profil(badbuf, 2, ext, 0), EINVAL);  // misaligned
  EXPECT_EQ(tru64_profil(e.a, 2, ext, 0), 0);
}

TEST_F(FaceTest, Tru64ExtendedSaturates) {
  Ext e;
  e.a[0].scale = 2;  // every pc of the range onto the first element
  e.hot[0] = UINT_MAX - 3;
  ASSERT_EQ(tru64_profil(e.a, 1, at(UINTPTR_MAX), 0), 0);
  EXPECT_TRUE(faces_test::burn_for(40, [&] { return e.hot[0] == UINT_MAX; }));
  burn_cpu_ms(10);  // more samples: they must not wrap
  stop();
  EXPECT_EQ(e.hot[0], UINT_MAX);
  EXPECT_EQ(sum(e.hot), uint64_t{UINT_MAX});
}

TEST_F(FaceTest, Tru64EachFormReplacesTheOther) {
  Ext e;
  unsigned short trad[8] = {};
  ASSERT_EQ(tru64_profil(trad, sizeof trad, toff(), 2), 0);
  EXPECT_TRUE(faces_test::burn_until([&] { return sum(trad) > 0; }));
  ASSERT_EQ(tru64_profil(e.a, 2, at(UINTPTR_MAX), 0), 0);  // extended stops traditional
  const uint64_t t0 = sum(trad);
  EXPECT_GT(t0, 0u);
  EXPECT_TRUE(faces_test::burn_until([&] { return sum(e.hot) > 0; }));
  EXPECT_EQ(sum(trad), t0);
  EXPECT_GT(sum(e.hot), 0u);
  ASSERT_EQ(tru64_profil(trad, sizeof trad, toff(), 2), 0);  // traditional stops extended
  const uint64_t h0 = sum(e.hot);
  EXPECT_TRUE(faces_test::burn_until([&] { return sum(trad) > t0; }));
  EXPECT_EQ(sum(e.hot), h0);
  EXPECT_GT(sum(trad), t0);
}

TEST_F(FaceTest, Tru64ProfilZeroStopsEitherForm) {
  Ext e;
  unsigned short trad[8] = {};
  ASSERT_EQ(tru64_profil(trad, sizeof trad, toff(), 2), 0);
  EXPECT_EQ(tru64_profil(nullptr, 0, nullptr, 0), 0);
  burn_cpu_ms(20);
  EXPECT_EQ(sum(trad), 0u);
  ASSERT_EQ(tru64_profil(e.a, 2, at(UINTPTR_MAX), 0), 0);
  EXPECT_EQ(tru64_profil(nullptr, 0, nullptr, 0), 0);
  burn_cpu_ms(20);
  EXPECT_EQ(sum(e.hot), 0u);
}

TEST_F(FaceTest, Tru64FailedCallChangesNothing) {
  Ext e;
  ASSERT_EQ(tru64_profil(e.a, 2, at(UINTPTR_MAX), 0), 0);
  burn_cpu_ms(20);
  const uint64_t h0 = sum(e.hot);
  tru64_profil_args inc[2] = {e.a[1], e.a[0]};
  EXPECT_ERRNO(tru64_profil(inc, 2, at(UINTPTR_MAX), 0), EINVAL);
  EXPECT_ERRNO(tru64_profil(faces_test::unmapped_page(), 16, toff(), 2), EFAULT);
  // 100 ms of CPU (about 100 samples): CPU timers are checked only at ticks that find the
  // thread running, so on a loaded machine a short burn's samples may arrive late.
  burn_cpu_ms(100);
  EXPECT_GT(sum(e.hot), h0 + 10);
}

}  // namespace

}  // namespace sprofil::faces_test
