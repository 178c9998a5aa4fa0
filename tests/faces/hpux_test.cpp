// HP-UX sprofil(2)/profil(2) validation (seed 000).
#include <climits>

#include "fixture.hpp"

namespace sprofil::faces_test {

namespace {

// A region that catches the burn loop: 8 PROF_UINT counters with scale 2.
struct Catch {
  unsigned int c[8] = {};
  hpux_prof entry() { return hpux_prof{c, sizeof c, reinterpret_cast<void*>(catch_offset()), 2}; }
};

TEST_F(FaceTest, HpuxE2bigForNegativeAndTooLargeProfcnt) {
  hpux_prof p{};
  EXPECT_ERRNO(hpux_sprofil(&p, -1, nullptr, PROF_USHORT), E2BIG);
  EXPECT_ERRNO(hpux_sprofil(&p, HPUX_PROFIL_MAX + 1, nullptr, PROF_USHORT), E2BIG);
  EXPECT_ERRNO(hpux_sprofil(&p, INT_MAX, nullptr, PROF_USHORT), E2BIG);
  EXPECT_EQ(hpux_profil_max(), HPUX_PROFIL_MAX);
}

TEST_F(FaceTest, HpuxProfcntZeroDisablesAndReturnsZero) {
  Catch k;
  hpux_prof p = k.entry();
  ASSERT_EQ(hpux_sprofil(&p, 1, nullptr, PROF_UINT), 0);
  EXPECT_TRUE(faces_test::burn_until([&] { return sum(k.c) > 0; }));
  EXPECT_GT(sum(k.c), 0u);
  EXPECT_EQ(hpux_sprofil(nullptr, 0, nullptr, PROF_UINT), 0);
  const uint64_t before = sum(k.c);
  burn_cpu_ms(30);
  EXPECT_EQ(sum(k.c), before);
}

TEST_F(FaceTest, HpuxFlagsMustBeExactlyOneElementSize) {
  Catch k;
  hpux_prof p = k.entry();
  for (unsigned f : {0u, 3u, 5u, 6u, 7u, 8u, PROF_USHORT | PROF_UINT64, 0x100u})
    EXPECT_ERRNO(hpux_sprofil(&p, 1, nullptr, f), EINVAL);
  EXPECT_EQ(hpux_sprofil(&p, 1, nullptr, PROF_USHORT), 0);
  EXPECT_EQ(hpux_sprofil(&p, 1, nullptr, PROF_UINT), 0);
  EXPECT_EQ(hpux_sprofil(&p, 1, nullptr, PROF_UINT64), 0);
}

TEST_F(FaceTest, HpuxPrSizeRules) {
  alignas(8) unsigned char buf[64];
  auto* off = reinterpret_cast<void*>(catch_offset());
  hpux_prof zero{buf, 0, off, 0x10000};
  EXPECT_ERRNO(hpux_sprofil(&zero, 1, nullptr, PROF_USHORT), EINVAL);
  hpux_prof odd{buf, 3, off, 0x10000};
  EXPECT_ERRNO(hpux_sprofil(&odd, 1, nullptr, PROF_USHORT), EINVAL);
  hpux_prof six{buf, 6, off, 0x10000};
  EXPECT_ERRNO(hpux_sprofil(&six, 1, nullptr, PROF_UINT), EINVAL);
  EXPECT_ERRNO(hpux_sprofil(&six, 1, nullptr, PROF_UINT64), EINVAL);
  // At most (2^46 * pr_scale) / 65536 bytes: 2^31 for scale 2.
  hpux_prof big{buf, (1u << 31) + 8, off, 2};
  EXPECT_ERRNO(hpux_sprofil(&big, 1, nullptr, PROF_USHORT), EINVAL);
  hpux_prof ok{buf, 64, off, 0x10000};
  EXPECT_EQ(hpux_sprofil(&ok, 1, nullptr, PROF_UINT64), 0);
}

TEST_F(FaceTest, HpuxMisalignedBufferIsEinval) {
  alignas(8) unsigned char buf[72];
  hpux_prof p{buf + 1, 64, reinterpret_cast<void*>(catch_offset()), 2};
  EXPECT_ERRNO(hpux_sprofil(&p, 1, nullptr, PROF_USHORT), EINVAL);
  p.pr_base = buf + 2;
  EXPECT_ERRNO(hpux_sprofil(&p, 1, nullptr, PROF_UINT), EINVAL);
  p.pr_base = buf + 4;
  EXPECT_ERRNO(hpux_sprofil(&p, 1, nullptr, PROF_UINT64), EINVAL);
}

TEST_F(FaceTest, HpuxEfaultForProfpTvpAndBuffers) {
  Catch k;
  hpux_prof p = k.entry();
  EXPECT_ERRNO(
      hpux_sprofil(static_cast<hpux_prof*>(faces_test::unmapped_page()), 1, nullptr, PROF_UINT),
      EFAULT);
  EXPECT_ERRNO(hpux_sprofil(nullptr, 1, nullptr, PROF_UINT), EFAULT);
  EXPECT_ERRNO(hpux_sprofil(&p, 1, static_cast<timeval*>(faces_test::unmapped_page()), PROF_UINT),
               EFAULT);
  EXPECT_ERRNO(hpux_sprofil(&p, 1, static_cast<timeval*>(faces_test::readonly_page()), PROF_UINT),
               EFAULT);
  hpux_prof bad{faces_test::unmapped_page(), 64, reinterpret_cast<void*>(catch_offset()), 2};
  EXPECT_ERRNO(hpux_sprofil(&bad, 1, nullptr, PROF_UINT), EFAULT);
  bad.pr_base = faces_test::readonly_page();
  EXPECT_ERRNO(hpux_sprofil(&bad, 1, nullptr, PROF_UINT), EFAULT);
  // An overflow descriptor whose element is not writable.
  hpux_prof two[2] = {k.entry(), {faces_test::readonly_page(), 4, nullptr, 2}};
  EXPECT_ERRNO(hpux_sprofil(two, 2, nullptr, PROF_UINT), EFAULT);
}

TEST_F(FaceTest, HpuxTvpReceivesTheTick) {
  Catch k;
  hpux_prof p = k.entry();
  timeval tv{99, 99};
  unsetenv("SPROFIL_HZ");
  ASSERT_EQ(hpux_sprofil(&p, 1, &tv, PROF_UINT), 0);
  EXPECT_EQ(tv.tv_sec, 0);
  EXPECT_EQ(tv.tv_usec, 1000);  // 1000 Hz by default
  setenv("SPROFIL_HZ", "100", 1);
  ASSERT_EQ(hpux_sprofil(&p, 1, &tv, PROF_UINT), 0);
  unsetenv("SPROFIL_HZ");
  EXPECT_EQ(tv.tv_sec, 0);
  EXPECT_EQ(tv.tv_usec, 10000);
}

TEST_F(FaceTest, HpuxEntriesMustAscendAndNotOverlap) {
  alignas(4) unsigned int a[16], b[16];
  const uintptr_t base = catch_offset();
  auto* lo = reinterpret_cast<void*>(base);
  auto* hi = reinterpret_cast<void*>(base + 0x1000);
  hpux_prof desc[2] = {{a, sizeof a, hi, 0x10000}, {b, sizeof b, lo, 0x10000}};
  EXPECT_ERRNO(hpux_sprofil(desc, 2, nullptr, PROF_UINT), EINVAL);  // descending
  hpux_prof same[2] = {{a, sizeof a, lo, 0x10000}, {b, sizeof b, lo, 0x10000}};
  EXPECT_ERRNO(hpux_sprofil(same, 2, nullptr, PROF_UINT), EINVAL);  // equal offsets
  // a covers [lo, lo + 64): b starting at lo + 32 overlaps it (the ERRORS section wins).
  hpux_prof ovl[2] = {{a, sizeof a, lo, 0x10000},
                      {b, sizeof b, reinterpret_cast<void*>(base + 32), 0x10000}};
  EXPECT_ERRNO(hpux_sprofil(ovl, 2, nullptr, PROF_UINT), EINVAL);
  hpux_prof good[2] = {{a, sizeof a, lo, 0x10000}, {b, sizeof b, hi, 0x10000}};
  EXPECT_EQ(hpux_sprofil(good, 2, nullptr, PROF_UINT), 0);
}

TEST_F(FaceTest, HpuxScaleZeroOrOneEntriesAreIgnored) {
  Catch k;
  // Ignored entries are not even checked: a null base, a bad size.
  hpux_prof p[3] = {{nullptr, 3, reinterpret_cast<void*>(1), 0},
                    k.entry(),
                    {nullptr, 5, reinterpret_cast<void*>(UINTPTR_MAX), 1}};
  ASSERT_EQ(hpux_sprofil(p, 3, nullptr, PROF_UINT), 0);
  EXPECT_TRUE(faces_test::burn_until([&] { return sum(k.c) > 0; }));
  EXPECT_GT(sum(k.c), 0u);
  // Only ignored entries: nothing counts, still success.
  hpux_prof q{k.c, sizeof k.c, reinterpret_cast<void*>(catch_offset()), 1};
  ASSERT_EQ(hpux_sprofil(&q, 1, nullptr, PROF_UINT), 0);
  const uint64_t before = sum(k.c);
  burn_cpu_ms(30);
  EXPECT_EQ(sum(k.c), before);
}

TEST_F(FaceTest, HpuxOverflowDescriptorCountsPcsInNoRegion) {
  // A region over text that never runs (this test's own data) and the overflow descriptor.
  alignas(8) static unsigned int data_region[4];
  unsigned int cold[4] = {}, over = 0;
  hpux_prof p[2] = {{cold, sizeof cold, data_region, 0x10000}, {&over, sizeof over, nullptr, 2}};
  ASSERT_EQ(hpux_sprofil(p, 2, nullptr, PROF_UINT), 0);
  EXPECT_TRUE(faces_test::burn_for(50, [&] { return over >= 20; }));
  hpux_sprofil(nullptr, 0, nullptr, PROF_UINT);
  EXPECT_GE(over, 20u);
  EXPECT_EQ(sum(cold), 0u);
}

TEST_F(FaceTest, HpuxOverflowDescriptorMustBeLastAndOneElement) {
  Catch k;
  unsigned int over[2] = {};
  hpux_prof notlast[2] = {{over, 4, nullptr, 2}, k.entry()};
  EXPECT_ERRNO(hpux_sprofil(notlast, 2, nullptr, PROF_UINT), EINVAL);
  hpux_prof longer[2] = {k.entry(), {over, 8, nullptr, 2}};
  EXPECT_ERRNO(hpux_sprofil(longer, 2, nullptr, PROF_UINT), EINVAL);
  hpux_prof alone{over, 4, nullptr, 2};
  EXPECT_EQ(hpux_sprofil(&alone, 1, nullptr, PROF_UINT), 0);
}

TEST_F(FaceTest, HpuxCountersSaturate) {
  alignas(8) unsigned short over = 65530;
  hpux_prof p{&over, 2, nullptr, 2};
  ASSERT_EQ(hpux_sprofil(&p, 1, nullptr, PROF_USHORT), 0);
  EXPECT_TRUE(faces_test::burn_for(60, [&] { return over == 65535; }));
  hpux_sprofil(nullptr, 0, nullptr, PROF_USHORT);
  EXPECT_EQ(over, 65535);
  unsigned int o32 = UINT_MAX - 3;
  hpux_prof q{&o32, 4, nullptr, 2};
  ASSERT_EQ(hpux_sprofil(&q, 1, nullptr, PROF_UINT), 0);
  EXPECT_TRUE(faces_test::burn_for(60, [&] { return o32 == UINT_MAX; }));
  hpux_sprofil(nullptr, 0, nullptr, PROF_UINT);
  EXPECT_EQ(o32, UINT_MAX);
}

TEST_F(FaceTest, HpuxProfilIsOneUshortEntry) {
  unsigned short c[8] = {};
  ASSERT_EQ(hpux_profil(c, sizeof c, reinterpret_cast<void*>(catch_offset()), 2), 0);
  EXPECT_TRUE(faces_test::burn_for(40, [&] { return c[0] > 0; }));
  hpux_profil(nullptr, 0, nullptr, 0);
  // scale 2: byte offset (pc - off) * 2 / 65536 = 0 for the burn loop (32 KiB above off).
  EXPECT_GT(c[0], 0);
  EXPECT_EQ(sum(c), c[0]);
  EXPECT_ERRNO(hpux_profil(c, 3, reinterpret_cast<void*>(catch_offset()), 2), EINVAL);
  EXPECT_ERRNO(hpux_profil(faces_test::unmapped_page(), 16, nullptr, 0x10000), EFAULT);
}

TEST_F(FaceTest, HpuxFailedCallChangesNothing) {
  Catch k;
  hpux_prof p = k.entry();
  ASSERT_EQ(hpux_sprofil(&p, 1, nullptr, PROF_UINT), 0);
  EXPECT_TRUE(faces_test::burn_until([&] { return sum(k.c) > 0; }));
  const uint64_t c0 = sum(k.c);
  EXPECT_GT(c0, 0u);
  unsigned int other[8] = {};
  hpux_prof q{other, sizeof other, reinterpret_cast<void*>(catch_offset()), 2};
  EXPECT_ERRNO(hpux_sprofil(&q, -1, nullptr, PROF_UINT), E2BIG);
  EXPECT_ERRNO(hpux_sprofil(&q, 1, nullptr, 3), EINVAL);
  EXPECT_ERRNO(hpux_sprofil(&q, 1, static_cast<timeval*>(faces_test::unmapped_page()), PROF_UINT),
               EFAULT);
  hpux_prof bad{faces_test::unmapped_page(), 32, reinterpret_cast<void*>(catch_offset()), 2};
  EXPECT_ERRNO(hpux_sprofil(&bad, 1, nullptr, PROF_UINT), EFAULT);
  // 100 ms of CPU (about 100 samples): CPU timers are checked only at ticks that find the
  // thread running, so on a loaded machine a short burn's samples may arrive late.
  EXPECT_TRUE(faces_test::burn_for(100, [&] { return sum(k.c) > c0 + 10; }));
  EXPECT_GT(sum(k.c), c0 + 10);
  EXPECT_EQ(sum(other), 0u);
}

}  // namespace

}  // namespace sprofil::faces_test
