// Helpers shared by the profile tests: sample profiles, file images, invariants.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "format/sprof_format.h"
#include "profile/profile.hpp"
#include "profile/reader.hpp"
#include "profile/writer.hpp"

namespace sprofil::profile_test {

using namespace profile;  // the library under test

// A fresh directory under the gtest temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "sprofil_profile_XXXXXX";
    char* p = ::mkdtemp(tmpl.data());
    EXPECT_NE(p, nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The counts of a (small) region bin by bin, zeros included: for comparisons in tests.
inline std::vector<uint64_t> dense(const Region& r) {
  std::vector<uint64_t> out(r.nbins());
  r.for_each_bin([&](uint64_t i, uint64_t c, uint64_t) { out.at(i) = c; });
  return out;
}

// Sets the counts of a region (which has its range) from a dense vector.
inline void set_counts(Region& r, const std::vector<uint64_t>& counts) {
  r.bins.clear();
  for (uint64_t i = 0; i < counts.size(); ++i) r.add(i, counts[i]);
}

inline Region make_region(const std::string& path, uint64_t start, uint64_t size, uint32_t bin,
                          uint32_t width, uint64_t seed) {
  Region r;
  r.path = path;
  r.start = start;
  r.end = start + size;
  r.bin_size = bin;
  r.counter_width = width;
  r.load_bias = start - 0x1000;
  r.file_offset = 0x1000;
  r.load_ns = 1000 + seed;
  const uint64_t nbins = (size + bin - 1) / bin;
  const uint64_t limit = width == 2 ? 0xffff : width == 4 ? 0xffffffffu : UINT64_MAX;
  for (uint64_t i = 0; i + 1 < nbins; i += 3) r.add(i, (i * 7919 + seed) % 1000 + 1);
  r.add(nbins - 1, limit);  // the largest value the width holds
  return r;
}

// A small profile with regions of every counter width.
inline Profile sample_profile() {
  Profile p;
  p.flags = SPROF_F_FINISHED;
  p.clock = Clock::kPerf;
  p.requested_hz = 997;
  p.tick_ns = 1003009;
  p.effective_hz = 991.5;
  p.start_ns = 1700000000000000000ull;
  p.end_ns = 1700000001000000000ull;
  p.cpu_ns = 987654321;
  p.pid = 4242;
  p.ppid = 1;
  p.argv = {"./prog", "--flag", "", "last arg"};
  p.overflow = 17;
  p.delivered = 100000;
  p.lost = 3;
  Region a = make_region("/usr/bin/prog", 0x555555554000, 10000, 4, 2, 1);
  a.flags = SPROF_R_MAIN;
  a.build_id = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  Region b = make_region("/usr/lib/libc.so.6", 0x7f0000028000, 5001, 2, 4, 2);
  b.build_id = {1, 2, 3};
  Region c = make_region("[vdso]", 0x7fff00000000, 8192, 16, 8, 3);
  c.flags = SPROF_R_VDSO;
  Region d = make_region("/usr/lib/libdl.so", 0x7f1000000000, 3000, 1, 2, 4);
  d.flags = SPROF_R_DLOPEN | SPROF_R_UNLOADED;
  d.unload_ns = 99999;
  Region e = make_region("/usr/lib/libm.so.6", 0x7f2000000000, 40000, 8, 4, 5);
  Region f = make_region("/opt/big.so", 0x7f3000000000, 70000, 4, 8, 6);
  f.add(1, 0x123456789abcdefull);
  p.regions = {a, b, c, d, e, f};
  return p;
}

// Every header field and every region of a and b, bin by bin (system parts too), alike.
inline void expect_same_profile(const Profile& a, const Profile& b) {
  EXPECT_EQ(a.version, b.version);
  EXPECT_EQ(a.flags, b.flags);
  EXPECT_EQ(a.clock, b.clock);
  EXPECT_EQ(a.requested_hz, b.requested_hz);
  EXPECT_EQ(a.tick_ns, b.tick_ns);
  EXPECT_DOUBLE_EQ(a.effective_hz, b.effective_hz);
  EXPECT_EQ(a.start_ns, b.start_ns);
  EXPECT_EQ(a.end_ns, b.end_ns);
  EXPECT_EQ(a.cpu_ns, b.cpu_ns);
  EXPECT_EQ(a.pid, b.pid);
  EXPECT_EQ(a.ppid, b.ppid);
  EXPECT_EQ(a.argv, b.argv);
  EXPECT_EQ(a.overflow, b.overflow);
  EXPECT_EQ(a.delivered, b.delivered);
  EXPECT_EQ(a.lost, b.lost);
  ASSERT_EQ(a.regions.size(), b.regions.size());
  for (size_t i = 0; i < a.regions.size(); ++i) {
    const Region& x = a.regions[i];
    const Region& y = b.regions[i];
    SCOPED_TRACE("region " + std::to_string(i) + " " + x.path);
    EXPECT_EQ(x.path, y.path);
    EXPECT_EQ(x.build_id, y.build_id);
    EXPECT_EQ(x.flags, y.flags);
    EXPECT_EQ(x.start, y.start);
    EXPECT_EQ(x.end, y.end);
    EXPECT_EQ(x.load_bias, y.load_bias);
    EXPECT_EQ(x.file_offset, y.file_offset);
    EXPECT_EQ(x.bin_size, y.bin_size);
    EXPECT_EQ(x.counter_width, y.counter_width);
    EXPECT_EQ(x.load_ns, y.load_ns);
    EXPECT_EQ(x.unload_ns, y.unload_ns);
    EXPECT_EQ(x.bins, y.bins);
  }
}

inline std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

inline void spit(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// The bytes the writer produces for `p` (a run: in run profile version `run_version`).
inline std::vector<uint8_t> image_of(const Profile& p, uint32_t run_version = SPROF_RUN_VERSION) {
  TempDir dir;
  std::string error;
  EXPECT_TRUE(write_profile(p, dir.file("p.sprof"), &error, run_version)) << error;
  return slurp(dir.file("p.sprof"));
}

template <typename T>
void poke(std::vector<uint8_t>& img, size_t off, T v) {
  ASSERT_LE(off + sizeof(T), img.size());
  std::memcpy(img.data() + off, &v, sizeof(T));
}
template <typename T>
T peek(const std::vector<uint8_t>& img, size_t off) {
  T v{};
  if (off + sizeof(T) <= img.size()) std::memcpy(&v, img.data() + off, sizeof(T));
  return v;
}

// File offsets of the region records in a writer-produced image.
inline std::vector<size_t> record_offsets(const std::vector<uint8_t>& img) {
  std::vector<size_t> out;
  const uint32_t n = peek<uint32_t>(img, offsetof(sprof_header, region_count));
  size_t off = SPROF_PAGE;
  for (uint32_t k = 0; k < n && off + SPROF_PAGE <= img.size(); ++k) {
    out.push_back(off);
    off += peek<uint64_t>(img, off + offsetof(sprof_region, record_size));
  }
  return out;
}

// What every successfully read profile must satisfy, whatever the input.
inline void check_invariants(const Profile& p) {
  ASSERT_EQ(p.version, 1u);
  ASSERT_LT(static_cast<uint32_t>(p.clock), uint32_t{SPROF_CLOCK_COUNT});
  size_t cmd = 0;
  for (const std::string& a : p.argv) cmd += a.size() + 1;
  ASSERT_LE(cmd, SPROF_CMDLINE_MAX + 1);
  for (const Region& r : p.regions) {
    ASSERT_TRUE(r.counter_width == 2 || r.counter_width == 4 || r.counter_width == 8);
    ASSERT_GT(r.bin_size, 0u);
    ASSERT_LT(r.start, r.end);
    const uint64_t span = r.end - r.start;
    ASSERT_EQ(r.nbins(), span / r.bin_size + (span % r.bin_size != 0));
    for (size_t i = 0; i < r.bins.size(); ++i) {
      ASSERT_LT(r.bins[i].index, r.nbins());
      ASSERT_NE(r.bins[i].count, 0u);
      ASSERT_LE(r.bins[i].system, r.bins[i].count);
      if (i > 0) {
        ASSERT_LT(r.bins[i - 1].index, r.bins[i].index);
      }
    }
    ASSERT_LE(r.path.size(), SPROF_PATH_MAX);
    ASSERT_LE(r.build_id.size(), SPROF_BUILD_ID_MAX);
    const uint64_t limit =
        r.counter_width == 8 ? UINT64_MAX : (uint64_t{1} << (8 * r.counter_width)) - 1;
    r.for_each_bin([&](uint64_t, uint64_t c, uint64_t) { ASSERT_LE(c, limit); });
  }
  (void)p.total_samples();
}

}  // namespace sprofil::profile_test
