// The profile model's limits and its system-time arrays:
// sparse counts, saturating totals, crafted files read by a real `sprofil report` child with
// its peak RSS measured, and the system array's round trip, validation and merge.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "profile/merge.hpp"
#include "test_util.hpp"

namespace sprofil::profile_test {
namespace {

// What a `sprofil report` child did: exit status, stdout, stderr, peak RSS in KiB.
struct Child {
  int status = -1;
  std::string out, err;
  long max_rss_kb = 0;
};

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Runs SPROFIL_TOOL_PATH with `args` (bounded by `timeout 120`), and measures its peak RSS
// with wait4's rusage of that one child.
Child run_tool(const TempDir& dir, const std::vector<std::string>& args) {
  Child c;
  const std::string out = dir.file("child.out"), err = dir.file("child.err");
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (o < 0 || e < 0) ::_exit(126);
    ::dup2(o, 1);
    ::dup2(e, 2);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(SPROFIL_TOOL_PATH));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    // A hang would be a bug: bound it with an alarm that kills the child.
    ::alarm(120);
    ::execv(SPROFIL_TOOL_PATH, argv.data());
    ::_exit(127);
  }
  struct rusage ru {};
  int status = 0;
  EXPECT_EQ(::wait4(pid, &status, 0, &ru), pid);
  c.status = status;
  c.max_rss_kb = ru.ru_maxrss;
  c.out = read_all(out);
  c.err = read_all(err);
  return c;
}

// The bound on a report's peak RSS for the crafted files below: the tool's own baseline (its
// libraries, the symbolizer) is about 10-20 MiB; the dense model needed 1 GiB for the 12 KB
// file and 34 GiB (bad_alloc) for the 17 GB one. 100 MiB leaves room for allocator noise
// while any per-bin allocation of those regions would exceed it by far.
constexpr long kMaxRssKb = 100 * 1024;

TEST(ProfileSparse, RegionHoldsOnlyNonZeroBins) {
  Region r;
  r.start = 0x1000;
  r.end = 0x1000 + (uint64_t{1} << 40);  // 2^38 bins of 4 bytes
  r.bin_size = 4;
  EXPECT_EQ(r.nbins(), uint64_t{1} << 38);
  r.add(7, 3, 1);
  r.add(2, 5);
  r.add(7, 4, 2);  // accumulates
  r.add(9, 0, 0);  // nothing
  r.add(r.nbins() - 1, UINT64_MAX);
  r.add(r.nbins() - 1, 1);  // saturates
  ASSERT_EQ(r.bins.size(), 3u);
  std::vector<Region::Bin> seen;
  r.for_each_bin([&](uint64_t i, uint64_t c, uint64_t s) { seen.push_back({i, c, s}); });
  EXPECT_EQ(seen, (std::vector<Region::Bin>{{2, 5, 0}, {7, 7, 3}, {r.nbins() - 1, UINT64_MAX, 0}}));
  EXPECT_EQ(r.count_at(7), 7u);
  EXPECT_EQ(r.system_at(7), 3u);
  EXPECT_EQ(r.count_at(8), 0u);
  EXPECT_EQ(r.total(), UINT64_MAX);  // saturates
  EXPECT_EQ(r.system_total(), 3u);
  EXPECT_EQ(r.max_count(), UINT64_MAX);
  r.add(2, 1, 10);  // the system part is clamped to the count
  EXPECT_EQ(r.system_at(2), 6u);
  EXPECT_EQ(sat_add(UINT64_MAX - 1, 2), UINT64_MAX);
  EXPECT_EQ(sat_add(40, 2), 42u);
}

TEST(ProfileSparse, SubtractFloorsAtZero) {
  Region a, b;
  a.add(1, 10, 4);
  a.add(3, 5, 5);
  a.add(8, 2);
  b.add(0, 7);
  b.add(1, 4, 1);
  b.add(3, 9, 2);
  a.subtract(b);
  EXPECT_EQ(a.bins, (std::vector<Region::Bin>{{1, 6, 3}, {8, 2, 0}}));
}

// A region whose system parts come back bit for bit, in the layout docs/file-format.md gives.
Profile system_profile() {
  Profile p = sample_profile();
  Region& a = p.regions[0];  // width 2
  a.flags |= SPROF_R_SYSTEM;
  a.bins.clear();
  a.add(0, 10, 4);
  a.add(5, 7, 7);
  a.add(2499, 0xffff, 1);
  Region& f = p.regions[5];  // width 8
  f.flags |= SPROF_R_SYSTEM;
  f.bins.clear();
  f.add(1, 0x123456789abcdefull, 0x23456789abcdefull);
  f.add(17000, 3, 0);
  return p;
}

TEST(ProfileSystem, RoundTripAndLayout) {
  TempDir dir;
  const Profile p = system_profile();
  std::vector<uint8_t> img = image_of(p);
  const std::vector<size_t> recs = record_offsets(img);
  ASSERT_EQ(recs.size(), 6u);
  // Region 0: 2500 counters of 2 bytes = 5000 bytes, padded to 8192; the system array follows.
  const size_t r0 = recs[0];
  EXPECT_EQ(peek<uint32_t>(img, r0 + offsetof(sprof_region, flags)), SPROF_R_MAIN | SPROF_R_SYSTEM);
  EXPECT_EQ(peek<uint64_t>(img, r0 + offsetof(sprof_region, record_size)), 5u * SPROF_PAGE);
  const uint64_t so = peek<uint64_t>(img, r0 + offsetof(sprof_region, system_offset));
  EXPECT_EQ(so, r0 + 3 * SPROF_PAGE);
  EXPECT_EQ(peek<uint16_t>(img, so + 0), 4u);
  EXPECT_EQ(peek<uint16_t>(img, so + 10), 7u);
  EXPECT_EQ(peek<uint16_t>(img, so + 2 * 2499), 1u);
  EXPECT_EQ(peek<uint16_t>(img, r0 + SPROF_PAGE + 10), 7u);  // the main array: user + system
  // Regions without the flag keep the old layout and a zero system_offset.
  EXPECT_EQ(peek<uint64_t>(img, recs[1] + offsetof(sprof_region, system_offset)), 0u);
  Profile q;
  std::string error;
  ASSERT_TRUE(parse_profile(img.data(), img.size(), &q, &error)) << error;
  check_invariants(q);
  ASSERT_EQ(q.regions.size(), p.regions.size());
  for (size_t k = 0; k < p.regions.size(); ++k) {
    EXPECT_EQ(q.regions[k].bins, p.regions[k].bins) << k;
    EXPECT_EQ(q.regions[k].flags, p.regions[k].flags) << k;
  }
  EXPECT_TRUE(q.has_system());
  EXPECT_EQ(q.system_samples(), 4u + 7 + 1 + 0x23456789abcdefull);
  // And the file written to disk reads the same (pread path, holes).
  ASSERT_TRUE(write_profile(p, dir.file("s.sprof"), &error)) << error;
  Profile d;
  ASSERT_TRUE(read_profile(dir.file("s.sprof"), &d, &error)) << error;
  for (size_t k = 0; k < p.regions.size(); ++k) EXPECT_EQ(d.regions[k].bins, p.regions[k].bins);
  // A run profile keeps them too.
  Profile run = combine_processes({p, sample_profile()}, {"", ".2"});
  ASSERT_TRUE(write_profile(run, dir.file("run.sprof"), &error)) << error;
  Profile rr;
  ASSERT_TRUE(read_profile(dir.file("run.sprof"), &rr, &error)) << error;
  ASSERT_EQ(rr.regions.size(), 12u);
  EXPECT_EQ(rr.regions[0].bins, p.regions[0].bins);
  EXPECT_EQ(rr.regions[5].bins, p.regions[5].bins);
  EXPECT_EQ(rr.system_samples(), q.system_samples());
}

TEST(ProfileSystem, ReaderRefusesBadSystemArrays) {
  const std::vector<uint8_t> good = image_of(system_profile());
  const size_t r0 = record_offsets(good)[0];
  const uint64_t so = peek<uint64_t>(good, r0 + offsetof(sprof_region, system_offset));
  auto expect = [&](std::vector<uint8_t> img, const std::vector<std::string>& needles) {
    Profile q;
    std::string error;
    EXPECT_FALSE(parse_profile(img.data(), img.size(), &q, &error));
    for (const std::string& n : needles) EXPECT_NE(error.find(n), std::string::npos) << error;
  };
  std::vector<uint8_t> img = good;
  poke<uint16_t>(img, so + 10, 8);  // bin 5: system 8 > count 7
  expect(img, {"region 0 (/usr/bin/prog)", "bin 5: system count 8 exceeds its count 7"});
  {
    // Unfinished (running or killed): a system part read after its count may exceed it by the
    // samples in between; it is clamped, not an error.
    img = good;
    poke<uint16_t>(img, so + 10, 8);
    poke<uint16_t>(img, so + 12, 1);
    poke<uint32_t>(img, offsetof(sprof_header, flags), 0);
    Profile q;
    std::string error;
    ASSERT_TRUE(parse_profile(img.data(), img.size(), &q, &error)) << error;
    EXPECT_EQ(q.regions[0].count_at(5), 7u);
    EXPECT_EQ(q.regions[0].system_at(5), 7u);
    EXPECT_EQ(q.regions[0].count_at(6), 0u);
    check_invariants(q);
  }
  img = good;
  poke<uint16_t>(img, so + 12, 1);  // bin 6 has no count
  expect(img, {"region 0 (/usr/bin/prog)", "bin 6: system count 1 exceeds its count 0"});
  img = good;
  poke<uint64_t>(img, r0 + offsetof(sprof_region, system_offset), so + 8);
  expect(img, {"region 0 (/usr/bin/prog)", "bad system_offset", "4096-aligned"});
  img = good;
  poke<uint64_t>(img, r0 + offsetof(sprof_region, system_offset), so + SPROF_PAGE);
  expect(img, {"region 0 (/usr/bin/prog)", "bad system_offset", "inside the record"});
  img = good;
  poke<uint64_t>(img, r0 + offsetof(sprof_region, system_offset), r0 + SPROF_PAGE);
  expect(img, {"bad system_offset", "after the"});
  img = good;  // the flag without its array's room in the record
  poke<uint64_t>(img, r0 + offsetof(sprof_region, record_size), 3 * SPROF_PAGE);
  expect(img, {"bad system_offset"});
}

TEST(ProfileSystem, MergeAddsSystemArrays) {
  Profile a = system_profile(), b = system_profile();
  b.regions[0].bins.clear();
  b.regions[0].add(5, 3, 1);
  b.regions[0].add(6, 2, 2);
  b.regions[0].flags &= ~SPROF_R_SYSTEM;  // an old file: its system parts count as 0
  b.regions[0].add(7, 1);
  Profile m;
  std::string error;
  ASSERT_TRUE(merge_profiles({a, b}, &m, &error)) << error;
  const Region& r = m.regions[0];
  EXPECT_TRUE(r.has_system());
  EXPECT_EQ(r.bins, (std::vector<Region::Bin>{
                        {0, 10, 4}, {5, 10, 8}, {6, 2, 2}, {7, 1, 0}, {2499, 0xffff, 1}}));
  EXPECT_EQ(r.counter_width, 2u);
  const Region& f = m.regions[5];
  EXPECT_EQ(f.system_at(1), 2 * 0x23456789abcdefull);
  EXPECT_EQ(f.count_at(1), 2 * 0x123456789abcdefull);
  // And through the writer and reader.
  TempDir dir;
  ASSERT_TRUE(write_profile(m, dir.file("m.sprof"), &error)) << error;
  Profile q;
  ASSERT_TRUE(read_profile(dir.file("m.sprof"), &q, &error)) << error;
  EXPECT_EQ(q.regions[0].bins, r.bins);
}

// A run profile whose table points two processes at one image is refused: overlapping images
// would let a small file multiply the reader's memory.
TEST(ProfileLimits, RunImagesMustNotOverlap) {
  Profile run = combine_processes({sample_profile(), sample_profile()}, {"", ".2"});
  std::vector<uint8_t> img = image_of(run);
  const size_t e0 = SPROF_PAGE, e1 = SPROF_PAGE + SPROF_RUN_ENTRY;
  Profile q;
  std::string error;
  ASSERT_TRUE(parse_profile(img.data(), img.size(), &q, &error)) << error;
  poke<uint64_t>(img, e1 + offsetof(sprof_run_process, image_offset),
                 peek<uint64_t>(img, e0 + offsetof(sprof_run_process, image_offset)));
  poke<uint64_t>(img, e1 + offsetof(sprof_run_process, image_size),
                 peek<uint64_t>(img, e0 + offsetof(sprof_run_process, image_size)));
  EXPECT_FALSE(parse_profile(img.data(), img.size(), &q, &error));
  EXPECT_NE(error.find("process 1: image at offset"), std::string::npos) << error;
  EXPECT_NE(error.find("overlaps the previous process's image"), std::string::npos) << error;
}

// A 12 KB file (header, one region record, one page of counters) whose region claims 2^40
// bins: a clear error naming the region, at once, in bounded memory.
TEST(ProfileLimits, TwelveKilobyteFileClaimingHugeRegion) {
  TempDir dir;
  Profile p = sample_profile();
  p.regions.resize(1);
  Region& r = p.regions[0];
  r.bins.clear();
  r.start = 0x400000;
  r.end = r.start + 4096;  // 1024 bins of 2 bytes: one page
  r.add(3, 5);
  std::vector<uint8_t> img = image_of(p);
  ASSERT_EQ(img.size(), 12288u);
  poke<uint64_t>(img, SPROF_PAGE + offsetof(sprof_region, end), r.start + (uint64_t{1} << 42));
  poke<uint64_t>(img, SPROF_PAGE + offsetof(sprof_region, nbins), uint64_t{1} << 40);
  spit(dir.file("huge.sprof"), img);
  Child c = run_tool(dir, {"report", dir.file("huge.sprof")});
  ASSERT_TRUE(WIFEXITED(c.status));
  EXPECT_EQ(WEXITSTATUS(c.status), 1) << c.err;
  EXPECT_NE(c.err.find("region 0 (/usr/bin/prog): counters truncated"), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("claims 1099511627776 counters"), std::string::npos) << c.err;
  EXPECT_LT(c.max_rss_kb, kMaxRssKb);
  RecordProperty("max_rss_kb", std::to_string(c.max_rss_kb));
}

// A genuinely huge sparse file: one region of 2^33 bins of 2 bytes (16 GiB of counters, 17 GB
// apparent, almost all holes) with three samples; read and reported right in bounded memory.
TEST(ProfileLimits, SeventeenGigabyteSparseFile) {
  TempDir dir;
  Profile p = sample_profile();
  p.regions.resize(1);
  Region& r = p.regions[0];
  r.bins.clear();
  r.path = "/nonexistent/huge-prog";
  r.build_id.clear();
  r.start = 0x400000;
  r.bin_size = 1;
  r.end = r.start + (uint64_t{1} << 33);
  r.add(12345, 2);
  r.add(r.nbins() - 1, 1);
  p.overflow = 1;
  std::string error;
  const std::string file = dir.file("sparse.sprof");
  if (!write_profile(p, file, &error))
    GTEST_SKIP() << "cannot write a 17 GB sparse file: " << error;
  struct stat st;
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(uint64_t(st.st_size), 2 * SPROF_PAGE + (uint64_t{1} << 34));
  EXPECT_LT(uint64_t(st.st_blocks) * 512, uint64_t{1} << 20);  // holes, not data
  Child c = run_tool(dir, {"report", file, "--format", "json", "--by", "object"});
  ASSERT_TRUE(WIFEXITED(c.status)) << c.err;
  ASSERT_EQ(WEXITSTATUS(c.status), 0) << c.err;
  EXPECT_LT(c.max_rss_kb, kMaxRssKb);
  RecordProperty("max_rss_kb", std::to_string(c.max_rss_kb));
  const nlohmann::json j = nlohmann::json::parse(c.out);
  EXPECT_EQ(j["total_samples"].get<uint64_t>(), 4u);
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["rows"][0]["name"], "huge-prog");
  EXPECT_EQ(j["rows"][0]["samples"].get<double>(), 3.0);
  EXPECT_EQ(j["rows"][0]["percent"].get<double>(), 75.0);
}

// Counts near UINT64_MAX in several regions: totals saturate, percentages stay in [0, 100],
// pprof values are clamped to INT64_MAX with a warning, gmon scales with a warning.
TEST(ProfileLimits, CountsNearUint64MaxInSeveralRegions) {
  TempDir dir;
  Profile p = sample_profile();
  p.regions.resize(3);
  for (Region& r : p.regions) {
    r.bins.clear();
    r.counter_width = 8;
    r.add(1, UINT64_MAX - 1);
  }
  p.regions[2].add(2, UINT64_MAX / 2);
  p.overflow = UINT64_MAX - 7;
  p.delivered = UINT64_MAX;
  std::string error;
  const std::string file = dir.file("max.sprof");
  ASSERT_TRUE(write_profile(p, file, &error)) << error;
  Profile q;
  ASSERT_TRUE(read_profile(file, &q, &error)) << error;
  EXPECT_EQ(q.total_samples(), UINT64_MAX);
  EXPECT_EQ(q.regions[2].total(), UINT64_MAX);

  Child c = run_tool(dir, {"report", file, "--format", "json", "--by", "object"});
  ASSERT_TRUE(WIFEXITED(c.status));
  ASSERT_EQ(WEXITSTATUS(c.status), 0) << c.err;
  EXPECT_LT(c.max_rss_kb, kMaxRssKb);
  const nlohmann::json j = nlohmann::json::parse(c.out);
  EXPECT_EQ(j["total_samples"].get<uint64_t>(), UINT64_MAX);
  ASSERT_EQ(j["rows"].size(), 4u);  // three objects and the overflow
  for (const auto& row : j["rows"]) {
    const double pct = row["percent"].get<double>();
    EXPECT_GE(pct, 0.0) << row;
    EXPECT_LE(pct, 100.0) << row;
    EXPECT_GE(row["ci95"][0].get<double>(), 0.0) << row;
    EXPECT_LE(row["ci95"][1].get<double>(), 100.0) << row;
  }
  Child text = run_tool(dir, {"report", file});
  ASSERT_EQ(WEXITSTATUS(text.status), 0) << text.err;
  EXPECT_NE(text.out.find("total samples:  18446744073709551615"), std::string::npos) << text.out;

  Child pprof = run_tool(dir, {"report", file, "--format", "pprof", "-o", dir.file("p.pb.gz")});
  ASSERT_EQ(WEXITSTATUS(pprof.status), 0) << pprof.err;
  EXPECT_NE(pprof.err.find("clamped to 9223372036854775807"), std::string::npos) << pprof.err;
  EXPECT_LT(pprof.max_rss_kb, kMaxRssKb);
  if (::system("command -v go >/dev/null 2>&1") == 0) {
    // go tool pprof reads it, and no value is negative.
    const std::string raw = dir.file("p.raw");
    const std::string cmd =
        "timeout 120 go tool pprof -raw '" + dir.file("p.pb.gz") + "' > '" + raw + "' 2>&1";
    ASSERT_EQ(::system(cmd.c_str()), 0) << read_all(raw);
    const std::string out = read_all(raw);
    // The sample lines ("VALUE VALUE: LOCATION") between "Samples:" and "Locations".
    const size_t from = out.find("[dflt]\n"), to = out.find("Locations");
    ASSERT_NE(from, std::string::npos) << out;
    ASSERT_NE(to, std::string::npos) << out;
    const std::string samples = out.substr(from, to - from);
    EXPECT_EQ(samples.find('-'), std::string::npos) << samples;  // no negative value
    size_t clamped = 0;
    for (size_t at = 0; (at = samples.find("9223372036854775807", at)) != std::string::npos; ++at)
      ++clamped;
    EXPECT_EQ(clamped, 2u * 5);  // 4 bins and the overflow, both values of each
  }

  // gmon: the main region's bins scaled down so that the largest fits 16 bits; one record.
  Child gmon = run_tool(dir, {"report", file, "--format", "gmon", "-o", dir.file("gmon.out")});
  ASSERT_EQ(WEXITSTATUS(gmon.status), 0) << gmon.err;
  EXPECT_NE(gmon.err.find("divided by"), std::string::npos) << gmon.err;
  struct stat st;
  ASSERT_EQ(::stat(dir.file("gmon.out").c_str(), &st), 0);
  EXPECT_EQ(uint64_t(st.st_size), 20 + 41 + 2 * p.regions[0].nbins());  // follows the text size
  EXPECT_LT(gmon.max_rss_kb, kMaxRssKb);
}

}  // namespace
}  // namespace sprofil::profile_test
