// The modern API's snapshot is a copy the caller owns: its region names and counts stay
// readable after the session grows its region table (realloc moves it) and after the
// session is destroyed. Under the ASan build a name pointing into session memory is a
// heap-use-after-free; without ASan the names are compared with what was added.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "sprofil/sprofil.h"

namespace sprofil::api_test {
namespace {

// Text ranges to add: disjoint slices of a static array (the API needs no real code to
// build a table; nothing is sampled here, the session never starts).
alignas(64) char g_text[64 * 256];

std::string name_of(int i) {
  return "region-" + std::to_string(i) + std::string(40, 'x');  // longer than any inline buffer
}

TEST(Snapshot, OwnsItsNamesAcrossGrowthAndDestroy) {
  sprofil_session* s = sprofil_create(nullptr);
  ASSERT_NE(s, nullptr);
  constexpr int kFirst = 3, kLater = 40;  // 40 more: the region table is reallocated
  for (int i = 0; i < kFirst; ++i)
    ASSERT_EQ(sprofil_add_range(s, g_text + 256 * i, g_text + 256 * (i + 1), name_of(i).c_str()),
              0);
  sprofil_snapshot* snap = sprofil_snapshot_take(s);
  ASSERT_NE(snap, nullptr);
  for (int i = kFirst; i < kFirst + kLater; ++i)
    ASSERT_EQ(sprofil_add_range(s, g_text + 256 * i, g_text + 256 * (i + 1), name_of(i).c_str()),
              0);
  sprofil_destroy(s);
  // Scribble over freed memory of the same sizes, so a dangling name would not still read
  // as the old string by chance.
  std::vector<std::vector<char>> junk;
  for (int i = 0; i < 64; ++i) junk.emplace_back(256 * 64, '#');

  ASSERT_EQ(snap->nregions, static_cast<size_t>(kFirst));
  for (int i = 0; i < kFirst; ++i) {
    const sprofil_region_counts& r = snap->regions[i];
    EXPECT_STREQ(r.name, name_of(i).c_str()) << "region " << i;
    EXPECT_EQ(r.lo, reinterpret_cast<uintptr_t>(g_text + 256 * i));
    EXPECT_EQ(r.nbins, 256u / r.bin_bytes);
    for (size_t k = 0; k < r.nbins; ++k) EXPECT_EQ(r.counts[k], 0u);  // never started
  }
  sprofil_snapshot_free(snap);
}

TEST(Version, IsTheProjectVersion) {
  EXPECT_STREQ(sprofil_version(), SPROFIL_PROJECT_VERSION);
}

}  // namespace

}  // namespace sprofil::api_test
