// Termination signals that reach `sprofil record` while its command runs (src/record/relay.hpp):
// the command gets each once, whoever sent it, and the profile is written. agent_prog's
// `sigcount` counts the SIGINTs and SIGTERMs it gets and ends 0.2 s of wall time after the first
// (within the relay's grace of a second).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "helpers.hpp"

namespace sprofil::agent_test {
namespace {

// The pid agent_prog wrote to pidfile (0 if it did not within 10 s).
pid_t wait_pid(const std::string& pidfile) {
  for (int i = 0; i < 1000; ++i) {
    std::ifstream in(pidfile);
    pid_t pid = 0;
    if (in >> pid && pid > 0) return pid;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return 0;
}

// The profile is written, with the command's samples, and no run directory is left behind.
void expect_profile(const TempDir& dir, const std::string& out, const Result& r) {
  EXPECT_EQ(list_dir(dir.path()).size(), 3u)  // out, the truth and the pid file
      << ::testing::PrintToString(list_dir(dir.path())) << describe(r);
  profile::Profile p = read(out);
  EXPECT_GT(p.total_samples(), 0u) << describe(r);
}

// A SIGTERM sent to record alone (a script's `kill $!`) reaches the command, once, after the
// relay's grace; the command ends by itself and the profile is written. Before, record died of
// it: no profile, the command left running.
TEST(RecordSignals, TermToRecordAloneReachesTheCommand) {
  TempDir dir;
  const std::string out = dir / "t.sprof", truth = dir / "truth", pidfile = dir / "pid";
  Spawned s =
      spawn({kTool, "record", "-o", out, "--", kProg, "--truth", truth, "sigcount", pidfile});
  ASSERT_GT(wait_pid(pidfile), 0);
  ASSERT_EQ(kill(s.pid, SIGTERM), 0);
  Result r = finish(s);
  EXPECT_EQ(r.status, 0) << describe(r);
  auto t = read_truth(truth);
  EXPECT_EQ(t["sigterm"], 1) << describe(r);
  EXPECT_EQ(t["sigint"], 0);
  expect_profile(dir, out, r);
}

// SIGINT and SIGTERM sent to record alone from another session (setsid): relayed.
TEST(RecordSignals, SignalsToRecordFromAnotherSessionAreRelayed) {
  for (const char* sig : {"INT", "TERM"}) {
    SCOPED_TRACE(sig);
    TempDir dir;
    const std::string out = dir / "t.sprof", truth = dir / "truth", pidfile = dir / "pid";
    Spawned s =
        spawn({kTool, "record", "-o", out, "--", kProg, "--truth", truth, "sigcount", pidfile});
    ASSERT_GT(wait_pid(pidfile), 0);
    const Result k = run({"setsid", "-w", "kill", std::string("-") + sig, std::to_string(s.pid)});
    EXPECT_EQ(k.status, 0) << describe(k);
    Result r = finish(s);
    EXPECT_EQ(r.status, 0) << describe(r);
    auto t = read_truth(truth);
    EXPECT_EQ(t[std::string(sig) == "INT" ? "sigint" : "sigterm"], 1) << describe(r);
    expect_profile(dir, out, r);
  }
}

// A signal to the whole process group from outside it (a CI runner's or systemd's kill of a
// job): record (in a session of its own, setsid) and the command both get it; the command ends
// within the relay's grace, so record relays nothing and the command gets it once.
TEST(RecordSignals, GroupSignalFromOutsideReachesTheCommandOnce) {
  TempDir dir;
  const std::string out = dir / "t.sprof", truth = dir / "truth", pidfile = dir / "pid";
  Spawned s = spawn(
      {"setsid", kTool, "record", "-o", out, "--", kProg, "--truth", truth, "sigcount", pidfile});
  ASSERT_GT(wait_pid(pidfile), 0);
  ASSERT_EQ(getpgid(s.pid), s.pid) << "setsid did not make record a process group's leader";
  ASSERT_EQ(kill(-s.pid, SIGTERM), 0);
  Result r = finish(s);
  EXPECT_EQ(r.status, 0) << describe(r);
  auto t = read_truth(truth);
  EXPECT_EQ(t["sigterm"], 1) << describe(r);
  expect_profile(dir, out, r);
}

// timeout(1) signals its child (record) and then its whole process group (the command too):
// the command gets the SIGTERM once, from the group, and record relays nothing.
TEST(RecordSignals, TimeoutsSignalReachesTheCommandOnce) {
  TempDir dir;
  const std::string out = dir / "t.sprof", truth = dir / "truth", pidfile = dir / "pid";
  Result r = run({"timeout", "-s", "TERM", "0.5", kTool, "record", "-o", out, "--", kProg,
                  "--truth", truth, "sigcount", pidfile});
  EXPECT_EQ(r.status, 124) << describe(r);  // timeout's: the command timed out
  auto t = read_truth(truth);
  EXPECT_EQ(t["sigterm"], 1) << describe(r);
  expect_profile(dir, out, r);
}

// ^C in a terminal (tmux) goes to the whole foreground process group: the command gets one
// SIGINT, not a second from record, and the profile is written.
TEST(RecordSignals, CtrlCInATerminalReachesTheCommandOnce) {
  if (access("/usr/bin/tmux", X_OK) != 0) GTEST_SKIP() << "no tmux (Debian's tmux)";
  TempDir dir;
  const std::string out = dir / "t.sprof", truth = dir / "truth", pidfile = dir / "pid";
  const std::string server = "sprofil_record_" + std::to_string(getpid());
  const Env env{{"TERM", "xterm"}};
  const Result started =
      run({"tmux", "-L", server, "new-session", "-d", "-s", "rec", "-x", "160", "-y", "40",
           kTool + " record -o " + out + " -- " + kProg + " --truth " + truth + " sigcount " +
               pidfile + " 2>" + std::string(dir / "err")},
          env);
  ASSERT_EQ(started.status, 0) << describe(started);
  ASSERT_GT(wait_pid(pidfile), 0);
  run({"tmux", "-L", server, "send-keys", "-t", "rec", "C-c"}, env);
  bool ended = false;
  for (int i = 0; i < 300 && !ended; ++i) {  // 30 s
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ended = run({"tmux", "-L", server, "has-session", "-t", "rec"}, env).status != 0;
  }
  run({"tmux", "-L", server, "kill-server"}, env);
  ASSERT_TRUE(ended) << "record did not end after ^C";
  auto t = read_truth(truth);
  EXPECT_EQ(t["sigint"], 1);
  EXPECT_EQ(t["sigterm"], 0);
  profile::Profile p = read(out);
  EXPECT_GT(p.total_samples(), 0u);
}

}  // namespace
}  // namespace sprofil::agent_test
