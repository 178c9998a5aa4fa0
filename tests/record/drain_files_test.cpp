// The record parent makes each process image's profile file for the agent (drain_proto.hpp's
// kDrainNewFile, record/drain.cpp): as the agent would (format/profile_file.hpp), and only for
// the pid that asks. These talk to a real Drainer over its socket, as the agent does
// (clock/drain_client.cpp); Run.ParentMakesEveryImagesFile runs real programs under it.
#include <gtest/gtest.h>
#include <linux/perf_event.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <utility>

#include "format/drain_proto.hpp"
#include "format/sprof_format.h"
#include "helpers.hpp"
#include "record/drain.hpp"
#include "util/fd_passing.hpp"

namespace sprofil::record_test {
namespace {

using agent_test::list_dir;
using agent_test::TempDir;

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

struct Answer {
  drain::FileAnswer a;
  int fd = -1;  // the file, when a.err is 0
};

// Asks the drainer at `sock` for a new file named after `name` in `dir`, for `pid`; with
// `event` (>= 0), that event and m's kDrainAdd fields go with it.
Answer ask_new_file(const std::string& sock, const std::string& dir, const char* name, int pid,
                    bool first, int event = -1, drain::DrainMsg m = {}) {
  Answer out;
  out.a.err = -1;
  m.kind = drain::kDrainNewFile;
  m.pid = pid;
  m.tid = pid;
  m.flags |= first ? drain::kNewFirst : 0;  // (kNewOpenEvent kept)
  snprintf(m.name, sizeof m.name, "%s", name);
  const int dirfd = open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  const int fds[2] = {dirfd, event};
  const int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  snprintf(a.sun_path, sizeof a.sun_path, "%s", sock.c_str());
  const timeval tv{5, 0};  // bounded: a drainer that does not answer fails the test
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (dirfd >= 0 && s >= 0 && connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      util::send_with_fds(s, &m, sizeof m, fds, event >= 0 ? 2 : 1) ==
          static_cast<ssize_t>(sizeof m)) {
    int n = 0;
    if (util::recv_with_fds(s, &out.a, sizeof out.a, &out.fd, 1, &n) !=
        static_cast<ssize_t>(sizeof out.a))
      out.a.err = -1;
    if (n == 0) out.fd = -1;
  }
  if (s >= 0) close(s);
  if (dirfd >= 0) close(dirfd);
  return out;
}

// The two counts that `re` (two groups) finds in a `SPROFIL_DRAIN_STATS=1` line; {~0, ~0} and a
// failure if it finds none.
std::pair<uint64_t, uint64_t> stat_pair(const std::string& err, const char* re) {
  std::smatch m;
  const bool found = std::regex_search(err, m, std::regex(re));
  EXPECT_TRUE(found) << re << " not in: " << err;
  if (!found) return {~0ull, ~0ull};
  return {std::stoull(m[1]), std::stoull(m[2])};
}

struct DrainerIn {
  TempDir dir;
  record::Drainer d;
  DrainerIn() {
    std::string why;
    EXPECT_TRUE(d.start(dir.path(), "p.sprof", &why)) << why;
  }
  ~DrainerIn() { d.finish(); }
};

// The first image's file takes the base name itself, replacing a planted link without
// following it; a later image's takes base.PID, and base.PID.1 where base.PID is taken. Each
// is private (0600), a regular file with its first page reserved on disk, and no temporary
// is left behind.
TEST(DrainFiles, ParentMakesAPrivateFileNamedForTheAskingPid) {
  DrainerIn t;
  const std::string dir = t.dir.path();
  const std::string target = t.dir / "target";
  { std::ofstream(target) << "target\n"; }
  ASSERT_EQ(symlink(target.c_str(), (t.dir / "p.sprof").c_str()), 0);
  const std::string mine = "p.sprof." + std::to_string(getpid());
  ASSERT_EQ(symlink(target.c_str(), (t.dir / mine).c_str()), 0);

  Answer first = ask_new_file(t.d.path(), dir, "p.sprof", getpid(), true);
  ASSERT_EQ(first.a.err, 0);
  ASSERT_GE(first.fd, 0);
  EXPECT_EQ(first.a.k, 0);
  Answer later = ask_new_file(t.d.path(), dir, "p.sprof", getpid(), false);
  ASSERT_EQ(later.a.err, 0);
  ASSERT_GE(later.fd, 0);
  EXPECT_EQ(later.a.k, 1);  // base.PID was taken (a link): base.PID.1

  for (const auto& [fd, name] :
       {std::pair{first.fd, std::string("p.sprof")}, std::pair{later.fd, mine + ".1"}}) {
    struct stat by_fd, by_name;
    ASSERT_EQ(fstat(fd, &by_fd), 0);
    ASSERT_EQ(lstat((t.dir / name).c_str(), &by_name), 0) << name;
    EXPECT_TRUE(S_ISREG(by_name.st_mode)) << name;
    EXPECT_EQ(by_fd.st_ino, by_name.st_ino) << name << ": the fd is the named file";
    EXPECT_EQ(by_fd.st_mode & 07777, 0600u) << name;
    EXPECT_EQ(by_fd.st_size, SPROF_PAGE) << name;
    EXPECT_GE(by_fd.st_blocks * 512, SPROF_PAGE) << name << ": the first page is reserved";
    close(fd);
  }
  std::ifstream in(target);
  const std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "target\n") << "a planted link was followed";
  EXPECT_EQ(std::filesystem::read_symlink(t.dir / mine).string(), target);
  t.d.finish();
  EXPECT_EQ(list_dir(dir), (std::vector<std::string>{"p.sprof", mine, mine + ".1", "target"}));
  const record::Drainer::Stats st = t.d.stats();
  EXPECT_EQ(st.new_files, 2u);
  EXPECT_EQ(st.new_files_refused, 0u);
}

// A file named for a pid is made only for that pid (SO_PEERCRED), and only under a plain
// name: the drainer refuses, makes nothing, and the agent then makes its own file.
TEST(DrainFiles, ParentRefusesAnotherPidAndNamesWithADirectory) {
  DrainerIn t;
  const std::string dir = t.dir.path();
  const std::vector<std::string> before = list_dir(dir);
  struct Case {
    const char* name;
    int pid;
    int err;
  } cases[] = {{"p.sprof", getppid(), EPERM},
               {"a/p.sprof", getpid(), EINVAL},
               {"..", getpid(), EINVAL},
               {".", getpid(), EINVAL},
               {"", getpid(), EINVAL}};
  for (const Case& c : cases) {
    Answer r = ask_new_file(t.d.path(), dir, c.name, c.pid, false);
    EXPECT_EQ(r.a.err, c.err) << "name '" << c.name << "' pid " << c.pid;
    EXPECT_LT(r.fd, 0) << c.name;
    if (r.fd >= 0) close(r.fd);
  }
  EXPECT_EQ(list_dir(dir), before);
  t.d.finish();
  const record::Drainer::Stats st = t.d.stats();
  EXPECT_EQ(st.new_files, 0u);
  EXPECT_EQ(st.new_files_refused, 5u);
}

// This thread's drain-mode task-clock event (1 ms period), and in *m the kDrainAdd fields for
// it; -1 if it cannot be opened.
int open_event(drain::DrainMsg* m) {
  perf_event_attr pa{};
  pa.type = PERF_TYPE_SOFTWARE;
  pa.size = sizeof pa;
  pa.config = PERF_COUNT_SW_TASK_CLOCK;
  pa.sample_period = 1000000;
  pa.sample_type = drain::kDrainSampleType;
  pa.exclude_kernel = 1;
  pa.exclude_hv = 1;
  m->kind = drain::kDrainAdd;
  m->pid = getpid();
  m->tid = static_cast<int32_t>(gettid());
  m->period_ns = m->first_ns = 1000000;
  m->ring_bytes = 5 * 4096;
  return static_cast<int>(syscall(SYS_perf_event_open, &pa, 0, -1, -1,
                                  static_cast<unsigned long>(PERF_FLAG_FD_CLOEXEC)));
}

// Burns about `s` of this thread's CPU, mostly in user space.
void burn_cpu(double s) {
  const double until = thread_cpu_s() + s;
  volatile uint64_t x = 0;
  while (thread_cpu_s() < until)  // user time mostly: the clock's read is a system call
    for (int i = 0; i < 100000; ++i) x = x + 1;
}

// Sends m with fds[0, nfds) to the drainer at `sock`; the one-byte answer, or -1.
int send_msg(const std::string& sock, const drain::DrainMsg& m, const int* fds, int nfds) {
  const int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  snprintf(a.sun_path, sizeof a.sun_path, "%s", sock.c_str());
  const timeval tv{5, 0};  // bounded: a drainer that does not answer fails the test
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char ack = -1;
  if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      util::send_with_fds(s, &m, sizeof m, fds, nfds) != static_cast<ssize_t>(sizeof m) ||
      recv(s, &ack, 1, 0) != 1)
    ack = -1;
  close(s);
  return ack;
}

// Sends a kDrainAdd of this thread's task-clock event (1 ms period) with m's other fields,
// fds[0, nfds) after the event's own; the one-byte answer, or -1.
int add_event(const std::string& sock, const int* more, int nfds, drain::DrainMsg m = {}) {
  const int ev = open_event(&m);
  if (ev < 0) return -1;
  int fds[4] = {ev, -1, -1, -1};
  for (int i = 0; i < nfds; ++i) fds[1 + i] = more[i];
  const int ack = send_msg(sock, m, fds, 1 + nfds);
  close(ev);
  return ack;
}

// A process whose file the parent made hands its events over alone (no re-open of its file,
// no second fd): the parent counts them into the file it made and holds. Without such a file
// (another drainer, or after the process's flush) the parent asks for the file
// (kAckNeedFile), and an event sent with it is taken.
TEST(DrainFiles, EventAloneCountsIntoTheFileTheParentMade) {
  SKIP_WITHOUT_PERF();
  DrainerIn t;
  EXPECT_EQ(add_event(t.d.path(), nullptr, 0), drain::kAckNeedFile) << "no file made yet";
  Answer made = ask_new_file(t.d.path(), t.dir.path(), "p.sprof", getpid(), true);
  ASSERT_EQ(made.a.err, 0);
  ASSERT_EQ(add_event(t.d.path(), nullptr, 0), drain::kAckDone);
  burn_cpu(0.1);
  t.d.finish();
  const record::Drainer::Stats st = t.d.stats();
  EXPECT_EQ(st.events, 1u);
  EXPECT_GE(st.samples, 50u) << "about 100 records at 1 ms";
  EXPECT_EQ(st.unplaced, 0u) << "every sample had the file";
  sprof_header h;
  ASSERT_EQ(pread(made.fd, &h, sizeof h, 0), static_cast<ssize_t>(sizeof h));
  EXPECT_GE(h.delivered, 50u) << "counted into the file the parent made";
  close(made.fd);

  DrainerIn other;  // a parent that made no file for this pid: the event goes with the file
  EXPECT_EQ(add_event(other.d.path(), nullptr, 0), drain::kAckNeedFile);
  const int file = open((t.dir / "p.sprof").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(file, 0);
  EXPECT_EQ(add_event(other.d.path(), &file, 1), drain::kAckDone);
  close(file);
}

// A forked child's event (pending: no file of its own yet) may come alone, naming the file the
// child was forked with by its device and inode. Taken where the parent made that file and
// still holds it (then with that file and its directory), or let go of a moment ago (its
// process flushed); answered kAckNeedFile where it did not make it, or let go of it for good;
// taken when the fds come with it.
TEST(DrainFiles, PendingEventAloneTakesTheFileItWasForkedWith) {
  SKIP_WITHOUT_PERF();
  DrainerIn t;
  Answer made = ask_new_file(t.d.path(), t.dir.path(), "p.sprof", getpid(), true);
  ASSERT_EQ(made.a.err, 0);
  struct stat st;
  ASSERT_EQ(fstat(made.fd, &st), 0);
  auto pending = [&](uint64_t dev, uint64_t ino, const int* fds, int nfds) {
    drain::DrainMsg m;
    m.flags = drain::kAddPending;
    m.from_dev = dev;
    m.from_ino = ino;
    m.ppid = getppid();
    m.region_count = 0;
    m.regions_end = SPROF_PAGE;
    snprintf(m.name, sizeof m.name, "p.sprof");
    return add_event(t.d.path(), fds, nfds, m);
  };
  EXPECT_EQ(pending(st.st_dev, st.st_ino + 1, nullptr, 0), drain::kAckNeedFile) << "not held";
  EXPECT_EQ(pending(st.st_dev, st.st_ino, nullptr, 0), drain::kAckDone);
  const int fds[2] = {made.fd, open(t.dir.path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)};
  ASSERT_GE(fds[1], 0);
  EXPECT_EQ(pending(st.st_dev, st.st_ino + 1, fds, 2), drain::kAckDone) << "with the fds";
  close(fds[1]);
  const record::Drainer::Stats st1 = t.d.stats();
  EXPECT_EQ(st1.pending_alone, 1u);
  EXPECT_EQ(st1.events, 2u);

  // After its process's flush the parent keeps the file a while (a launcher that exits right
  // after its fork, before its child's first event): 5 s, the newest 64 such files.
  drain::DrainMsg flush;
  flush.kind = drain::kDrainFlush;
  flush.pid = getpid();
  EXPECT_EQ(send_msg(t.d.path(), flush, nullptr, 0), 0);
  EXPECT_EQ(pending(st.st_dev, st.st_ino, nullptr, 0), drain::kAckDone) << "ended a moment ago";
  EXPECT_EQ(send_msg(t.d.path(), flush, nullptr, 0), 0);
  // 64 newer images of this pid, each file let go for the next: the first is let go for good.
  for (int k = 0; k < 64; ++k) {
    Answer next = ask_new_file(t.d.path(), t.dir.path(), "p.sprof", getpid(), false);
    ASSERT_EQ(next.a.err, 0) << k;
    close(next.fd);
  }
  EXPECT_EQ(send_msg(t.d.path(), flush, nullptr, 0), 0);
  EXPECT_EQ(pending(st.st_dev, st.st_ino, nullptr, 0), drain::kAckNeedFile) << "64 newer ended";
  close(made.fd);
}

// The main thread's event with the request for the file (the agent's start: one exchange, not
// two): the agent's own (an fd with the kDrainAdd fields), or, with kNewOpenEvent, opened by the
// parent on the asking thread (the fields without an fd). Either is taken into the file made,
// answered with `added`, and the thread's CPU from then on is counted there (about 100 records
// at 1 ms). The drainer's stats at the end.
record::Drainer::Stats main_event_with_the_file(bool parent_opens) {
  DrainerIn t;
  drain::DrainMsg m;
  const int ev = open_event(&m);
  EXPECT_GE(ev, 0);
  if (ev < 0) return {};
  if (parent_opens) {
    close(ev);  // only its fields go
    m.flags = drain::kNewOpenEvent;
  }
  Answer made =
      ask_new_file(t.d.path(), t.dir.path(), "p.sprof", getpid(), true, parent_opens ? -1 : ev, m);
  if (!parent_opens) close(ev);
  EXPECT_EQ(made.a.err, 0);
  EXPECT_EQ(made.a.added, 1);
  burn_cpu(0.1);
  t.d.finish();
  sprof_header h{};
  EXPECT_EQ(pread(made.fd, &h, sizeof h, 0), static_cast<ssize_t>(sizeof h));
  EXPECT_GE(h.delivered, 50u) << "counted into the file made with it";
  if (made.fd >= 0) close(made.fd);
  return t.d.stats();
}

TEST(DrainFiles, EventWithTheFileRequestIsTaken) {
  SKIP_WITHOUT_PERF();
  const record::Drainer::Stats st = main_event_with_the_file(false);
  EXPECT_EQ(st.events, 1u);
  EXPECT_GE(st.samples, 50u);
  EXPECT_EQ(st.main_events, 0u) << "the agent's own";
}

TEST(DrainFiles, ParentOpensTheMainThreadsEventWhenAsked) {
  SKIP_WITHOUT_PERF();
  if (gettid() != getpid()) GTEST_SKIP() << "needs the process's main thread";
  const record::Drainer::Stats st = main_event_with_the_file(true);
  EXPECT_EQ(st.events, 1u);
  EXPECT_GE(st.samples, 50u);
  EXPECT_EQ(st.main_events, 1u);
  EXPECT_EQ(st.main_events_refused, 0u);
}

// Under `sprofil record` every process image's file is the parent's work: a shell that runs
// three programs, each exec'd (the shell, and each forked child's new image, make four files;
// the forked children themselves make none), none refused.
TEST(Run, ParentMakesEveryImagesFile) {
  SKIP_WITHOUT_PERF();  // drain mode runs with the perf clock
  TempDir dir;
  const std::string out = dir / "run.sprof";
  const std::string p = agent_test::kProg;
  const std::string script =
      "'" + p + "' burn 0.05; '" + p + "' burn 0.05; '" + p + "' burn 0.05; exit 0";
  agent_test::Result r =
      agent_test::run({agent_test::kTool, "record", "--agent", "-o", out, "bash", "-c", script},
                      {{"SPROFIL_DRAIN_STATS", "1"}});
  ASSERT_EQ(r.status, 0) << agent_test::describe(r);
  const auto [made, refused] = stat_pair(r.err,
                                         "([0-9]+) process images' files made, "
                                         "([0-9]+) refused");
  EXPECT_GE(made, 4u) << r.err;
  EXPECT_EQ(refused, 0u) << r.err;
  const profile::Profile prof = agent_test::read(out);
  EXPECT_GE(prof.processes.size(), 3u);  // the three burners at least (the shell may take none)
}

// A process whose file the parent made exits without a flush (FileAnswer::watched): the parent
// sees it end (a pidfd), drains the last samples its rings held and completes the file as the
// exit's flush would have: finished, every sample in it (samples x period = the process's CPU
// within 5% + 20 ms, as Drain.EveryTickCountedAt1kHzAnd10kHz), and its effective rate
// recomputed from every sample counted, not from those counted when the agent finished its
// header (to the milli-hertz the header keeps).
TEST(Run, ParentSeesTheExitAndCompletesTheFile) {
  SKIP_WITHOUT_PERF();
  TempDir dir;
  const std::string out = dir / "exit.sprof";
  agent_test::Result r = agent_test::run({agent_test::kTool, "record", "--agent", "-F", "1000",
                                          "-o", out, agent_test::kProg, "burn", "0.3"},
                                         {{"SPROFIL_DRAIN_STATS", "1"}});
  ASSERT_EQ(r.status, 0) << agent_test::describe(r);
  const std::regex seen("([0-9]+) processes' exits seen without a flush");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, seen)) << r.err;
  EXPECT_EQ(std::stoull(m[1]), 1u) << r.err;
  const profile::Profile prof = agent_test::read(out);
  ASSERT_EQ(prof.processes.size(), 1u);
  const profile::Process& pr = prof.processes[0];
  EXPECT_TRUE(pr.flags & SPROF_F_FINISHED);
  ASSERT_GT(pr.cpu_ns, 0u);
  ASSERT_GT(pr.delivered, 0u);
  const double cpu_s = static_cast<double>(pr.cpu_ns) / 1e9;
  const double sampled_s =
      static_cast<double>(pr.delivered) * static_cast<double>(pr.tick_ns) / 1e9;
  EXPECT_NEAR(sampled_s, cpu_s, 0.05 * cpu_s + 0.02) << "sampled " << sampled_s << " s";
  EXPECT_NEAR(pr.effective_hz, static_cast<double>(pr.delivered) / cpu_s, 0.002)
      << pr.delivered << " samples in " << cpu_s << " s";
}

// An execute-only program (mode 0711) run by an unprivileged user is not dumpable: the record
// parent, the same user, may not open a perf event on it (perf_event_open: EACCES), and the
// agent opens its main thread's event itself (kDrainAdd), as for any other thread. The run is
// profiled all the same: samples x period within 10% of the program's CPU from the first
// sample on (0.3 s of burn; the loader and the agent's start before the event are the
// summary's unsampled CPU). Also without --agent: record's default, sampling from outside, would
// see the kernel end the program's events at its exec (it is not dumpable), and takes the agent.
TEST(Run, ExecuteOnlyProgramOfAnotherUserIsProfiledByItsOwnEvent) {
  SKIP_WITHOUT_PERF();
  if (geteuid() != 0) GTEST_SKIP() << "needs root: it runs the command as another user (4242)";
  if (agent_test::run({"setpriv", "--version"}).status != 0)
    GTEST_SKIP() << "needs setpriv (util-linux) to run commands as another user";
  int paranoid = 2;
  std::ifstream("/proc/sys/kernel/perf_event_paranoid") >> paranoid;
  if (paranoid > 2)
    GTEST_SKIP() << "perf_event_paranoid " << paranoid << ": perf events are denied to users";
  TempDir dir;
  ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);
  const std::string prog = dir / "prog", outdir = dir / "out";
  std::filesystem::copy_file(agent_test::kProg, prog);
  ASSERT_EQ(chmod(prog.c_str(), 0711), 0);
  ASSERT_EQ(mkdir(outdir.c_str(), 0700), 0);
  ASSERT_EQ(chown(outdir.c_str(), 4242, 4242), 0);
  for (const bool agent : {true, false}) {
    SCOPED_TRACE(agent ? "record --agent" : "record");
    const std::string out = outdir + "/x.sprof";
    agent_test::Args a{"setpriv", "--reuid=4242",          "--regid=4242",    "--clear-groups",
                       "env",     "SPROFIL_DRAIN_STATS=1", agent_test::kTool, "record"};
    if (agent) a.push_back("--agent");
    a.insert(a.end(), {"-F", "1000", "-o", out, prog, "burn", "0.3"});
    agent_test::Result r = agent_test::run(a);
    ASSERT_EQ(r.status, 0) << agent_test::describe(r);
    const auto [opened, not_opened] =
        stat_pair(r.err, "([0-9]+) main threads' events opened for them, ([0-9]+) could not be");
    EXPECT_EQ(opened, 0u) << r.err;
    EXPECT_EQ(not_opened, 1u) << r.err;
    const auto [events, records] = stat_pair(r.err, "drain: ([0-9]+) events, ([0-9]+) sample");
    EXPECT_EQ(events, 1u) << "the agent's own event, handed over: " << r.err;
    EXPECT_GE(records, 200u) << r.err;
    const profile::Profile p = agent_test::read(out);
    ASSERT_EQ(p.processes.size(), 1u);
    const double cpu = static_cast<double>(p.cpu_ns) * 1e-9;
    const double sampled = static_cast<double>(p.total_samples()) / 1000;
    EXPECT_GE(sampled, 0.25) << "0.3 s of burn";
    EXPECT_LE(sampled, 1.1 * cpu) << "cpu " << cpu;
  }
}

}  // namespace
}  // namespace sprofil::record_test
