// Live profiles (docs/live.md), end to end with real programs: tests/live/progs/live_prog.cpp
// under the N64 face, the modern API and the agent (`sprofil record --live`), looked at while
// they run with the tool (`sprofil fetch`, `gperf`, `list`) and the client library.
// Every test uses its own per-user directory (XDG_RUNTIME_DIR = a scratch directory), and
// every wait is bounded in count and time.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../common/process.hpp"
#include "live/client.hpp"
#include "live/live.hpp"
#include "profile/reader.hpp"
#include "profile/writer.hpp"
#include "sprofil/ultra64.h"

namespace sprofil::live_test {
namespace {

using namespace sprofil;
using testproc::Args;
using testproc::Env;

const std::string kTool = SPROFIL_TOOL;
const std::string kProg = LIVE_PROG;

using testproc::finish;
using testproc::now_s;
using testproc::Proc;
using testproc::read_fd;
using testproc::run;
using testproc::spawn;

class TempDir : public testproc::TempDir {
 public:
  TempDir() : testproc::TempDir("sprofil_live") {}
};

void sleep_until(double t) {
  while (now_s() < t) usleep(10000);
}

// The pid the program prints in "ready PID" (within 20 s), or 0.
int wait_ready(const Proc& p) {
  for (int i = 0; i < 2000; ++i) {
    const std::string out = read_fd(p.out);
    const size_t at = out.find("ready ");
    if (at != std::string::npos && out.find('\n', at) != std::string::npos)
      return std::atoi(out.c_str() + at + 6);
    usleep(10000);
  }
  return 0;
}

bool wait_exists(const std::string& path) {
  for (int i = 0; i < 1000; ++i) {  // 10 s
    if (access(path.c_str(), F_OK) == 0) return true;
    usleep(10000);
  }
  return false;
}

uint64_t total(const profile::Profile& p) {
  uint64_t t = 0;
  for (const auto& r : p.regions) t += r.total();
  return t;
}

// Every bin of `a` is at most the same bin of `b` (matched by region start): never down.
void expect_no_decrease(const profile::Profile& a, const profile::Profile& b) {
  for (const auto& ra : a.regions) {
    const profile::Region* rb = nullptr;
    for (const auto& r : b.regions)
      if (r.start == ra.start && r.end == ra.end) rb = &r;
    ASSERT_NE(rb, nullptr) << "region " << ra.path << " vanished";
    ra.for_each_bin([&](uint64_t i, uint64_t count, uint64_t) {
      ASSERT_LE(count, rb->count_at(i)) << ra.path << " bin " << i << " went down";
    });
  }
}

// Each test's own per-user directory: $XDG_RUNTIME_DIR/sprofil.
class Live : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    setenv("XDG_RUNTIME_DIR", dir_.path().c_str(), 1);
    env_ = {{"XDG_RUNTIME_DIR", dir_.path()}};
  }
  std::string sock(int pid) const { return dir_ / ("sprofil/" + std::to_string(pid) + ".sock"); }
  void counts_grow_under_record(const std::vector<std::string>& mode);
  TempDir dir_;
  Env env_;
};

// Fetched at about 1 s (client library) and 3 s (`sprofil fetch`) of a 5 s run: the counts
// grow and never go down; the program's output and exit are its own; the socket is private
// and gone after exit.
void grows(const Proc& started, int pid, const std::string& socket, double t0,
           const std::string& file) {
  ASSERT_GT(pid, 0);
  sleep_until(t0 + 1);
  profile::Profile s1, s2;
  std::string err;
  ASSERT_TRUE(live::fetch_profile(socket, &s1, &err)) << err;
  sleep_until(t0 + 3);
  const Proc f = run({kTool, "fetch", std::to_string(pid), "-o", file});
  ASSERT_EQ(f.status, 0) << f.stderr_text;
  ASSERT_TRUE(profile::read_profile(file, &s2, &err)) << err;
  EXPECT_EQ(s1.pid, pid);
  EXPECT_EQ(s2.pid, pid);
  EXPECT_GT(total(s1), 0u);
  EXPECT_GT(total(s2), total(s1));
  expect_no_decrease(s1, s2);
  struct stat st;
  ASSERT_EQ(lstat(socket.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 077, 0u);
  (void)started;
}

// The live service's socket is made owner-only without a umask(077) of the program's process:
// the umask is every thread's, and a file another thread made meanwhile got mode 0600 instead
// of the program's own. live_prog counts the calls of umask() that serving makes (its own
// umask comes first in every library's lookup).
TEST_F(Live, ServingNeverChangesTheProgramsUmask) {
  const Proc p = run({kProg, "umask"}, env_);
  ASSERT_EQ(p.status, 0) << p.stderr_text;
  EXPECT_EQ(p.stdout_text, "umask calls 0\ndone\n");
}

// burn_hot's share in a profile file and its 95% interval, in percent (`sprofil report
// --format csv`: samples,percent,ci95_low,ci95_high,...); lo < 0 when it has no row.
struct Share {
  double lo = -1, pct = -1, hi = -1;
};
Share hot_share(const std::string& file) {
  const Proc r = run({kTool, "report", "--format", "csv", file});
  Share s;
  std::istringstream in(r.stdout_text);
  for (std::string line; std::getline(in, line);) {
    if (line.find("burn_hot") == std::string::npos) continue;
    std::istringstream f(line);
    std::string samples, pct, lo, hi;
    std::getline(f, samples, ',');
    std::getline(f, pct, ',');
    std::getline(f, lo, ',');
    std::getline(f, hi, ',');
    s = Share{std::atof(lo.c_str()), std::atof(pct.c_str()), std::atof(hi.c_str())};
  }
  return s;
}

// After the program stopped its profile (it prints "stopped" and waits for `hold`), its final
// counts are fetched from the live service. They hold the last snapshot's (`last`, at 3 s)
// bin by bin, and the snapshot's share of burn_hot (about 2/3 of burn's time) agrees with the
// final one: their 95% intervals overlap.
void agrees_with_final(const Proc& p, int pid, const std::string& hold, const std::string& last,
                       const std::string& final_file) {
  bool stopped = false;
  for (int i = 0; i < 2000 && !stopped; ++i) {  // at most 20 s
    stopped = read_fd(p.out).find("stopped\n") != std::string::npos;
    if (!stopped) usleep(10000);
  }
  const Proc f = run({kTool, "fetch", std::to_string(pid), "-o", final_file});
  const int fd = open(hold.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  if (fd >= 0) close(fd);
  ASSERT_TRUE(stopped) << "the program did not stop its profile";
  ASSERT_EQ(f.status, 0) << f.stderr_text;
  profile::Profile a, b;
  std::string err;
  ASSERT_TRUE(profile::read_profile(last, &a, &err)) << err;
  ASSERT_TRUE(profile::read_profile(final_file, &b, &err)) << err;
  EXPECT_GT(total(b), total(a));
  expect_no_decrease(a, b);
  const Share s = hot_share(last), t = hot_share(final_file);
  ASSERT_GE(s.lo, 0) << "no burn_hot row in the snapshot's report";
  ASSERT_GE(t.lo, 0) << "no burn_hot row in the final report";
  EXPECT_TRUE(s.lo <= t.hi && t.lo <= s.hi)
      << "snapshot " << s.pct << "% [" << s.lo << ", " << s.hi << "], final " << t.pct << "% ["
      << t.lo << ", " << t.hi << "]";
  // burn() gives burn_hot 20 ms of every 30 ms of its CPU time: 67%. The bound is loose (the
  // cpu clock skews on a loaded machine, docs/agent.md): it rules out a swapped or broken
  // attribution.
  EXPECT_GT(t.pct, 45);
  EXPECT_LT(t.pct, 85);
}

TEST_F(Live, N64CountsGrowWhileItRuns) {
  const double t0 = now_s();
  const std::string hold = dir_ / "hold";
  // The auto clock (perf where it works), as the API case uses: see live_prog.cpp.
  Env env = env_;
  env.push_back({"SPROFIL_CLOCK", "auto"});
  Proc p = spawn({kProg, "n64", "5", hold}, env);
  const int pid = wait_ready(p);
  grows(p, pid, sock(pid), t0, dir_ / "s2.sprof");
  agrees_with_final(p, pid, hold, dir_ / "s2.sprof", dir_ / "final.sprof");
  finish(&p);
  EXPECT_EQ(p.status, 0) << p.stderr_text;
  EXPECT_EQ(p.stdout_text, "ready " + std::to_string(pid) + "\nstopped\ndone\n");
  EXPECT_EQ(p.stderr_text, "");
  EXPECT_NE(access(sock(pid).c_str(), F_OK), 0) << "socket left behind";
  struct stat st;
  ASSERT_EQ(stat((dir_ / "sprofil").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(Live, ApiCountsGrowWhileItRuns) {
  const double t0 = now_s();
  const std::string hold = dir_ / "hold";
  Proc p = spawn({kProg, "api", "5", hold}, env_);
  const int pid = wait_ready(p);
  grows(p, pid, sock(pid), t0, dir_ / "s2.sprof");
  agrees_with_final(p, pid, hold, dir_ / "s2.sprof", dir_ / "final.sprof");
  finish(&p);
  EXPECT_EQ(p.status, 0) << p.stderr_text;
  EXPECT_EQ(p.stdout_text, "ready " + std::to_string(pid) + "\nstopped\ndone\n");
  EXPECT_NE(access(sock(pid).c_str(), F_OK), 0) << "socket left behind";
}

// `sprofil record --live` with `mode`'s options: the command's counts grow while it runs,
// `sprofil list` and `gperf` see it, and the last snapshot agrees with the final profile.
void Live::counts_grow_under_record(const std::vector<std::string>& mode) {
  const double t0 = now_s();
  // 8 s of wall time: the program must still run for gperf after grows() (3 s and a fetch),
  // which took over 5 s in CI with a sanitized tool on a loaded machine.
  std::vector<std::string> cmd{kTool, "record", "--live"};
  cmd.insert(cmd.end(), mode.begin(), mode.end());
  cmd.insert(cmd.end(), {"-o", dir_ / "run.sprof", kProg, "plain", "8"});
  Proc p = spawn(cmd, env_);
  const int pid = wait_ready(p);
  ASSERT_TRUE(wait_exists(sock(pid)));
  // From outside record puts nothing in the program's environment; with the agent, where its
  // file is (live_prog links the runtime for its other modes: its maps say nothing).
  std::ifstream environ_file("/proc/" + std::to_string(pid) + "/environ");
  const std::string environ_text((std::istreambuf_iterator<char>(environ_file)),
                                 std::istreambuf_iterator<char>());
  EXPECT_EQ(environ_text.find("SPROFIL_OUTPUT=") != std::string::npos, !mode.empty());
  // `sprofil list` shows it, with its samples so far and the CPU they stand for.
  const Proc l = run({kTool, "list"}, env_);
  EXPECT_EQ(l.status, 0);
  const std::string prog = std::regex_replace(kProg, std::regex(R"([.^$|()\[\]{}*+?\\])"), "\\$&");
  const std::regex listed("(^|\n) *" + std::to_string(pid) + "  +([0-9]+)  +([0-9.]+)  " + prog +
                          " plain 8\n");
  std::smatch row;
  ASSERT_TRUE(std::regex_search(l.stdout_text, row, listed)) << l.stdout_text;
  EXPECT_GT(std::stoul(row[2]), 0u) << l.stdout_text;  // it burns from its start
  EXPECT_GT(std::stod(row[3]), 0.0) << l.stdout_text;
  grows(p, pid, sock(pid), t0, dir_ / "s2.sprof");
  if (mode.empty()) {
    // Sampled from outside, record answers with a packed run profile of the process (the pages
    // that hold counts): never more than its dense v1 image and the run's framing (the header,
    // the table and the extents, a page each here). live_prog's image holds few regions that
    // took samples, and its counters are most of their pages (a CI run: 40 KB packed, 60 KB
    // dense); on cc1plus the answer is 1.3 MB against 95 MB (docs/benchmarks.md), and
    // tests/profile's PackedRun tests check what a sparse image stores. The client takes it
    // for the process's own profile.
    std::vector<uint8_t> raw;
    profile::Profile one;
    std::string e;
    ASSERT_TRUE(live::fetch_image(sock(pid), &raw, &e)) << e;
    ASSERT_GE(raw.size(), sizeof SPROF_RUN_MAGIC);
    EXPECT_EQ(std::memcmp(raw.data(), SPROF_RUN_MAGIC, sizeof SPROF_RUN_MAGIC), 0);
    ASSERT_TRUE(live::fetch_profile(sock(pid), &one, &e)) << e;
    EXPECT_FALSE(one.run);
    EXPECT_EQ(one.pid, pid);
    EXPECT_EQ(one.processes.size(), 1u);
    const int fd = memfd_create("dense", MFD_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(profile::write_profile_fd(one, fd, &e)) << e;
    struct stat dense;
    ASSERT_EQ(fstat(fd, &dense), 0);
    close(fd);
    EXPECT_LE(static_cast<off_t>(raw.size()), dense.st_size + 3 * SPROF_PAGE);
  }
  // `sprofil gperf PID` prints the report of `sprofil report`, burn() on top.
  const Proc g = run({kTool, "gperf", std::to_string(pid), "--limit", "1"}, env_);
  EXPECT_EQ(g.status, 0) << g.stderr_text;
  EXPECT_NE(g.stdout_text.find("burn"), std::string::npos) << g.stdout_text;
  finish(&p);
  EXPECT_EQ(p.status, 0) << p.stderr_text;
  profile::Profile fin;
  std::string err;
  ASSERT_TRUE(profile::read_profile(dir_ / "run.sprof", &fin, &err)) << err;
  EXPECT_GT(total(fin), 0u);
  // The last snapshot's share of the program's own code agrees with the final profile's:
  // their 95% Wilson intervals overlap.
  profile::Profile last;
  ASSERT_TRUE(profile::read_profile(dir_ / "s2.sprof", &last, &err)) << err;
  // The snapshot names each object by its resolved path, as the run profile does
  // (profile::resolve_paths): the agent's libc is /lib/x86_64-linux-gnu/libc.so.6 as the
  // loader found it, /lib a link on a merged /usr. (Sampled from outside, a snapshot holds the
  // objects with samples only.)
  int checked = 0;
  for (const auto& r : last.regions) {
    if (r.path.empty() || r.path[0] != '/') continue;
    char buf[PATH_MAX];
    ASSERT_NE(realpath(r.path.c_str(), buf), nullptr) << r.path;
    EXPECT_EQ(r.path, buf);
    ++checked;
  }
  EXPECT_GE(checked, 1);
  auto share = [](const profile::Profile& q) {
    double x = 0;
    for (const auto& r : q.regions)
      if (r.path.find("live_prog") != std::string::npos) x += static_cast<double>(r.total());
    const double n = static_cast<double>(q.total_samples()), z = 1.959963984540054;
    const double ph = x / n, den = 1 + z * z / n;
    const double mid = (ph + z * z / (2 * n)) / den;
    const double half = z * std::sqrt(ph * (1 - ph) / n + z * z / (4 * n * n)) / den;
    return std::pair<double, double>{mid - half, mid + half};
  };
  const auto [lo1, hi1] = share(last);
  const auto [lo2, hi2] = share(fin);
  // Or within 2.5 points: the final profile also holds what no snapshot taken at 3 s can, near
  // a 100% share where the 95% intervals (about +-0.1 point) are narrower than that: the exit
  // path (libc's exit handlers, the agent finishing its file; seen: 99.8% against 99.5%) and
  // the agent serving the snapshots after it and gperf's (each a fresh image of the counters
  // whose page faults are kernel time in libc's memset: about 1% of this run for three fetches
  // on an idle machine, 1.8 points in CI under load).
  const double mid1 = (lo1 + hi1) / 2, mid2 = (lo2 + hi2) / 2;
  EXPECT_TRUE((lo1 <= hi2 && lo2 <= hi1) || std::fabs(mid1 - mid2) <= 0.025)
      << "snapshot [" << lo1 << ", " << hi1 << "] final [" << lo2 << ", " << hi2 << "]\n"
      << run({kTool, "report", dir_ / "s2.sprof", "--by", "object"}).stdout_text
      << run({kTool, "report", dir_ / "run.sprof", "--by", "object"}).stdout_text;
  EXPECT_GT(lo2, 0.5);  // burn() dominates
}

// Sampled from outside (record's default): record serves the command's socket itself.
TEST_F(Live, RecordCountsGrowWhileItRuns) {
  counts_grow_under_record({});
}

// With the agent: the agent's own service in the program.
TEST_F(Live, AgentCountsGrowWhileItRuns) {
  counts_grow_under_record({"--agent"});
}

// The live service waits for a client without holding a descriptor number: a blocked accept
// takes the lowest free one before it waits, and the program's next open got the number after
// the one it gets natively. Under record's default and the agent, with their clocks.
TEST_F(Live, ServiceLeavesTheProgramsDescriptorNumbers) {
  const Proc native = run({kProg, "fd", "0.3"}, env_);
  ASSERT_EQ(native.status, 0) << native.stderr_text;
  ASSERT_EQ(native.stdout_text.rfind("fd ", 0), 0u) << native.stdout_text;
  for (const std::vector<std::string>& mode :
       std::vector<std::vector<std::string>>{{}, {"--agent"}, {"--clock", "sampler"}}) {
    std::vector<std::string> cmd{kTool, "record", "--live", "-q", "-o", dir_ / "fd.sprof"};
    cmd.insert(cmd.end(), mode.begin(), mode.end());
    for (const char* a : {"--", kProg.c_str(), "fd", "0.3"}) cmd.push_back(a);
    const Proc p = run(cmd, env_);
    EXPECT_EQ(p.status, 0) << p.stderr_text;
    EXPECT_EQ(p.stdout_text, native.stdout_text) << (mode.empty() ? "default" : mode.back());
  }
}

// Sampled from outside, each process of the command is served under its own pid: a shell that
// runs live_prog (forked, then exec'd: `; sleep` keeps bash from exec'ing it in place) has its
// socket and live_prog its own, whose snapshot is live_prog's image (its pid and arguments,
// over 100 samples of its own code after 0.5 s of burn() at 1 kHz); the shell's has none of
// live_prog's code. Once live_prog has ended (the shell sleeps on), its socket is gone within
// 2 s (record's next pass, the server's next look) and the shell's stays.
TEST_F(Live, RecordServesEachProcessOfTheCommand) {
  Proc p = spawn({kTool, "record", "--live", "-o", dir_ / "run.sprof", "bash", "-c",
                  "'" + kProg + "' plain 1.5; sleep 3"},
                 env_);
  const int pid = wait_ready(p);
  ASSERT_GT(pid, 0);
  int shell = 0;
  {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string comm_and_before, state;
    std::getline(stat, comm_and_before, ')');
    stat >> state >> shell;
  }
  ASSERT_GT(shell, 0);
  ASSERT_TRUE(wait_exists(sock(pid)));
  ASSERT_TRUE(wait_exists(sock(shell)));
  usleep(500000);
  auto own_samples = [](const profile::Profile& q) {
    uint64_t n = 0;
    for (const auto& r : q.regions)
      if (r.path.find("live_prog") != std::string::npos) n += r.total();
    return n;
  };
  profile::Profile snap, shell_snap;
  std::string err;
  ASSERT_TRUE(live::fetch_profile(sock(pid), &snap, &err)) << err;
  EXPECT_EQ(snap.pid, pid);
  ASSERT_FALSE(snap.argv.empty());
  EXPECT_EQ(snap.argv.back(), "1.5");
  EXPECT_GT(own_samples(snap), 100u);
  ASSERT_TRUE(live::fetch_profile(sock(shell), &shell_snap, &err)) << err;
  EXPECT_EQ(shell_snap.pid, shell);
  EXPECT_EQ(own_samples(shell_snap), 0u);
  for (int i = 0; i < 500 && kill(pid, 0) == 0; ++i) usleep(10000);  // live_prog ends (5 s)
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {  // 2 s
    gone = access(sock(pid).c_str(), F_OK) != 0;
    if (!gone) usleep(10000);
  }
  EXPECT_TRUE(gone) << sock(pid);
  EXPECT_EQ(access(sock(shell).c_str(), F_OK), 0) << "the shell still runs";
  finish(&p);
  EXPECT_EQ(p.status, 0) << p.stderr_text;
  EXPECT_NE(access(sock(shell).c_str(), F_OK), 0) << "socket left behind";
}

// fork: the child serves its own counts on its own socket; the parent's stays the parent's.
TEST_F(Live, ForkedChildServesItsOwn) {
  Proc p = spawn({kProg, "n64fork", "3"}, env_);
  const int child = wait_ready(p);
  ASSERT_GT(child, 0);
  const int parent = p.pid;
  ASSERT_TRUE(wait_exists(sock(child)));
  profile::Profile c, par;
  std::string err;
  ASSERT_TRUE(live::fetch_profile(sock(child), &c, &err)) << err;
  EXPECT_EQ(c.pid, child);
  EXPECT_EQ(c.ppid, parent);
  ASSERT_TRUE(live::fetch_profile(sock(parent), &par, &err)) << err;
  EXPECT_EQ(par.pid, parent);
  finish(&p);
  EXPECT_EQ(p.status, 0) << p.stderr_text;
  EXPECT_NE(p.stdout_text.find("child done\ndone\n"), std::string::npos) << p.stdout_text;
  EXPECT_NE(access(sock(child).c_str(), F_OK), 0);
  EXPECT_NE(access(sock(parent).c_str(), F_OK), 0);
}

// Sockets of processes that are gone (here: a pid that cannot exist) are removed when a
// process starts the service; other files are left alone.
TEST_F(Live, StaleSocketsAreSwept) {
  ASSERT_EQ(mkdir((dir_ / "sprofil").c_str(), 0700), 0);
  const std::string stale = dir_ / "sprofil/99999999.sock";
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, stale.c_str(), sizeof a.sun_path - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  close(fd);
  const std::string other = dir_ / "sprofil/99999999.txt";
  close(open(other.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
  const Proc p = run({kProg, "n64", "0.5"}, env_);
  EXPECT_EQ(p.status, 0);
  EXPECT_NE(access(stale.c_str(), F_OK), 0);
  EXPECT_EQ(access(other.c_str(), F_OK), 0);
}

// Flush with `sprofil gperf --serve` running: the file arrives and holds exactly the counters
// the program's own snapshot (osProfileFlushSnapshot) holds.
TEST_F(Live, N64FlushWithServer) {
  const std::string gsock = dir_ / "g.sock";
  Proc server = spawn(
      {kTool, "gperf", "--serve", "--dir", dir_.path(), "--socket", gsock, "--count", "1"}, env_);
  ASSERT_TRUE(wait_exists(gsock));
  Env env = env_;
  env.emplace_back("SPROFIL_GPERF_SOCKET", gsock);
  const Proc p = run({kProg, "n64flush"}, env);
  ASSERT_EQ(p.status, 0) << p.stderr_text;
  int err = -1;
  long long us = -1;
  unsigned long long sum = 0;
  ASSERT_EQ(sscanf(p.stdout_text.c_str(), "flush err=%d us=%lld sum=%llu", &err, &us, &sum), 3)
      << p.stdout_text;
  EXPECT_EQ(err, 0);
  EXPECT_GT(sum, 0u);
  finish(&server, 20);
  EXPECT_EQ(server.status, 0) << server.stderr_text;
  EXPECT_NE(server.stdout_text.find("flush 1: pid "), std::string::npos) << server.stdout_text;
  std::string file;
  for (const auto& e : std::filesystem::directory_iterator(dir_.path()))
    if (e.path().filename().string().rfind("gperf.", 0) == 0) file = e.path().string();
  ASSERT_FALSE(file.empty()) << server.stdout_text;
  profile::Profile f;
  std::string e;
  ASSERT_TRUE(profile::read_profile(file, &f, &e)) << e;
  EXPECT_EQ(total(f), sum);
  ASSERT_EQ(f.regions.size(), 1u);
  EXPECT_NE(f.regions[0].path.find("live_prog"), std::string::npos) << f.regions[0].path;
  EXPECT_NE(access(gsock.c_str(), F_OK), 0) << "the server left its socket";
}

// No server: Flush returns at once with ERR_OSPROFILEFLUSH_HOST and the program finishes
// normally. The seed asks for 10 ms; we assert 100 ms because the two cores are shared with
// other test runs and a descheduled process can lose tens of ms between the two clock reads
// (the call itself is a socket() and a failing connect()).
TEST_F(Live, N64FlushWithoutServer) {
  Env env = env_;
  env.emplace_back("SPROFIL_GPERF_SOCKET", dir_ / "none.sock");
  const Proc p = run({kProg, "n64flush"}, env);
  ASSERT_EQ(p.status, 0) << p.stderr_text;
  int err = -1;
  long long us = -1;
  unsigned long long sum = 0;
  ASSERT_EQ(sscanf(p.stdout_text.c_str(), "flush err=%d us=%lld sum=%llu", &err, &us, &sum), 3)
      << p.stdout_text;
  EXPECT_EQ(err, ERR_OSPROFILEFLUSH_HOST);
  EXPECT_LT(us, 100000);
  EXPECT_GT(sum, 0u);  // the local snapshot is still taken
  EXPECT_NE(p.stdout_text.find("done\n"), std::string::npos);
}

TEST_F(Live, GperfServeStopsCleanlyOnSigint) {
  const std::string gsock = dir_ / "g.sock";
  Proc server = spawn({kTool, "gperf", "--serve", "--dir", dir_.path(), "--socket", gsock}, env_);
  ASSERT_TRUE(wait_exists(gsock));
  kill(server.pid, SIGINT);
  finish(&server, 10);
  EXPECT_EQ(server.status, 0) << server.stderr_text;
  EXPECT_NE(access(gsock.c_str(), F_OK), 0);
}

// Another user (nobody) is refused by the peer-credential check, with a clear message. The
// directory and socket are opened up by hand (the runtime makes them 0700, which alone keeps
// nobody out) so that the connection reaches the check.
TEST_F(Live, AnotherUserIsRefused) {
  if (geteuid() != 0 || access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "needs root";
  Proc p = spawn({kProg, "api", "3"}, env_);
  const int pid = wait_ready(p);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(chmod(dir_.path().c_str(), 0711), 0);
  ASSERT_EQ(chmod((dir_ / "sprofil").c_str(), 0711), 0);
  ASSERT_EQ(chmod(sock(pid).c_str(), 0777), 0);
  const Proc f = run({"setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", kTool,
                      "fetch", sock(pid), "-o", dir_ / "stolen.sprof"});
  EXPECT_NE(f.status, 0);
  EXPECT_NE(f.stderr_text.find("refused: the profiled process belongs to another user"),
            std::string::npos)
      << f.stderr_text;
  EXPECT_NE(access((dir_ / "stolen.sprof").c_str(), F_OK), 0);
  profile::Profile s;
  std::string err;
  EXPECT_TRUE(live::fetch_profile(sock(pid), &s, &err)) << err;  // the owner still is served
  finish(&p);
  EXPECT_EQ(p.status, 0) << p.stderr_text;
  EXPECT_EQ(p.stdout_text, "ready " + std::to_string(pid) + "\ndone\n");
}

int connect_raw(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Stalled clients and garbage requests (fuzzed, fixed seed) get dropped or an error answer;
// a proper fetch still works, and the program's output, exit and sampling are unaffected.
TEST_F(Live, StalledAndGarbageClientsDoNotDisturb) {
  Proc p = spawn({kProg, "api", "5"}, env_);
  const int pid = wait_ready(p);
  ASSERT_GT(pid, 0);
  const std::string s = sock(pid);
  std::vector<int> stalled;
  for (int i = 0; i < 3; ++i) stalled.push_back(connect_raw(s));  // connect, never write
  std::mt19937 rng(11);
  int answered = 0;
  for (int i = 0; i < 100; ++i) {
    const int fd = connect_raw(s);
    ASSERT_GE(fd, 0);
    std::vector<uint8_t> junk(rng() % 64);
    for (auto& b : junk) b = static_cast<uint8_t>(rng());
    if (i % 4 == 0 && junk.size() >= 4) std::memcpy(junk.data(), "SPLQ", 4);  // near misses
    if (i % 8 == 1) {  // a well-formed header with a bad version / op
      live::Message m{};
      std::memcpy(m.magic, "SPLQ", 4);
      m.version = i % 16 == 1 ? 99 : 1;
      m.op_or_status = 7;
      junk.assign(reinterpret_cast<uint8_t*>(&m), reinterpret_cast<uint8_t*>(&m) + sizeof m);
    }
    if (!junk.empty()) (void)send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
    shutdown(fd, SHUT_WR);
    pollfd pf{fd, POLLIN, 0};
    if (poll(&pf, 1, 3000) > 0) {  // an answer, or the server closing: never a hang
      live::Message m{};
      if (recv(fd, &m, sizeof m, MSG_WAITALL) == static_cast<ssize_t>(sizeof m)) {
        EXPECT_EQ(std::memcmp(m.magic, "SPLA", 4), 0);
        EXPECT_NE(m.op_or_status, 0u);
        ++answered;
      }
    }
    close(fd);
  }
  EXPECT_GT(answered, 0);
  profile::Profile snap;
  std::string err;
  EXPECT_TRUE(live::fetch_profile(s, &snap, &err, 20000)) << err;
  EXPECT_GT(total(snap), 0u);
  // A client that disconnects mid-reply: ask, read 10 bytes, close. Never SIGPIPE.
  for (int i = 0; i < 5; ++i) {
    const int fd = connect_raw(s);
    live::Message m{};
    std::memcpy(m.magic, "SPLQ", 4);
    m.version = 1;
    m.op_or_status = live::kOpSnapshot;
    (void)send(fd, &m, sizeof m, MSG_NOSIGNAL);
    char b[10];
    (void)recv(fd, b, sizeof b, MSG_WAITALL);
    close(fd);
  }
  for (int fd : stalled) close(fd);
  finish(&p);
  EXPECT_EQ(p.status, 0) << p.stderr_text;
  EXPECT_EQ(p.stdout_text, "ready " + std::to_string(pid) + "\ndone\n");
  EXPECT_EQ(p.stderr_text, "");
}

TEST_F(Live, HundredConcurrentFetches) {
  Proc p = spawn({kProg, "api", "5"}, env_);
  const int pid = wait_ready(p);
  ASSERT_GT(pid, 0);
  std::atomic<int> ok{0};
  std::vector<std::string> errors(100);
  std::vector<std::thread> threads;
  for (int i = 0; i < 100; ++i)
    threads.emplace_back([&, i] {
      profile::Profile s;
      if (live::fetch_profile(sock(pid), &s, &errors[i], 30000) && s.pid == pid) ++ok;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 100) << errors[0];
  finish(&p);
  EXPECT_EQ(p.status, 0) << p.stderr_text;
}

// `sprofil top` with stdout not a terminal: one block per interval, burn_hot() on top; it ends by
// itself when the program exits.
TEST_F(Live, TopPlainBlocksAndEndsWithTheProgram) {
  Proc p = spawn({kProg, "api", "2.5"}, env_);
  const int pid = wait_ready(p);
  ASSERT_GT(pid, 0);
  const Proc t = run({kTool, "top", std::to_string(pid), "-i", "0.5", "--limit", "3"}, env_);
  finish(&p);
  EXPECT_EQ(p.status, 0);
  EXPECT_EQ(t.status, 0) << t.stderr_text;
  size_t blocks = 0, burns = 0;
  for (size_t at = 0; (at = t.stdout_text.find("sprofil top: pid ", at)) != std::string::npos; ++at)
    ++blocks;
  for (size_t at = 0; (at = t.stdout_text.find("burn_hot(", at)) != std::string::npos; ++at)
    ++burns;
  EXPECT_GE(blocks, 3u) << t.stdout_text;  // ~4 intervals of 0.5 s in 2.5 s, and the end
  EXPECT_GE(burns, 2u) << t.stdout_text;
  EXPECT_NE(t.stdout_text.find("is gone"), std::string::npos) << t.stdout_text;
}

// `sprofil top` in a real terminal (tmux): it draws the view, and q quits it.
TEST_F(Live, TopInATerminalQuitsOnQ) {
  if (access("/usr/bin/tmux", X_OK) != 0) GTEST_SKIP() << "no tmux";
  Proc p = spawn({kProg, "api", "5"}, env_);
  const int pid = wait_ready(p);
  ASSERT_GT(pid, 0);
  const std::string server = "sprofil_live_" + std::to_string(getpid());
  Env env = env_;
  env.emplace_back("TERM", "xterm");
  const Proc started = run({"tmux", "-L", server, "new-session", "-d", "-s", "top", "-x", "160",
                            "-y", "40", kTool + " top " + sock(pid) + " -i 0.3"},
                           env);
  ASSERT_EQ(started.status, 0) << started.stderr_text;
  std::string screen;
  for (int i = 0; i < 100 && screen.find("burn_hot(") == std::string::npos; ++i) {  // 10 s
    usleep(100000);
    screen = run({"tmux", "-L", server, "capture-pane", "-p", "-t", "top"}, env).stdout_text;
  }
  EXPECT_NE(screen.find("[q quit, p pause, s sort]"), std::string::npos) << screen;
  EXPECT_NE(screen.find("burn_hot("), std::string::npos) << screen;
  run({"tmux", "-L", server, "send-keys", "-t", "top", "q"}, env);
  bool ended = false;
  for (int i = 0; i < 50 && !ended; ++i) {  // 5 s
    usleep(100000);
    ended = run({"tmux", "-L", server, "has-session", "-t", "top"}, env).status != 0;
  }
  EXPECT_TRUE(ended) << "top did not quit on q";
  run({"tmux", "-L", server, "kill-server"}, env);
  finish(&p);
  EXPECT_EQ(p.status, 0) << p.stderr_text;
}

}  // namespace

}  // namespace sprofil::live_test
