// The "do no harm" harness: runs a real program natively and under `sprofil record` with each
// clock, each time in a fresh scratch directory prepared the same way, and compares what a
// user can see: the exit status, stdout, stderr (less sprofil's own lines) and every file the
// program leaves in its directory, byte for byte. The profile must read back.
#pragma once

#include <sys/stat.h>
#include <sys/wait.h>
#include <algorithm>

#include <functional>
#include <map>

#include "agent/helpers.hpp"

namespace sprofil::harm_test {

using agent_test::Args;
using agent_test::Env;
using agent_test::Result;
using agent_test::TempDir;

// What a user can observe of one run.
struct Outcome {
  int status = -1;
  std::string ended;  // "exited N" or "killed by signal N", as the caller's waitpid saw it
  std::string out, err;
  std::string err_with_agent;  // stderr less the tool's own lines only ("sprofil record: ...")
  std::map<std::string, std::string> files;  // name -> contents ("<dir>", "-> target" for links)
  std::string profile;                       // the profile written ("" for a native run)
};

// The lines of err that do not start with `prefix`.
inline std::string lines_without(const std::string& err, const char* prefix) {
  std::string kept, line;
  std::istringstream in(err);
  while (std::getline(in, line))
    if (line.rfind(prefix, 0) != 0) kept += line + "\n";
  return kept;
}

// stderr without the lines sprofil itself writes (the tool's and the agent's).
inline std::string program_stderr(const std::string& err) {
  return lines_without(err, "sprofil");
}

// stderr without the tool's own lines ("sprofil record: ..."): what the program and the agent
// in it wrote.
inline std::string without_tool_lines(const std::string& err) {
  return lines_without(err, "sprofil record:");
}

inline std::map<std::string, std::string> snapshot_dir(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    const std::string rel = e.path().string().substr(dir.size() + 1);
    if (e.is_symlink())
      files[rel] = "-> " + std::filesystem::read_symlink(e.path()).string();
    else if (e.is_directory())
      files[rel] = "<dir>";
    else {
      std::ifstream in(e.path(), std::ios::binary);
      std::ostringstream s;
      s << in.rdbuf();
      files[rel] = s.str();
    }
  }
  return files;
}

// The clocks a test should try here: every clock, perf only where perf events are allowed,
// and then twice: "perf" (record's default, sampled from outside: nothing loaded into the
// program) and "perf+agent" (record --agent: the agent in the program, drain mode).
inline std::vector<std::string> clocks() {
  std::vector<std::string> v{"cpu", "itimer", "wall", "sampler"};
  if (agent_test::perf_probe() == 0) v.insert(v.begin(), {"perf", "perf+agent"});
  return v;
}

// clocks() where the agent is in the program (all but "perf", record's default): for the tests
// of what the agent does there (its signals, its fds, its files).
inline std::vector<std::string> agent_clocks() {
  std::vector<std::string> v = clocks();
  v.erase(std::remove(v.begin(), v.end(), "perf"), v.end());
  return v;
}

// The agent's SPROFIL_CLOCK for one of clocks()' entries.
inline std::string agent_clock(const std::string& clock) {
  return clock.substr(0, clock.find("+agent"));
}

// `sprofil record`'s options for one of clocks()' entries.
// "CLOCK+agent": with --agent.
inline Args clock_options(const std::string& clock) {
  const size_t plus = clock.find("+agent");
  if (plus != std::string::npos) return {"--agent", "--clock", clock.substr(0, plus)};
  return {"--clock", clock};
}

// Runs argv in a fresh scratch directory (prepared by `setup`, which gets its path): natively
// when clock is empty, else under `sprofil record --clock CLOCK` with the profile written
// outside that directory. `shell` = run argv through /bin/sh -c (for ulimit and the like).
inline Outcome run_once(const std::string& clock, const Args& argv,
                        const std::function<void(const std::string&)>& setup = {},
                        const Env& env = {}, const Args& record_opts = {}) {
  TempDir work, outdir;
  const std::string cwd = work / "w";
  std::filesystem::create_directory(cwd);
  if (setup) setup(cwd);
  Args a;
  Outcome o;
  if (!clock.empty()) {
    o.profile = outdir / "run.sprof";
    a = {agent_test::kTool, "record"};
    const Args c = clock_options(clock);
    a.insert(a.end(), c.begin(), c.end());
    a.insert(a.end(), {"-o", o.profile});
    a.insert(a.end(), record_opts.begin(), record_opts.end());
    a.push_back("--");
  }
  a.insert(a.end(), argv.begin(), argv.end());
  Result r = agent_test::run(a, env, cwd);
  o.status = r.status;
  o.ended = WIFSIGNALED(r.wait_status)
                ? "killed by signal " + std::to_string(WTERMSIG(r.wait_status))
                : "exited " + std::to_string(WEXITSTATUS(r.wait_status));
  o.out = r.out;
  o.err = clock.empty() ? r.err : program_stderr(r.err);
  o.err_with_agent = clock.empty() ? r.err : without_tool_lines(r.err);
  o.files = snapshot_dir(cwd);
  if (!clock.empty()) {
    // Keep the profile past the scratch directory's end: copy it into memory as a path check.
    profile::Profile p;
    std::string why;
    if (!profile::read_profile(o.profile, &p, &why))
      o.profile = "unreadable: " + why;
    else
      o.profile = "ok";
  }
  return o;
}

// Natively and under every clock: the same status, output and files; the profile reads back.
// `silent`: the agent writes no line of its own into the program's stderr either.
inline void expect_no_harm(const Args& argv,
                           const std::function<void(const std::string&)>& setup = {},
                           const Env& env = {}, bool silent = false) {
  const Outcome native = run_once("", argv, setup, env);
  for (const std::string& clock : clocks()) {
    SCOPED_TRACE("clock " + clock);
    const Outcome o = run_once(clock, argv, setup, env);
    EXPECT_EQ(o.status, native.status);
    EXPECT_EQ(o.ended, native.ended);
    EXPECT_EQ(o.out, native.out);
    EXPECT_EQ(o.err, native.err);
    if (silent) {
      EXPECT_EQ(o.err_with_agent, native.err);
    }
    EXPECT_EQ(o.files, native.files);
    EXPECT_EQ(o.profile, "ok");
  }
}

}  // namespace sprofil::harm_test
