// merge_profiles: matching regions across runs, summing, widening, and the errors.
#include "profile/merge.hpp"

#include "test_util.hpp"

namespace sprofil::profile_test {
namespace {

Region region(const std::string& path, std::vector<uint8_t> bid, uint64_t start,
              std::vector<uint64_t> counts, uint32_t bin = 4, uint32_t width = 4) {
  Region r;
  r.path = path;
  r.build_id = std::move(bid);
  r.start = start;
  r.end = start + counts.size() * bin;
  r.bin_size = bin;
  r.counter_width = width;
  r.file_offset = 0x2000;
  r.load_bias = start - 0x2000;
  for (uint64_t i = 0; i < counts.size(); ++i) r.add(i, counts[i]);
  return r;
}

Profile run(std::vector<Region> regions, uint64_t overflow = 0) {
  Profile p;
  p.flags = SPROF_F_FINISHED;
  p.clock = Clock::kCpu;
  p.requested_hz = 1000;
  p.tick_ns = 1000000;
  p.start_ns = 100;
  p.end_ns = 200;
  p.cpu_ns = 50;
  p.effective_hz = 1000;
  p.argv = {"prog"};
  p.regions = std::move(regions);
  p.overflow = overflow;
  p.delivered = overflow;
  for (const Region& r : p.regions) p.delivered += r.total();
  return p;
}

TEST(Merge, SameBuildIdDifferentLoadAddressesSumBinByBin) {
  Profile a = run({region("/usr/bin/prog", {1, 2, 3}, 0x555500001000, {1, 2, 3, 4}),
                   region("/lib/libc.so.6", {9}, 0x7f0000001000, {10, 0, 30})},
                  5);
  Profile b = run({region("/lib/libc.so.6", {9}, 0x7fab00001000, {1, 1, 1}),
                   region("/usr/bin/prog", {1, 2, 3}, 0x563400001000, {100, 200, 300, 400})},
                  7);
  b.lost = 2;
  Profile m;
  std::string error;
  ASSERT_TRUE(merge_profiles({a, b}, &m, &error)) << error;
  ASSERT_EQ(m.regions.size(), 2u);
  EXPECT_EQ(m.regions[0].path, "/usr/bin/prog");
  EXPECT_EQ(m.regions[0].start, 0x555500001000u);  // the first input's addresses
  EXPECT_EQ(dense(m.regions[0]), (std::vector<uint64_t>{101, 202, 303, 404}));
  EXPECT_EQ(dense(m.regions[1]), (std::vector<uint64_t>{11, 1, 31}));
  EXPECT_EQ(m.overflow, 12u);
  EXPECT_EQ(m.delivered, a.delivered + b.delivered);
  EXPECT_EQ(m.delivered, 10u + 40u + 5u + 1000u + 3u + 7u);
  EXPECT_EQ(m.lost, 2u);
  EXPECT_EQ(m.total_samples(), 1065u);
  EXPECT_EQ(m.tick_ns, 1000000u);
  EXPECT_TRUE(m.finished());
  EXPECT_EQ(m.cpu_ns, 100u);
  EXPECT_DOUBLE_EQ(m.effective_hz, 1000.0);
}

TEST(Merge, MatchesByPathWithoutBuildIdAndKeepsUnmatchedRegions) {
  Profile a = run({region("/a.so", {}, 0x1000, {1, 1}), region("/only-a.so", {}, 0x9000, {5})});
  Profile b = run({region("/a.so", {7, 7}, 0x8000, {2, 3}), region("/only-b.so", {}, 0, {6})});
  // Same path, but a different build-id than b's: a different object (upgraded library).
  Profile c = run({region("/a.so", {8, 8}, 0x1000, {1000, 1000})});
  Profile m;
  std::string error;
  ASSERT_TRUE(merge_profiles({a, b, c}, &m, &error)) << error;
  ASSERT_EQ(m.regions.size(), 4u);
  EXPECT_EQ(m.regions[0].path, "/a.so");
  EXPECT_EQ(dense(m.regions[0]), (std::vector<uint64_t>{3, 4}));
  EXPECT_EQ(m.regions[0].build_id, (std::vector<uint8_t>{7, 7}));  // filled in from b
  EXPECT_EQ(m.regions[1].path, "/only-a.so");
  EXPECT_EQ(m.regions[2].path, "/only-b.so");
  EXPECT_EQ(m.regions[3].path, "/a.so");
  EXPECT_EQ(dense(m.regions[3]), (std::vector<uint64_t>{1000, 1000}));
}

TEST(Merge, SameObjectDifferentSegmentsStaySeparate) {
  Region text = region("/lib/x.so", {4}, 0x7000, {1, 2});
  Region text2 = region("/lib/x.so", {4}, 0x9000, {3, 4});
  text2.file_offset = 0x5000;
  Profile m;
  std::string error;
  ASSERT_TRUE(merge_profiles({run({text, text2}), run({text2, text})}, &m, &error)) << error;
  ASSERT_EQ(m.regions.size(), 2u);
  EXPECT_EQ(dense(m.regions[0]), (std::vector<uint64_t>{2, 4}));
  EXPECT_EQ(dense(m.regions[1]), (std::vector<uint64_t>{6, 8}));
}

TEST(Merge, WidensAndSaturates) {
  Profile a = run({region("/p", {}, 0, {0xffff, 1, UINT64_MAX - 1}, 4, 2)});
  Profile b = run({region("/p", {}, 0, {1, 1, 5}, 4, 2)});
  Profile m;
  std::string error;
  ASSERT_TRUE(merge_profiles({a, b}, &m, &error)) << error;
  EXPECT_EQ(dense(m.regions[0]), (std::vector<uint64_t>{0x10000, 2, UINT64_MAX}));
  EXPECT_EQ(m.regions[0].counter_width, 8u);  // UINT64_MAX needs 8
  Profile c = run({region("/p", {}, 0, {0xffff, 1}, 4, 2)});
  Profile d = run({region("/p", {}, 0, {1, 1}, 4, 2)});
  ASSERT_TRUE(merge_profiles({c, d}, &m, &error)) << error;
  EXPECT_EQ(m.regions[0].counter_width, 4u);  // 0x10000 needs 4
  Profile e = run({region("/p", {}, 0, {1, 1}, 4, 2)});
  Profile f = run({region("/p", {}, 0, {1, 1}, 4, 8)});
  ASSERT_TRUE(merge_profiles({e, f}, &m, &error)) << error;
  EXPECT_EQ(m.regions[0].counter_width, 8u);  // never narrower than an input
  // The merged profile writes and reads back exactly.
  ASSERT_TRUE(merge_profiles({a, b}, &m, &error)) << error;
  std::vector<uint8_t> img = image_of(m);
  Profile r;
  ASSERT_TRUE(parse_profile(img.data(), img.size(), &r, &error)) << error;
  EXPECT_EQ(r.regions[0].bins, m.regions[0].bins);
  EXPECT_EQ(r.regions[0].counter_width, 8u);
}

TEST(Merge, HeaderFields) {
  Profile a = run({});
  Profile b = run({});
  b.flags = SPROF_F_CHILD;  // crashed child: not finished
  b.end_ns = 0;
  b.start_ns = 50;
  b.cpu_ns = 150;
  b.effective_hz = 2000;
  b.clock = Clock::kWall;
  b.requested_hz = 7;
  Profile m;
  std::string error;
  ASSERT_TRUE(merge_profiles({a, b}, &m, &error)) << error;
  EXPECT_FALSE(m.finished());
  EXPECT_EQ(m.end_ns, 0u);
  EXPECT_EQ(m.start_ns, 50u);
  EXPECT_EQ(m.cpu_ns, 200u);
  EXPECT_DOUBLE_EQ(m.effective_hz, (1000.0 * 50 + 2000.0 * 150) / 200);
  EXPECT_EQ(m.clock, Clock::kCpu);  // from the first
  EXPECT_EQ(m.requested_hz, 1000u);
  EXPECT_EQ(m.argv, (std::vector<std::string>{"prog"}));
}

TEST(Merge, TickMismatchIsAnErrorNamingBothValues) {
  Profile a = run({});
  Profile b = run({});
  Profile c = run({});
  c.tick_ns = 4000000;
  Profile m;
  std::string error;
  size_t bad = 99;
  EXPECT_FALSE(merge_profiles({a, b, c}, &m, &error, &bad));
  EXPECT_EQ(bad, 2u);
  EXPECT_NE(error.find("tick_ns"), std::string::npos) << error;
  EXPECT_NE(error.find("1000000"), std::string::npos) << error;
  EXPECT_NE(error.find("4000000"), std::string::npos) << error;
}

TEST(Merge, BinLayoutMismatchNamesTheObject) {
  Profile a = run({region("/usr/lib/libfoo.so", {1}, 0x1000, {1, 2, 3, 4})});
  Profile b = run({region("/usr/lib/libfoo.so", {1}, 0x1000, {1, 2, 3, 4, 5, 6, 7, 8}, 2)});
  Profile m;
  std::string error;
  size_t bad = 99;
  EXPECT_FALSE(merge_profiles({a, b}, &m, &error, &bad));
  EXPECT_EQ(bad, 1u);
  EXPECT_NE(error.find("/usr/lib/libfoo.so"), std::string::npos) << error;
  EXPECT_NE(error.find("bin layout"), std::string::npos) << error;
  EXPECT_NE(error.find("bin_size 2"), std::string::npos) << error;
  // Different size, same bin_size.
  Profile c = run({region("/usr/lib/libfoo.so", {1}, 0x1000, {1, 2, 3})});
  EXPECT_FALSE(merge_profiles({a, c}, &m, &error));
  EXPECT_NE(error.find("/usr/lib/libfoo.so"), std::string::npos) << error;
}

TEST(Merge, EmptyInputAndSingleInput) {
  Profile m;
  std::string error;
  EXPECT_FALSE(merge_profiles({}, &m, &error));
  EXPECT_NE(error.find("no profiles"), std::string::npos) << error;
  Profile a = sample_profile();
  ASSERT_TRUE(merge_profiles({a}, &m, &error)) << error;
  ASSERT_EQ(m.regions.size(), a.regions.size());
  for (size_t i = 0; i < a.regions.size(); ++i) EXPECT_EQ(m.regions[i].bins, a.regions[i].bins);
  EXPECT_EQ(m.total_samples(), a.total_samples());
}

}  // namespace
}  // namespace sprofil::profile_test
