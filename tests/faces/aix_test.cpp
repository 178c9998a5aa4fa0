// AIX profil subroutine validation, forms 1 and 2 (seed 003).
#include <climits>

#include "fixture.hpp"
#include "sprofil/aix.h"

namespace sprofil::faces_test {

namespace {

void* at(uintptr_t a) {
  return reinterpret_cast<void*>(a);
}

// Turns off whichever form is on (both calls are no-ops for the other form).
void aix_off() {
  aix_prof end{nullptr, nullptr, nullptr, 0, 0};
  aix_profil(&end, -1, 0, 0);
  aix_profil(nullptr, 0, 0, 0);
}

// Form 2 over the burn loop's 64 KiB (hot) and 4 KiB far below it (cold), in one contiguous
// buffer.
struct Form2 {
  unsigned short buf[96] = {};
  unsigned short* hot = buf + 32;  // 64 shorts
  unsigned short* cold = buf;      // 32 shorts
  aix_prof p[3];
  Form2() {
    const uintptr_t lo = catch_offset();
    p[0] = {at(lo - 0x100000), at(lo - 0x100000 + 0x1000), cold, 64, UINT_MAX};
    p[1] = {at(lo), at(lo + 0x10000), hot, 128, UINT_MAX};
    p[2] = {nullptr, nullptr, nullptr, 0, 0};
  }
  uint64_t hot_sum() const {
    uint64_t s = 0;
    for (int i = 0; i < 64; ++i) s += hot[i];
    return s;
  }
  uint64_t cold_sum() const {
    uint64_t s = 0;
    for (int i = 0; i < 32; ++i) s += cold[i];
    return s;
  }
};

TEST_F(FaceTest, AixForm1OnlyLow16BitsOfScaleCount) {
  unsigned short c[8] = {};
  // 0x10002: the high half is ignored, leaving 2: every pc onto one counter.
  ASSERT_EQ(aix_profil(c, sizeof c, catch_offset(), 0x10002), 0);
  EXPECT_TRUE(faces_test::burn_until([&] { return c[0] > 0; }));
  aix_off();
  EXPECT_GT(c[0], 0);
  EXPECT_EQ(sum(c), c[0]);
  // 0x10000 and 0x10001 are 0 and 1: off (and nothing was on: no effect, returns 0).
  unsigned short d[8] = {};
  EXPECT_EQ(aix_profil(d, sizeof d, catch_offset(), 0x10000), 0);
  EXPECT_EQ(aix_profil(d, sizeof d, catch_offset(), 0x10001), 0);
  burn_cpu_ms(20);
  EXPECT_EQ(sum(d), 0u);
}

TEST_F(FaceTest, AixForm1ScaleZeroOrOneTurnsOff) {
  for (unsigned s : {0u, 1u}) {
    unsigned short c[8] = {};
    ASSERT_EQ(aix_profil(c, sizeof c, catch_offset(), 2), 0);
    EXPECT_TRUE(faces_test::burn_until([&] { return sum(c) > 0; }));
    EXPECT_EQ(aix_profil(c, sizeof c, catch_offset(), s), 0);
    const uint64_t before = sum(c);
    EXPECT_GT(before, 0u);
    burn_cpu_ms(20);
    EXPECT_EQ(sum(c), before);
  }
}

TEST_F(FaceTest, AixForm1BufferSizeZeroIsIneffective) {
  unsigned short c[8] = {};
  EXPECT_EQ(aix_profil(c, 0, catch_offset(), 2), 0);
  burn_cpu_ms(20);
  EXPECT_EQ(sum(c), 0u);
}

TEST_F(FaceTest, AixForm1Formula) {
  // ((pc - off) * 0x8000) >> 16 = (pc - off) / 2 bytes, rounded down to even: element
  // (pc - off) / 4. The burn loop lies 32 KiB above off.
  static unsigned short c[0x8000 / 2];
  const uintptr_t pc = reinterpret_cast<uintptr_t>(&burn_cpu_ms);
  const size_t first = (pc - catch_offset() - 0x7000) / 4;
  const auto in_burn = [&] {
    uint64_t n = 0;
    for (size_t i = first; i < first + 64 && i < 0x4000; ++i) n += c[i];
    return n;
  };
  ASSERT_EQ(aix_profil(c, sizeof c, catch_offset() + 0x7000, 0x8000), 0);
  EXPECT_TRUE(faces_test::burn_for(30, [&] { return in_burn() > 0; }));
  aix_off();
  EXPECT_GT(in_burn(), 0u);
  EXPECT_GT(in_burn() * 10, sum(c) * 9);
}

TEST_F(FaceTest, AixForm1Saturates) {
  unsigned short c[4] = {65530, 65530, 0, 0};
  ASSERT_EQ(aix_profil(c, sizeof c, catch_offset(), 2), 0);
  EXPECT_TRUE(faces_test::burn_for(50, [&] { return c[0] == USHRT_MAX; }));
  aix_off();
  EXPECT_EQ(c[0], USHRT_MAX);
}

TEST_F(FaceTest, AixEfaultForBadBuffers) {
  EXPECT_ERRNO(aix_profil(faces_test::unmapped_page(), 16, catch_offset(), 2), EFAULT);
  EXPECT_ERRNO(aix_profil(faces_test::readonly_page(), 16, catch_offset(), 2), EFAULT);
  EXPECT_ERRNO(aix_profil(faces_test::unmapped_page(), -1, 0, 0), EFAULT);  // the array
  Form2 f;
  f.p[1].p_buff = static_cast<unsigned short*>(faces_test::unmapped_page());
  f.p[0].p_buff = f.p[1].p_buff - 32;
  EXPECT_ERRNO(aix_profil(f.p, -1, 0, 0), EFAULT);
}

TEST_F(FaceTest, AixForm2PHighMustAscend) {
  Form2 f;
  aix_prof rev[3] = {f.p[1], f.p[0], f.p[2]};
  rev[0].p_buff = f.buf;
  rev[1].p_buff = f.buf + 64;
  EXPECT_ERRNO(aix_profil(rev, -1, 0, 0), EINVAL);
}

TEST_F(FaceTest, AixForm2BuffersMustBeContiguous) {
  Form2 f;
  unsigned short other[64];
  f.p[1].p_buff = other;
  EXPECT_ERRNO(aix_profil(f.p, -1, 0, 0), EFAULT);
}

TEST_F(FaceTest, AixForm2ComputedScaleFillsTheBuffer) {
  Form2 f;
  // 64 KiB of text over 128 bytes of buffer: scale 128 * 65536 / 65536 = 128, element
  // ((pc - lo) * 128 >> 16) / 2 = (pc - lo) / 1024: the burn loop is near element 32.
  const size_t e = (reinterpret_cast<uintptr_t>(&burn_cpu_ms) - catch_offset()) / 1024;
  ASSERT_EQ(e, 32u);
  ASSERT_EQ(aix_profil(f.p, -1, 0, 0), 0);
  EXPECT_TRUE(faces_test::burn_for(40, [&] { return f.hot[e] + f.hot[e + 1] > 0; }));
  aix_off();
  EXPECT_GT(f.hot[e] + f.hot[e + 1], 0);
  EXPECT_EQ(f.cold_sum(), 0u);
}

TEST_F(FaceTest, AixOnWhileOnHasNoEffect) {
  unsigned short a[8] = {}, b[8] = {};
  ASSERT_EQ(aix_profil(a, sizeof a, catch_offset(), 2), 0);
  EXPECT_EQ(aix_profil(b, sizeof b, catch_offset(), 2), 0);
  Form2 f;
  EXPECT_EQ(aix_profil(f.p, -1, 0, 0), 0);  // form 2 while form 1 is on: no effect either
  EXPECT_TRUE(faces_test::burn_until([&] { return sum(a) > 0; }));
  EXPECT_GT(sum(a), 0u);
  EXPECT_EQ(sum(b), 0u);
  EXPECT_EQ(f.hot_sum(), 0u);
}

TEST_F(FaceTest, AixOffWhileOffHasNoEffect) {
  aix_prof end{nullptr, nullptr, nullptr, 0, 0};
  EXPECT_EQ(aix_profil(&end, -1, 0, 0), 0);
  EXPECT_EQ(aix_profil(nullptr, 0, 0, 0), 0);
  EXPECT_EQ(aix_profil(nullptr, 16, 0, 1), 0);
}

TEST_F(FaceTest, AixOffThroughTheOtherFormHasNoEffect) {
  unsigned short a[8] = {};
  ASSERT_EQ(aix_profil(a, sizeof a, catch_offset(), 2), 0);
  aix_prof end{nullptr, nullptr, nullptr, 0, 0};
  EXPECT_EQ(aix_profil(&end, -1, 0, 0), 0);  // form 2 off: form 1 keeps going
  EXPECT_TRUE(faces_test::burn_until([&] { return sum(a) > 0; }));
  EXPECT_GT(sum(a), 0u);
  EXPECT_EQ(aix_profil(nullptr, 0, 0, 0), 0);  // form 1 off
  const uint64_t a0 = sum(a);
  burn_cpu_ms(20);
  EXPECT_EQ(sum(a), a0);

  Form2 f;
  ASSERT_EQ(aix_profil(f.p, -1, 0, 0), 0);
  EXPECT_EQ(aix_profil(a, sizeof a, catch_offset(), 0), 0);  // form 1 off: form 2 keeps going
  EXPECT_TRUE(faces_test::burn_until([&] { return f.hot_sum() > 0; }));
  EXPECT_GT(f.hot_sum(), 0u);
  EXPECT_EQ(aix_profil(&end, -1, 0, 0), 0);  // form 2 off
  const uint64_t h0 = f.hot_sum();
  burn_cpu_ms(20);
  EXPECT_EQ(f.hot_sum(), h0);
}

TEST_F(FaceTest, AixFailedCallChangesNothing) {
  Form2 f;
  ASSERT_EQ(aix_profil(f.p, -1, 0, 0), 0);
  burn_cpu_ms(20);
  const uint64_t h0 = f.hot_sum();
  EXPECT_ERRNO(aix_profil(faces_test::unmapped_page(), -1, 0, 0), EFAULT);
  // 100 ms of CPU (about 100 samples): CPU timers are checked only at ticks that find the
  // thread running, so on a loaded machine a short burn's samples may arrive late.
  EXPECT_TRUE(faces_test::burn_for(100, [&] { return f.hot_sum() > h0 + 10; }));
  EXPECT_GT(f.hot_sum(), h0 + 10);
}

}  // namespace

}  // namespace sprofil::faces_test
