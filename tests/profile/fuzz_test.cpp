// Robustness of the reader on hostile input: every truncation, random byte mutations and
// extreme values in every header and region field. The reader must return an error or a
// consistent Profile, never crash (this file is also built with ASan + UBSan).
#include <random>

#include "test_util.hpp"

#if defined(__SANITIZE_ADDRESS__)
// LeakSanitizer needs ptrace, which containers often forbid; leaks are not what we test here.
extern "C" const char* __asan_default_options() {
  return "detect_leaks=0";
}
#endif

namespace sprofil::profile_test {
namespace {

// Small: three regions of widths 2, 4, 8 (a few pages in all).
Profile small_profile() {
  Profile p;
  p.flags = SPROF_F_FINISHED;
  p.tick_ns = 1000000;
  p.requested_hz = 1000;
  p.argv = {"a.out", "x"};
  p.overflow = 1;
  p.delivered = 10;
  p.regions = {make_region("/bin/a.out", 0x400000, 600, 4, 2, 1),
               make_region("/lib/libc.so", 0x7f0000000000, 1000, 4, 4, 2),
               make_region("[vdso]", 0x7fff0000, 256, 1, 8, 3)};
  p.regions[1].build_id = {9, 8, 7, 6};
  return p;
}

// Parses and, on success, checks the invariants. Returns whether it parsed.
bool parse_and_check(const std::vector<uint8_t>& img) {
  Profile p;
  std::string error;
  bool ok = parse_profile(img.data(), img.size(), &p, &error);
  if (ok) {
    check_invariants(p);
  } else {
    EXPECT_FALSE(error.empty());
  }
  return ok;
}

TEST(ReaderFuzz, EveryTruncation) {
  const std::vector<uint8_t> img = image_of(small_profile());
  ASSERT_EQ(img.size(), 7u * SPROF_PAGE);
  size_t parsed = 0;
  for (size_t len = 0; len <= img.size(); ++len) {
    std::vector<uint8_t> cut(img.begin(), img.begin() + static_cast<ptrdiff_t>(len));
    if (parse_and_check(cut)) ++parsed;
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(parsed, 1u);  // only the whole file (regions_end == its size)
  // With regions_end lowered to 0, cuts are caught by the region checks instead.
  std::vector<uint8_t> img0 = img;
  poke<uint64_t>(img0, offsetof(sprof_header, regions_end), 0);
  poke<uint32_t>(img0, offsetof(sprof_header, region_count), 0);
  for (size_t len = 0; len <= img0.size(); len += 1) {
    std::vector<uint8_t> cut(img0.begin(), img0.begin() + static_cast<ptrdiff_t>(len));
    EXPECT_EQ(parse_and_check(cut), len >= SPROF_PAGE);
  }
  // Same with region_count 3 and regions_end 0: a region error for every short cut.
  poke<uint32_t>(img0, offsetof(sprof_header, region_count), 3);
  for (size_t len = SPROF_PAGE; len < img0.size(); len += 1) {
    std::vector<uint8_t> cut(img0.begin(), img0.begin() + static_cast<ptrdiff_t>(len));
    Profile p;
    std::string error;
    ASSERT_FALSE(parse_profile(cut.data(), cut.size(), &p, &error)) << len;
    ASSERT_EQ(error.rfind("region", 0), 0u) << error;
  }
}

TEST(ReaderFuzz, RandomByteMutations) {
  const std::vector<uint8_t> img = image_of(small_profile());
  const std::vector<size_t> recs = record_offsets(img);
  ASSERT_EQ(recs.size(), 3u);
  std::mt19937_64 rng(0x5eed5eedu);
  size_t parsed = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<uint8_t> m = img;
    const int nmut = 1 + static_cast<int>(rng() % 8);
    for (int j = 0; j < nmut; ++j) {
      // Aim most mutations at the interesting bytes: header fields and record fields.
      size_t pos;
      switch (rng() % 4) {
        case 0:
          pos = rng() % 128;
          break;
        case 1:
          pos = recs[rng() % recs.size()] + rng() % 160;
          break;
        default:
          pos = rng() % m.size();
          break;
      }
      m[pos] = static_cast<uint8_t>(rng());
    }
    if (rng() % 4 == 0) m.resize(rng() % (m.size() + 1));
    if (parse_and_check(m)) ++parsed;
    if (::testing::Test::HasFatalFailure()) return;
  }
  // Many mutations hit counters or padding and leave a valid file: both paths are exercised.
  EXPECT_GT(parsed, 1000u);
  EXPECT_LT(parsed, 20000u);
}

struct Field {
  const char* name;
  size_t offset;
  size_t size;
};

const Field kHeaderFields[] = {
    {"version", offsetof(sprof_header, version), 4},
    {"header_size", offsetof(sprof_header, header_size), 4},
    {"flags", offsetof(sprof_header, flags), 4},
    {"clock", offsetof(sprof_header, clock), 4},
    {"requested_hz", offsetof(sprof_header, requested_hz), 4},
    {"region_count", offsetof(sprof_header, region_count), 4},
    {"tick_ns", offsetof(sprof_header, tick_ns), 8},
    {"effective_hz_milli", offsetof(sprof_header, effective_hz_milli), 8},
    {"start_ns", offsetof(sprof_header, start_ns), 8},
    {"end_ns", offsetof(sprof_header, end_ns), 8},
    {"cpu_ns", offsetof(sprof_header, cpu_ns), 8},
    {"pid", offsetof(sprof_header, pid), 4},
    {"ppid", offsetof(sprof_header, ppid), 4},
    {"regions_end", offsetof(sprof_header, regions_end), 8},
    {"overflow", offsetof(sprof_header, overflow), 8},
    {"delivered", offsetof(sprof_header, delivered), 8},
    {"lost", offsetof(sprof_header, lost), 8},
    {"cmdline_len", offsetof(sprof_header, cmdline_len), 4},
    {"regions_changes", offsetof(sprof_header, regions_changes), 4},
    {"start_cpu_ns", offsetof(sprof_header, start_cpu_ns), 8},
};

const Field kRegionFields[] = {
    {"magic", offsetof(sprof_region, magic), 4},
    {"flags", offsetof(sprof_region, flags), 4},
    {"record_size", offsetof(sprof_region, record_size), 8},
    {"counters_offset", offsetof(sprof_region, counters_offset), 8},
    {"start", offsetof(sprof_region, start), 8},
    {"end", offsetof(sprof_region, end), 8},
    {"load_bias", offsetof(sprof_region, load_bias), 8},
    {"file_offset", offsetof(sprof_region, file_offset), 8},
    {"nbins", offsetof(sprof_region, nbins), 8},
    {"bin_size", offsetof(sprof_region, bin_size), 4},
    {"counter_width", offsetof(sprof_region, counter_width), 4},
    {"load_ns", offsetof(sprof_region, load_ns), 8},
    {"unload_ns", offsetof(sprof_region, unload_ns), 8},
    {"build_id_len", offsetof(sprof_region, build_id_len), 4},
    {"path_len", offsetof(sprof_region, path_len), 4},
};

std::vector<uint64_t> extreme_values(size_t size, uint64_t file_size, uint64_t original) {
  const uint64_t max = size == 8 ? UINT64_MAX : (uint64_t{1} << (8 * size)) - 1;
  std::vector<uint64_t> v = {0,
                             1,
                             2,
                             3,
                             4,
                             7,
                             8,
                             16,
                             63,
                             64,
                             65,
                             SPROF_PAGE - 1,
                             SPROF_PAGE,
                             SPROF_PAGE + 1,
                             2 * SPROF_PAGE,
                             SPROF_PATH_MAX,
                             SPROF_PATH_MAX + 1,
                             SPROF_CMDLINE_MAX,
                             SPROF_CMDLINE_MAX + 1,
                             file_size - 1,
                             file_size,
                             file_size + 1,
                             original - 1,
                             original + 1,
                             max / 2,
                             max / 2 + 1,
                             max / 8 + 1,
                             max - SPROF_PAGE,
                             max - 1,
                             max};
  for (uint64_t& x : v) x &= max;
  return v;
}

void poke_n(std::vector<uint8_t>& img, size_t off, size_t size, uint64_t v) {
  std::memcpy(img.data() + off, &v, size);  // little-endian host
}

// A packed run profile (versions 3 and 2) of two processes: every truncation but the whole file
// is refused, and random bytes written over its table and its extent tables give an error or a
// consistent profile, never a read outside the file (ASan build) or a runaway allocation.
TEST(ReaderFuzz, PackedRunTruncationsAndMutations) {
  Profile second = small_profile();
  second.pid = 7;
  const Profile run = combine_processes({small_profile(), second}, {"", ".7"});
  for (const uint32_t version : {SPROF_RUN_VERSION, SPROF_RUN_VERSION_PAGES}) {
    SCOPED_TRACE("version " + std::to_string(version));
    const std::vector<uint8_t> img = image_of(run, version);
    ASSERT_EQ(peek<uint32_t>(img, offsetof(sprof_run_header, version)), version);
    size_t parsed = 0;
    for (size_t len = 0; len <= img.size(); len = len + 64 < img.size() ? len + 64 : len + 1) {
      std::vector<uint8_t> cut(img.begin(), img.begin() + static_cast<ptrdiff_t>(len));
      if (parse_and_check(cut)) ++parsed;
      if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_EQ(parsed, 1u);
    // The bytes that place the images' units: the table's entries and each extent table.
    std::vector<size_t> targets;
    for (size_t e = 0; e < 2; ++e) {
      const size_t entry = SPROF_PAGE + e * SPROF_RUN_ENTRY;
      for (size_t b = 8; b < 88; ++b) targets.push_back(entry + b);
      const uint64_t at = peek<uint64_t>(img, entry + offsetof(sprof_run_process, image_offset));
      const uint32_t n = peek<uint32_t>(img, entry + offsetof(sprof_run_process, extent_count));
      for (size_t b = 0; b < n * sizeof(sprof_run_extent); ++b) targets.push_back(at + b);
    }
    std::mt19937_64 rng(0x9acced + version);
    for (int round = 0; round < 4000; ++round) {
      std::vector<uint8_t> m = img;
      const int edits = 1 + static_cast<int>(rng() % 3);
      for (int k = 0; k < edits; ++k) {
        const size_t at = targets[rng() % targets.size()];
        m[at] = rng() % 4 == 0 ? 0xff : static_cast<uint8_t>(rng());
      }
      parse_and_check(m);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(ReaderFuzz, ExtremeHeaderFields) {
  const std::vector<uint8_t> img = image_of(small_profile());
  for (const Field& f : kHeaderFields) {
    const uint64_t orig = peek<uint64_t>(img, f.offset) &
                          (f.size == 8 ? UINT64_MAX : (uint64_t{1} << (8 * f.size)) - 1);
    for (uint64_t v : extreme_values(f.size, img.size(), orig)) {
      SCOPED_TRACE(std::string(f.name) + " = " + std::to_string(v));
      std::vector<uint8_t> m = img;
      poke_n(m, f.offset, f.size, v);
      parse_and_check(m);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(ReaderFuzz, ExtremeRegionFields) {
  const std::vector<uint8_t> img = image_of(small_profile());
  const std::vector<size_t> recs = record_offsets(img);
  for (size_t k = 0; k < recs.size(); ++k) {
    for (const Field& f : kRegionFields) {
      const size_t off = recs[k] + f.offset;
      const uint64_t orig =
          peek<uint64_t>(img, off) & (f.size == 8 ? UINT64_MAX : (uint64_t{1} << (8 * f.size)) - 1);
      for (uint64_t v : extreme_values(f.size, img.size(), orig)) {
        SCOPED_TRACE("region " + std::to_string(k) + " " + f.name + " = " + std::to_string(v));
        std::vector<uint8_t> m = img;
        poke_n(m, off, f.size, v);
        parse_and_check(m);
        if (::testing::Test::HasFatalFailure()) return;
        // And combined with a consistent-looking nbins/record_size for the new range, so the
        // deeper checks are reached too.
        if (f.offset == offsetof(sprof_region, end) && v > 0x10000) {
          poke_n(m, recs[k] + offsetof(sprof_region, nbins), 8, UINT64_MAX / 2);
          parse_and_check(m);
        }
      }
    }
  }
}

TEST(ReaderFuzz, PairsOfExtremeRegionFields) {
  // The size-related fields together: nbins, bin_size, width, start/end, record_size.
  const std::vector<uint8_t> img = image_of(small_profile());
  const size_t rec = record_offsets(img)[2];
  const uint64_t vals[] = {0, 1, 2, 8, SPROF_PAGE, UINT32_MAX, UINT64_MAX / 8 + 1, UINT64_MAX};
  for (uint64_t nbins : vals)
    for (uint64_t bin : {uint64_t{1}, uint64_t{8}, uint64_t{UINT32_MAX}})
      for (uint64_t end : vals)
        for (uint64_t rs : {uint64_t{0}, uint64_t{2 * SPROF_PAGE}, UINT64_MAX - SPROF_PAGE + 1}) {
          std::vector<uint8_t> m = img;
          poke_n(m, rec + offsetof(sprof_region, start), 8, 0);
          poke_n(m, rec + offsetof(sprof_region, end), 8, end);
          poke_n(m, rec + offsetof(sprof_region, nbins), 8, nbins);
          poke_n(m, rec + offsetof(sprof_region, bin_size), 4, bin);
          poke_n(m, rec + offsetof(sprof_region, record_size), 8, rs);
          parse_and_check(m);
          if (::testing::Test::HasFatalFailure()) return;
        }
}

}  // namespace
}  // namespace sprofil::profile_test
