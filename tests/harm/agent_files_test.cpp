// How the agent creates its files. Every profile is a
// private temporary (O_EXCL, O_NOFOLLOW, mode 0600) renamed into place, so a link or a file
// planted at the output path by another user is never followed, truncated or mapped; a
// setuid program linked with the library ignores the caller's SPROFIL_* variables.
#include <sys/statvfs.h>

#include "agent_common.hpp"

namespace sprofil::harm_test {
namespace {

mode_t mode_of(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
}

// Runs cmd as `nobody` (setpriv), checking it worked.
void as_nobody(const Args& cmd) {
  Args a{"setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"};
  a.insert(a.end(), cmd.begin(), cmd.end());
  Result r = agent_test::run(a);
  ASSERT_EQ(r.status, 0) << agent_test::describe(r);
}

#define SKIP_UNLESS_ROOT()                                                                 \
  do {                                                                                     \
    if (geteuid() != 0)                                                                    \
      GTEST_SKIP() << "needs root: it plays an unprivileged user (nobody) against a root " \
                      "run";                                                               \
    if (agent_test::run({"setpriv", "--version"}).status != 0)                             \
      GTEST_SKIP() << "needs setpriv (util-linux) to run commands as another user";        \
  } while (0)

TEST(AgentFiles, ProfilesAreCreatedPrivate) {
  TempDir out;
  // The agent alone and the tool's (a later image's FILE.PID.N: LaterImageNeverReplacesAName).
  const std::string prof = out / "p.sprof";
  Outcome o = run_once("", {kBusy, "50"}, {}, agent_env(prof));
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(mode_of(prof), 0600u);
  Result r = agent_test::record(out / "r.sprof", {}, {kBusy, "50"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(mode_of(out / "r.sprof"), 0600u);
  // A stricter umask makes it stricter still; no temporary is left behind.
  // (set in the shell that execs the program, so it applies when the agent starts)
  r = agent_test::run({"/bin/sh", "-c",
                       "umask 0277 && exec env LD_PRELOAD=\"$1\" SPROFIL_OUTPUT=\"$2\" \"$3\" 50",
                       "sh", agent_test::kRuntime, out / "u.sprof", kBusy});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(mode_of(out / "u.sprof"), 0400u);
  EXPECT_EQ(agent_test::list_dir(out.path()),
            (std::vector<std::string>{"p.sprof", "r.sprof", "u.sprof"}));
}

// The profile's mappings in the program: the header's and one for the records of every object
// found at start (and one per dlopen after), not one per object. /bin/cat of its own maps has
// five objects (cat, libc, the loader, the vDSO, the agent), each a record; a mapping each was
// six mappings of the file (with 5,000 objects, 5,006 of the program's 65,530 allowed).
TEST(AgentFiles, ProfileTakesTwoMappingsWhateverTheObjects) {
  auto count = [](const std::string& maps, const std::string& needle) {
    size_t n = 0;
    std::istringstream in(maps);
    for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
    return n;
  };
  TempDir out;
  const std::string prof = out / "p.sprof";
  Outcome alone = run_once("", {"/bin/cat", "/proc/self/maps"}, {}, agent_env(prof));
  ASSERT_EQ(alone.status, 0) << alone.err;
  EXPECT_GE(count(alone.out, "libc.so"), 1u) << alone.out;
  EXPECT_EQ(count(alone.out, "/p.sprof"), 2u) << alone.out;
  Outcome rec = run_once("auto+agent", {"/bin/cat", "/proc/self/maps"});
  ASSERT_EQ(rec.status, 0) << rec.err;
  EXPECT_EQ(count(rec.out, ".run.sprof.sprofil-"), 2u) << rec.out;  // the run's directory
}

// Drain mode (record --agent where perf events are allowed): the record parent counts into
// the arrays, and the agent writes each record's page with the pwrite that reserves its space,
// so the program's start faults in no page of its records' mapping (the file from its second
// page on): nothing of it is resident, a page fault and its page-table work less per object at
// every start (docs/benchmarks.md, "After 6515f65"). With the cpu clock the agent fills the
// records through the mapping, and they are resident.
TEST(AgentFiles, DrainModeStartTouchesNoRecordPage) {
  SKIP_WITHOUT_PERF();
  // The Rss of the run's file mapped from its second page (the records), -1 if not mapped.
  auto records_kb = [](const std::string& smaps) -> long {
    std::istringstream in(smaps);
    bool in_records = false;
    for (std::string line; std::getline(in, line);) {
      if (line.find(".run.sprof.sprofil-") != std::string::npos)
        in_records = line.find(" 00001000 ") != std::string::npos;
      else if (in_records && line.rfind("Rss:", 0) == 0)
        return std::stol(line.substr(4));
    }
    return -1;
  };
  Outcome drain = run_once("auto+agent", {"/bin/cat", "/proc/self/smaps"});
  ASSERT_EQ(drain.status, 0) << drain.err;
  EXPECT_EQ(records_kb(drain.out), 0) << drain.out;
  Outcome cpu = run_once("cpu", {"/bin/cat", "/proc/self/smaps"});
  ASSERT_EQ(cpu.status, 0) << cpu.err;
  EXPECT_GT(records_kb(cpu.out), 0) << cpu.out;
}

// A forked child's profile is 0600 too and never replaces an existing FILE.PID: the
// program is exec'd with SPROFIL_STARTED (a later image of a run), so it takes FILE.PID,
// where a link has been planted first.
TEST(AgentFiles, LaterImageNeverReplacesAName) {
  TempDir out;
  const std::string prof = out / "p.sprof";
  const std::string target = out / "target";
  { std::ofstream(target) << "target\n"; }
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  Env env = agent_env(prof);
  env.emplace_back("SPROFIL_STARTED", "1");
  const pid_t pid = fork();
  if (pid == 0) {
    char c;
    close(go[1]);
    if (read(go[0], &c, 1) != 1) _exit(120);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    const int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    execl(kBusy.c_str(), kBusy.c_str(), "100", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(go[0]);
  const std::string mine = prof + "." + std::to_string(pid);
  ASSERT_EQ(symlink(target.c_str(), mine.c_str()), 0);
  ASSERT_EQ(write(go[1], "x", 1), 1);
  close(go[1]);
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  EXPECT_TRUE(slurp(target) == "target\n") << "the link's target changed";
  EXPECT_EQ(std::filesystem::read_symlink(mine).string(), target);
  const std::string taken = mine + ".1";
  EXPECT_EQ(mode_of(taken), 0600u);
  const profile::Profile p = agent_test::read(taken);
  EXPECT_EQ(p.pid, pid);
}

// Root profiles into a sticky world-writable directory where `nobody` planted a symlink to a
// root-only file at the output path, and (second run) a file of its own. The root-only file
// is unchanged, the planted file's data is not truncated (nobody kept a second link to it),
// the program is not killed and the run profiles normally.
TEST(AgentFiles, PlantedLinkAndFileInStickyDirectory) {
  SKIP_UNLESS_ROOT();
  TempDir base;
  const std::string shared = base / "shared", secret = base / "secret";
  ASSERT_EQ(mkdir(shared.c_str(), 0777), 0);
  ASSERT_EQ(chmod(shared.c_str(), 01777), 0);
  ASSERT_EQ(chmod(base.path().c_str(), 0755), 0);
  { std::ofstream(secret) << "root only\n"; }
  ASSERT_EQ(chmod(secret.c_str(), 0600), 0);
  const std::string out = shared + "/run.sprof";
  const Outcome native = run_once("", {kBusy, "100"});

  // 1. A symlink to the root-only file.
  as_nobody({"ln", "-s", secret, out});
  Outcome o = run_once("", {kBusy, "100"}, {}, agent_env(out));
  EXPECT_EQ(o.status, native.status) << o.err;
  EXPECT_EQ(o.out, native.out);
  EXPECT_TRUE(slurp(secret) == "root only\n") << "the root-only file changed";
  struct stat st;
  ASSERT_EQ(lstat(out.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_GT(agent_test::read(out).delivered, 0u);
  ASSERT_EQ(unlink(out.c_str()), 0);

  // 2. A file of nobody's (with a second link it keeps), world-writable.
  const std::string keep = shared + "/keep";
  as_nobody({"/bin/sh", "-c",
             "printf planted > '" + out + "' && chmod 666 '" + out + "' && ln '" + out + "' '" +
                 keep + "'"});
  o = run_once("", {kBusy, "100"}, {}, agent_env(out));
  EXPECT_EQ(o.status, native.status) << o.err;
  EXPECT_EQ(o.out, native.out);
  EXPECT_TRUE(slurp(keep) == "planted") << "the planted file's data changed";
  ASSERT_EQ(lstat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_GT(agent_test::read(out).delivered, 0u);

  // 3. Under the tool, with the link planted again.
  ASSERT_EQ(unlink(out.c_str()), 0);
  as_nobody({"ln", "-s", secret, out});
  Result r = agent_test::record(out, {}, {kBusy, "100"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, native.out);
  EXPECT_TRUE(slurp(secret) == "root only\n") << "the root-only file changed";
  EXPECT_GT(agent_test::read(out).delivered, 0u);
}

// An unprivileged run where nobody (a different user) planted a file of its own at the
// output path in a sticky directory: the sticky bit forbids replacing it, so the agent says it
// cannot create the profile and the program runs as natively; the planted file is untouched.
TEST(AgentFiles, UnprivilegedRunFailsClearlyOnAPlantedFile) {
  SKIP_UNLESS_ROOT();
  TempDir base;
  const std::string shared = base / "shared";
  ASSERT_EQ(mkdir(shared.c_str(), 0777), 0);
  ASSERT_EQ(chmod(shared.c_str(), 01777), 0);
  ASSERT_EQ(chmod(base.path().c_str(), 0755), 0);
  const std::string out = shared + "/run.sprof";
  as_nobody({"/bin/sh", "-c", "printf planted > '" + out + "' && chmod 666 '" + out + "'"});
  const Outcome native = run_once("", {kBusy, "50"});
  // The victim: an unprivileged user other than nobody (uid 4242); the agent is preloaded into
  // the program only (env runs after setpriv dropped root).
  Args cmd{"setpriv",
           "--reuid=4242",
           "--regid=4242",
           "--clear-groups",
           "env",
           "LD_PRELOAD=" + agent_test::kRuntime,
           "SPROFIL_OUTPUT=" + out,
           kBusy,
           "50"};
  Result r = agent_test::run(cmd);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, native.out);
  EXPECT_FALSE(agent_test::lines_with(r.err, "not profiling: cannot create").empty()) << r.err;
  EXPECT_TRUE(slurp(out) == "planted") << "the planted file changed";
  // No temporary left behind.
  EXPECT_EQ(agent_test::list_dir(shared), std::vector<std::string>{"run.sprof"});
}

// A setuid-root program linked with libsprofil, run by nobody with SPROFIL_OUTPUT pointing
// into a root-only directory: nothing is created there and the program behaves as natively.
TEST(AgentFiles, SetuidProgramIgnoresTheCallersVariables) {
  SKIP_UNLESS_ROOT();
  TempDir base;
  struct statvfs vfs;
  ASSERT_EQ(statvfs(base.path().c_str(), &vfs), 0);
  if (vfs.f_flag & ST_NOSUID)
    GTEST_SKIP() << base.path() << " is on a nosuid filesystem: a setuid program cannot be tried";
  ASSERT_EQ(chmod(base.path().c_str(), 0755), 0);
  const std::string prog = base / "agent_setuid", rootonly = base / "rootonly";
  std::filesystem::copy_file(kSetuid, prog);
  ASSERT_EQ(chown(prog.c_str(), 0, 0), 0);
  ASSERT_EQ(chmod(prog.c_str(), 04755), 0);
  ASSERT_EQ(mkdir(rootonly.c_str(), 0700), 0);
  const Args as_user{"setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", prog};
  const Env env{{"SPROFIL_OUTPUT", rootonly + "/x.sprof"}, {"SPROFIL_STARTED", "\x01"}};
  const Result native = agent_test::run(as_user, {{"SPROFIL_OUTPUT", "\x01"}});
  ASSERT_EQ(native.status, 0) << native.err;
  ASSERT_EQ(native.out, "ruid 65534 euid 0\n");
  const Result r = agent_test::run(as_user, env);
  EXPECT_EQ(r.status, native.status);
  EXPECT_EQ(r.out, native.out);
  EXPECT_EQ(r.err, native.err);
  EXPECT_TRUE(agent_test::list_dir(rootonly).empty());
  // The same program without the setuid bit, run by root, does obey SPROFIL_OUTPUT: the check
  // above is about AT_SECURE, not about a library that never starts.
  ASSERT_EQ(chmod(prog.c_str(), 0755), 0);
  const Result plain = agent_test::run({prog}, env);
  EXPECT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(agent_test::list_dir(rootonly), std::vector<std::string>{"x.sprof"});
}

}  // namespace
}  // namespace sprofil::harm_test
