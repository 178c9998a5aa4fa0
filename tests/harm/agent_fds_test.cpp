// The agent holds no file descriptor after start-up. A program that
// closes every descriptor it did not open and reuses the numbers for its own files (a buffered
// log flushed at exit, a dlopen that makes the profile grow, a forked child writing to fd 3)
// sees the same results natively, under `sprofil record` and under the agent alone.
// The perf clock is left out here: its perf-event descriptors are the other half of the
// program's descriptors sprofil holds, handled with the clocks (src/clock), not by the agent;
// add "perf" to kClocks once it is.
#include "agent_common.hpp"

namespace sprofil::harm_test {
namespace {

const char* const kClocks[] = {"cpu", "itimer", "wall"};

TEST(AgentFds, ProgramThatClosesAndReusesDescriptors) {
  const Outcome native = run_once("", {kFds, kPlugin});
  ASSERT_EQ(native.status, 0) << native.err;
  // The files the program writes, natively: the log reached its fd 3 and the child's write too.
  ASSERT_NE(native.files.at("log.txt").find("log fd 3\n"), std::string::npos);
  ASSERT_NE(native.files.at("log.txt").find("child status 7\n"), std::string::npos);
  ASSERT_NE(native.files.at("log.txt").find("child wrote to fd 3\n"), std::string::npos);
  for (const char* clock : kClocks) {
    SCOPED_TRACE(std::string("clock ") + clock);
    const Outcome o = run_once(clock, {kFds, kPlugin});
    EXPECT_EQ(o.status, native.status);
    EXPECT_EQ(o.out, native.out);
    EXPECT_EQ(o.err, native.err);
    EXPECT_EQ(o.files, native.files);
    EXPECT_EQ(o.profile, "ok");
  }
}

TEST(AgentFds, AgentAloneKeepsCountingThePlugin) {
  const Outcome native = run_once("", {kFds, kPlugin});
  TempDir out;
  const std::string prof = out / "p.sprof";
  const Outcome o = run_once("", {kFds, kPlugin}, {}, agent_env(prof, "cpu"));
  EXPECT_EQ(o.status, native.status);
  EXPECT_EQ(o.out, native.out);
  EXPECT_EQ(o.err, native.err);  // and the agent had nothing to say
  EXPECT_EQ(o.files, native.files);
  // The profile grew at the dlopen after close_range and still reads back, with the plugin's
  // samples: it burns ~150 ms of CPU in the plugin (at 1000 Hz, well over 20 samples).
  const profile::Profile p = agent_test::read(prof);
  EXPECT_TRUE(p.finished());
  ASSERT_GE(regions_named(p, "agent_plugin.so"), 1);
  uint64_t in_plugin = 0;
  for (const auto& r : p.regions)
    if (r.path.find("agent_plugin.so") != std::string::npos) in_plugin += r.total();
  EXPECT_GE(in_plugin, 20u);
}

// The fd table the program has natively: a single-threaded program's start exchange with the
// record parent and its flushes (exec, exit) keep their fds low and close them before the
// program runs again (clock/drain_client.cpp, Alone), instead of growing its fd table to
// RLIMIT_NOFILE's limit for good (32768 entries at a limit of 20,000). A shell prints its
// FDSize, then execs grep to print the new image's (exec keeps the table): the same natively
// and under every clock.
TEST(AgentFds, SingleThreadedProgramKeepsItsFdTable) {
  const Args argv = {"/bin/sh", "-c",
                     "grep FDSize /proc/$$/status; exec grep FDSize /proc/self/status"};
  const Outcome native = run_once("", argv);
  ASSERT_EQ(native.status, 0) << native.err;
  ASSERT_NE(native.out.find("FDSize:"), std::string::npos) << native.out;
  expect_no_harm(argv);
}

// The program replaces the profile file by one of its own before the dlopen: the agent sees
// that the path is no longer its file, does not touch it, says so once and the program's file
// is intact.
TEST(AgentFds, ProfileReplacedByTheProgramIsLeftAlone) {
  TempDir out;
  const std::string prof = out / "p.sprof";
  Env env = agent_env(prof, "cpu");
  env.emplace_back("AGENT_FDS_REPLACE", prof);
  const Outcome o = run_once("", {kFds, kPlugin}, {}, env);
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_TRUE(slurp(prof) == "mine\n") << "the program's file changed";
  EXPECT_EQ(agent_test::lines_with(o.err, "is no longer the profile").size(), 1u) << o.err;
  EXPECT_NE(o.files.at("log.txt").find("child status 7\n"), std::string::npos);
}

}  // namespace
}  // namespace sprofil::harm_test
