// The life of a recorded program. Exit status passes through; _exit, a raw exit_group, SIGKILL
// and abort leave readable profiles with every sample, finished where the process exited; forked
// children and exec'd programs write files of their own; threads made before and after the agent
// starts are all sampled; the agent works without the tool.
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <random>
#include <thread>

#include "helpers.hpp"

namespace sprofil::agent_test {
namespace {

TEST(Exit, StatusPassesThrough) {
  TempDir dir;
  Result r = record(dir / "sh.sprof", {}, {"sh", "-c", "exit 7"});
  EXPECT_EQ(r.status, 7) << describe(r);
  r = record(dir / "true.sprof", {}, {"true"});
  EXPECT_EQ(r.status, 0) << describe(r);
  r = record(dir / "none.sprof", {}, {dir / "no-such-program"});
  EXPECT_EQ(r.status, 127) << describe(r);
}

// The text report of the profile gives no "did not finish cleanly" warning.
void expect_report_finished(const std::string& out) {
  const Result text = run({kTool, "report", out});
  EXPECT_EQ(text.status, 0) << describe(text);
  EXPECT_EQ(text.out.find("did not finish"), std::string::npos) << text.out;
}

// _exit runs no atexit handler; the interposed _exit writes the end fields (src/agent/exit.cpp)
// under each way of sampling: drain mode, a signal per sample, the cpu clock's timers. Before
// it, each such file said it did not finish cleanly and had no effective rate.
TEST(Exit, UnderscoreExitKeepsEverySampleAndFinishes) {
  struct Way {
    const char* name;
    std::string clock;
    Env env;
  };
  const bool perf = perf_probe() == 0;
  const Way ways[] = {{"drain", "perf", {}},
                      {"signal", "perf", {{"SPROFIL_PERF_MODE", "signal"}}},
                      {"cpu", "cpu", {}}};
  TempDir dir;
  for (const Way& w : ways) {
    if (w.clock == "perf" && !perf) continue;
    SCOPED_TRACE(w.name);
    const std::string out = dir / (std::string(w.name) + ".sprof");
    const std::string truth_file = dir / (std::string(w.name) + ".truth");
    Result r = record(out, {"--clock", w.clock, "-F", "1000"},
                      {kProg, "--truth", truth_file, "exit_", "0.3"}, w.env);
    ASSERT_EQ(r.status, 0) << describe(r);
    const double cpu = read_truth(truth_file)["process_cpu"];
    profile::Profile p = read(out);
    ASSERT_EQ(p.processes.size(), 1u);
    EXPECT_TRUE(p.finished()) << "_exit should have written the end fields";
    expect_consistent(p, w.name);
    // The end fields: the process's CPU time at its _exit (the truth is read just before it),
    // within 10% (and 20 ms) of it, an end after the start, and an effective rate.
    const double end_cpu = static_cast<double>(p.processes[0].cpu_ns) * 1e-9;
    EXPECT_NEAR(end_cpu, cpu, std::max(0.02, 0.1 * cpu));
    EXPECT_GT(p.processes[0].end_ns, p.processes[0].start_ns);
    EXPECT_GT(p.processes[0].effective_hz, 0);
    // Every sample: at the perf clock, one per ms of CPU within 10%. The cpu clock's rate is
    // the tick's, which the effective rate (samples over that CPU time) tells.
    const double rate = w.clock == "perf" ? 1000 : p.processes[0].effective_hz;
    EXPECT_NEAR(static_cast<double>(p.total_samples()), cpu * rate, 0.1 * cpu * rate);
    Json j = report_json(out);
    EXPECT_NEAR(samples_of(j, "burn_main"), static_cast<double>(p.total_samples()),
                0.1 * static_cast<double>(p.total_samples()));
    expect_report_finished(out);
  }
}

// A process that ends with a raw exit_group (Go's runtime does) runs neither atexit handlers
// nor _exit. In drain mode the record parent, which sees the process end while it is a zombie,
// reads its exit code and CPU time and completes the file (drain_ends.cpp, gone()): finished, its
// CPU time the process's (the truth is read just before the exit), an effective rate.
TEST(Exit, RawExitGroupIsCompletedByTheRecordParent) {
  SKIP_WITHOUT_PERF();
  TempDir dir;
  const std::string out = dir / "raw.sprof", truth_file = dir / "truth";
  Result r =
      record(out, {"--clock", "perf", "-F", "1000"},
             {kProg, "--truth", truth_file, "rawexit", "0.3"}, {{"SPROFIL_DRAIN_STATS", "1"}});
  ASSERT_EQ(r.status, 3) << describe(r);
  EXPECT_NE(r.err.find(" 1 exits the agent did not see"), std::string::npos) << r.err;
  const double cpu = read_truth(truth_file)["process_cpu"];
  profile::Profile p = read(out);
  ASSERT_EQ(p.processes.size(), 1u);
  EXPECT_TRUE(p.finished());
  expect_consistent(p, "raw exit");
  const double end_cpu = static_cast<double>(p.processes[0].cpu_ns) * 1e-9;
  EXPECT_GE(end_cpu, cpu);
  EXPECT_LE(end_cpu, cpu + std::max(0.02, 0.1 * cpu));
  EXPECT_NEAR(p.processes[0].effective_hz, 1000, 100);
  expect_report_finished(out);
}

// Whether a reaped process's exit code can be read from its pidfd (PIDFD_GET_INFO with
// PIDFD_INFO_EXIT, Linux 6.15): a child is made, reaped, and asked.
bool pidfd_keeps_exit_code() {
  struct Info {
    uint64_t mask = 0, cgroupid = 0;
    uint32_t ids[11] = {};
    int32_t exit_code = 0;
  } info;
  const pid_t pid = fork();
  if (pid == 0) _exit(5);
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  waitpid(pid, nullptr, 0);
  if (fd < 0) return false;
  info.mask = 1u << 3;
  const bool ok = ioctl(fd, _IOWR(0xFF, 11, Info), &info) == 0 && (info.mask & (1u << 3)) &&
                  WIFEXITED(info.exit_code) && WEXITSTATUS(info.exit_code) == 5;
  close(fd);
  return ok;
}

// The same exit in a shell's child: the shell may reap it before the record parent sees its
// end. Then its exit code comes from its pidfd, and its CPU time is reckoned from its CPU at
// its start and its events' counters (drain_state.hpp, Watch).
TEST(Exit, RawExitGroupOfAShellsChildIsCompletedByTheRecordParent) {
  SKIP_WITHOUT_PERF();
  if (!pidfd_keeps_exit_code())
    GTEST_SKIP() << "this kernel keeps no exit code with a reaped process's pidfd (Linux 6.15)";
  TempDir dir;
  const std::string out = dir / "raw.sprof", truth_file = dir / "truth";
  for (int k = 0; k < 3 && !HasFailure(); ++k) {
    SCOPED_TRACE("run " + std::to_string(k));
    Result r = record(out, {"--clock", "perf", "-F", "1000"},
                      {"/bin/sh", "-c", kProg + " --truth " + truth_file + " rawexit 0.2; true"});
    ASSERT_EQ(r.status, 0) << describe(r);
    const double cpu = read_truth(truth_file)["process_cpu"];
    profile::Profile p = read(out);
    bool seen = false;
    for (const auto& proc : p.processes) {
      if (proc.comm != "agent_prog") continue;
      seen = true;
      EXPECT_TRUE(proc.flags & SPROF_F_FINISHED);
      const double end_cpu = static_cast<double>(proc.cpu_ns) * 1e-9;
      EXPECT_GE(end_cpu, 0.95 * cpu);
      EXPECT_LE(end_cpu, cpu + std::max(0.02, 0.1 * cpu));
    }
    EXPECT_TRUE(seen) << describe(r);
  }
}

// A signal per sample (SPROFIL_PERF_MODE=signal) counts a thread's kernel time at its next
// signal in user space; a thread's last kernel time is credited when its event closes, and an
// _exit closes none: the interposed _exit credits it (rt::credit_at_underscore_exit). 100 forked
// children spin 5 ms each on clock_gettime(CLOCK_THREAD_CPUTIME_ID), a system call, then
// _exit: before, the samples stood for 0.35 of the run's CPU; now about 0.8 (the rest is each
// child's start before its event, and its parent's).
TEST(Exit, UnderscoreExitCreditsTheLastKernelTimeInSignalMode) {
  SKIP_WITHOUT_PERF();
  TempDir dir;
  const std::string out = dir / "many.sprof";
  Result r = record(out, {"--clock", "perf", "-F", "1000"}, {kProg, "forkmany", "100", "5000"},
                    {{"SPROFIL_PERF_MODE", "signal"}});
  ASSERT_EQ(r.status, 0) << describe(r);
  profile::Profile p = read(out);
  ASSERT_GT(p.run_cpu_ns, 0u);
  const double sampled = static_cast<double>(p.total_samples()) * 1e-3;
  const double cpu = static_cast<double>(p.run_cpu_ns) * 1e-9;
  EXPECT_GE(sampled, 0.65 * cpu) << describe(r);
  EXPECT_LE(sampled, 1.1 * cpu) << describe(r);
}

// A vfork child shares its parent's memory, agent and all: its _exit must not complete the
// parent's file. The parent then dies by SIGKILL, so its file must stay unfinished, with every
// sample of both its burns.
TEST(Exit, VforkChildsUnderscoreExitLeavesTheParentsFileAlone) {
  TempDir dir;
  const std::string out = dir / "vfork.sprof", truth_file = dir / "truth";
  Result r = record(out, {"--clock", precise_clock(), "-F", "1000"},
                    {kProg, "--truth", truth_file, "vforkkill", "0.15"});
  EXPECT_EQ(r.status, 128 + SIGKILL) << describe(r);
  const double cpu = read_truth(truth_file)["burn_main"];
  profile::Profile p = read(out);
  EXPECT_FALSE(p.finished()) << "the vfork child's _exit completed its parent's file";
  expect_consistent(p, "vfork");
  Json j = report_json(out);
  EXPECT_GE(samples_of(j, "burn_main"), 0.85 * cpu * 1000);
}

// _exit from a signal handler that may have interrupted malloc: the agent's _exit takes no
// lock it waits for and allocates nothing, so the program ends with the handler's status
// (a watchdog in the program ends one that hangs, with SIGUSR2, after 30 s). Five runs of the
// agent alone (no record parent, which would complete the file too: a signal per sample with
// the perf clock, the cpu clock without perf), where its _exit alone completes the file and
// credits the thread's last kernel time.
TEST(Exit, UnderscoreExitFromASignalHandlerEndsTheProgram) {
  TempDir dir;
  for (int k = 0; k < 5; ++k) {
    SCOPED_TRACE("run " + std::to_string(k));
    const std::string out = dir / ("handler" + std::to_string(k) + ".sprof");
    Result r = run({kProg, "handlerexit", "0.3"}, {{"LD_PRELOAD", kRuntime},
                                                   {"SPROFIL_OUTPUT", out},
                                                   {"SPROFIL_HZ", "1000"},
                                                   {"SPROFIL_CLOCK", precise_clock()},
                                                   {"SPROFIL_STARTED", "\x01"}});
    ASSERT_EQ(r.status, 9) << describe(r);
    profile::Profile p = read(out);
    EXPECT_TRUE(p.finished());
    expect_consistent(p, "handler");
  }
}

// Debian's /bin/sh (dash) ends every script with _exit: a recorded shell script's profile is
// finished, each process in it, and the report gives no warning.
TEST(Exit, ShellScriptsProfileIsFinished) {
  TempDir dir;
  const std::string out = dir / "sh.sprof";
  Result r =
      record(out, {"--clock", precise_clock()},
             {"/bin/sh", "-c",
              std::string(kProg) + " burn 0.1; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"});
  ASSERT_EQ(r.status, 0) << describe(r);
  profile::Profile p = read(out);
  ASSERT_GE(p.processes.size(), 2u);
  for (const auto& proc : p.processes)
    EXPECT_TRUE(proc.flags & SPROF_F_FINISHED) << proc.comm << " " << proc.pid;
  EXPECT_TRUE(p.finished());
  expect_report_finished(out);
}

// `sprofil record` killed with SIGKILL leaves its run directory with the processes' files, and
// the program runs on. `sprofil report DIR` gathers them as record would have, and says why
// they were not gathered; a directory without them is refused with the reason.
TEST(Exit, RunDirectoryOfAKilledRecordIsReadByReport) {
  TempDir dir;
  Spawned rec =
      spawn({kTool, "record", "--agent", "-o", dir / "k.sprof", "--", kProg, "burn", "0.6"});
  // The run directory, once the program's file is in it (at most 20 s).
  std::string run_dir;
  for (int i = 0; i < 400 && run_dir.empty(); ++i) {
    for (const std::string& name : list_dir(dir.path()))
      if (name.rfind(".k.sprof.sprofil-", 0) == 0 &&
          std::filesystem::exists(dir / name + "/p.sprof"))
        run_dir = dir / name;
    if (run_dir.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(run_dir.empty()) << ::testing::PrintToString(list_dir(dir.path()));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_EQ(kill(rec.pid, SIGKILL), 0);
  const Result killed = finish(std::move(rec));
  EXPECT_EQ(killed.status, 128 + SIGKILL);
  // The program runs on without record, and completes its file (at most 20 s).
  for (int i = 0; i < 400 && !read(run_dir + "/p.sprof").finished(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(read(run_dir + "/p.sprof").finished());
  const Result r = run({kTool, "report", run_dir, "--format", "json"});
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_NE(r.err.find("did not gather"), std::string::npos) << r.err;
  const Json j = Json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  ASSERT_EQ(j["processes"].size(), 1u) << r.out;
  // Sampled from the start until record's end, less what its last pass had not drained yet
  // (in drain mode the rings were record's): some, and not the whole 0.6 s.
  EXPECT_GT(samples_of(j, "burn_main"), 0) << r.out;
  EXPECT_LT(samples_of(j, "burn_main"), 600) << r.out;
  const Result none = run({kTool, "report", dir.path()});
  EXPECT_EQ(none.status, 1);
  EXPECT_NE(none.err.find("no profile of a run"), std::string::npos) << none.err;
  EXPECT_EQ(none.out, "");
}

TEST(Exit, AbortKeepsEverySampleAndTheToolReportsTheSignal) {
  TempDir dir;
  const std::string out = dir / "abort.sprof", truth_file = dir / "truth";
  Result r = record(out, {"--clock", precise_clock(), "-F", "2000"},
                    {kProg, "--truth", truth_file, "abort", "0.2"});
  EXPECT_EQ(r.status, 128 + SIGABRT) << describe(r);
  EXPECT_NE(r.err.find("signal 6"), std::string::npos) << r.err;
  const double cpu = read_truth(truth_file)["process_cpu"];
  profile::Profile p = read(out);
  EXPECT_FALSE(p.finished());
  expect_consistent(p, "abort");
  EXPECT_NEAR(static_cast<double>(p.total_samples()), cpu * 2000, 0.1 * cpu * 2000);
  EXPECT_EQ(run({kTool, "report", out}).status, 0);
}

// SIGKILL of the program (not the tool) at random moments, under each clock.
TEST(Exit, SigkillAtRandomMomentsLeavesAConsistentProfile) {
  const bool perf = perf_probe() == 0;
  std::mt19937 rng(20240607);
  std::uniform_int_distribution<int> delay_ms(100, 600);
  const char* clocks[] = {"auto", "cpu", "perf", "itimer", "wall"};
  TempDir dir;
  for (int k = 0; k < 5; ++k) {
    const std::string clock = clocks[k];
    const int delay = delay_ms(rng);
    if (clock == "perf" && !perf) continue;
    SCOPED_TRACE("run " + std::to_string(k) + ", clock " + clock + ", kill after " +
                 std::to_string(delay) + " ms");
    const std::string out = dir / ("kill" + std::to_string(k) + ".sprof");
    const std::string pidfile = dir / ("pid" + std::to_string(k));
    Spawned s = spawn({kTool, "record", "--agent", "--clock", clock, "-F", "1000", "-o", out, "--",
                       kProg, "forever", pidfile});
    pid_t child = 0;
    for (int i = 0; i < 5000 && child == 0; ++i) {  // the program writes its pid at start
      std::ifstream in(pidfile);
      if (!(in >> child)) {
        child = 0;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    ASSERT_GT(child, 0) << "the program never started";
    std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    ASSERT_EQ(kill(child, SIGKILL), 0);
    Result r = finish(s);
    EXPECT_EQ(r.status, 128 + SIGKILL) << describe(r);
    EXPECT_NE(r.err.find("signal 9"), std::string::npos) << r.err;
    profile::Profile p = read(out);
    EXPECT_FALSE(p.finished());
    EXPECT_EQ(p.pid, child);
    expect_consistent(p, "SIGKILL");
    Result rep = run({kTool, "report", out});
    EXPECT_EQ(rep.status, 0) << describe(rep);
    EXPECT_NE(rep.out.find("burn_main"), std::string::npos) << rep.out;
  }
}

// The fork tests: agent_prog's fork modes recorded at 2000 Hz with the clock under test into
// dir_/fork.sprof, their truth in dir_/truth (the child's in truth.child).
class Fork : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (std::string(GetParam()) == "perf") SKIP_WITHOUT_PERF();
  }
  Result record_fork(const Args& mode) {
    Args cmd{kProg, "--truth", truth_};
    cmd.insert(cmd.end(), mode.begin(), mode.end());
    return record(out_, {"--clock", GetParam(), "-F", "2000"}, cmd);
  }
  // Splits the run into its processes' images (explode_run): the name of the one of `pid`.
  std::string child_file(double pid) {
    explode_run(out_);
    return out_ + "." + std::to_string(static_cast<int>(pid));
  }
  std::string files() { return ::testing::PrintToString(list_dir(dir_.path())); }
  // A burn's samples at 2000 Hz: within 10% of its CPU time (the machine's noise), above
  // within 10% of its CPU time plus the steal the perf clock counted (steal_of). Below, the
  // cpu clock within 20%: its tick-checked timers fall short on a loaded machine (0.82 of a
  // kernel burn's CPU with two busy loops beside ctest -j3 on 2 cores).
  static void expect_burn(double got, const std::map<std::string, double>& truth,
                          const std::string& name) {
    const double cpu = truth.at(name), steal = steal_of(truth, name);
    const double low = std::string(GetParam()) == "cpu" ? 0.8 : 0.9;
    EXPECT_GE(got, low * cpu * 2000) << name << ": " << got << " samples";
    EXPECT_LE(got, 1.1 * (cpu + steal) * 2000) << name << ": " << got << ", steal " << steal;
  }

  TempDir dir_;
  const std::string out_ = dir_ / "fork.sprof", truth_ = dir_ / "truth";
};

// A forked child's burn is in FILE.PID (CHILD flag, its pid), not in the parent's file.
TEST_P(Fork, ChildWritesItsOwnFile) {
  Result r = record_fork({"fork", "0.2", "0.3"});
  ASSERT_EQ(r.status, 0) << describe(r);
  auto parent = read_truth(truth_);
  auto child = read_truth(truth_ + ".child");
  const int child_pid = static_cast<int>(child["child_pid"]);
  EXPECT_EQ(child_pid, static_cast<int>(parent["child_pid"]));
  // One run, one file: the run profile holds both processes.
  EXPECT_EQ(list_dir(dir_.path()),
            (std::vector<std::string>{"fork.sprof", "truth", "truth.child"}));
  const std::string cf = child_file(child_pid);
  ASSERT_TRUE(std::filesystem::exists(cf)) << "files: " << files();
  profile::Profile c = read(cf);
  EXPECT_TRUE(c.flags & SPROF_F_CHILD);
  EXPECT_TRUE(c.finished());
  EXPECT_EQ(c.pid, child_pid);
  EXPECT_EQ(c.ppid, static_cast<int>(parent["parent_pid"]));
  expect_consistent(c, "child");
  Json jc = report_json(cf);
  expect_burn(samples_of(jc, "burn_child"), child, "child_cpu");
  EXPECT_EQ(samples_of(jc, "burn_parent"), 0);

  profile::Profile p = read(out_);
  EXPECT_FALSE(p.flags & SPROF_F_CHILD);
  EXPECT_EQ(p.pid, static_cast<int>(parent["parent_pid"]));
  Json jp = report_json(out_);
  EXPECT_EQ(samples_of(jp, "burn_child"), 0) << "the child's burn leaked into the parent's file";
  expect_burn(samples_of(jp, "burn_parent"), parent, "parent_cpu");
}

// A forked child whose exec fails goes on sampling into a file of its own: the exec removed
// its empty file, and the failed exec makes it again. All of its burn after the failed exec
// is counted (before, it went into the removed file and was lost).
TEST_P(Fork, ChildWhoseExecFailsKeepsItsSamples) {
  Result r = record_fork({"fork", "0.05", "0.3", "failexec"});
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(r.err.find("no longer the profile"), std::string::npos) << r.err;
  auto child = read_truth(truth_ + ".child");
  const std::string cf = child_file(child["child_pid"]);
  ASSERT_TRUE(std::filesystem::exists(cf)) << "files: " << files();
  profile::Profile c = read(cf);
  EXPECT_TRUE(c.finished());
  EXPECT_TRUE(c.flags & SPROF_F_CHILD);
  expect_consistent(c, "child");
  expect_burn(samples_of(report_json(cf), "burn_child"), child, "child_cpu");
}

// A forked child that spends its time in the kernel and then execs: that time is in the
// child's file. The perf clock counts user space only, so it is the record parent's credit
// at the exec (the periods that ended in the kernel), added before the agent completes the
// file (before, the empty file was removed first and the credit went into it, lost).
TEST_P(Fork, KernelTimeBeforeAnExecIsKept) {
  Result r = record_fork({"forkexec", "0.2", "/bin/true"});
  ASSERT_EQ(r.status, 0) << describe(r);
  auto child = read_truth(truth_ + ".child");
  const std::string cf = child_file(child["child_pid"]);
  ASSERT_TRUE(std::filesystem::exists(cf)) << "files: " << files();
  profile::Profile c = read(cf);
  EXPECT_TRUE(c.finished());
  expect_consistent(c, "child");
  // 0.2 s at 2000 Hz: 400 samples, nearly all kernel time (the child's rusage: 96-100%). The
  // perf clock's split follows the kernel's (98-100% of the samples): within 10%. The cpu
  // clock's falls short of it, by a machine-dependent part: over 80% of the samples on an
  // Intel Xeon VM, 73-75% on an AMD EPYC VM (294-302 of 400 in three CI runs), 68-71% on the
  // AMD EPYC PVM guest of docs/benchmarks.md "After 6515f65" (273-285, three runs, one CI
  // failure at 70%); 60%.
  expect_burn(static_cast<double>(c.total_samples()), child, "child_cpu");
  if (std::string(GetParam()) == "perf")
    EXPECT_GT(static_cast<double>(c.system_samples()), 0.9 * child["child_system"] * 2000);
  else
    EXPECT_GT(static_cast<double>(c.system_samples()), 0.6 * child["child_cpu"] * 2000);
}

// In drain mode the record parent makes a forked child's file (drain_proto.hpp's
// kDrainChildFile): the child only maps it. The file is the one the child made itself before:
// its name, flags and pid, the parent's regions at the same offsets (the parent's records as
// they were at the fork), and the child's burn in it, the parent's not.
TEST(ForkDrain, RecordParentMakesTheChildsFile) {
  SKIP_WITHOUT_PERF();
  TempDir dir;
  const std::string out = dir / "fork.sprof", truth = dir / "truth";
  Result r =
      record(out, {"--clock", "perf", "-F", "2000"},
             {kProg, "--truth", truth, "fork", "0.2", "0.3"}, {{"SPROFIL_DRAIN_STATS", "1"}});
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_NE(r.err.find(" 1 forked children's files made, 0 refused"), std::string::npos) << r.err;
  // The child was forked with the file the record parent made (its parent process's): its
  // event went alone, and the parent took that file and its directory (drain_proto.hpp).
  EXPECT_NE(r.err.find(" 1 forked children's events taken without their files"), std::string::npos)
      << r.err;
  auto parent = read_truth(truth);
  auto child = read_truth(truth + ".child");
  const int child_pid = static_cast<int>(child["child_pid"]);
  explode_run(out);
  const std::string cf = out + "." + std::to_string(child_pid);
  ASSERT_TRUE(std::filesystem::exists(cf)) << ::testing::PrintToString(list_dir(dir.path()));
  profile::Profile c = read(cf), p = read(out);
  EXPECT_TRUE(c.flags & SPROF_F_CHILD);
  EXPECT_TRUE(c.finished());
  EXPECT_EQ(c.pid, child_pid);
  EXPECT_EQ(c.ppid, static_cast<int>(parent["parent_pid"]));
  ASSERT_EQ(c.regions.size(), p.regions.size());
  for (size_t i = 0; i < c.regions.size(); ++i) {
    EXPECT_EQ(c.regions[i].start, p.regions[i].start) << i;
    EXPECT_EQ(c.regions[i].end, p.regions[i].end) << i;
    EXPECT_EQ(c.regions[i].path, p.regions[i].path) << i;
  }
  expect_consistent(c, "child");
  // 0.3 s at 2000 Hz: within 10% of the child's CPU (and its steal), as the Fork tests.
  const double got = samples_of(report_json(cf), "burn_child");
  EXPECT_GE(got, 0.9 * child["child_cpu"] * 2000);
  EXPECT_LE(got, 1.1 * (child["child_cpu"] + steal_of(child, "child_cpu")) * 2000);
  EXPECT_EQ(samples_of(report_json(cf), "burn_parent"), 0);
  EXPECT_EQ(samples_of(report_json(out), "burn_child"), 0);
}

// In drain mode a forked child without its own file makes no flush exchange at its exec: the
// exec removes its event (perf.hpp's remove_on_exec), and the record parent, which sees the
// event end, drains it to its end and completes the file it made for the child's samples
// (drain_ends.cpp's event_ended): finished, with the child's CPU time up to the exec (its own
// counter's) and its samples. The program's and /bin/true's exits are watched: no flush at
// all in the run.
TEST(ForkDrain, AnExecEndsAForkedChildsSamplingWithoutAFlush) {
  SKIP_WITHOUT_PERF();
  TempDir dir;
  const std::string out = dir / "fork.sprof", truth = dir / "truth";
  Result r = record(out, {"--clock", "perf", "-F", "2000"},
                    {kProg, "--truth", truth, "forkexec", "0.2", "/bin/true"},
                    {{"SPROFIL_DRAIN_STATS", "1"}});
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_NE(r.err.find(" 0 flushes, 1 forked children's files completed at their events' end"),
            std::string::npos)
      << r.err;
  auto child = read_truth(truth + ".child");
  explode_run(out);
  const std::string cf = out + "." + std::to_string(static_cast<int>(child["child_pid"]));
  ASSERT_TRUE(std::filesystem::exists(cf)) << ::testing::PrintToString(list_dir(dir.path()));
  const profile::Profile c = read(cf);
  EXPECT_TRUE(c.finished());
  expect_consistent(c, "child");
  // Its CPU time: the process's at the event's opening plus the event's counter, against the
  // child's own clock read just before its exec (0.2 s, and its steal): within 10%.
  const double cpu = static_cast<double>(c.cpu_ns) * 1e-9;
  EXPECT_GE(cpu, 0.9 * child["child_cpu"]);
  EXPECT_LE(cpu, 1.1 * (child["child_cpu"] + steal_of(child, "child_cpu")));
  // 0.2 s at 2000 Hz, nearly all in the kernel (the record parent's credit at the end).
  const double got = static_cast<double>(c.total_samples());
  EXPECT_GE(got, 0.9 * child["child_cpu"] * 2000);
  EXPECT_LE(got, 1.1 * (child["child_cpu"] + steal_of(child, "child_cpu")) * 2000);
}

// agent_prog's `daemon 0.3 [now]` under drain mode at 2000 Hz: the daemon's thread is sampled
// within 10% of its CPU (and its steal), in a file of its own.
void expect_daemon_sampled(const std::string& how) {
  TempDir dir;
  const std::string out = dir / "d.sprof", truth = dir / "truth";
  Args cmd{kProg, "--truth", truth, "daemon", "0.3"};
  if (!how.empty()) cmd.push_back(how);
  Result r = record(out, {"--clock", "perf", "-F", "2000"}, cmd, {{"SPROFIL_DRAIN_STATS", "1"}});
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_NE(r.err.find(" 0 samples unplaced"), std::string::npos) << r.err;
  auto d = read_truth(truth + ".daemon");
  const std::string pid = std::to_string(static_cast<int>(d["daemon_pid"]));
  explode_run(out);
  const std::string df = out + "." + pid;
  ASSERT_TRUE(std::filesystem::exists(df))
      << ::testing::PrintToString(list_dir(dir.path())) << " " << r.err;
  const profile::Profile c = read(df);
  EXPECT_TRUE(c.flags & SPROF_F_CHILD);
  expect_consistent(c, "daemon");
  const double got = samples_of(report_json(df), "burn_daemon");
  EXPECT_GE(got, 0.9 * d["daemon_cpu"] * 2000);
  EXPECT_LE(got, 1.1 * (d["daemon_cpu"] + steal_of(d, "daemon_cpu")) * 2000);
}

// The daemon pattern in drain mode: a launcher (an exec'd image, its own file) forks a child
// and exits once the child runs; its file goes (removed here by the launcher itself, as the record
// parent removes one without samples). The child, pending (no file of its own), then starts a
// thread: its event comes alone, and the record parent takes it on the fds the child's first event
// brought (it holds the launcher's file no longer). Before, the parent asked for the file, the
// child could not open it, and the thread was not sampled.
TEST(ForkDrain, DaemonsThreadAfterItsLauncherIsGoneIsSampled) {
  SKIP_WITHOUT_PERF();
  expect_daemon_sampled("");
}

// The launcher exits right after its fork, and its child's first hand-over, which names the
// launcher's file, comes after the record parent has seen that end and removed the file
// (empty): the child waits for it in an atfork handler that runs before the agent's
// (early_fork.cpp), as it may under load. The parent keeps the files of ended processes a
// while (drain_files.cpp, ended_files). Before it did, such a daemon was not sampled ("cannot hand
// a thread's perf event ... not sampled"): in 16 of 25 runs without the wait, beside two busy loops
// on the 2-core VM. Three runs.
TEST(ForkDrain, DaemonOfALauncherThatExitsAtOnceIsSampled) {
  SKIP_WITHOUT_PERF();
  for (int k = 0; k < 3 && !HasFatalFailure(); ++k) {
    SCOPED_TRACE("run " + std::to_string(k));
    expect_daemon_sampled("now");
  }
}

// Each forked child draws its own random phase for its first period. 100 children of one
// process each spend about 0.6 ms of CPU after their fork (most of it after their event's
// hand-over) and _exit: each is due one period of 1 ms with probability about its time over
// the period, independently, so about half of them get a sample (sd 5). The generator was
// inherited: every child drew the phase its parent would have drawn next, and either nearly all
// of them got a sample or nearly none did (100, 97, 6, 100, 1 and 9 of 100 in six runs). Two
// runs, each held to 20 to 80.
TEST(ForkDrain, ForkedChildrenDrawTheirOwnPhases) {
  SKIP_WITHOUT_PERF();
  for (int k = 0; k < 2 && !HasFailure(); ++k) {
    SCOPED_TRACE("run " + std::to_string(k));
    TempDir dir;
    const std::string out = dir / "many.sprof";
    Result r = record(out, {"--clock", "perf", "-F", "1000"}, {kProg, "forkmany", "100", "600"});
    ASSERT_EQ(r.status, 0) << describe(r);
    profile::Profile p = read(out);
    int children = 0;  // forked children with samples (with none, they have no file)
    for (const auto& proc : p.processes) children += (proc.flags & SPROF_F_CHILD) != 0;
    EXPECT_GE(children, 20) << describe(r);
    EXPECT_LE(children, 80) << describe(r);
  }
}

INSTANTIATE_TEST_SUITE_P(Clocks, Fork, ::testing::Values("cpu", "perf"),
                         [](const auto& pi) { return std::string(pi.param); });

// bash runs two programs, the second of which execs a third: one file per exec'd program,
// FILE.PID, FILE.PID.1, ... in exec order for the same pid, and no empty leftover from bash's
// forks. A forked bash child that spent a period of CPU before its exec (the fork's page
// faults, its own file: a few ms on this VM, so at 2000 Hz it happens in about one run in
// five) took samples: its file is kept, under its pid, and the exec'd program's name follows.
TEST(Exec, OneFilePerExecdProgram) {
  TempDir dir;
  const std::string out = dir / "sh.sprof";
  const std::string script =
      "'" + kProg + "' burn 0.1; '" + kProg + "' burnexec 0.1 '" + kProg + "' split 0.1; exit 0";
  Result r = record(out, {"--clock", "cpu", "-F", "2000"}, {"bash", "-c", script});
  ASSERT_EQ(r.status, 0) << describe(r);
  // One run, one file: the run profile holds every process with samples.
  EXPECT_EQ(list_dir(dir.path()), (std::vector<std::string>{"sh.sprof"}));
  explode_run(out);
  std::map<std::string, profile::Profile> files;
  for (const std::string& name : list_dir(dir.path())) files[name] = read(dir / name);
  ASSERT_TRUE(files.count("sh.sprof")) << r.err;
  const std::string listing = ::testing::PrintToString(list_dir(dir.path())) + "\n" + r.err;
  // pid -> its programs' modes (bash for a forked child's own part) in the order of their
  // files' names: FILE.PID, then FILE.PID.1, FILE.PID.2.
  std::map<uint32_t, std::vector<std::string>> by_pid;
  std::map<std::string, std::string> by_mode;  // agent_prog mode -> file name
  for (auto& [name, p] : files) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(p.finished());
    ASSERT_FALSE(p.argv.empty());
    if (name == "sh.sprof") {
      EXPECT_NE(p.argv[0].find("bash"), std::string::npos);
      continue;
    }
    EXPECT_GT(p.delivered, 0u) << "empty leftover";
    const std::string base = "sh.sprof." + std::to_string(p.pid);
    EXPECT_TRUE(name == base || name.rfind(base + ".", 0) == 0) << listing;
    const bool forked_bash = p.argv[0].find("bash") != std::string::npos;
    by_pid[p.pid].push_back(forked_bash ? "bash" : p.argv.at(1));
    if (!forked_bash) by_mode[p.argv.at(1)] = name;
  }
  ASSERT_EQ(by_mode.size(), 3u) << listing;
  const uint32_t burnexec_pid = files[by_mode["burnexec"]].pid;
  const uint32_t burn_pid = files[by_mode["burn"]].pid;
  EXPECT_EQ(files[by_mode["split"]].pid, burnexec_pid);
  EXPECT_NE(burn_pid, burnexec_pid);
  EXPECT_EQ(by_pid.size(), 2u) << listing;
  // Each pid's files in name order are its programs in exec order, a forked bash's own part
  // (at most one, first) before them; no other file.
  auto with_fork = [](std::vector<std::string> programs, const std::vector<std::string>& got) {
    if (!got.empty() && got[0] == "bash") programs.insert(programs.begin(), "bash");
    return programs;
  };
  EXPECT_EQ(by_pid[burn_pid], with_fork({"burn"}, by_pid[burn_pid])) << listing;
  EXPECT_EQ(by_pid[burnexec_pid], with_fork({"burnexec", "split"}, by_pid[burnexec_pid]))
      << listing;
  // Each file holds its own program's burn only.
  EXPECT_GT(samples_of(report_json(dir / by_mode["burnexec"]), "burn_main"), 100);
  EXPECT_EQ(samples_of(report_json(dir / by_mode["burnexec"]), "burn_a"), 0);
  EXPECT_GT(samples_of(report_json(dir / by_mode["split"]), "burn_b"), 0);
}

// The CPU clock goes on across an exec: the file of an image that an exec started holds the
// process's CPU time, the images' before it included. `sprofil record` stores each image's own
// (record.cpp, own_cpu). Before, three images of 0.2 s each in one process said 0.2, 0.4 and
// 0.6 s: 1.2 s of process CPU for a run of 0.6 s, an effective rate of 500 Hz at 1000 Hz asked,
// and a warning that the samples covered only half of the CPU time.
TEST(Exec, EachImageCountsItsOwnCpuTime) {
  TempDir dir;
  const std::string out = dir / "e.sprof";
  Result r = record(out, {"--clock", precise_clock(), "-F", "1000"},
                    {kProg, "burnexec", "0.2", kProg, "burnexec", "0.2", kProg, "burn", "0.2"});
  ASSERT_EQ(r.status, 0) << describe(r);
  const profile::Profile p = read(out);
  ASSERT_EQ(p.processes.size(), 3u) << r.err;
  uint64_t sum = 0;
  for (const profile::Process& pr : p.processes) {
    SCOPED_TRACE(pr.name);
    EXPECT_EQ(pr.pid, p.processes[0].pid);
    // 0.2 s of burn and the image's start and end (a few ms), on a machine that may be busy.
    EXPECT_GT(pr.cpu_ns, 190'000'000u);
    EXPECT_LT(pr.cpu_ns, 300'000'000u);
    EXPECT_NEAR(pr.effective_hz, 1000, 150);
    sum += pr.cpu_ns;
  }
  // The images' times add up to the run's (its one process) but for the execs and loaders.
  ASSERT_GT(p.run_cpu_ns, 0u);
  EXPECT_NEAR(double(sum), double(p.run_cpu_ns), 0.05 * double(p.run_cpu_ns));
  EXPECT_NEAR(p.effective_hz, 1000, 150);
  const Result text = run({kTool, "report", out});
  EXPECT_EQ(text.out.find("cover only"), std::string::npos) << text.out;
  EXPECT_EQ(text.err.find("cover only"), std::string::npos) << text.err;
}

// The header's command line is the process image's own, byte for byte as /proc/PID/cmdline
// gives it (the agent joins it from the argv its constructor is called with): arguments that
// are empty, hold spaces or bytes above 127, under every clock.
TEST(Exec, HeaderCommandLineIsTheImagesOwn) {
  TempDir dir;
  const std::string saved = dir / "cmdline";
  // The shell saves its cmdline, then burns (a file without samples is not kept).
  const std::string script =
      "cat /proc/$$/cmdline > \"$0\"; i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done";
  const Args args = {"sh", "-c", script, saved, "two words", "", "caf\xc3\xa9", "-x"};
  for (const char* clock : {"auto", "cpu"}) {
    SCOPED_TRACE(clock);
    const std::string out = dir / (std::string(clock) + ".sprof");
    Result r = record(out, {"--clock", clock}, args);
    ASSERT_EQ(r.status, 0) << describe(r);
    std::ifstream in(saved, std::ios::binary);
    const std::string bytes{std::istreambuf_iterator<char>(in), {}};
    ASSERT_FALSE(bytes.empty());
    std::vector<std::string> want;  // each argument is NUL-terminated
    for (size_t at = 0; at < bytes.size();) {
      const size_t end = bytes.find('\0', at);
      want.push_back(bytes.substr(at, end - at));
      at = end + 1;
    }
    EXPECT_EQ(want, std::vector<std::string>(args.begin(), args.end()));
    const profile::Profile p = read(out);
    bool found = false;
    for (const profile::Process& proc : p.processes) {
      if (proc.argv.size() < 2 || proc.argv[1] != "-c") continue;  // not the shell
      found = true;
      EXPECT_EQ(proc.argv, want);
    }
    EXPECT_TRUE(found) << "no process of the shell in the profile\n" << describe(r);
  }
}

class ExecdShell : public ::testing::TestWithParam<const char*> {};

// A burning program execs a shell that burns, forks and execs under a fast clock: no
// profiling signal may reach an image without the handler (it would die of SIGPROF).
TEST_P(ExecdShell, IsNeverKilledByAProfilingSignal) {
  const std::string clock = GetParam();
  if (clock == "perf") SKIP_WITHOUT_PERF();
  TempDir dir;
  const std::string shell_work =
      "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; '" + kProg + "' burn 0.05; exit 3";
  for (const char* name : {"x0.sprof", "x1.sprof", "x2.sprof"}) {
    Result r = record(dir / name, {"--clock", clock, "-F", "10000"},
                      {kProg, "burnexec", "0.05", "sh", "-c", shell_work});
    EXPECT_EQ(r.status, 3) << name << ": " << describe(r);
  }
}

INSTANTIATE_TEST_SUITE_P(Clocks, ExecdShell, ::testing::Values("cpu", "itimer", "perf", "wall"),
                         [](const auto& pi) { return std::string(pi.param); });

class Threads : public ::testing::TestWithParam<const char*> {};

// Two threads started by a library constructor before the agent (through libc's own
// pthread_create) and two started by main: four equal burns, four equal shares.
TEST_P(Threads, EarlyAndLateThreadsGetEqualShares) {
  const std::string clock = GetParam();
  if (clock == "perf") SKIP_WITHOUT_PERF();
  TempDir dir;
  const std::string out = dir / "threads.sprof", truth_file = dir / "truth";
  Result r = record(out, {"--clock", clock, "-F", "2000"},
                    {kProg, "--truth", truth_file, "threads", "2", "0.25"},
                    {{"AGENT_EARLY_THREADS", "2"}});
  ASSERT_EQ(r.status, 0) << describe(r);
  auto truth = read_truth(truth_file);
  ASSERT_EQ(truth["early_threads"], 2);
  EXPECT_EQ(truth["early_before_agent"], 1) << "the early threads started after the agent";
  Json j = report_json(out);
  const char* fns[] = {"burn_early_0", "burn_early_1", "burn_late_0", "burn_late_1"};
  double mean = 0;
  for (const char* fn : fns) mean += samples_of(j, fn) / 4;
  ASSERT_GT(mean, 0);
  for (const char* fn : fns) {
    EXPECT_NEAR(samples_of(j, fn), mean, 0.1 * mean) << fn << "\n" << j["rows"].dump(1);
    const double want = truth[fn] * 2000;
    EXPECT_NEAR(samples_of(j, fn), want, 0.1 * want) << fn;
  }
}

INSTANTIATE_TEST_SUITE_P(Clocks, Threads, ::testing::Values("cpu", "perf"),
                         [](const auto& pi) { return std::string(pi.param); });

TEST(AgentAlone, PreloadWritesAValidProfile) {
  TempDir dir;
  const std::string out = dir / "alone.sprof", truth_file = dir / "truth";
  Result r = run({kProg, "--truth", truth_file, "burn", "0.2"}, {{"LD_PRELOAD", kRuntime},
                                                                 {"SPROFIL_OUTPUT", out},
                                                                 {"SPROFIL_HZ", "2000"},
                                                                 {"SPROFIL_CLOCK", precise_clock()},
                                                                 {"SPROFIL_STARTED", "\x01"}});
  ASSERT_EQ(r.status, 0) << describe(r);
  const double cpu = read_truth(truth_file)["process_cpu"];
  profile::Profile p = read(out);
  EXPECT_TRUE(p.finished());
  EXPECT_EQ(profile::clock_name(p.clock), precise_clock());
  EXPECT_EQ(p.requested_hz, 2000u);
  expect_consistent(p, "preload");
  EXPECT_NEAR(static_cast<double>(p.total_samples()), cpu * 2000, 0.1 * cpu * 2000);
  EXPECT_GT(samples_of(report_json(out), "burn_main"), 0.9 * cpu * 2000);
}

TEST(AgentAlone, InvalidClockSaysWhyAndTheProgramRuns) {
  TempDir dir;
  const std::string out = dir / "bad.sprof", truth_file = dir / "truth";
  Result r = run({kProg, "--truth", truth_file, "burn", "0.02"}, {{"LD_PRELOAD", kRuntime},
                                                                  {"SPROFIL_OUTPUT", out},
                                                                  {"SPROFIL_CLOCK", "sundial"},
                                                                  {"SPROFIL_STARTED", "\x01"}});
  EXPECT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(lines_with(r.err, "sprofil").size(), 1u) << r.err;
  EXPECT_EQ(r.err.rfind("sprofil: not profiling: ", 0), 0u) << r.err;
  EXPECT_TRUE(std::filesystem::exists(truth_file)) << "the program did not run to its end";
}

}  // namespace
}  // namespace sprofil::agent_test
