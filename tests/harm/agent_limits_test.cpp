// A file-size limit (RLIMIT_FSIZE) or a full filesystem never kills the
// program (SIGXFSZ, SIGBUS). The agent checks the limit before it grows the file, reserves the
// counter space (fallocate), and keeps the counters that do not fit in anonymous memory,
// written at a clean exit when they fit.
#include "agent_common.hpp"

namespace sprofil::harm_test {
namespace {

// /bin/sh counts `ulimit -f` in 512-byte blocks (dash); bash in 1024: both are checked below
// through the numbers the profile has to fit in.
Args with_limit(const std::string& blocks, const Args& cmd) {
  Args a{"/bin/sh", "-c", "ulimit -f " + blocks + " && exec \"$0\" \"$@\""};
  a.insert(a.end(), cmd.begin(), cmd.end());
  return a;
}

uint64_t fsize_limit_bytes(const std::string& blocks) {
  Result r = agent_test::run({"/bin/sh", "-c", "ulimit -f " + blocks + " && ulimit -f"});
  // dash prints blocks of 512 bytes, bash of 1024: ask the kernel through /proc instead.
  Result lim = agent_test::run(
      {"/bin/sh", "-c", "ulimit -f " + blocks + " && grep 'Max file size' /proc/self/limits"});
  std::istringstream in(lim.out);
  std::string w;
  uint64_t v = 0;
  while (in >> w)
    if (std::isdigit(static_cast<unsigned char>(w[0]))) {
      v = std::stoull(w);
      break;
    }
  EXPECT_GT(v, 0u) << lim.out << r.out;
  return v;
}

// The program and its exec'd image under a limit, natively and under every clock: same
// status and output, and the profile (the shell's, which execs the program) reads back.
TEST(AgentLimits, FileSizeLimitInsideTheRun) {
  for (const std::string blocks : {"16", "1024"}) {
    SCOPED_TRACE("ulimit -f " + blocks);
    expect_no_harm(with_limit(blocks, {kBusy, "300"}));
  }
}

// `ulimit -f N; sprofil record -- prog`: the limit applies to the tool and everything it runs.
TEST(AgentLimits, FileSizeLimitAroundRecord) {
  const Outcome native = run_once("", with_limit("1024", {kBusy, "300"}));
  ASSERT_EQ(native.status, 0) << native.err;
  const uint64_t limit = fsize_limit_bytes("1024");
  for (const std::string blocks : {"4", "16", "1024"}) {
    SCOPED_TRACE("ulimit -f " + blocks);
    TempDir out;
    const std::string prof = out / "p.sprof";
    Result r = agent_test::run(
        with_limit(blocks, {agent_test::kTool, "record", "--agent", "--clock",
                            agent_test::precise_clock(), "-o", prof, "--", kBusy, "300"}));
    EXPECT_EQ(r.out, native.out);
    EXPECT_EQ(r.err.find("killed by signal"), std::string::npos) << r.err;
    struct stat st;
    if (blocks == "4") {
      // Not even the 4096-byte header fits (2048 or 4096 bytes): the program runs unprofiled
      // and unharmed, and the recording, which produced no profile, fails saying why.
      EXPECT_NE(r.status, 0) << agent_test::describe(r);
      EXPECT_NE(r.status, 128 + SIGXFSZ) << agent_test::describe(r);
      EXPECT_FALSE(agent_test::lines_with(r.err, "not profiling").empty()) << r.err;
      EXPECT_FALSE(agent_test::lines_with(r.err, "no profile was written").empty()) << r.err;
      continue;
    }
    EXPECT_EQ(r.status, 0) << agent_test::describe(r);
    ASSERT_EQ(stat(prof.c_str(), &st), 0) << r.err;
    const profile::Profile p = agent_test::read(prof);
    EXPECT_TRUE(p.finished());
    EXPECT_GT(p.delivered, 0u);
    if (blocks == "1024") {
      EXPECT_LE(static_cast<uint64_t>(st.st_size), limit);
      // libc's counters (1.4 MB of text) cannot fit in 512 KB: they were kept in memory,
      // and the agent said so.
      EXPECT_FALSE(agent_test::lines_with(r.err, "cannot grow").empty()) << r.err;
      EXPECT_GE(regions_named(p, "agent_busy"), 1);  // the main program's fit
    }
  }
}

// Under a 512 KB limit libc's counters (1.4 MB) cannot be in the file; a plugin dlopen'd later
// is kept in memory too (it comes after libc) and written at exit where it fits: its samples
// (~150 ms of CPU in it, cpu clock at 1000 Hz) are in the profile, 30 at least (all lost
// would be none). On a machine overloaded five times over it got 71: the cpu clock's
// signals come late there, and a late sample lands in the code that runs after the plugin's.
// The program also forks a child (its own file, under the same limit) and runs as natively.
TEST(AgentLimits, PluginCountsSurviveTheLimit) {
  const Args cmd = with_limit("1024", {kFds, kPlugin});
  const Outcome native = run_once("", cmd);
  ASSERT_EQ(native.status, 0) << native.err;
  TempDir out;
  const std::string prof = out / "p.sprof";
  // The agent in the program only (not in the shell that sets the limit).
  const Outcome o = run_once("", {"/bin/sh", "-c",
                                  "ulimit -f 1024 && exec env LD_PRELOAD=\"$1\" "
                                  "SPROFIL_OUTPUT=\"$2\" SPROFIL_CLOCK=cpu \"$3\" \"$4\"",
                                  "sh", agent_test::kRuntime, prof, kFds, kPlugin});
  EXPECT_EQ(o.status, native.status) << o.err;
  EXPECT_EQ(o.out, native.out);
  EXPECT_EQ(program_stderr(o.err), native.err);
  EXPECT_EQ(o.files, native.files);
  struct stat st;
  ASSERT_EQ(stat(prof.c_str(), &st), 0);
  EXPECT_LE(static_cast<uint64_t>(st.st_size), fsize_limit_bytes("1024"));
  const profile::Profile p = agent_test::read(prof);
  uint64_t in_plugin = 0;
  for (const auto& r : p.regions)
    if (r.path.find("agent_plugin.so") != std::string::npos) in_plugin += r.total();
  EXPECT_GE(in_plugin, 30u) << o.err;
}

// A filesystem too small for all the counters: the program runs to its end, the profile
// reads back, the agent says what it could not keep.
TEST(AgentLimits, FilesystemTooSmallForTheCounters) {
  SmallFs fs("640k");
  if (!fs.ok()) GTEST_SKIP() << fs.why() << "; the test needs to mount a small tmpfs (root)";
  const Outcome native = run_once("", {kBusy, "300"});
  for (const std::string& clock : agent_clocks()) {
    SCOPED_TRACE("clock " + clock);
    const std::string prof = fs.dir() + "/p-" + clock + ".sprof";
    const Outcome o = run_once("", {kBusy, "300"}, {}, agent_env(prof, agent_clock(clock)));
    EXPECT_EQ(o.status, native.status) << o.err;
    EXPECT_EQ(o.out, native.out);
    EXPECT_EQ(program_stderr(o.err), native.err);
    EXPECT_FALSE(agent_test::lines_with(o.err, "cannot grow").empty()) << o.err;
    const profile::Profile p = agent_test::read(prof);
    EXPECT_TRUE(p.finished());
    // The counters kept in memory were written at exit (only their non-zero pages: they fit):
    // every counted sample is in a region or the overflow, libc's (spilled) included.
    uint64_t kept = p.overflow;
    for (const auto& r : p.regions) kept += r.total();
    EXPECT_EQ(kept, p.counted());
    EXPECT_GE(p.delivered, 100u);  // ~300 ms of CPU at 1000 Hz
    EXPECT_GE(regions_named(p, "libc.so.6"), 1);
    unlink(prof.c_str());
  }
}

// The program itself fills the filesystem that holds the profile, then keeps running: every
// sample lands in counter space reserved when the region was added, so nothing faults.
TEST(AgentLimits, FilesystemFilledByTheProgram) {
  SmallFs fs("24m");
  if (!fs.ok()) GTEST_SKIP() << fs.why() << "; the test needs to mount a small tmpfs (root)";
  const Outcome native = run_once("", {kBusy, "400", fs.dir()});
  ASSERT_EQ(native.status, 0) << native.err;
  ASSERT_NE(native.out.find("filled: ENOSPC"), std::string::npos) << native.out;
  for (const std::string& clock : clocks()) {
    SCOPED_TRACE("clock " + clock);
    const std::string prof = fs.dir() + "/p.sprof";
    // Under the tool too: the profile is on the filesystem the program fills.
    Args a{agent_test::kTool, "record"};
    const Args c = clock_options(clock);
    a.insert(a.end(), c.begin(), c.end());
    a.insert(a.end(), {"-o", prof, "--", kBusy, "400", fs.dir()});
    Result r = agent_test::run(a);
    EXPECT_EQ(r.status, 0) << agent_test::describe(r);
    EXPECT_EQ(r.out, native.out);
    EXPECT_TRUE(agent_test::lines_with(r.err, "cannot grow").empty()) << r.err;
    const profile::Profile p = agent_test::read(prof);
    EXPECT_TRUE(p.finished());
    // ~400 ms of CPU at 1000 Hz, most of it after the disk was full.
    EXPECT_GE(p.delivered, 100u);
    unlink(prof.c_str());
  }
}

// The reservation is for the run only: at a clean exit the space of counter pages no sample
// touched is given back, so a finished profile is sparse again. agent_busy's counters cover
// its own text, libc's, libstdc++'s and libm's (about 3 MB); a 300 ms run touches a few pages.
// Bound: at most a quarter of the file's size stays allocated (all of it before the release).
TEST(AgentLimits, UntouchedReservationIsReleasedAtExit) {
  TempDir out;
  const std::string prof = out / "p.sprof";
  const Outcome o = run_once("", {kBusy, "300"}, {}, agent_env(prof, "cpu"));
  ASSERT_EQ(o.status, 0) << o.err;
  struct stat st;
  ASSERT_EQ(stat(prof.c_str(), &st), 0);
  EXPECT_LE(static_cast<uint64_t>(st.st_blocks) * 512, static_cast<uint64_t>(st.st_size) / 4)
      << st.st_size;
  const profile::Profile p = agent_test::read(prof);
  uint64_t counted = p.overflow;
  for (const auto& r : p.regions) counted += r.total();
  EXPECT_EQ(counted, p.counted());  // no count was lost with the space
  EXPECT_GE(p.delivered, 100u);
}

// The CPU affinity is the program's: in drain mode (record's perf clock) the exchanges with
// the record parent pin the thread to its CPU while it waits for the answer and give the mask
// back (clock/drain_client.cpp, CpuPin). A shell prints its Cpus_allowed_list after its start,
// then execs grep to print the new image's (the exec's flush and the image's start are
// exchanges too): the same natively and under every clock, with the machine's every CPU and
// under `taskset` (where the mask is not init's, no pin).
TEST(AgentLimits, CpuAffinityIsTheProgramsOwn) {
  const std::string show =
      "grep Cpus_allowed_list /proc/$$/status; exec grep Cpus_allowed_list /proc/self/status";
  const Outcome native = run_once("", {"/bin/sh", "-c", show});
  ASSERT_EQ(native.status, 0) << native.err;
  ASSERT_EQ(agent_test::lines_with(native.out, "Cpus_allowed_list:").size(), 2u) << native.out;
  expect_no_harm({"/bin/sh", "-c", show});
  if (access("/usr/bin/taskset", X_OK) == 0)
    expect_no_harm({"/usr/bin/taskset", "-c", "0", "/bin/sh", "-c", show});
}

}  // namespace
}  // namespace sprofil::harm_test

namespace sprofil::harm_test {
namespace {

// An address-space limit (RLIMIT_AS) set inside the recorded command, 6 MiB above what the
// program maps natively, natively and under every clock: in drain mode (the default) the agent
// maps each record's page, not its counters (4 bytes per byte of text: about 17 MiB for this
// C++ program's libraries at 1-byte bins, which made its allocation fail under sprofil); with a
// signal per sample it takes 16-byte bins, and its sampler thread a small stack (it had 8 MiB).
TEST(AgentLimits, AddressSpaceLimitInsideTheRun) {
  const std::string prog = AGENT_ADDRSPACE;
  const Result vm = agent_test::run({prog, "vmsize"});
  ASSERT_EQ(vm.status, 0) << vm.err;
  const long native_kb = std::stol(vm.out);
  ASSERT_GT(native_kb, 0);
  constexpr long kAllocMb = 64, kSpareKb = 6 * 1024;
  const std::string limit = std::to_string(native_kb + kAllocMb * 1024 + kSpareKb);
  const Args cmd{"/bin/sh", "-c",    "ulimit -v " + limit + " && exec \"$0\" \"$@\"",
                 prog,      "alloc", std::to_string(kAllocMb)};
  const Outcome native = run_once("", cmd);
  ASSERT_EQ(native.status, 0) << native.out << native.err;
  ASSERT_EQ(native.out, "ok\n");
  expect_no_harm(cmd);
}

// RLIMIT_NPROC and a cgroup's pids.max count tasks, threads included. Under the sampler clock
// (auto's choice where perf events are denied) each profiled process had a thread of sprofil's,
// so a program that forks up to its limit made about half the children it makes natively
// (14 of 28 here). Every clock now leaves the program its tasks: it makes as many children as
// natively less what `sprofil record` itself takes (its process and drain mode's thread), as
// with any profiler that runs beside the program. Runs as nobody: root is exempt from the
// limit.
TEST(AgentLimits, ProcessLimitAsNatively) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: it runs the program as nobody";
  if (agent_test::run({"setpriv", "--version"}).status != 0)
    GTEST_SKIP() << "needs setpriv (util-linux) to run commands as another user";
  TempDir out;
  std::filesystem::permissions(out.path(), std::filesystem::perms::all);
  const auto children = [&](const std::string& clock) {
    std::string cmd = "ulimit -u 30 && exec ";
    if (!clock.empty())
      cmd +=
          agent_test::kTool + " record -q --clock " + clock + " -o " + (out / "p.sprof") + " -- ";
    cmd += std::string(AGENT_FORKS) + " 60";
    const Result r = agent_test::run(
        {"setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "/bin/bash", "-c", cmd});
    EXPECT_EQ(r.status, 0) << clock << ": " << agent_test::describe(r);
    return std::atoi(r.out.c_str());
  };
  const int native = children("");
  if (native < 20 || native >= 30)
    GTEST_SKIP() << "nobody made " << native << " children under ulimit -u 30 natively";
  std::vector<std::string> clocks{"sampler", "cpu", "itimer", "wall"};
  if (agent_test::perf_probe() == 0) clocks.insert(clocks.begin(), "perf");
  for (const std::string& clock : clocks) {
    SCOPED_TRACE(clock);
    const int under = children(clock);
    EXPECT_GE(under, native - (clock == "perf" ? 2 : 1)) << "natively " << native;
    EXPECT_LE(under, native);
  }
}

}  // namespace
}  // namespace sprofil::harm_test
