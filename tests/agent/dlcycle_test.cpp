// The agent's dlopen/dlclose path reads only the objects it does not know
// yet (src/agent/objects.cpp, regions.cpp). The profile must stay right through many cycles:
// a module closed and loaded again keeps one record and both loads' samples, a module loaded
// by another module's constructor is counted from its first instruction, scans racing from two
// threads lose nothing, the churn adds no records, and a dlopen that adds a module with a
// module it needs (read from the loader's list past the last object known) records both.
#include <climits>
#include <cstdlib>
#include <sstream>
#include <string>

#include "helpers.hpp"

namespace sprofil::agent_test {
namespace {

const std::string kDlcycle = AGENT_DLCYCLE;
const std::string kDir = DLCYCLE_DIR;

// The records of the module whose path ends with this file name.
std::vector<const profile::Region*> records_of(const profile::Profile& p, const std::string& so) {
  std::vector<const profile::Region*> v;
  for (const profile::Region& g : p.regions)
    if (g.path.size() >= so.size() && g.path.compare(g.path.size() - so.size(), so.size(), so) == 0)
      v.push_back(&g);
  return v;
}

class Dlcycle : public ::testing::TestWithParam<std::tuple<int, const char*>> {};

TEST_P(Dlcycle, SharesAndRecordsSurviveTheChurn) {
  const auto [cycles, mode] = GetParam();
  TempDir dir;
  const std::string out = dir / "dl.sprof", truth_file = dir / "truth";
  const std::string clock = precise_clock();
  // ~1.9 s of CPU at 2000 Hz: ~3,800 samples (perf), fewer with the tick-bound cpu clock.
  // The perf clock in signal mode (the agent's own table takes every sample) and in drain
  // mode (the record parent looks pcs up in its own table over the file's records, rebuilt
  // when the agent changes them: b is loaded where a was, and counted as b).
  Result r =
      record(out, {"--clock", clock, "-F", "2000"},
             {kDlcycle, kDir, truth_file, std::to_string(cycles)}, {{"SPROFIL_PERF_MODE", mode}});
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(r.out, "done\n");
  auto truth = read_truth(truth_file);
  const double cpu = truth["process_cpu"];
  ASSERT_GT(cpu, 1.3);
  RecordProperty("a_same_address", std::to_string(truth["a_same_address"]));

  // Shares per function against the program's own CPU clocks. The tolerance (5 points) is the
  // accuracy tests' 2 points plus the loader's CPU in the churn, which is not in any burn: one
  // point on an Intel Xeon VM; on an AMD EPYC VM at 300 cycles dlcycle_a and dlcycle_b came
  // out 3.4-4.3 points over their CPU share in three CI runs. A record lost or not revived
  // would cost a function its whole share (a: 2 x 0.3 s of ~1.9 s, one load's samples missing
  // is 17 points).
  // Above, in the churn, dlcycle_a and dlcycle_b get 7.5: the user-only event's periods that
  // end in the kernel are credited to the next user-space sample, and each of their churn
  // burns (0.3 ms, under one period) starts right after a loader call whose last part is kernel
  // time (dlopen(b)'s, with the agent's reservation and mapping of b's records, before a's
  // burn; dlclose(a)'s, with the agent's drain request (kDrainSync), before b's). Drain mode
  // on the AMD EPYC VM: a 4.1-4.3 points over when idle, 3.7-6.3 beside two busy loops and
  // 5.1-5.3 in CI; before kDrainSync part of a's samples were drained after b took a's
  // address and counted as b's (a -2.3 to +3.6, b up to +8.0 beside two busy loops).
  Json j = report_json(out);
  ASSERT_TRUE(j.is_object());
  const double total = j["total_samples"].get<double>();
  EXPECT_GT(total, 1000) << "expected ~3,800 samples";
  for (const std::string fn :
       {"dlcycle_a", "dlcycle_b", "dlcycle_inner", "dlcycle_main", "dlcycle_dep"}) {
    const double want = 100.0 * truth[fn] / cpu, got = percent_of(j, fn);
    const bool churned = cycles > 1 && (fn == "dlcycle_a" || fn == "dlcycle_b");
    std::ostringstream what;
    what << fn << " (" << clock << " clock, " << mode << " mode, " << cycles
         << " cycles): " << samples_of(j, fn) << " of " << total << " samples";
    EXPECT_GE(got, want - 5.0) << what.str();
    EXPECT_LE(got, want + (churned ? 7.5 : 5.0)) << what.str();
  }
  // Everything burnt was inside a known object: only the loader's and start-up's stray
  // samples can be outside. In signal mode these include a library's own code run inside
  // dlopen before the agent registers it (_init, its constructors, their first page faults):
  // the handler looks the pc up at once, where drain mode looks it up when the ring is
  // drained, after the record was added, and counts it in the library's _init. On the AMD
  // EPYC VM (a page fault 12-14 us) signal mode had 0.33-0.61% outside when idle and
  // 1.04-1.38% under the test suite's load (three CI runs), drain mode 0.02-0.09%: 2 points
  // for signal mode, 1 for drain.
  const double outside_bound = std::string(mode) == "signal" ? 2.0 : 1.0;
  EXPECT_LT(percent_of(j, "[outside any object]"), outside_bound) << j.dump(1);

  // One record per module, however many cycles: a reload gets its record back. a and c end
  // closed (UNLOADED), b, inner, outer, user and the dep it needs loaded.
  profile::Profile p = read(out);
  EXPECT_TRUE(p.finished());
  const std::pair<const char*, bool> modules[] = {
      {"libdlcycle_a.so", true},      {"libdlcycle_b.so", false},     {"libdlcycle_c.so", true},
      {"libdlcycle_inner.so", false}, {"libdlcycle_outer.so", false}, {"libdlcycle_user.so", false},
      {"libdlcycle_dep.so", false}};
  for (const auto& [so, unloaded] : modules) {
    const auto recs = records_of(p, so);
    ASSERT_EQ(recs.size(), 1u) << so;
    EXPECT_TRUE(recs[0]->flags & SPROF_R_DLOPEN) << so;
    EXPECT_EQ((recs[0]->flags & SPROF_R_UNLOADED) != 0, unloaded)
        << so << " flags " << recs[0]->flags;
  }
}

// 1 cycle: the plain path; 300: the churn (and the racing thread's 300 cycles of c).
INSTANTIATE_TEST_SUITE_P(Cycles, Dlcycle,
                         ::testing::Combine(::testing::Values(1, 300),
                                            ::testing::Values("signal", "drain")),
                         [](const auto& pi) {
                           return std::to_string(std::get<0>(pi.param)) + "_" +
                                  std::get<1>(pi.param);
                         });

// `agent_prog forkdl` on libdlcycle_b.so under `sprofil record` in drain mode (with `extra`
// after its arguments): the forked child's one file, FILE.PID, with its record of the module
// and both of its burns (0.1 s and 0.3 s at 2000 Hz) within 10% of their CPU (and its steal),
// as the Fork tests ask; and the record parent's stats: no sample unplaced.
void expect_child_with_both_burns(const TempDir& dir, const std::string& extra) {
  const std::string out = dir / "fd.sprof", truth = dir / "truth";
  std::vector<std::string> cmd = {
      kProg, "--truth", truth, "forkdl", kDir + "/libdlcycle_b.so", "dlcycle_b", "0.3"};
  if (!extra.empty()) cmd.push_back(extra);
  Result r = record(out, {"--clock", "perf", "-F", "2000"}, cmd, {{"SPROFIL_DRAIN_STATS", "1"}});
  EXPECT_EQ(r.status, 0) << describe(r);
  EXPECT_NE(r.err.find(" 1 forked children's files made, 0 refused"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" 0 samples unplaced"), std::string::npos) << r.err;
  auto child = read_truth(truth + ".child");
  const std::string pid = std::to_string(static_cast<int>(child["child_pid"]));
  explode_run(out);
  const std::string listing = ::testing::PrintToString(list_dir(dir.path()));
  EXPECT_FALSE(std::filesystem::exists(out + "." + pid + ".1")) << listing;
  if (!std::filesystem::exists(out + "." + pid)) {
    ADD_FAILURE() << "no file of the child: " << listing;
    return;
  }
  profile::Profile c = read(out + "." + pid);
  EXPECT_TRUE(c.flags & SPROF_F_CHILD);
  EXPECT_TRUE(c.finished());
  EXPECT_EQ(records_of(c, "libdlcycle_b.so").size(), 1u);
  expect_consistent(c, "child");
  const Json j = report_json(out + "." + pid);
  const double dl = child["dl_cpu"], child_burn = child["child_cpu"];
  EXPECT_GE(samples_of(j, "dlcycle_b"), 0.9 * dl * 2000);
  EXPECT_LE(samples_of(j, "dlcycle_b"), 1.1 * (dl + steal_of(child, "dl_cpu")) * 2000);
  EXPECT_GE(samples_of(j, "burn_child"), 0.9 * child_burn * 2000);
  EXPECT_LE(samples_of(j, "burn_child"), 1.1 * (child_burn + steal_of(child, "child_cpu")) * 2000);
}

// Drain mode: a forked child has no file of its own until it must write into one. One that
// burns (its samples go to the file the record parent makes at the first of them), then
// dlopens a module (it takes that file and adds the module's record) and burns in it, has one
// file, FILE.PID, with both burns: none of its samples is lost or counted twice.
TEST(ForkDrain, ChildThatDlopensKeepsOneFile) {
  SKIP_WITHOUT_PERF();
  TempDir dir;
  expect_child_with_both_burns(dir, "");
  const std::string out = dir / "fd.sprof";
  EXPECT_EQ(samples_of(report_json(out), "dlcycle_b"), 0);
  EXPECT_EQ(samples_of(report_json(out), "burn_child"), 0);
}

// The same where the file the child was forked with is gone (the record parent removes the
// file of a process that took no sample at its end: a daemon's launcher that forks and exits).
// The child cannot read that file when it must take its own at the dlopen, but the record
// parent holds it, and made the child's file from it: the child takes that one (kDrainChildFile
// without the parent process's file), not a new one of its own beside the one its events count
// into, where the module has no record and its samples had nowhere to go.
TEST(ForkDrain, ChildThatDlopensAfterItsParentsFileIsGone) {
  SKIP_WITHOUT_PERF();
  TempDir dir;
  expect_child_with_both_burns(dir, "gone");
}

// A module dlopen'd by a name relative to the working directory ("./libdlcycle_b.so") is named
// by its absolute path in the profile, under the agent with either clock, as record's default
// names it from the kernel's maps: so `report` finds its file from any directory, with no
// build-id cache to fall back on.
TEST(Dlcycle, RelativeDlopenNameIsMadeAbsolute) {
  for (const char* clock : {"perf", "sampler"}) {
    SCOPED_TRACE(clock);
    TempDir dir;
    const std::string out = dir / "rel.sprof";
    Result r = run({kTool, "record", "--agent", "--clock", clock, "-q", "-o", out, "--", kProg,
                    "forkdl", "./libdlcycle_b.so", "dlcycle_b", "0.3"},
                   {}, kDir);
    ASSERT_EQ(r.status, 0) << describe(r);
    const profile::Profile p = read(out);
    const auto recs = records_of(p, "libdlcycle_b.so");
    ASSERT_EQ(recs.size(), 1u);
    char real[PATH_MAX];
    ASSERT_NE(realpath((kDir + "/libdlcycle_b.so").c_str(), real), nullptr);
    EXPECT_EQ(recs[0]->path, real);
    r = run({kTool, "report", out, "--format", "json"},
            {{"SPROFIL_BUILDID_DIR", dir / "no-cache"}, {"DEBUGINFOD_URLS", ""}}, "/");
    ASSERT_EQ(r.status, 0) << describe(r);
    // 0.3 s in dlcycle_b at 1000 Hz; the cpu-time clocks' ticks leave a few out.
    EXPECT_GT(samples_of(Json::parse(r.out), "dlcycle_b"), 0.7 * 0.3 * 1000) << r.out;
  }
}

}  // namespace
}  // namespace sprofil::agent_test
