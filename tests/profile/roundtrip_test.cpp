// Writer -> reader round trips, and the plain accessors of the model.
#include <sys/stat.h>

#include "test_util.hpp"

namespace sprofil::profile_test {
namespace {

TEST(ProfileModel, ClockNames) {
  EXPECT_STREQ(clock_name(Clock::kCpu), "cpu");
  EXPECT_STREQ(clock_name(Clock::kItimer), "itimer");
  EXPECT_STREQ(clock_name(Clock::kPerf), "perf");
  EXPECT_STREQ(clock_name(Clock::kWall), "wall");
  EXPECT_STREQ(clock_name(static_cast<Clock>(9)), "unknown");
}

TEST(ProfileModel, TotalsAndFinished) {
  Profile p;
  p.overflow = 5;
  Region a;
  set_counts(a, {1, 2, 3});
  Region b;
  set_counts(b, {10, 0, 20, 30});
  p.regions = {a, b};
  EXPECT_EQ(a.total(), 6u);
  EXPECT_EQ(b.total(), 60u);
  EXPECT_EQ(p.total_samples(), 71u);
  EXPECT_FALSE(p.finished());
  p.flags = SPROF_F_FINISHED | SPROF_F_CHILD;
  EXPECT_TRUE(p.finished());
  set_counts(p.regions[0], {UINT64_MAX, 1});
  EXPECT_EQ(p.regions[0].total(), UINT64_MAX);  // saturates
  EXPECT_EQ(p.total_samples(), UINT64_MAX);
  a.start = 0x1000;
  a.bin_size = 8;
  EXPECT_EQ(a.bin_address(3), 0x1018u);
}

TEST(ProfileRoundTrip, AllCounterWidths) {
  TempDir dir;
  Profile p = sample_profile();
  std::string error;
  ASSERT_TRUE(write_profile(p, dir.file("a.sprof"), &error)) << error;
  Profile q;
  ASSERT_TRUE(read_profile(dir.file("a.sprof"), &q, &error)) << error;
  expect_same_profile(p, q);
  check_invariants(q);
  // Exact byte size: header + each record page + counters padded to pages.
  uint64_t want = SPROF_PAGE;
  for (const Region& r : p.regions)
    want += SPROF_PAGE + (r.nbins() * r.counter_width + SPROF_PAGE - 1) / SPROF_PAGE * SPROF_PAGE;
  std::vector<uint8_t> img = slurp(dir.file("a.sprof"));
  EXPECT_EQ(img.size(), want);
  EXPECT_EQ(peek<uint64_t>(img, offsetof(sprof_header, regions_end)), want);
  // The same bytes parse from memory.
  Profile m;
  ASSERT_TRUE(parse_profile(img.data(), img.size(), &m, &error)) << error;
  expect_same_profile(p, m);
}

TEST(ProfileRoundTrip, ExactBytesOfHeaderAndRecord) {
  Profile p = sample_profile();
  std::vector<uint8_t> img = image_of(p);
  ASSERT_GE(img.size(), 2 * SPROF_PAGE);
  EXPECT_EQ(std::memcmp(img.data(), "SPROFIL\0", 8), 0);
  EXPECT_EQ(peek<uint32_t>(img, offsetof(sprof_header, version)), 1u);
  EXPECT_EQ(peek<uint32_t>(img, offsetof(sprof_header, header_size)), 4096u);
  EXPECT_EQ(peek<uint32_t>(img, offsetof(sprof_header, clock)), 2u);
  EXPECT_EQ(peek<uint32_t>(img, offsetof(sprof_header, region_count)), 6u);
  EXPECT_EQ(peek<uint64_t>(img, offsetof(sprof_header, effective_hz_milli)), 991500u);
  const char cmd[] = "./prog\0--flag\0\0last arg";  // plus its final NUL
  EXPECT_EQ(peek<uint32_t>(img, offsetof(sprof_header, cmdline_len)), sizeof cmd);
  EXPECT_EQ(std::memcmp(img.data() + offsetof(sprof_header, cmdline), cmd, sizeof cmd), 0);
  // regions_changes (a live reader's cue) and the reserved bytes are zero.
  EXPECT_EQ(peek<uint32_t>(img, offsetof(sprof_header, regions_changes)), 0u);
  EXPECT_EQ(peek<uint64_t>(img, offsetof(sprof_header, start_cpu_ns)), 0u);  // the tools write 0
  for (size_t i = offsetof(sprof_header, reserved); i < SPROF_PAGE; ++i) ASSERT_EQ(img[i], 0);
  // Region 0: at 4096, counters right after, 2-byte little-endian counters.
  const size_t r0 = SPROF_PAGE;
  EXPECT_EQ(peek<uint32_t>(img, r0 + offsetof(sprof_region, magic)), SPROF_REGION_MAGIC);
  EXPECT_EQ(peek<uint64_t>(img, r0 + offsetof(sprof_region, counters_offset)), 8192u);
  EXPECT_EQ(peek<uint64_t>(img, r0 + offsetof(sprof_region, nbins)), 2500u);
  EXPECT_EQ(peek<uint32_t>(img, r0 + offsetof(sprof_region, counter_width)), 2u);
  EXPECT_EQ(peek<uint64_t>(img, r0 + offsetof(sprof_region, record_size)), 3u * SPROF_PAGE);
  for (size_t i = r0 + offsetof(sprof_region, reserved); i < r0 + SPROF_PAGE; ++i)
    ASSERT_EQ(img[i], 0);
  const Region& a = p.regions[0];
  EXPECT_EQ(img[8192], a.count_at(0) & 0xff);
  EXPECT_EQ(img[8193], a.count_at(0) >> 8);
  EXPECT_EQ(peek<uint16_t>(img, 8192 + 2 * 2499), 0xffffu);
  // Padding after the counters is zero.
  for (size_t i = 8192 + 5000; i < 8192 + 8192; ++i) ASSERT_EQ(img[i], 0);
}

TEST(ProfileRoundTrip, CountsTooWideForTheirWidthAreWidenedTo8) {
  Profile p = sample_profile();
  p.regions[0].add(5, 70000);           // does not fit 2 bytes
  p.regions[1].add(1, 0x100000000ull);  // does not fit 4 bytes
  std::vector<uint8_t> img = image_of(p);
  Profile q;
  std::string error;
  ASSERT_TRUE(parse_profile(img.data(), img.size(), &q, &error)) << error;
  EXPECT_EQ(q.regions[0].counter_width, 8u);
  EXPECT_EQ(q.regions[1].counter_width, 8u);
  EXPECT_EQ(q.regions[2].counter_width, 8u);
  EXPECT_EQ(q.regions[3].counter_width, 2u);  // untouched
  EXPECT_EQ(q.regions[0].bins, p.regions[0].bins);
  EXPECT_EQ(q.regions[1].bins, p.regions[1].bins);
}

TEST(ProfileRoundTrip, UnfinishedProfileReads) {
  Profile p = sample_profile();
  p.flags = SPROF_F_CHILD;  // crashed fork child: no FINISHED, no end
  p.end_ns = 0;
  p.cpu_ns = 0;
  p.effective_hz = 0;
  p.regions.resize(2);
  std::vector<uint8_t> img = image_of(p);
  Profile q;
  std::string error;
  ASSERT_TRUE(parse_profile(img.data(), img.size(), &q, &error)) << error;
  EXPECT_FALSE(q.finished());
  EXPECT_EQ(q.flags, SPROF_F_CHILD);
  EXPECT_EQ(q.end_ns, 0u);
  EXPECT_EQ(q.effective_hz, 0.0);
  EXPECT_EQ(q.regions[1].bins, p.regions[1].bins);
}

// A process killed while its handler recorded a sample: the bin holds the sample, the
// delivered tally (raised last) does not yet. An unfinished profile's delivered is taken up
// to its counts and lost samples; a finished one is read as written.
TEST(ProfileRoundTrip, KilledMidSampleDeliveredCoversTheCounts) {
  Profile p = sample_profile();
  p.regions.resize(2);  // counts of 2 and 4 bytes: a total far from saturation
  ASSERT_LT(p.total_samples(), UINT64_MAX / 2);
  p.lost = 7;
  p.delivered = p.total_samples() + p.lost - 3;  // three counted samples not yet delivered
  for (const uint32_t flags : {0u, static_cast<uint32_t>(SPROF_F_FINISHED)}) {
    p.flags = flags;
    std::vector<uint8_t> img = image_of(p);
    Profile q;
    std::string error;
    ASSERT_TRUE(parse_profile(img.data(), img.size(), &q, &error)) << error;
    EXPECT_EQ(q.total_samples(), p.total_samples());
    EXPECT_EQ(q.lost, 7u);
    EXPECT_EQ(q.delivered, flags ? p.delivered : p.total_samples() + p.lost) << flags;
  }
  p.flags = 0;  // a delivered tally ahead of the counts (overflow, a sample in flight) stays
  p.delivered = p.total_samples() + p.lost + 5;
  std::vector<uint8_t> img = image_of(p);
  Profile q;
  std::string error;
  ASSERT_TRUE(parse_profile(img.data(), img.size(), &q, &error)) << error;
  EXPECT_EQ(q.delivered, p.delivered);
}

TEST(ProfileRoundTrip, NoRegionsNoArgv) {
  Profile p;
  p.tick_ns = 1000000;
  std::vector<uint8_t> img = image_of(p);
  EXPECT_EQ(img.size(), SPROF_PAGE);
  Profile q;
  std::string error;
  ASSERT_TRUE(parse_profile(img.data(), img.size(), &q, &error)) << error;
  EXPECT_TRUE(q.regions.empty());
  EXPECT_TRUE(q.argv.empty());
  EXPECT_EQ(q.tick_ns, 1000000u);
}

TEST(ProfileRoundTrip, UncommittedRecordsAndTrailingBytesAreIgnored) {
  Profile p = sample_profile();
  std::vector<uint8_t> img = image_of(p);
  // A record written but not yet committed: region_count still says 4 of 6.
  poke<uint32_t>(img, offsetof(sprof_header, region_count), 4);
  img.resize(img.size() + 12345, 0xab);  // and junk past the end
  Profile q;
  std::string error;
  ASSERT_TRUE(parse_profile(img.data(), img.size(), &q, &error)) << error;
  ASSERT_EQ(q.regions.size(), 4u);
  EXPECT_EQ(q.regions[3].bins, p.regions[3].bins);
}

TEST(ProfileRoundTrip, UnknownFlagBitsAreTolerated) {
  std::vector<uint8_t> img = image_of(sample_profile());
  poke<uint32_t>(img, offsetof(sprof_header, flags), 0xfffffff1u);
  Profile q;
  std::string error;
  ASSERT_TRUE(parse_profile(img.data(), img.size(), &q, &error)) << error;
  EXPECT_TRUE(q.finished());
}

TEST(ProfileRoundTrip, CounterZeroPagesAreHoles) {
  TempDir dir;
  Profile p;
  p.tick_ns = 1;
  Region r;
  r.path = "/big";
  r.start = 0x100000;
  r.end = r.start + (64u << 20);  // 16 Mi bins of 4 bytes: 64 MiB of counters
  r.bin_size = 4;
  r.counter_width = 4;
  r.add(12345, 7);
  r.add(r.nbins() - 1, 9);
  p.regions = {r};
  std::string error;
  ASSERT_TRUE(write_profile(p, dir.file("big.sprof"), &error)) << error;
  struct stat st;
  ASSERT_EQ(::stat(dir.file("big.sprof").c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), 2 * SPROF_PAGE + (64u << 20));
  EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, 1u << 20);  // almost all holes
  Profile q;
  ASSERT_TRUE(read_profile(dir.file("big.sprof"), &q, &error)) << error;
  ASSERT_EQ(q.regions.size(), 1u);
  EXPECT_EQ(q.regions[0].count_at(12345), 7u);
  EXPECT_EQ(q.regions[0].count_at(q.regions[0].nbins() - 1), 9u);
  EXPECT_EQ(q.regions[0].bins.size(), 2u);  // only the non-zero bins are held
  EXPECT_EQ(q.regions[0].total(), 16u);
}

// The header's command line holds whole arguments up to the first that does not fit, as the
// agent cuts /proc/self/cmdline: a long command never costs the profile its counts.
// The file reader skips holes by seeking, and keeps each extent the file system reported;
// a memory image is read in full. Counts scattered over holes and data extents of several
// regions, with system parts, must read the same both ways.
TEST(ProfileRoundTrip, SparseFileReadsAsItsImage) {
  TempDir dir;
  Profile p;
  p.tick_ns = 1;
  for (int k = 0; k < 3; ++k) {
    Region r;
    r.path = "/sparse" + std::to_string(k);
    r.start = 0x10000000u * (k + 1);
    r.end = r.start + (8u << 20);  // 2 Mi bins of 4 bytes: 8 MiB of counters
    r.bin_size = 4;
    r.counter_width = 4;
    for (uint64_t i = 7 + k; i < r.nbins(); i += 25000 + 977 * k)  // a bin every ~100 KB
      r.add(i, i % 13 + 1, i % 3 == 0 ? 1 : 0);
    for (uint64_t i = 500000; i < 600000; i += 3)  // a data stretch of several 64 KB chunks
      r.add(i, 2, 1);
    p.regions.push_back(r);
  }
  std::string error;
  ASSERT_TRUE(write_profile(p, dir.file("sparse.sprof"), &error)) << error;
  const std::vector<uint8_t> img = slurp(dir.file("sparse.sprof"));
  Profile from_file, from_image;
  ASSERT_TRUE(read_profile(dir.file("sparse.sprof"), &from_file, &error)) << error;
  ASSERT_TRUE(parse_profile(img.data(), img.size(), &from_image, &error)) << error;
  ASSERT_EQ(from_file.regions.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(from_file.regions[k].bins, from_image.regions[k].bins) << k;
    EXPECT_EQ(from_file.regions[k].total(), p.regions[k].total()) << k;
    EXPECT_EQ(from_file.regions[k].bins.size(), p.regions[k].bins.size()) << k;
    EXPECT_GT(from_file.regions[k].bins.size(), 33000u) << k;
  }
}

TEST(ProfileWriter, CutsAnOverlongCommandLineAtAWholeArgument) {
  TempDir dir;
  std::string error;
  Profile p = sample_profile();
  p.argv = {"prog", std::string(100, 'a'), std::string(SPROF_CMDLINE_MAX, 'b'), "after"};
  ASSERT_TRUE(write_profile(p, dir.file("long.sprof"), &error)) << error;
  Profile q;
  ASSERT_TRUE(read_profile(dir.file("long.sprof"), &q, &error)) << error;
  EXPECT_EQ(q.argv, (std::vector<std::string>{"prog", std::string(100, 'a')}));
  EXPECT_EQ(q.total_samples(), p.total_samples());
}

TEST(ProfileWriter, RejectsInconsistentProfiles) {
  TempDir dir;
  std::string error;
  auto bad = [&](auto mutate, const char* needle) {
    Profile p = sample_profile();
    mutate(p);
    error.clear();
    EXPECT_FALSE(write_profile(p, dir.file("bad.sprof"), &error)) << needle;
    EXPECT_NE(error.find(needle), std::string::npos) << error;
  };
  bad([](Profile& p) { p.regions[1].counter_width = 3; }, "counter_width");
  bad([](Profile& p) { p.regions[1].bin_size = 0; }, "bin_size");
  bad([](Profile& p) { p.regions[1].end = p.regions[1].start; }, "start");
  bad([](Profile& p) { p.regions[1].bins.push_back({p.regions[1].nbins(), 1, 0}); }, "bad bin");
  bad([](Profile& p) { p.regions[1].path.assign(SPROF_PATH_MAX + 1, 'x'); }, "path");
  bad([](Profile& p) { p.regions[1].build_id.assign(65, 1); }, "build-id");
  EXPECT_FALSE(std::filesystem::exists(dir.file("bad.sprof")));
  // Nothing left behind (the temporary file is removed).
  EXPECT_TRUE(std::filesystem::is_empty(dir.file("")));
  Profile p = sample_profile();
  EXPECT_FALSE(write_profile(p, dir.file("no/such/dir/x.sprof"), &error));
  EXPECT_NE(error.find("temporary"), std::string::npos) << error;
}

}  // namespace
}  // namespace sprofil::profile_test
