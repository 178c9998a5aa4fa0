// System V profil() (seed 001) and BSD profil(2) (seed 002, first part) validation.
#include <cstring>

#include "fixture.hpp"
#include "sprofil/bsd.h"
#include "sprofil/sysv.h"

namespace sprofil::faces_test {

namespace {

TEST_F(FaceTest, SysvScaleZeroOrOneTurnsOff) {
  for (unsigned off_scale : {0u, 1u}) {
    unsigned short c[8] = {};
    ASSERT_EQ(sysv_profil(c, sizeof c, catch_offset(), 2), 0);
    EXPECT_TRUE(faces_test::burn_until([&] { return sum(c) > 0; }));
    EXPECT_GT(sum(c), 0u);
    EXPECT_EQ(sysv_profil(c, sizeof c, catch_offset(), off_scale), 0);
    const uint64_t before = sum(c);
    burn_cpu_ms(20);
    EXPECT_EQ(sum(c), before);
  }
}

TEST_F(FaceTest, SysvBufsizZeroIsIneffective) {
  unsigned short c[8] = {};
  ASSERT_EQ(sysv_profil(c, sizeof c, catch_offset(), 2), 0);
  EXPECT_EQ(sysv_profil(c, 0, catch_offset(), 2), 0);
  burn_cpu_ms(20);
  EXPECT_EQ(sum(c), 0u);
}

TEST_F(FaceTest, SysvIndexFormula) {
  // scale 2: index = (((pc - off) * 2) >> 16) / 2 = 0 within 64 KiB of off.
  unsigned short c[8] = {};
  ASSERT_EQ(sysv_profil(c, sizeof c, catch_offset(), 2), 0);
  EXPECT_TRUE(faces_test::burn_until([&] { return c[0] > 0; }));
  sysv_profil(nullptr, 0, 0, 0);
  EXPECT_GT(c[0], 0);
  EXPECT_EQ(sum(c), c[0]);
}

TEST_F(FaceTest, SysvErrors) {
  alignas(4) unsigned short c[9] = {};
  EXPECT_ERRNO(sysv_profil(c, sizeof c, catch_offset(), 0x10001), EINVAL);
  EXPECT_ERRNO(sysv_profil(reinterpret_cast<unsigned short*>(reinterpret_cast<char*>(c) + 1), 8,
                           catch_offset(), 2),
               EINVAL);
  EXPECT_ERRNO(
      sysv_profil(static_cast<unsigned short*>(faces_test::unmapped_page()), 16, catch_offset(), 2),
      EFAULT);
  EXPECT_ERRNO(
      sysv_profil(static_cast<unsigned short*>(faces_test::readonly_page()), 16, catch_offset(), 2),
      EFAULT);
  EXPECT_EQ(sysv_profil(c, sizeof c, catch_offset(), 0x10000), 0);
}

TEST_F(FaceTest, SysvFailedCallChangesNothing) {
  unsigned short c[8] = {};
  ASSERT_EQ(sysv_profil(c, sizeof c, catch_offset(), 2), 0);
  burn_cpu_ms(20);
  const uint64_t c0 = sum(c);
  EXPECT_ERRNO(sysv_profil(c, sizeof c, catch_offset(), 0x20000), EINVAL);
  EXPECT_ERRNO(
      sysv_profil(static_cast<unsigned short*>(faces_test::unmapped_page()), 16, catch_offset(), 2),
      EFAULT);
  // 100 ms of CPU (about 100 samples): CPU timers are checked only at ticks that find the
  // thread running, so on a loaded machine a short burn's samples may arrive late.
  EXPECT_TRUE(faces_test::burn_for(100, [&] { return sum(c) > c0 + 10; }));
  EXPECT_GT(sum(c), c0 + 10);
}

TEST_F(FaceTest, BsdScaleZeroDisables) {
  alignas(2) char s[16] = {};
  ASSERT_EQ(bsd_profil(s, sizeof s, catch_offset(), 2), 0);
  burn_cpu_ms(20);
  EXPECT_EQ(bsd_profil(s, sizeof s, catch_offset(), 0), 0);
  unsigned short v[8];
  memcpy(v, s, sizeof v);
  const uint64_t before = sum(v);
  EXPECT_GT(before, 0u);
  burn_cpu_ms(20);
  memcpy(v, s, sizeof v);
  EXPECT_EQ(sum(v), before);
}

TEST_F(FaceTest, BsdBinFormulaHalvesFirst) {
  // bin = ((pc - off) / 2) * scale / 65536; scale 4: bin = (pc - off) / 32768 = 1 here
  // (the burn loop lies 32 KiB .. 64 KiB above off).
  alignas(2) unsigned short s[8] = {};
  ASSERT_EQ(bsd_profil(reinterpret_cast<char*>(s), sizeof s, catch_offset(), 4), 0);
  EXPECT_TRUE(faces_test::burn_for(30, [&] { return s[1] > 0; }));
  bsd_profil(nullptr, 0, 0, 0);
  EXPECT_EQ(s[0], 0);
  EXPECT_GT(s[1], 0);
  EXPECT_EQ(sum(s), s[1]);
}

TEST_F(FaceTest, BsdErrors) {
  alignas(4) char s[18] = {};
  EXPECT_ERRNO(bsd_profil(s, 16, catch_offset(), 65537), EINVAL);
  EXPECT_ERRNO(bsd_profil(s + 1, 16, catch_offset(), 2), EINVAL);
  EXPECT_ERRNO(bsd_profil(static_cast<char*>(faces_test::unmapped_page()), 16, catch_offset(), 2),
               EFAULT);
  EXPECT_ERRNO(bsd_profil(static_cast<char*>(faces_test::readonly_page()), 16, catch_offset(), 2),
               EFAULT);
  EXPECT_EQ(bsd_profil(s, 16, catch_offset(), 65536), 0);  // 65536 is legal: 2 bytes a bin
  EXPECT_EQ(bsd_profil(s, 16, catch_offset(), 1), 0);      // and so is 1
}

TEST_F(FaceTest, BsdEinvalKeepsProfilingOn) {
  alignas(2) unsigned short s[8] = {};
  ASSERT_EQ(bsd_profil(reinterpret_cast<char*>(s), sizeof s, catch_offset(), 2), 0);
  burn_cpu_ms(20);
  const uint64_t c0 = sum(s);
  EXPECT_ERRNO(bsd_profil(reinterpret_cast<char*>(s), sizeof s, catch_offset(), 70000), EINVAL);
  EXPECT_TRUE(faces_test::burn_until([&] { return sum(s) > c0 + 10; }));
  EXPECT_GT(sum(s), c0 + 10);
}

TEST_F(FaceTest, BsdIllegalBufferTerminatesProfiling) {
  alignas(2) unsigned short s[8] = {};
  ASSERT_EQ(bsd_profil(reinterpret_cast<char*>(s), sizeof s, catch_offset(), 2), 0);
  burn_cpu_ms(20);
  EXPECT_ERRNO(bsd_profil(static_cast<char*>(faces_test::unmapped_page()), 16, catch_offset(), 2),
               EFAULT);
  const uint64_t c0 = sum(s);
  burn_cpu_ms(30);
  EXPECT_EQ(sum(s), c0);
}

TEST_F(FaceTest, BsdBinsWrap) {
  alignas(2) unsigned short s[8] = {};
  s[0] = s[1] = 65535;
  ASSERT_EQ(bsd_profil(reinterpret_cast<char*>(s), sizeof s, catch_offset(), 2), 0);
  burn_cpu_ms(40);
  bsd_profil(nullptr, 0, 0, 0);
  // scale 2: bin = ((pc - off) / 2) * 2 / 65536 = 0: it passed 65535 and wrapped.
  EXPECT_LT(s[0], 1000);
  EXPECT_GT(s[0], 0);
}

}  // namespace

}  // namespace sprofil::faces_test
