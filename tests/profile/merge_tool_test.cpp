// `sprofil merge` end to end, through the built tool binary.
#include <sys/wait.h>

#include <cstdio>

#include "profile/merge.hpp"
#include "test_util.hpp"

namespace sprofil::profile_test {
namespace {

struct Result {
  int status = -1;     // exit status
  std::string output;  // stdout and stderr
};

Result run_tool(const std::string& args) {
  Result r;
  std::string cmd = std::string("'") + SPROFIL_TOOL_PATH + "' " + args + " 2>&1";
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) r.output.append(buf, n);
  int st = ::pclose(f);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  return r;
}

Profile one_run(uint64_t base, uint64_t scale, uint32_t flags) {
  Profile p = sample_profile();
  p.flags = flags;
  for (Region& r : p.regions) {
    r.start += base;  // ASLR: a different load address every run
    r.end += base;
    r.load_bias += base;
    std::vector<uint64_t> counts = dense(r);
    for (uint64_t& c : counts) c = c % 1000 * scale;
    set_counts(r, counts);
  }
  p.overflow = 3 * scale;
  p.delivered = p.total_samples();
  return p;
}

TEST(MergeTool, MergesFilesFromTheWriter) {
  TempDir dir;
  std::string error;
  const Profile a = one_run(0, 1, SPROF_F_FINISHED);
  const Profile b = one_run(0x10000000, 2, SPROF_F_FINISHED);
  const Profile c = one_run(0x20000000, 40000, SPROF_F_FINISHED | SPROF_F_CHILD);
  ASSERT_TRUE(write_profile(a, dir.file("a.sprof"), &error)) << error;
  ASSERT_TRUE(write_profile(b, dir.file("b.sprof"), &error)) << error;
  ASSERT_TRUE(write_profile(c, dir.file("c.sprof.123"), &error)) << error;
  Result r = run_tool("merge -o " + dir.file("out.sprof") + " " + dir.file("a.sprof") + " " +
                      dir.file("b.sprof") + " " + dir.file("c.sprof.123"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "");
  Profile m;
  ASSERT_TRUE(read_profile(dir.file("out.sprof"), &m, &error)) << error;
  ASSERT_EQ(m.regions.size(), a.regions.size());
  for (size_t i = 0; i < a.regions.size(); ++i) {
    SCOPED_TRACE(a.regions[i].path);
    EXPECT_EQ(m.regions[i].path, a.regions[i].path);
    EXPECT_EQ(m.regions[i].start, a.regions[i].start);
    ASSERT_EQ(m.regions[i].nbins(), a.regions[i].nbins());
    const std::vector<uint64_t> mc = dense(m.regions[i]), ac = dense(a.regions[i]);
    for (size_t k = 0; k < ac.size(); ++k) ASSERT_EQ(mc[k], ac[k] * 40003) << k;
  }
  // 999 * 40000 does not fit 2 bytes: the writer stored c's region 0 with 8-byte counters,
  // and the merge is never narrower than an input.
  EXPECT_EQ(m.regions[0].counter_width, 8u);
  EXPECT_EQ(m.overflow, 3u * 40003);
  EXPECT_EQ(m.delivered, a.delivered + b.delivered + c.delivered);
  EXPECT_EQ(m.total_samples(), a.total_samples() * 40003);
  EXPECT_TRUE(m.finished());
  EXPECT_EQ(m.argv, a.argv);
}

// A run's header notes (report::run_notes) have no place in the merged profile, of one process:
// merge names each with its input, and merges.
TEST(MergeTool, RunNotesItCannotKeepAreSaid) {
  TempDir dir;
  std::string error;
  Profile a = combine_processes({one_run(0, 1, SPROF_F_FINISHED)}, {});
  a.throttled = 7;
  const Profile b = one_run(0x10000000, 2, SPROF_F_FINISHED);
  ASSERT_TRUE(write_profile(a, dir.file("a.sprof"), &error)) << error;
  ASSERT_TRUE(write_profile(b, dir.file("b.sprof"), &error)) << error;
  Result r = run_tool("merge -o " + dir.file("out.sprof") + " " + dir.file("a.sprof") + " " +
                      dir.file("b.sprof"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("sprofil merge: warning: " + dir.file("a.sprof") +
                          ": the kernel throttled the sampling 7 times"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("(not kept: the merged profile is of one process)"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find(dir.file("b.sprof")), std::string::npos) << r.output;
  Profile m;
  ASSERT_TRUE(read_profile(dir.file("out.sprof"), &m, &error)) << error;
  EXPECT_EQ(m.delivered, a.delivered + b.delivered);
}

TEST(MergeTool, SingleInputCopies) {
  TempDir dir;
  std::string error;
  const Profile a = one_run(0, 1, 0);
  ASSERT_TRUE(write_profile(a, dir.file("a.sprof"), &error)) << error;
  Result r = run_tool("merge --output " + dir.file("o.sprof") + " " + dir.file("a.sprof"));
  ASSERT_EQ(r.status, 0) << r.output;
  Profile m;
  ASSERT_TRUE(read_profile(dir.file("o.sprof"), &m, &error)) << error;
  EXPECT_FALSE(m.finished());
  EXPECT_EQ(m.total_samples(), a.total_samples());
}

TEST(MergeTool, BadInputFileExitsOneNamingTheFile) {
  TempDir dir;
  std::string error;
  ASSERT_TRUE(write_profile(one_run(0, 1, 0), dir.file("good.sprof"), &error)) << error;
  spit(dir.file("junk.sprof"), std::vector<uint8_t>(5000, 'j'));
  Result r = run_tool("merge -o " + dir.file("out.sprof") + " " + dir.file("good.sprof") + " " +
                      dir.file("junk.sprof"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("sprofil merge: " + dir.file("junk.sprof") + ": bad magic"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("out.sprof")));

  r = run_tool("merge -o " + dir.file("out.sprof") + " " + dir.file("missing.sprof"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("sprofil merge: " + dir.file("missing.sprof") + ": cannot open"),
            std::string::npos)
      << r.output;
}

TEST(MergeTool, MismatchNamesTheOffendingFile) {
  TempDir dir;
  std::string error;
  Profile a = one_run(0, 1, 0);
  Profile b = one_run(0, 1, 0);
  b.tick_ns = a.tick_ns + 1;
  ASSERT_TRUE(write_profile(a, dir.file("a.sprof"), &error)) << error;
  ASSERT_TRUE(write_profile(b, dir.file("b.sprof"), &error)) << error;
  Result r = run_tool("merge -o " + dir.file("out.sprof") + " " + dir.file("a.sprof") + " " +
                      dir.file("b.sprof"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("sprofil merge: " + dir.file("b.sprof") + ": tick_ns differs"),
            std::string::npos)
      << r.output;
}

TEST(MergeTool, UsageErrors) {
  Result r = run_tool("merge a.sprof");  // -o is required
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--output"), std::string::npos) << r.output;
  r = run_tool("merge -o x.sprof");  // at least one input
  EXPECT_NE(r.status, 0);
}

}  // namespace
}  // namespace sprofil::profile_test
