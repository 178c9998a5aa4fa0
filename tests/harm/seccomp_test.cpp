// A program that installs a seccomp filter (tests/harm/progs/agent_sandbox.cpp): natively and
// under every clock the same exit status, output and files (the filter kills the process on
// any system call the program does not make itself, so any call of sprofil's after the filter
// would kill it); in drain mode the threads sampled before the filter stay sampled after it;
// the profile and the report say what was not sampled (src/clock/sandbox.cpp).
#include <nlohmann/json.hpp>

#include "format/sprof_format.h"
#include "harness.hpp"
#include "profile/reader.hpp"

namespace sprofil::harm_test {
namespace {

const std::string kSandbox = AGENT_SANDBOX;
const std::string kPlugin = AGENT_PLUGIN;

TEST(Seccomp, ProgramThatInstallsAFilterRunsAsNatively) {
  for (const char* how : {"prctl", "syscall"}) {
    SCOPED_TRACE(how);
    const Outcome native = run_once("", {kSandbox, how, kPlugin});
    ASSERT_EQ(native.status, 0) << native.err;
    EXPECT_EQ(native.out,
              "filter installed\nthread joined\nforked child: 0\nspawned with the copied "
              "environment: 0\nexec with the "
              "copied environment: 0\ndlopen: ok\ndone\n");
    expect_no_harm({kSandbox, how, kPlugin});
  }
  // With the live service (its thread and socket, and a socket for a forked child's): it ends
  // at the filter, its socket removed then, not at the exit.
  expect_no_harm({kSandbox, "prctl", kPlugin}, {}, {{"SPROFIL_LIVE", "1"}});
}

// The samples of burn_after (the same work as burn_before, after the filter) over those of
// burn_before, from the report of `profile`; -1 if the report fails.
double after_over_before(const std::string& profile, std::string* text) {
  const Result r = agent_test::run({agent_test::kTool, "report", profile, "--format", "json"});
  if (r.status != 0) return -1;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  double before = 0, after = 0;
  for (const auto& row : j["rows"]) {
    const std::string name = row.value("name", "");
    if (name.find("burn_before") != std::string::npos) before += row.value("samples", 0.0);
    if (name.find("burn_after") != std::string::npos) after += row.value("samples", 0.0);
  }
  *text = agent_test::run({agent_test::kTool, "report", profile}).out;
  return before > 0 ? after / before : -1;
}

// Records agent_sandbox (its filter installed `how`) with the record options `opts`: the run
// succeeds, and its root process is flagged sandboxed and finished. Returns the report's
// ratio (after_over_before) and its text.
double record_sandboxed(const Args& opts, const char* how, std::string* text) {
  TempDir dir;
  const std::string out = dir / "p.sprof";
  Result r = agent_test::record(out, opts, {kSandbox, how, kPlugin});
  EXPECT_EQ(r.status, 0) << agent_test::describe(r);
  profile::Profile p;
  std::string error;
  EXPECT_TRUE(profile::read_profile(out, &p, &error)) << error;
  if (p.processes.empty()) return -1;
  EXPECT_NE(p.processes[0].flags & SPROF_F_SANDBOXED, 0u);
  // Finished: by the record parent in drain mode, at the filter with a signal per sample.
  EXPECT_NE(p.processes[0].flags & SPROF_F_FINISHED, 0u);
  const double ratio = after_over_before(out, text);
  EXPECT_NE(text->find("installed a seccomp filter"), std::string::npos) << *text;
  for (const char* format : {"json", "html"}) {
    const Result rep =
        agent_test::run({agent_test::kTool, "report", out, "--format", format, "-o", "-"});
    EXPECT_NE(rep.out.find(format == std::string("json") ? "\"sandboxed_warning\""
                                                         : "installed a seccomp filter"),
              std::string::npos)
        << format;
  }
  return ratio;
}

// Drain mode (the default): the main thread's event, which the record parent holds, samples
// it after the filter as before (the same work: about as many samples, 40% either way for a
// loaded machine); the thread and the processes started after it are not sampled, and the
// profile's flag and the report say so.
TEST(Seccomp, DrainModeSamplesOnAndTheReportSaysWhatItDidNot) {
  SKIP_WITHOUT_PERF();
  std::string text;
  const double ratio = record_sandboxed({}, "prctl", &text);
  EXPECT_GT(ratio, 0.6) << text;
  EXPECT_LT(ratio, 1.4) << text;
  EXPECT_NE(text.find("were not sampled"), std::string::npos) << text;
}

// With a signal per sample (the cpu clock) sampling stops at the filter: no sample of
// burn_after, the file completed there.
TEST(Seccomp, SignalPerSampleStopsAtTheFilter) {
  std::string text;
  EXPECT_EQ(record_sandboxed({"--clock", "cpu"}, "syscall", &text), 0.0) << text;
}

}  // namespace
}  // namespace sprofil::harm_test
