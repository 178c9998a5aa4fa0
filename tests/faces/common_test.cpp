// Rules common to all faces: one face channel, and enable/disable cycles (glibc sprofil bug
// #3: no double free when profiling is switched on and off many times).
#include "fixture.hpp"
#include "sprofil/aix.h"
#include "sprofil/bsd.h"
#include "sprofil/sysv.h"
#include "sprofil/tru64.h"

namespace sprofil::faces_test {

namespace {

TEST_F(FaceTest, AnyFaceReplacesWhatAnotherSetUp) {
  unsigned int h[8] = {};
  hpux_prof p{h, sizeof h, reinterpret_cast<void*>(catch_offset()), 2};
  ASSERT_EQ(hpux_sprofil(&p, 1, nullptr, PROF_UINT), 0);
  EXPECT_TRUE(faces_test::burn_until([&] { return sum(h) > 0; }));
  alignas(2) unsigned short b[8] = {};
  ASSERT_EQ(bsd_profil(reinterpret_cast<char*>(b), sizeof b, catch_offset(), 2), 0);
  const uint64_t h0 = sum(h);
  EXPECT_GT(h0, 0u);
  EXPECT_TRUE(faces_test::burn_until([&] { return sum(b) > 0; }));
  EXPECT_EQ(sum(h), h0);
  EXPECT_GT(sum(b), 0u);
  // And turning a face off turns the channel off, whoever set it up.
  unsigned short s[8] = {};
  ASSERT_EQ(sysv_profil(s, sizeof s, catch_offset(), 2), 0);
  ASSERT_EQ(tru64_profil(nullptr, 0, nullptr, 0), 0);
  burn_cpu_ms(20);
  EXPECT_EQ(sum(s), 0u);
}

// Enable / disable / enable many times, through every face, with sizes changing.
TEST_F(FaceTest, EnableDisableCyclesDoNotDoubleFree) {
  static unsigned int big[4096];
  static unsigned short small[4096];
  for (int i = 0; i < 300; ++i) {
    const size_t n = 2 + static_cast<size_t>(i * 37 % 4000);
    hpux_prof p[2] = {
        {big, static_cast<unsigned>(n * 4), reinterpret_cast<void*>(catch_offset()), 0x10000},
        {big + 4095, 4, nullptr, 2}};
    switch (i % 7) {
      case 0:
        ASSERT_EQ(hpux_sprofil(p, 1 + i % 2, nullptr, PROF_UINT), 0);
        break;
      case 1:
        ASSERT_EQ(sysv_profil(small, n * 2, catch_offset(), 0x8000), 0);
        break;
      case 2:
        ASSERT_EQ(bsd_profil(reinterpret_cast<char*>(small), n * 2, catch_offset(), 65536), 0);
        break;
      case 3:
        ASSERT_EQ(tru64_profil(small, static_cast<unsigned>(n * 2),
                               reinterpret_cast<void*>(catch_offset()), 0x4000),
                  0);
        break;
      case 4: {
        aix_prof a[2] = {{reinterpret_cast<void*>(catch_offset()),
                          reinterpret_cast<void*>(catch_offset() + 0x10000), small,
                          static_cast<int>(n * 2), UINT32_MAX},
                         {}};
        ASSERT_EQ(aix_profil(a, -1, 0, 0), 0);
        break;
      }
      case 5: {
        OSProf o{small, static_cast<u32>(n), reinterpret_cast<u32*>(catch_offset() & ~uintptr_t{3}),
                 reinterpret_cast<u32*>((catch_offset() & ~uintptr_t{3}) + 4 * (n - 1))};
        osProfileInit(&o, 1);
        ASSERT_EQ(osProfileLastError(), 0);
        osProfileStart(100 + static_cast<u32>(i));
        ASSERT_EQ(osProfileLastError(), 0);
        break;
      }
      default:
        ASSERT_EQ(hpux_profil(small, n * 2, reinterpret_cast<void*>(catch_offset()), 0x10000), 0);
    }
    if (i % 3 == 0) burn_cpu_ms(1);
    switch (i % 4) {  // off through various faces, sometimes twice, sometimes not at all
      case 0:
        osProfileStop();
        hpux_sprofil(nullptr, 0, nullptr, PROF_UINT);
        break;
      case 1:
        osProfileStop();
        bsd_profil(nullptr, 0, 0, 0);
        bsd_profil(nullptr, 0, 0, 0);
        break;
      case 2:
        osProfileStop();
        osProfileStop();
        tru64_profil(nullptr, 0, nullptr, 0);
        break;
      default:
        osProfileStop();
        break;
    }
  }
}

}  // namespace

}  // namespace sprofil::faces_test
