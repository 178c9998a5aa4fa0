// A real program you did not write, natively and under every clock: a shell script that
// forks children, writes files, reads its own output back and exits with a status of its own.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.hpp"

namespace sprofil::harm_test {
namespace {

TEST(NoHarm, ShellScriptWithChildrenAndFiles) {
  const char* script =
      "set -e; for i in 1 2 3 4 5; do echo line $i >> log.txt; seq 1 2000 | sort -r > s$i; done;"
      "cat log.txt; wc -l s1 >&2; ln -s log.txt link; mkdir d; cp s1 d/; exit 3";
  expect_no_harm({"/bin/sh", "-c", script});
}

// Runs `sh -c "(sleep 0.3; [JOB_ENV] /bin/true; ...) 2> job.err & echo started"` under record
// in dir, with the clock and the environment given, checks the run, waits for the background
// job's end (20 s at the most) and returns the job's stderr, with what record said.
struct JobOutcome {
  Result record;
  std::string job_err;
};
JobOutcome run_job_that_outlives_the_run(const TempDir& dir, const std::string& clock,
                                         const std::string& job_env, const Env& env) {
  JobOutcome o;
  const std::string done = dir / "done", err = dir / "job.err";
  const std::string script = "(sleep 0.3; " + job_env + " /bin/true; /bin/sh -c 'echo job' > '" +
                             done + ".tmp'; mv '" + done + ".tmp' '" + done + "') 2> '" + err +
                             "' & echo started";
  o.record =
      agent_test::record(dir / "p.sprof", {"--clock", clock}, {"/bin/sh", "-c", script}, env);
  EXPECT_EQ(o.record.status, 0) << agent_test::describe(o.record);
  EXPECT_EQ(o.record.out, "started\n");
  for (int i = 0; i < 200 && !std::filesystem::exists(done); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_TRUE(std::filesystem::exists(done)) << "the background job did not finish";
  std::ifstream in(err);
  o.job_err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return o;
}

// A background job that outlives the run (record ends with its command) and starts a program
// after it. Natively nothing is printed. Under record the agent in that program finds the run's
// directory gone, and used to print "sprofil: not profiling: cannot create ...: No such file or
// directory" into the program's stderr (the harness leaves out sprofil's lines, so this test
// reads the job's stderr itself: every line of it is the program's).
TEST(NoHarm, JobThatOutlivesTheRunPrintsNothing) {
  for (const std::string clock : {"auto", "cpu"}) {
    SCOPED_TRACE(clock);
    TempDir dir;
    // The job ends about 0.3 s after the run.
    const JobOutcome o = run_job_that_outlives_the_run(dir, clock, "", {});
    EXPECT_EQ(o.job_err, "") << agent_test::describe(o.record);
  }
}

// The same background job, its program starting while record ends, at the points of the race
// that a loaded machine hit once in a few hundred runs of the test above, held there by a shim
// preloaded into record and the job (progs/slow_end_shim.cpp): record waits 1.5 s where it
// reads the run's directory at its end (and 1 s before it removes it); the job's program starts
// 0.3 s into that, and its agent's rename of its new file waits until the file is gone. Record
// used to read the directory and remove every entry in it while the directory stayed: the
// agent's file, half made, was removed under it, and it printed "sprofil: not profiling:
// cannot create ...: No such file or directory" into the job's stderr; record warned of a
// ".sprofil-tmp-" file "not a profile of this run". Record now ends the run for every agent at
// once, first, by renaming the directory away: the job's program is not profiled, and nothing
// is printed, in the job's stderr or record's.
TEST(NoHarm, ProgramStartingAsTheRunEndsPrintsNothing) {
  for (const std::string clock : {"auto", "cpu"}) {
    SCOPED_TRACE(clock);
    TempDir dir;
    const JobOutcome o = run_job_that_outlives_the_run(dir, clock, "SLOW_END_JOB=1",
                                                       {{"LD_PRELOAD", SLOW_END_SHIM}});
    EXPECT_EQ(o.record.err.find("warning"), std::string::npos) << o.record.err;
    EXPECT_EQ(o.job_err, "") << agent_test::describe(o.record);
    // Nothing of the run is left beside the profile.
    for (const auto& e : std::filesystem::directory_iterator(dir.path()))
      EXPECT_TRUE(e.path().filename() == "p.sprof" || e.path().filename() == "job.err" ||
                  e.path().filename() == "done")
          << e.path();
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

// A job as a shell runs one: argv in a process group of its own, stdout and stderr captured.
// With a pid file (the program writes its pid there), the program is sent SIGTSTP once it is
// there: to its pid alone (`kill -TSTP PID` from elsewhere; under record the command's, not
// record's) or, with `group`, to the job's group, as the terminal sends ^Z; without, the
// program stops itself. The shell's waitpid(WUNTRACED) then sees the job stop (within 10 s)
// or end; a stopped job is continued by its group's SIGCONT (`fg`, `bg`), its pid's alone
// (`kill -CONT PID`) or the program's alone (under record the command's, from the pid file), and
// its end waited for (20 s).
struct JobRun {
  std::string stop, end, out, err;
};

std::string how_ended(int st) {
  return WIFSIGNALED(st) ? "killed by signal " + std::to_string(WTERMSIG(st))
                         : "exited " + std::to_string(WEXITSTATUS(st));
}

// Starts argv as a shell starts a job: in a process group of its own, stdout and stderr into
// out and err. Its pid (the group's id).
pid_t start_job(const Args& argv, int out, int err) {
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> v;
    for (const std::string& a : argv) v.push_back(const_cast<char*>(a.c_str()));
    v.push_back(nullptr);
    execvp(v[0], v.data());
    _exit(127);
  }
  setpgid(pid, pid);
  return pid;
}

enum class Cont { kGroup, kJobPid, kProgramPid };

JobRun run_job(const Args& argv, const std::string& pidfile, bool group, Cont cont) {
  JobRun j;
  const int out = memfd_create("out", MFD_CLOEXEC), err = memfd_create("err", MFD_CLOEXEC);
  const pid_t pid = start_job(argv, out, err);
  const auto poll = [pid](int flags, int tries, int* st) {
    for (int i = 0; i < tries; ++i) {
      if (waitpid(pid, st, flags | WNOHANG) == pid) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  };
  pid_t prog = 0;
  if (!pidfile.empty()) {
    for (int i = 0; i < 2000 && !std::filesystem::exists(pidfile); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::ifstream in(pidfile);
    in >> prog;
    if (prog > 0) kill(group ? -pid : prog, SIGTSTP);
  }
  int st = 0;
  if (!poll(WUNTRACED, 2000, &st)) {
    j.stop = "no stop seen in 10 s";
    kill(-pid, SIGCONT);  // what a user would do from elsewhere, to get the terminal back
  } else if (WIFSTOPPED(st)) {
    j.stop = "stopped by signal " + std::to_string(WSTOPSIG(st));
    kill(cont == Cont::kGroup ? -pid : cont == Cont::kJobPid || prog <= 0 ? pid : prog, SIGCONT);
  } else {
    j.stop = "ended before a stop";
  }
  if (!WIFEXITED(st) && !WIFSIGNALED(st)) {
    if (!poll(0, 4000, &st)) {
      kill(-pid, SIGKILL);
      waitpid(pid, &st, 0);
      j.end = "did not end in 20 s";
    }
  }
  if (j.end.empty()) j.end = how_ended(st);
  j.out = agent_test::read_fd(out);
  j.err = agent_test::read_fd(err);
  close(out);
  close(err);
  return j;
}

// A job that stops stops under `sprofil record` too, and one that ignores ^Z does not.
// Natively the shell sees its child stopped and takes the terminal back ("Stopped"). A stop
// sent to the program alone (a program that stops itself to wait for a debugger,
// `kill -TSTP PID`) left the shell waiting for a record that still ran: no prompt until
// someone continued the program from elsewhere. Record now stops with the same signal, and when
// it is continued the program is too (src/record/relay.cpp, stop_with_command), whether `fg`
// continued the group or `kill -CONT` record alone; and record is continued when the program
// alone is (`kill -CONT` of the command's pid: record had stayed stopped for good, its caller
// waiting). Record ignores the terminal's ^Z itself: a program that ignores it ran on natively,
// and under record the job stopped (record's stop).
TEST(NoHarm, StoppedCommandStopsTheJobAsNatively) {
  struct Case {
    const char* name;
    Args prog;  // with "PIDFILE" for the pid file's path
    bool group;
  };
  const Case cases[] = {{"raise(SIGSTOP)", {SIG_STOP, "self", "STOP"}, false},
                        {"raise(SIGTSTP)", {SIG_STOP, "self", "TSTP"}, false},
                        {"kill -TSTP PID", {SIG_STOP, "outside", "PIDFILE"}, false},
                        {"^Z", {SIG_STOP, "outside", "PIDFILE"}, true},
                        {"^Z, ignored", {SIG_STOP, "ignore-tstp", "PIDFILE"}, true}};
  for (const Case& c : cases) {
    for (const Cont cont : {Cont::kGroup, Cont::kJobPid, Cont::kProgramPid}) {
      if (cont == Cont::kProgramPid && c.prog.back() != "PIDFILE") continue;
      SCOPED_TRACE(std::string(c.name) + (cont == Cont::kGroup    ? ", fg"
                                          : cont == Cont::kJobPid ? ", kill -CONT PID"
                                                                  : ", kill -CONT PROGRAM"));
      TempDir dir;
      const auto job = [&](const Args& before, const std::string& pids) {
        Args a = before;
        for (const std::string& x : c.prog) a.push_back(x == "PIDFILE" ? pids : x);
        const bool with_pids = c.prog.back() == "PIDFILE";
        return run_job(a, with_pids ? pids : "", c.group, cont);
      };
      const JobRun native = job({}, dir / "native.pid");
      ASSERT_EQ(native.end, "exited 0") << native.stop;
      const JobRun recorded =
          job({agent_test::kTool, "record", "-o", dir / "p.sprof", "--"}, dir / "record.pid");
      EXPECT_EQ(recorded.stop, native.stop) << recorded.err;
      EXPECT_EQ(recorded.end, native.end);
      EXPECT_EQ(recorded.out, native.out);
    }
  }
}

// argv with its stderr a pipe whose reader has gone (`cmd 2>&1 | head` after head ended): how
// it ended.
std::string end_with_stderr_reader_gone(const Args& argv) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return "no pipe";
  close(p[0]);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], 2);
    std::vector<char*> v;
    for (const std::string& a : argv) v.push_back(const_cast<char*>(a.c_str()));
    v.push_back(nullptr);
    execvp(v[0], v.data());
    _exit(127);
  }
  close(p[1]);
  int st = 0;
  waitpid(pid, &st, 0);
  return how_ended(st);
}

// `sprofil record -- cmd 2>&1 | head`: record's closing line went into a pipe whose reader had
// ended, and SIGPIPE killed record after the command had exited 0 (a pipefail script failed,
// PIPESTATUS said 141). Record ignores SIGPIPE for itself; the command keeps the caller's (a
// command that writes into that pipe dies of it, natively and under record alike).
TEST(NoHarm, StderrReaderGoneKeepsTheCommandsStatus) {
  for (const std::string cmd : {"sleep 0.1; exit 0", "exit 4", "echo to stderr >&2; exit 0"}) {
    SCOPED_TRACE(cmd);
    TempDir dir;
    const Args prog{"/bin/sh", "-c", cmd};
    Args under{agent_test::kTool, "record", "-o", dir / "p.sprof", "--"};
    under.insert(under.end(), prog.begin(), prog.end());
    EXPECT_EQ(end_with_stderr_reader_gone(under), end_with_stderr_reader_gone(prog));
    profile::Profile p;
    std::string why;
    EXPECT_TRUE(profile::read_profile(dir / "p.sprof", &p, &why)) << why;
  }
}

// The agent's own lines go to the program's stderr. Where its reader had gone, the write raised
// SIGPIPE and killed a program that never wrote there itself (exit 0 natively). The agent now
// writes with SIGPIPE blocked and takes back the one it raised (src/util/message.cpp). Here
// the agent cannot make its file (a directory that does not exist) and says so.
TEST(NoHarm, AgentLineIntoAPipeWithoutReaderKillsNothing) {
  const Args prog{"/bin/sh", "-c", "sleep 0.05; exit 0"};
  Args preloaded{"env", "LD_PRELOAD=" + agent_test::kRuntime,
                 "SPROFIL_OUTPUT=/nonexistent/sprofil/p.sprof"};
  preloaded.insert(preloaded.end(), prog.begin(), prog.end());
  EXPECT_EQ(end_with_stderr_reader_gone(prog), "exited 0");
  EXPECT_EQ(end_with_stderr_reader_gone(preloaded), "exited 0");
  // The same program says why where its stderr is read.
  const Result r = agent_test::run(preloaded);
  EXPECT_NE(r.err.find("not profiling"), std::string::npos) << r.err;
}

// Whether pid has ended (gone, or a zombie not yet reaped by whoever inherited it), waited for
// up to 5 s.
bool ends_within_5s(pid_t pid) {
  for (int i = 0; i < 500; ++i) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string pid_s, comm, state;
    if (!(stat >> pid_s >> comm >> state) || state == "Z") return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// A supervisor starts a command with a parent-death signal (PR_SET_PDEATHSIG, SIGKILL: it must
// not outlive the supervisor) and dies. Natively the command dies with it. Under record the
// signal was record's alone (fork clears it): record died and the command ran on, orphaned.
// Record now gives the command its own parent-death signal.
TEST(NoHarm, ParentDeathSignalReachesTheCommand) {
  TempDir dir;
  for (const bool under : {false, true}) {
    SCOPED_TRACE(under ? "under record" : "natively");
    const std::string pids = dir / (under ? "record.pid" : "native.pid");
    Args a{SIG_STOP, "pdeath", pids};
    if (under) a.insert(a.end(), {agent_test::kTool, "record", "-o", dir / "p.sprof", "--"});
    a.insert(a.end(),
             {"/bin/sh", "-c",
              "echo $$ > " + pids + ".tmp; mv " + pids + ".tmp " + pids + "; exec sleep 20"});
    const Result r = agent_test::run(a);
    ASSERT_EQ(r.status, 0) << agent_test::describe(r);
    std::ifstream in(pids);
    pid_t command = 0;
    in >> command;
    ASSERT_GT(command, 0);
    const bool ended = ends_within_5s(command);
    if (!ended) kill(command, SIGKILL);
    EXPECT_TRUE(ended) << "the command outlived the supervisor that died";
  }
}

// `chrt -R`: a real-time policy with SCHED_RESET_ON_FORK holds across exec, not fork. Natively
// the command runs with it; under record the fork that starts the command reset it to
// SCHED_OTHER. Needs the privilege to set a real-time policy (skipped without).
TEST(NoHarm, ResetOnForkPolicyIsTheCommandsToo) {
  const Args show{"/bin/sh", "-c", "chrt -p $$ | cut -d: -f2; nice"};
  for (const char* policy : {"-f", "-r"}) {
    SCOPED_TRACE(policy);
    Args native{"chrt", "-R", policy, "7"};
    native.insert(native.end(), show.begin(), show.end());
    const Result n = agent_test::run(native);
    if (n.status != 0) GTEST_SKIP() << "chrt -R " << policy << " 7 fails here: " << n.err;
    ASSERT_NE(n.out.find("RESET_ON_FORK"), std::string::npos) << n.out;
    TempDir dir;
    Args under{"chrt", "-R", policy, "7", agent_test::kTool, "record", "-o", dir / "p.sprof", "--"};
    under.insert(under.end(), show.begin(), show.end());
    const Result r = agent_test::run(under);
    EXPECT_EQ(r.status, 0) << agent_test::describe(r);
    EXPECT_EQ(r.out, n.out);
  }
}

// `sprofil record -q`: the command's stderr is its own, byte for byte: no closing line from
// record, no line from the agent (here the itimer clock's note that the program took SIGPROF,
// which it prints without -q).
TEST(NoHarm, QuietRecordLeavesTheCommandsStderrItsOwn) {
  TempDir dir;
  const Args prog{"/bin/sh", "-c", "echo out; echo err >&2; exit 2"};
  Args quiet{agent_test::kTool, "record", "-q", "-o", dir / "p.sprof", "--"};
  quiet.insert(quiet.end(), prog.begin(), prog.end());
  const Result n = agent_test::run(prog), r = agent_test::run(quiet);
  EXPECT_EQ(r.status, n.status);
  EXPECT_EQ(r.out, n.out);
  EXPECT_EQ(r.err, n.err);
  profile::Profile p;
  std::string why;
  EXPECT_TRUE(profile::read_profile(dir / "p.sprof", &p, &why)) << why;
  const Args own{SIG_OWN_SIGPROF, "sigaction"};
  for (const bool q : {false, true}) {
    Args a{agent_test::kTool, "record", "--clock", "itimer", "-o", dir / "own.sprof"};
    if (q) a.push_back("-q");
    a.push_back("--");
    a.insert(a.end(), own.begin(), own.end());
    const Result o = agent_test::run(a);
    EXPECT_EQ(o.status, 0) << agent_test::describe(o);
    const bool said = o.err.find("sprofil: the program took SIGPROF") != std::string::npos;
    EXPECT_EQ(said, !q) << o.err;
    EXPECT_EQ(o.err.find("sprofil record:") != std::string::npos, !q) << o.err;
  }
}

// `sprofil record` as the first process of a pid namespace (a container's entrypoint): the
// orphans of the command's tree are record's, where natively they were the command's (bash
// reaps them). Record left them zombies for the run's length; it now reaps them. Needs
// unshare -p (root).
TEST(NoHarm, OrphansOfAContainersFirstProcessAreReaped) {
  const std::string script =
      "(sleep 0.1 &); sleep 0.6; echo zombies=$(grep -s '^State:.Z' /proc/[0-9]*/status | wc -l)";
  const Args ns{"unshare", "--pid", "--fork", "--mount-proc"};
  Args native = ns;
  native.insert(native.end(), {"/bin/bash", "-c", script});
  const Result n = agent_test::run(native);
  if (n.status != 0 || n.out != "zombies=0\n")
    GTEST_SKIP() << "unshare --pid fails or differs here: " << agent_test::describe(n);
  TempDir dir;
  Args under = ns;
  under.insert(under.end(), {agent_test::kTool, "record", "-q", "-o", dir / "p.sprof", "--",
                             "/bin/bash", "-c", script});
  const Result r = agent_test::run(under);
  EXPECT_EQ(r.status, 0) << agent_test::describe(r);
  EXPECT_EQ(r.out, n.out);
}

// SIGUSR1 (a daemon's reload, dd's progress) sent to a job under record: to the job's group
// (`kill -USR1 %1`) the command gets it once, as natively; to the job's pid (record's) it
// killed record, which wrote no profile and left the command orphaned. Record now ignores it
// (relay.hpp: sent to record alone it does not reach the command).
TEST(NoHarm, UserSignalToTheJobKeepsRecordAndReachesTheCommandOnce) {
  for (const bool group : {true, false}) {
    SCOPED_TRACE(group ? "to the group" : "to record's pid");
    TempDir dir;
    const auto job = [&](const Args& before, const std::string& pids) {
      Args a = before;
      a.insert(a.end(), {SIG_STOP, "usr1", pids});
      const int out = memfd_create("out", MFD_CLOEXEC);
      const pid_t pid = start_job(a, out, 2);
      for (int i = 0; i < 2000 && !std::filesystem::exists(pids); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      kill(group ? -pid : pid, SIGUSR1);
      int st = 0;
      waitpid(pid, &st, 0);
      const std::string printed = agent_test::read_fd(out);
      close(out);
      return how_ended(st) + ", " + printed;
    };
    const std::string native = job({}, dir / "native.pid");
    EXPECT_EQ(native, "exited 0, usr1 1\n");
    const std::string under =
        job({agent_test::kTool, "record", "-q", "-o", dir / "p.sprof", "--"}, dir / "record.pid");
    EXPECT_EQ(under, group ? native : "exited 0, usr1 0\n");
    profile::Profile p;
    std::string why;
    EXPECT_TRUE(profile::read_profile(dir / "p.sprof", &p, &why)) << why;
  }
}

// A caller that ignores SIGCHLD (a disposition exec keeps: some daemons and launchers start
// their commands so) had the kernel reap record's command at its end: record could not read
// its status and ended with 0 whatever the command's was.
TEST(NoHarm, CallerIgnoringSigchldGetsTheCommandsStatus) {
  for (const std::string end : {"exit 3", "kill -TERM $$"}) {
    SCOPED_TRACE(end);
    TempDir dir;
    const Args cmd{"/bin/sh", "-c", "echo out; " + end};
    Args native{SIG_STOP, "ignore-chld"},
        recorded{SIG_STOP, "ignore-chld", agent_test::kTool, "record", "-o", dir / "p.sprof", "--"};
    native.insert(native.end(), cmd.begin(), cmd.end());
    recorded.insert(recorded.end(), cmd.begin(), cmd.end());
    const Result n = agent_test::run(native), r = agent_test::run(recorded);
    EXPECT_EQ(how_ended(r.wait_status), how_ended(n.wait_status)) << agent_test::describe(r);
    EXPECT_EQ(r.out, n.out);
  }
}

// The samples up to the fault are in the profile: 50 ms of the main thread's CPU before the
// worker starts and the worker's 100 ms before it faults (the main thread burns meanwhile,
// not counted here), at 1 kHz at least 80% of 150 samples.
TEST(NoHarm, SamplesUpToAThreadsFaultAreKept) {
  TempDir dir;
  // (in dir: the program writes a file into its working directory)
  const Result r = agent_test::run({agent_test::kTool, "record", "-F", "1000", "-o",
                                    dir / "p.sprof", "--", SIG_DIE, "thread-SEGV"},
                                   {}, dir.path());
  ASSERT_TRUE(WIFSIGNALED(r.wait_status)) << agent_test::describe(r);
  EXPECT_TRUE(std::filesystem::exists(dir / "before.txt"));
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

// The live service's thread mid-exchange with a client (which held it up to 5 s) when the
// program drops root as setpriv does (KEEPCAPS, setresuid, capset, setresgid): the runtime
// awaited that thread's end 20 ms at most, so it lived on through the calls without the
// capabilities that capset gave back to the main thread alone, and glibc aborted the program at
// setresgid (its result differed in that thread; a CI run of the test above met it under load).
// Now the client is cut off and the thread's end awaited. The client connects and sends
// nothing, and stays connected till the program has ended: the program ends as natively, its
// ids printed.
TEST(NoHarm, PrivilegeDropWhileALiveClientIsServedAsNatively) {
  if (geteuid() != 0) GTEST_SKIP() << "dropping privileges needs root";
  TempDir dir;
  const std::string go = dir / "go", run_dir = dir / "run";
  std::filesystem::create_directory(run_dir);
  std::filesystem::permissions(run_dir, std::filesystem::perms::owner_all);
  { std::ofstream(go.c_str()) << "go\n"; }
  const Result native = agent_test::run({AGENT_DROP, "keepcaps", go});
  ASSERT_EQ(native.status, 0) << native.err;
  ASSERT_EQ(native.out, "uid 65534 gid 65534\n");
  std::filesystem::remove(go);
  agent_test::Spawned rec =
      agent_test::spawn({agent_test::kTool, "record", "--agent", "--live", "-o", dir / "p.sprof",
                         "--", AGENT_DROP, "keepcaps", go},
                        {{"XDG_RUNTIME_DIR", run_dir}});
  // The program's socket (record's child), at most 10 s.
  std::string sock;
  for (int i = 0; i < 1000 && sock.empty(); ++i) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(run_dir + "/sprofil", ec))
      if (e.path().extension() == ".sock") sock = e.path();
    if (sock.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_FALSE(sock.empty()) << "no live socket";
  const int client = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(client, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", sock.c_str());
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << strerror(errno);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // it waits for the request
  { std::ofstream(go.c_str()) << "go\n"; }
  const Result r = agent_test::finish(std::move(rec));
  close(client);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(WIFEXITED(r.wait_status)) << r.wait_status;
  EXPECT_EQ(r.out, native.out);
  EXPECT_EQ(program_stderr(r.err), native.err);
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
