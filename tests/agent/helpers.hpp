// Helpers of the agent tests: run the real tool and programs (capturing their output), read
// the profiles they write (read_profile and `sprofil report --format json`), and the truth
// files the programs write.
#pragma once

#include <gtest/gtest.h>

#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../common/process.hpp"
#include "format/sprof_format.h"
#include "profile/profile.hpp"
#include "profile/reader.hpp"
#include "profile/writer.hpp"

namespace sprofil::agent_test {

using Json = nlohmann::json;
using testproc::Args;
using testproc::Env;

inline const std::string kTool = SPROFIL_TOOL;
inline const std::string kRuntime = SPROFIL_RUNTIME;
inline const std::string kDemo = DEMO_PROG;
inline const std::string kProg = AGENT_PROG;
inline const std::string kSeccomp = SECCOMP_LAUNCHER;

// A scratch directory, removed at the end (kept when SPROFIL_KEEP_TEMP is set).
class TempDir : public testproc::TempDir {
 public:
  TempDir() : testproc::TempDir("sprofil_agent") {}
};

struct Result {
  int status = -1;  // exit code, or 128 + signal
  std::string out, err;
  int wait_status = 0;  // as waitpid gave it: exited or killed, which signal
};

using testproc::read_fd;
using Spawned = testproc::Proc;  // pid, and memfds holding stdout and stderr

// Starts argv (PATH lookup) with env changes, stdout and stderr captured, in `cwd` if given.
inline Spawned spawn(const Args& argv, const Env& env = {}, const std::string& cwd = "") {
  return testproc::spawn(argv, env, cwd);
}

// Waits for the process (bounded by the test's own timeout) and collects its output.
inline Result finish(Spawned s) {
  testproc::finish(&s, 600);
  return Result{s.status, s.stdout_text, s.stderr_text, s.wait_status};
}

inline Result run(const Args& argv, const Env& env = {}, const std::string& cwd = "") {
  return finish(spawn(argv, env, cwd));
}

// `sprofil record [opts] -o out -- cmd...`, with the agent (--agent: these tests are the
// agent's) unless opts say how to sample (--agentless or --agent).
inline Result record(const std::string& out, const Args& opts, const Args& cmd,
                     const Env& env = {}) {
  Args a{kTool, "record"};
  if (std::find(opts.begin(), opts.end(), "--agentless") == opts.end() &&
      std::find(opts.begin(), opts.end(), "--agent") == opts.end())
    a.push_back("--agent");
  a.insert(a.end(), opts.begin(), opts.end());
  a.insert(a.end(), {"-o", out, "--"});
  a.insert(a.end(), cmd.begin(), cmd.end());
  return run(a, env);
}

inline std::string describe(const Result& r) {
  return "status " + std::to_string(r.status) + "\nstdout:\n" + r.out + "\nstderr:\n" + r.err;
}

// `sprofil report FILE --format json [--by BY]`, parsed; null on failure (with a test failure).
inline Json report_json(const std::string& file, const std::string& by = "function") {
  Result r = run({kTool, "report", file, "--format", "json", "--by", by});
  EXPECT_EQ(r.status, 0) << describe(r);
  if (r.status != 0) return Json();
  Json j = Json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  return j.is_discarded() ? Json() : j;
}

// Sum of a column over the rows with this name ("object" rows are named by object).
inline double row_sum(const Json& j, const std::string& name, const char* field) {
  double v = 0;
  if (!j.contains("rows")) return 0;
  for (const Json& row : j["rows"])
    if (row.value("name", "") == name) v += row.value(field, 0.0);
  return v;
}
inline double samples_of(const Json& j, const std::string& name) {
  return row_sum(j, name, "samples");
}
inline double percent_of(const Json& j, const std::string& name) {
  return row_sum(j, name, "percent");
}

inline profile::Profile read(const std::string& path) {
  profile::Profile p;
  std::string err;
  EXPECT_TRUE(profile::read_profile(path, &p, &err)) << path << ": " << err;
  return p;
}

// "name value" lines.
inline std::map<std::string, double> read_truth(const std::string& path) {
  std::map<std::string, double> t;
  std::ifstream in(path);
  std::string name;
  double v;
  while (in >> name >> v) t[name] = v;
  EXPECT_FALSE(t.empty()) << "no truth in " << path;
  return t;
}

// The perf clock's periods are task-clock time, which also counts the time the hypervisor
// steals while the thread holds its vCPU; the thread's CPU clock (the truth) and rusage leave
// it out. The steal during agent_prog's burn `name` (NAME_task_clock - NAME, burn_noting), 0
// where perf events are denied. Tests hold lower bounds against the CPU time and upper ones
// against the CPU time plus this steal.
// Every count in the file, overflow included, is a sample delivered and not lost.
inline void expect_consistent(const profile::Profile& p, const std::string& what) {
  EXPECT_GT(p.delivered, 0u) << what;
  EXPECT_EQ(p.total_samples(), p.delivered - p.lost)
      << what << ": overflow " << p.overflow << ", lost " << p.lost;
}

inline double steal_of(const std::map<std::string, double>& truth, const std::string& name) {
  const auto tc = truth.find(name + "_task_clock"), cpu = truth.find(name);
  if (tc == truth.end() || cpu == truth.end()) return 0;
  return std::max(0.0, tc->second - cpu->second);
}

inline std::vector<std::string> lines_with(const std::string& text, const std::string& needle) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.find(needle) != std::string::npos) out.push_back(line);
  return out;
}

// Files in dir, by name.
inline std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> v;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    v.push_back(e.path().filename().string());
  std::sort(v.begin(), v.end());
  return v;
}

// `sprofil record -o OUT` writes one run profile holding every process. For the tests that
// look at each process alone: writes each process's image as the file the runtime itself
// names (OUT, OUT.PID, OUT.PID.N), OUT last, and returns those names.
inline std::vector<std::string> explode_run(const std::string& out) {
  profile::Profile run = read(out);
  const std::vector<profile::Profile> images = profile::process_images(run);
  std::vector<std::string> names;
  for (size_t i = run.processes.size(); i-- > 0;) {
    const std::string name = out + run.processes[i].name;
    std::string err;
    EXPECT_TRUE(profile::write_profile(images[i], name, &err)) << err;
    names.push_back(name);
  }
  return names;
}

// 0 if a user-space task-clock perf event can be opened here (what the perf clock needs),
// else the errno.
inline int perf_probe() {
  perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.type = PERF_TYPE_SOFTWARE;
  a.size = sizeof a;
  a.config = PERF_COUNT_SW_TASK_CLOCK;
  a.sample_period = 1000000;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  a.disabled = 1;
  const long fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) return errno;
  close(static_cast<int>(fd));
  return 0;
}

// The clock for tests about something else: perf where it works (exact under CPU contention,
// unlike the tick-driven cpu and itimer clocks), else cpu.
inline std::string precise_clock() {
  return perf_probe() == 0 ? "perf" : "cpu";
}

#define SKIP_WITHOUT_PERF()                                                                \
  do {                                                                                     \
    if (const int perf_err = ::sprofil::agent_test::perf_probe())                          \
      GTEST_SKIP() << "perf_event_open of a user-space task clock fails here ("            \
                   << strerror(perf_err) << "); see /proc/sys/kernel/perf_event_paranoid"; \
  } while (0)

// `sprofil record MODE -F 1000 -o out -- agent_prog forever pidfile`, its program killed with
// SIGKILL delay_ms after it wrote its pid (*child: that pid, 0 if it never did within 5 s,
// and then not killed). The tool's result, once it ended.
inline Result record_killed_after(const std::string& mode, const std::string& out,
                                  const std::string& pidfile, int delay_ms, pid_t* child) {
  Spawned s =
      spawn({kTool, "record", mode, "-F", "1000", "-o", out, "--", kProg, "forever", pidfile});
  *child = 0;
  for (int i = 0; i < 5000 && *child == 0; ++i) {  // at most 5 s
    std::ifstream in(pidfile);
    if (!(in >> *child)) {
      *child = 0;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  if (*child > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    kill(*child, SIGKILL);
  }
  return finish(std::move(s));
}

}  // namespace sprofil::agent_test
