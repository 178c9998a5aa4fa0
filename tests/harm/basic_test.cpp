// A real program you did not write, natively and under every clock: a shell script that
// forks children, writes files, reads its own output back and exits with a status of its own.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include <sys/wait.h>

#include "harness.hpp"

namespace sprofil::harm_test {
namespace {

TEST(NoHarm, ShellScriptWithChildrenAndFiles) {
  const char* script =
      "set -e; for i in 1 2 3 4 5; do echo line $i >> log.txt; seq 1 2000 | sort -r > s$i; done;"
      "cat log.txt; wc -l s1 >&2; ln -s log.txt link; mkdir d; cp s1 d/; exit 3";
  expect_no_harm({"/bin/sh", "-c", script});
}

// A background job that outlives the run (record ends with its command) and starts a program
// after it. Natively nothing is printed. Under record the agent in that program finds the run's
// directory gone, and used to print "sprofil: not profiling: cannot create ...: No such file or
// directory" into the program's stderr (the harness leaves out sprofil's lines, so this test
// reads the job's stderr itself: every line of it is the program's).
TEST(NoHarm, JobThatOutlivesTheRunPrintsNothing) {
  std::vector<std::string> clocks_here{"auto", "cpu"};
  for (const std::string& clock : clocks_here) {
    SCOPED_TRACE(clock);
    TempDir dir;
    const std::string done = dir / "done", err = dir / "job.err";
    const std::string script = "(sleep 0.3; /bin/true; /bin/sh -c 'echo job' > '" + done +
                               ".tmp'; mv '" + done + ".tmp' '" + done + "') 2> '" + err +
                               "' & echo started";
    const Result r =
        agent_test::record(dir / "p.sprof", {"--clock", clock}, {"/bin/sh", "-c", script});
    ASSERT_EQ(r.status, 0) << agent_test::describe(r);
    EXPECT_EQ(r.out, "started\n");
    // The job ends about 0.3 s after the run; waited for up to 20 s.
    for (int i = 0; i < 200 && !std::filesystem::exists(done); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_TRUE(std::filesystem::exists(done)) << "the background job did not finish";
    std::ifstream in(err);
    const std::string job_err((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
    EXPECT_EQ(job_err, "");
  }
}

// A program that ends by a signal ends so under `sprofil record` too: the caller's waitpid sees
// it killed by that signal, not an exit of 128 + its number (a shell's "Segmentation fault", a
// script stopping at a ^C'd command, Python's negative returncode). A normal exit with such a
// number stays a normal exit.
TEST(NoHarm, ProgramKilledByASignalEndsRecordTheSameWay) {
  for (const char* how : {"SEGV", "ABRT", "INT", "TERM", "KILL", "PIPE", "thread-SEGV"}) {
    SCOPED_TRACE(how);
    expect_no_harm({SIG_DIE, how});
  }
  SCOPED_TRACE("exit 139");
  expect_no_harm({SIG_DIE, "exit", "139"});
  const Outcome native = run_once("", {SIG_DIE, "exit", "139"});
  EXPECT_EQ(native.ended, "exited 139");
}

// The samples up to the fault are in the profile: 50 ms of the main thread's CPU before the
// worker starts and the worker's 100 ms before it faults (the main thread burns meanwhile,
// not counted here), at 1 kHz at least 80% of 150 samples.
TEST(NoHarm, SamplesUpToAThreadsFaultAreKept) {
  TempDir dir;
  const Result r = agent_test::record(dir / "p.sprof", {"-F", "1000"}, {SIG_DIE, "thread-SEGV"});
  ASSERT_TRUE(WIFSIGNALED(r.wait_status)) << agent_test::describe(r);
  EXPECT_EQ(WTERMSIG(r.wait_status), SIGSEGV);
  EXPECT_NE(r.err.find("killed by signal 11"), std::string::npos) << r.err;
  profile::Profile p;
  std::string why;
  ASSERT_TRUE(profile::read_profile(dir / "p.sprof", &p, &why)) << why;
  EXPECT_GE(p.total_samples(), 120u);
}

// A program that changes its root and starts another there (chroot, a build root, a
// container's pivot_root): libsprofil's path in LD_PRELOAD names nothing in the new root, and
// the loader printed "ERROR: ld.so: object ... cannot be preloaded ... ignored." into the new
// program's stderr, which it does not print natively. The exec now passes an environment
// without sprofil where the library cannot be read (src/clock/exec_env.cpp). Needs root.
TEST(NoHarm, ChrootedProgramGetsNoLoaderError) {
  if (geteuid() != 0) GTEST_SKIP() << "chroot needs root (CAP_SYS_CHROOT)";
  const auto make_root = [](const std::string& cwd) {
    const std::string cmd = "cd '" + cwd +
                            "' && for f in /bin/dash $(ldd /bin/dash | grep -o '/[^ ]*'); do "
                            "mkdir -p root$(dirname $f) && cp $f root$f || exit 1; done";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  };
  expect_no_harm({"chroot", "root", "/bin/dash", "-c",
                  "echo in the root; echo to stderr >&2; echo made > /made.txt; exit 5"},
                 make_root);
}

// unshare of a user namespace and setns into a mount namespace are refused (EINVAL) to a
// process of more than one thread. A single-threaded program (unshare(1), nsenter(1),
// bubblewrap, a rootless container's set-up) makes them natively; under the sampler clock
// (auto's choice where perf events are denied) or with the live service, sprofil's own thread
// made them fail ("unshare failed: Invalid argument"). They now end around the call
// (src/clock/alone.cpp). Skipped where the native run cannot make them (no user namespaces,
// not root).
TEST(NoHarm, NamespaceCallsOfASingleThreadedProgramAsNatively) {
  const Args unshare_user{"unshare", "-U", "/bin/sh", "-c", "echo in a user namespace; exit 4"};
  const Outcome native = run_once("", unshare_user);
  if (native.out != "in a user namespace\n")
    GTEST_SKIP() << "unshare -U fails natively here: " << native.err;
  for (const Env& env : {Env{}, Env{{"SPROFIL_LIVE", "1"}}}) {
    SCOPED_TRACE(env.empty() ? "unshare -U" : "unshare -U, live service");
    expect_no_harm(unshare_user, {}, env);
  }
  // setns into the mount namespace of a process that made one.
  agent_test::Spawned target = agent_test::spawn({"unshare", "-m", "sleep", "20"});
  const std::string ns = "/proc/" + std::to_string(target.pid) + "/ns/mnt";
  std::string own;
  for (int i = 0; i < 200; ++i) {  // until unshare has made the namespace (at most 2 s)
    own = std::filesystem::read_symlink("/proc/self/ns/mnt").string();
    std::error_code ec;
    if (std::filesystem::read_symlink(ns, ec).string() != own && !ec) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  {
    SCOPED_TRACE("nsenter --mount");
    expect_no_harm({"nsenter", "--mount=" + ns, "/bin/sh", "-c", "echo in its mount namespace"});
  }
  kill(target.pid, SIGKILL);
  agent_test::finish(std::move(target));
}

// A program that drops root for another user (setpriv: KEEPCAPS, setresuid, capset, setresgid,
// then an exec of its command). Under the sampler clock it was killed by SIGABRT: glibc applies
// setresgid to every thread and aborts where one thread's result differs, and the sampler
// thread had not got back the capabilities that capset gives the calling thread alone
// (src/clock/alone.cpp now ends the runtime's threads around such calls). Under every clock
// the command, started as that user, printed "sprofil: not profiling: cannot create ...:
// Permission denied" twice into its stderr: it cannot enter the run's private directory, and
// now starts without the agent (src/clock/exec_env.cpp). And a program that drops privileges
// itself was told at its exit that objects loaded from then on were not counted. The agent
// writes nothing into stderr here (`silent`). Needs root.
TEST(NoHarm, PrivilegeDropOfASingleThreadedProgramAsNatively) {
  if (geteuid() != 0) GTEST_SKIP() << "dropping privileges needs root";
  const Args drop{"setpriv",
                  "--reuid=65534",
                  "--regid=65534",
                  "--clear-groups",
                  "/bin/sh",
                  "-c",
                  "id -u; id -g; echo to stderr >&2; exit 6"};
  for (const Env& env : {Env{}, Env{{"SPROFIL_LIVE", "1"}}}) {
    SCOPED_TRACE(env.empty() ? "setpriv" : "setpriv, live service");
    expect_no_harm(drop, {}, env, /*silent=*/true);
  }
  SCOPED_TRACE("a program that drops privileges itself");
  expect_no_harm({AGENT_DROP}, {}, {}, /*silent=*/true);
}

// A program that closed its stderr and opened a data file of its own on fd 2: sprofil's lines
// went into that file (here: the itimer clock saying that it moved away from the program's
// ITIMER_PROF). They now go only to the stderr the program started with
// (src/util/message.cpp), and the file holds the program's lines alone, under every clock.
TEST(NoHarm, NoMessageIntoAFileThatTookFdTwo) {
  expect_no_harm({AGENT_FD2});
  const Outcome native = run_once("", {AGENT_FD2});
  EXPECT_EQ(native.files.at("data.txt"), "first line of the program's data\nlast line\n");
}

// A program that locks its memory (mlockall(MCL_CURRENT | MCL_FUTURE), as real-time programs
// do) and then loads a 4.8 MB library: natively the lock holds the program's own pages; under
// sprofil it held the agent's counter arrays too (4 bytes per byte of text), 11 MB more at the
// lock and 26 MB more after the load here, memory the machine can never reclaim. The agent now
// unlocks its mappings (src/agent/mlock.cpp). Allowed above native: 3 MB, the runtime
// library's own pages (its data and bss, about 1.5 MB) with room for the heap's growth.
TEST(NoHarm, LockedMemoryAsNatively) {
  const std::string lib = "libcapstone.so.4";
  const auto locked = [](const Outcome& o, long* at_lock, long* after) {
    return sscanf(o.out.c_str(), "locked %ld %ld", at_lock, after) == 2;
  };
  const Outcome native = run_once("", {AGENT_MLOCK, lib});
  long n_lock = 0, n_after = 0;
  if (native.status == 4) GTEST_SKIP() << lib << " is not installed (scripts/deps.sh)";
  ASSERT_TRUE(locked(native, &n_lock, &n_after)) << native.out << native.err;
  for (const std::string& clock : clocks()) {
    SCOPED_TRACE("clock " + clock);
    const Outcome o = run_once(clock, {AGENT_MLOCK, lib});
    ASSERT_EQ(o.status, 0) << o.err;
    long at_lock = 0, after = 0;
    ASSERT_TRUE(locked(o, &at_lock, &after)) << o.out;
    EXPECT_LE(at_lock, n_lock + 3072) << "natively " << n_lock << " kB";
    EXPECT_LE(after, n_after + 3072) << "natively " << n_after << " kB";
  }
}

// A shell sets `_` in the environment of the program it runs to that program's path (bash
// scripts read it as $_ at their start, to tell whether they were sourced). Run through
// `sprofil record`, the program found record's path there; record now puts the command's path
// back, as the shell would have (src/record/record.cpp).
TEST(NoHarm, UnderscoreVariableNamesTheCommand) {
  TempDir dir;
  const Result native = agent_test::run({"bash", "-c", "printenv _"});
  const Result r = agent_test::run(
      {"bash", "-c", agent_test::kTool + " record -o '" + (dir / "p.sprof") + "' -- printenv _"});
  ASSERT_EQ(r.status, 0) << agent_test::describe(r);
  EXPECT_NE(native.out.find("printenv"), std::string::npos) << native.out;
  EXPECT_EQ(r.out, native.out);
}

}  // namespace
}  // namespace sprofil::harm_test
