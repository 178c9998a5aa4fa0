// The perf maps that JITs write (/tmp/perf-PID.map), as the report reads them for record's JIT
// regions (src/symbolize/perf_map.cpp): entries of reused ranges, malformed lines, and the
// files it refuses. tests/record's Agentless.JitCodeIsNamedByItsPerfMap records a real JIT.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "symbolize/perf_map.hpp"
#include "test_util.hpp"

namespace sprofil::report_test {
namespace {

using symbolize::PerfMapSymbol;

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = temp_dir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(PerfMap, PathsThatNameAPerfMap) {
  EXPECT_TRUE(symbolize::is_perf_map_path("/tmp/perf-12.map"));
  EXPECT_EQ(symbolize::perf_map_path(4321), "/tmp/perf-4321.map");
  EXPECT_TRUE(symbolize::is_perf_map_path(symbolize::perf_map_path(4321)));
  for (const char* p : {"/tmp/perf-.map", "/tmp/perf-12x.map", "/tmp/perf-12.map.bak",
                        "/var/tmp/perf-12.map", "/usr/lib/x86_64-linux-gnu/libc.so.6", ""})
    EXPECT_FALSE(symbolize::is_perf_map_path(p)) << p;
}

// The entry written last takes a range that an older one held (the JIT put new code where
// collected code was); lines that are not "START SIZE NAME" and entries of size 0 are skipped
// and counted; a name keeps its spaces, a last line needs no newline.
TEST(PerfMap, NewestEntryTakesAReusedRange) {
  const std::string path = write_file("reused.map",
                                      "1000 100 old_big\n"
                                      "1040 10 new_small\n"
                                      "not a map line\n"
                                      "3000 0 empty\n"
                                      "2000 10 LazyCompile:*f /srv/app.js:12\n"
                                      "4000 8 last without newline");
  std::vector<PerfMapSymbol> syms;
  uint64_t skipped = 0;
  std::string why;
  ASSERT_TRUE(symbolize::read_perf_map(path, &syms, &skipped, &why)) << why;
  EXPECT_EQ(skipped, 2u);
  struct Want {
    const char* name;
    uint64_t start, end;
  };
  const std::vector<Want> want = {{"old_big", 0x1000, 0x1040},
                                  {"new_small", 0x1040, 0x1050},
                                  {"old_big", 0x1050, 0x1100},
                                  {"LazyCompile:*f /srv/app.js:12", 0x2000, 0x2010},
                                  {"last without newline", 0x4000, 0x4008}};
  ASSERT_EQ(syms.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(syms[i].name, want[i].name) << i;
    EXPECT_EQ(syms[i].start, want[i].start) << i;
    EXPECT_EQ(syms[i].end, want[i].end) << i;
  }
}

// 20,000 small entries, then 20,000 older ones each over all of them (written later than
// them in the file: newer): the symbols stay disjoint, and their count linear in the entries.
TEST(PerfMap, ManyOverlapsStayDisjointAndFew) {
  std::string text;
  for (int i = 0; i < 20000; ++i) {
    char line[64];
    snprintf(line, sizeof line, "%x 8 small_%d\n", 0x100000 + 16 * i, i);
    text += line;
  }
  for (int i = 0; i < 20000; ++i) text += "100000 50000 big_" + std::to_string(i) + "\n";
  const std::string path = write_file("overlaps.map", text);
  std::vector<PerfMapSymbol> syms;
  uint64_t skipped = 0;
  std::string why;
  ASSERT_TRUE(symbolize::read_perf_map(path, &syms, &skipped, &why)) << why;
  EXPECT_EQ(skipped, 0u);
  ASSERT_EQ(syms.size(), 1u) << "the last big entry takes the whole range";
  EXPECT_EQ(syms[0].name, "big_19999");
  // Reversed: the small ones newest, each keeps its 8 bytes, the big one the gaps.
  std::string reversed;
  reversed += "100000 50000 big\n";
  for (int i = 0; i < 20000; ++i) {
    char line[64];
    snprintf(line, sizeof line, "%x 8 small_%d\n", 0x100000 + 16 * i, i);
    reversed += line;
  }
  ASSERT_TRUE(symbolize::read_perf_map(write_file("reversed.map", reversed), &syms, &skipped, &why))
      << why;
  EXPECT_EQ(syms.size(), 40000u);  // each small one and the gap after it
  for (size_t i = 1; i < syms.size(); ++i)
    ASSERT_LE(syms[i - 1].end, syms[i].start) << "overlap at " << i;
}

// Refused as perf report refuses them: a symbolic link (not followed), a FIFO (no hang), a
// file of another user (as root: chown'd to nobody).
TEST(PerfMap, RefusesLinksFifosAndOtherUsersFiles) {
  const std::string good = write_file("good.map", "1000 10 f\n");
  std::vector<PerfMapSymbol> syms;
  uint64_t skipped = 0;
  std::string why;
  ASSERT_TRUE(symbolize::read_perf_map(good, &syms, &skipped, &why)) << why;
  const std::string link = temp_dir() + "/link.map";
  ASSERT_EQ(symlink(good.c_str(), link.c_str()), 0);
  EXPECT_FALSE(symbolize::read_perf_map(link, &syms, &skipped, &why));
  EXPECT_NE(why.find("symbolic link"), std::string::npos) << why;
  EXPECT_TRUE(syms.empty());
  const std::string fifo = temp_dir() + "/fifo.map";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(symbolize::read_perf_map(fifo, &syms, &skipped, &why));
  EXPECT_EQ(why, "not a regular file");
  if (geteuid() != 0) {
    std::cout << "note: not root: the other user's file is not checked\n";
    return;
  }
  const std::string other = write_file("other.map", "1000 10 planted\n");
  ASSERT_EQ(chown(other.c_str(), 65534, 65534), 0);
  EXPECT_FALSE(symbolize::read_perf_map(other, &syms, &skipped, &why));
  EXPECT_NE(why.find("owned by uid 65534"), std::string::npos) << why;
  EXPECT_TRUE(syms.empty());
}

}  // namespace
}  // namespace sprofil::report_test
