// `sprofil record` as a user expects it: the real tool recording real programs, and the
// tool's answers to hostile inputs.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>

#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <tuple>

#include "format/sprof_format.h"
#include "helpers.hpp"
#include "secure_program.hpp"

namespace sprofil::record_test {
using namespace agent_test;  // tests/agent/helpers.hpp

namespace {

const std::string kStatic = STATIC_PROG;

Result record_nodash(const std::string& out, const Args& cmd, const std::string& cwd = "") {
  Args a{kTool, "record", "-o", out};
  a.insert(a.end(), cmd.begin(), cmd.end());
  return run(a, {}, cwd);
}

bool exists(const std::string& p) {
  struct stat st;
  return lstat(p.c_str(), &st) == 0;
}

// record's options end at the command's first word, so the command keeps its own options
// without `--`; with `--`, a later `--` is the command's.
TEST(Options, TheCommandKeepsEveryOptionWithoutDashDash) {
  TempDir dir;
  const std::string out = dir / "p.sprof";
  Result r = record_nodash(out, {"sh", "-c", "echo -o x", "sh", "-F", "1"});
  EXPECT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(r.out, "-o x\n");
  profile::Profile p = read(out);
  EXPECT_EQ(p.argv.at(0), "sh");
  EXPECT_EQ(list_dir(dir.path()), (std::vector<std::string>{"p.sprof"}));
  // With `--`, a `--` inside the command is the command's.
  r = run({kTool, "record", "-o", out, "--", "sh", "-c", "echo \"$@\"", "sh", "--", "-o", "y"});
  EXPECT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(r.out, "-- -o y\n");
}

TEST(Options, GccKeepsItsOutputOption) {
  if (run({"sh", "-c", "command -v gcc"}).status != 0) GTEST_SKIP() << "no gcc";
  TempDir dir;
  {
    std::ofstream f(dir / "hot.c");
    f << "int hot(int x) { return x * 3; }\n";
  }
  const std::string out = dir / "P";
  Result r = record_nodash(out, {"gcc", "-O2", "-c", "hot.c", "-o", "hot.o"}, dir.path());
  ASSERT_EQ(r.status, 0) << describe(r);
  std::ifstream obj(dir / "hot.o", std::ios::binary);
  char magic[4] = {};
  obj.read(magic, 4);
  EXPECT_EQ(std::string(magic, 4),
            "\x7f"
            "ELF")
      << "hot.o is not the object file";
  profile::Profile p = read(out);  // and P is a profile
  EXPECT_EQ(p.argv.at(0), "gcc");
}

// An output in a missing directory, or a directory as the output, fails with a non-zero
// status before the command runs.
TEST(Output, BadOutputFailsBeforeTheCommandRuns) {
  TempDir dir;
  const std::string mark = dir / "ran";
  Result r = record_nodash("/nonexistent/d/x.sprof", {"touch", mark});
  EXPECT_NE(r.status, 0) << describe(r);
  EXPECT_FALSE(exists(mark)) << "the command ran although its profile could not be written";
  EXPECT_NE(r.err.find("/nonexistent/d"), std::string::npos) << r.err;
  // A directory as the output: the same, at once.
  r = record_nodash(dir.path(), {"touch", mark});
  EXPECT_NE(r.status, 0) << describe(r);
  EXPECT_FALSE(exists(mark));
  EXPECT_NE(r.err.find("is a directory"), std::string::npos) << r.err;
}

// An output that is someone's data (a non-empty regular file that is not a profile: `-o main.c`
// for `-o main.sprof`) is refused with status 2 before the command runs, the file as it was;
// merge refuses it too. An empty file (mktemp's) and a profile (a rerun's) are replaced.
TEST(Output, AFileThatIsNotAProfileIsNeverReplaced) {
  const auto slurp = [](const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  TempDir dir;
  const std::string mark = dir / "ran", data = dir / "main.c";
  { std::ofstream(data) << "int main() { return 0; }\n"; }
  Result r = record_nodash(data, {"touch", mark});
  EXPECT_EQ(r.status, 2) << describe(r);
  EXPECT_FALSE(exists(mark)) << "the command ran although its profile would replace a file";
  EXPECT_NE(r.err.find("exists and is not a sprofil profile"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(data), "int main() { return 0; }\n");
  // A rerun replaces the profile it made; an empty file is replaced.
  const std::string p = dir / "p.sprof", empty = dir / "empty.sprof";
  ASSERT_EQ(record_nodash(p, {kProg, "burn", "0.05"}).status, 0);
  r = record_nodash(p, {kProg, "burn", "0.05"});
  EXPECT_EQ(r.status, 0) << describe(r);
  EXPECT_GT(read(p).delivered, 0u);
  { std::ofstream touch(empty); }
  r = record_nodash(empty, {kProg, "burn", "0.05"});
  EXPECT_EQ(r.status, 0) << describe(r);
  EXPECT_GT(read(empty).delivered, 0u);
  // merge: the same rule, the file as it was.
  r = run({kTool, "merge", "-o", data, p, empty});
  EXPECT_EQ(r.status, 1) << describe(r);
  EXPECT_NE(r.err.find("exists and is not a sprofil profile"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(data), "int main() { return 0; }\n");
}

// --scratch DIR: with the agent, the processes' files are kept in a private run directory made
// in DIR while the command runs (seen from inside the command), and the profile goes to -o;
// afterwards DIR is as it was. (Sampled from outside, no run directory is made.) A --scratch that
// cannot take the run directory, or an output whose directory cannot take the profile, fails with
// status 2 before the command runs.
TEST(Output, ScratchHoldsTheProcessesFilesWhileTheCommandRuns) {
  TempDir dir, scratch;
  const std::string out = dir / "run.sprof";
  const std::string during = dir / "during";
  const std::string script = "ls -A '" + scratch.path() + "' > '" + during + "'; ls -A '" +
                             dir.path() + "' >> '" + during + "'; '" + kProg + "' burn 0.3";
  Result r = run(
      {kTool, "record", "--agent", "--scratch", scratch.path(), "-o", out, "bash", "-c", script});
  ASSERT_EQ(r.status, 0) << describe(r);
  std::ifstream f(during);
  std::vector<std::string> seen;
  for (std::string line; std::getline(f, line);) seen.push_back(line);
  // The run directory in the scratch directory; in the output's directory only the list.
  ASSERT_EQ(seen.size(), 2u) << describe(r);
  EXPECT_EQ(seen[0].rfind(".run.sprof.sprofil-", 0), 0u) << seen[0];
  EXPECT_EQ(seen[1], "during");
  EXPECT_EQ(list_dir(scratch.path()), std::vector<std::string>{});
  EXPECT_EQ(list_dir(dir.path()), (std::vector<std::string>{"during", "run.sprof"}));
  EXPECT_EQ(read(out).processes.at(0).comm, "bash");
  EXPECT_NEAR(samples_of(report_json(out), "burn_main"), 0.3 * 1000, 0.3 * 0.3 * 1000);

  const std::string mark = dir / "ran";
  for (const auto& [scr, output, says] :
       {std::tuple<std::string, std::string, std::string>{"/nonexistent/scratch", out,
                                                          "--scratch /nonexistent/scratch"},
        {scratch.path(), "/nonexistent/d/x.sprof", "/nonexistent/d"}}) {
    r = run({kTool, "record", "--scratch", scr, "-o", output, "touch", mark});
    EXPECT_EQ(r.status, 2) << describe(r);
    EXPECT_FALSE(exists(mark)) << "the command ran although its profile could not be written";
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  }
  EXPECT_EQ(list_dir(scratch.path()), std::vector<std::string>{});
}

// A statically linked program, which the preloaded agent cannot enter, is refused with that
// reason before it runs, exit status 2.
// With the agent (--agent, or where perf events are denied): sampled from outside, record's
// default, a static program is profiled (tests/record/agentless_test.cpp).
TEST(Command, StaticBinaryIsRefusedWithTheReason) {
  TempDir dir;
  const std::string mark = dir / "ran";
  Result r = run({kTool, "record", "--agent", "-o", dir / "p.sprof", kStatic, mark});
  EXPECT_EQ(r.status, 2) << describe(r);
  EXPECT_EQ(r.err.rfind("sprofil record: cannot profile " + kStatic +
                            ": it is statically linked, so the preloaded agent cannot enter it; ",
                        0),
            0u)
      << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_FALSE(exists(mark));
  EXPECT_FALSE(exists(dir / "p.sprof"));
  EXPECT_EQ(r.err.find("no profile was written"), std::string::npos) << r.err;
}

// A setuid or setgid program of another user or group (secure_program.hpp), whose loader
// ignores LD_PRELOAD: refused the same way, before it runs.
TEST(Command, SetuidProgramIsRefusedWithTheReason) {
  const std::string prog = secure_program();
  if (prog.empty()) GTEST_SKIP() << "no setuid or setgid program of another user or group";
  TempDir dir;
  // --help: had it run, it would only have printed its usage.
  Result r = record_nodash(dir / "p.sprof", {prog, "--help"});
  EXPECT_EQ(r.status, 2) << describe(r);
  EXPECT_EQ(r.err.rfind("sprofil record: cannot profile " + prog + ": it is " + secure_kind(prog) +
                            ", and the dynamic loader ignores LD_PRELOAD for it, so the agent "
                            "cannot enter it; ",
                        0),
            0u)
      << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(list_dir(dir.path()), std::vector<std::string>{}) << "leftovers";
}

// Exit status 126 when the command is found but not executable, 127 when it is not found, as
// shells do; no profile and no run directory is left behind.
TEST(Command, ExitStatusesFollowTheShell) {
  TempDir dir;
  const std::string script = dir / "script.sh";
  {
    std::ofstream f(script);
    f << "#!/bin/sh\necho hi\n";
  }
  chmod(script.c_str(), 0644);
  Result r = record_nodash(dir / "p.sprof", {script});
  EXPECT_EQ(r.status, 126) << describe(r);
  EXPECT_NE(r.err.find("not executable"), std::string::npos) << r.err;
  r = record_nodash(dir / "p.sprof", {dir / "missing"});
  EXPECT_EQ(r.status, 127) << describe(r);
  r = record_nodash(dir / "p.sprof", {"sprofil-no-such-command-anywhere"});
  EXPECT_EQ(r.status, 127) << describe(r);
  EXPECT_NE(r.err.find("command not found"), std::string::npos) << r.err;
  EXPECT_FALSE(exists(dir / "p.sprof"));
  EXPECT_EQ(list_dir(dir.path()), (std::vector<std::string>{"script.sh"})) << "leftovers";
}

// Drain mode: the record parent removes the file of a process that took no sample when the
// process exits (sparing the file's release and a costlier removal at the end), and counts it
// with its CPU time as collect() would: at 10 Hz most of 30 /bin/true take none. (At 100 Hz a
// loaded machine once gave them 34 samples between them, where each runs about 1.3 ms of CPU
// here; the cause was not isolated.)
TEST(Run, DrainModeRemovesEmptyFilesAtTheirExitAndCountsThem) {
  SKIP_WITHOUT_PERF();
  TempDir dir;
  const std::string out = dir / "run.sprof";
  const std::string script =
      "for i in $(seq 30); do /bin/true; done; '" + kProg + "' burn 0.2; exit 0";
  Result r = run(
      {kTool, "record", "--agent", "--clock", "perf", "-F", "10", "-o", out, "bash", "-c", script},
      {{"SPROFIL_DRAIN_STATS", "1"}});
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(list_dir(dir.path()), (std::vector<std::string>{"run.sprof"}));
  const std::regex removed(
      "([0-9]+) empty files removed at their process's exit \\(([0-9.]+) s of CPU\\)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, removed)) << r.err;
  const uint64_t n = std::stoull(m[1]);
  EXPECT_GE(n, 15u) << r.err;
  // Their CPU time is counted: each /bin/true runs for about a millisecond. (Not the summary's
  // "of it in the processes without samples", which is at most the run's CPU less samples x
  // tick: at 10 Hz the burner's 0.2 s can take 3 ticks, and the run's CPU then has no room.)
  EXPECT_GT(std::stod(m[2]), 0.0) << r.err;
  profile::Profile p = read(out);
  EXPECT_GE(p.dropped_processes, n);
  EXPECT_GE(p.dropped_processes + p.processes.size(), 32u);  // bash, 30 /bin/true, the burner
}

// Drain mode (`--agent`) re-draws a young thread's period every 16 to 48 of its samples at
// 1 kHz (perf::jitter_block), when each block is due, not at the parent's tick (about 170 ms at
// 1 kHz): a short run of periodic code is then many blocks, each at its own period, so one
// block whose period falls in step with the code cannot move its shares by much. 0.4 s of CPU
// is about 400 samples: 8 to 25 blocks plus the first draw (3 when the tick set the pace).
// (Record's default cannot re-draw a running thread's period: agentless.hpp.)
TEST(Run, DrainModeReDrawsAShortRunInManyBlocks) {
  SKIP_WITHOUT_PERF();
  TempDir dir;
  const std::string out = dir / "run.sprof";
  Result r = run({kTool, "record", "--agent", "--clock", "perf", "-F", "1000", "-o", out, kProg,
                  "burn", "0.4"},
                 {{"SPROFIL_DRAIN_STATS", "1"}});
  ASSERT_EQ(r.status, 0) << describe(r);
  const std::regex redrawn("([0-9]+) periods re-drawn");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, redrawn)) << r.err;
  const uint64_t n = std::stoull(m[1]);
  const profile::Profile p = read(out);
  ASSERT_EQ(p.processes.size(), 1u);
  const uint64_t samples = p.total_samples();
  // Blocks average 32 samples, are 16 to 48, and a pass that comes late lengthens one: at
  // most 64 on average allows 16 ms of lateness a block (a loaded machine; the parent wakes at
  // each block's end).
  EXPECT_GE(n, 1 + samples / 64) << samples << " samples\n" << r.err;
  EXPECT_LE(n, 2 + samples / 16) << samples << " samples\n" << r.err;
}

// One run, one profile: a shell with 50 short children that take no sample (dropped and
// counted) and one that burns (stored, with its command name for --comm).
TEST(Run, ShellWithFiftyChildrenGivesOneProfile) {
  TempDir dir;
  const std::string out = dir / "run.sprof";
  const std::string script =
      "for i in $(seq 50); do /bin/true; done; '" + kProg + "' burn 0.2; exit 0";
  Result r =
      run({kTool, "record", "--clock", "cpu", "-F", "2000", "-o", out, "bash", "-c", script});
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(list_dir(dir.path()), (std::vector<std::string>{"run.sprof"}));
  profile::Profile p = read(out);
  EXPECT_TRUE(p.run);
  // Every process of the run is either stored (with samples, below) or counted as dropped:
  // bash, its 50 forks with their /bin/true, and the burner. Most take no sample; a fork or a
  // /bin/true that ran half a period of CPU (2000 Hz) after the agent armed its timer takes
  // one (on an AMD EPYC VM 51 of 101 did once, the agent's start and exit included).
  EXPECT_GE(p.dropped_processes + p.processes.size(), 52u);
  ASSERT_GE(p.processes.size(), 2u);
  EXPECT_EQ(p.processes[0].comm, "bash");
  bool burner = false;
  for (size_t i = 1; i < p.processes.size(); ++i) {
    EXPECT_GT(p.processes[i].delivered, 0u) << "empty process stored: " << p.processes[i].pid;
    if (p.processes[i].comm == "agent_prog") {
      burner = true;
      EXPECT_NE(p.processes[i].pid, p.processes[0].pid);
    }
  }
  EXPECT_TRUE(burner);
  // The summary line names processes, samples and the dropped ones.
  if (p.dropped_processes > 0) {
    EXPECT_NE(r.err.find("processes without samples not stored"), std::string::npos) << r.err;
  }
  // The report has a command column; --comm keeps one program.
  Json j = report_json(out);
  ASSERT_TRUE(j.contains("rows"));
  double burn = 0;
  for (const Json& row : j["rows"])
    if (row.value("name", "") == "burn_main") {
      EXPECT_EQ(row.value("comm", ""), "agent_prog");
      burn += row.value("samples", 0.0);
    }
  EXPECT_NEAR(burn, 0.2 * 2000, 0.2 * 0.2 * 2000);  // 20%: cpu clock under shared CPUs
  EXPECT_EQ(j["dropped_processes"].get<uint64_t>(), p.dropped_processes);
  EXPECT_GT(j["run_cpu_seconds"].get<double>(), 0.15);
  EXPECT_GE(j["unsampled_cpu_seconds"].get<double>(), 0.0);
  Result f = run({kTool, "report", out, "--format", "json", "--comm", "agent_prog"});
  ASSERT_EQ(f.status, 0) << describe(f);
  Json jf = Json::parse(f.out);
  for (const Json& row : jf["rows"]) EXPECT_EQ(row.value("comm", ""), "agent_prog");
  EXPECT_NEAR(samples_of(jf, "burn_main"), burn, 0.5);
  Result text = run({kTool, "report", out});
  EXPECT_NE(text.out.find("command"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("unsampled CPU:"), std::string::npos) << text.out;
}

// The run profile's size is its data: every image packed, no holes (version 3 of the run
// format, by 8-byte units; version 2 packed pages). Stored in full, each process's image was tens
// of megabytes of zero counters for its libraries (1-byte bins), file holes that a copy, an upload
// or an archive wrote out: a record of `make` compiling four one-line files had an apparent size
// of 1.35 GB for 1.3 MB of data.
TEST(Run, OutputIsOnlyItsDataWithoutHoles) {
  TempDir dir;
  const std::string out = dir / "run.sprof";
  const std::string script = "'" + kProg + "' burn 0.2; '" + kProg + "' burn 0.1; exit 0";
  Result r = run({kTool, "record", "-o", out, "bash", "-c", script});
  ASSERT_EQ(r.status, 0) << describe(r);
  const int fd = ::open(out.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  struct stat st;
  ASSERT_EQ(fstat(fd, &st), 0);
  // The first hole is the end of the file.
  EXPECT_EQ(lseek(fd, 0, SEEK_HOLE), st.st_size);
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  ASSERT_EQ(pread(fd, bytes.data(), bytes.size(), 0), st.st_size);
  ::close(fd);
  // What the images hold once unpacked: far more than what is stored.
  uint32_t count = 0, version = 0;
  std::memcpy(&version, bytes.data() + offsetof(sprof_run_header, version), 4);
  std::memcpy(&count, bytes.data() + offsetof(sprof_run_header, process_count), 4);
  EXPECT_EQ(version, SPROF_RUN_VERSION);
  ASSERT_GE(count, 2u);
  uint64_t unpacked = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* entry = bytes.data() + SPROF_PAGE + i * SPROF_RUN_ENTRY;
    uint64_t size = 0, stored = 0;
    std::memcpy(&size, entry + offsetof(sprof_run_process, image_size), 8);
    std::memcpy(&stored, entry + offsetof(sprof_run_process, stored_size), 8);
    unpacked += size;
    // Its bytes of data, not its pages: a page-packed image (version 2) stored two pages at
    // least, its extents' page and its header's.
    EXPECT_LT(stored, 2 * uint64_t{SPROF_PAGE}) << "process " << i << " of " << count;
  }
  EXPECT_GT(unpacked, 8 * static_cast<uint64_t>(st.st_size))
      << "stored " << st.st_size << " bytes of images of " << unpacked;
  // And it reads as the run it is: both burners' samples, 0.3 s of CPU at the default rate.
  profile::Profile p = read(out);
  uint64_t burn = 0;
  for (const profile::Region& reg : p.regions)
    if (p.processes[reg.process].comm == "agent_prog") burn += reg.total();
  const double want = 0.3 * p.requested_hz;
  EXPECT_NEAR(static_cast<double>(burn), want, 0.25 * want);
}

// The summary line of a run whose one process took no sample (/bin/true at 1 Hz: about 1 ms of
// CPU against a 1 s period) says so: the root process is stored even without samples, and "1
// process, 0 samples" read as a process with samples (the report's processes line).
TEST(Run, SummarySaysTheProcessHasNoSamples) {
  TempDir dir;
  const std::string out = dir / "p.sprof";
  Result r = agent_test::record(out, {"-F", "1"}, {"/bin/true"});
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(r.out, "");
  const profile::Profile p = read(out);
  ASSERT_EQ(p.processes.size(), 1u);
  const std::string wrote = "sprofil record: wrote " + out + ": ";
  if (p.total_samples() == 0) {
    EXPECT_NE(r.err.find(wrote + "1 process (without samples), 0 samples ("), std::string::npos)
        << r.err;
  } else {  // its random first period was shorter than its CPU time: rare
    EXPECT_NE(r.err.find(wrote + "1 process, 1 sample ("), std::string::npos) << r.err;
  }
  // A process with samples is not called one without.
  r = agent_test::record(out, {}, {kProg, "burn", "0.05"});
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_NE(r.err.find(wrote + "1 process, "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("without samples)"), std::string::npos) << r.err;
}

// A second record to the same -o replaces the first run's profile (no process of the first
// run in it); nothing else is left in the directory.
TEST(Run, RerunNeverMixesRuns) {
  TempDir dir;
  const std::string out = dir / "p.sprof";
  Result r = record_nodash(out, {"sh", "-c", "'" + kProg + "' burn 0.05 & wait"});
  ASSERT_EQ(r.status, 0) << describe(r);
  profile::Profile first = read(out);
  r = record_nodash(out, {kProg, "burn", "0.05"});
  ASSERT_EQ(r.status, 0) << describe(r);
  profile::Profile second = read(out);
  EXPECT_EQ(list_dir(dir.path()), (std::vector<std::string>{"p.sprof"}));
  ASSERT_EQ(second.processes.size(), 1u);
  for (const profile::Process& pr : first.processes)
    EXPECT_NE(pr.pid, second.processes[0].pid) << "a process of the first run in the second";
  EXPECT_EQ(second.processes[0].comm, "agent_prog");
}

// Two records to the same -o at once: the file holds one of the two runs, whole, and nothing
// else is left in the directory.
TEST(Run, ConcurrentRecordsToTheSameOutput) {
  TempDir dir;
  const std::string out = dir / "same.sprof";
  Spawned a = spawn({kTool, "record", "-o", out, kProg, "burn", "0.3"});
  Spawned b = spawn({kTool, "record", "-o", out, kProg, "burn", "0.3"});
  Result ra = finish(a), rb = finish(b);
  EXPECT_EQ(ra.status, 0) << describe(ra);
  EXPECT_EQ(rb.status, 0) << describe(rb);
  profile::Profile p = read(out);
  ASSERT_EQ(p.processes.size(), 1u);
  // The file is one of the two runs, whole: its only process is the root of a or of b.
  EXPECT_TRUE(p.processes[0].ppid == a.pid || p.processes[0].ppid == b.pid)
      << p.processes[0].ppid << " vs " << a.pid << ", " << b.pid;
  EXPECT_EQ(list_dir(dir.path()), (std::vector<std::string>{"same.sprof"}));
}

// report says /etc/passwd is "not a sprofil profile"; report and merge refuse a FIFO at once
// instead of blocking on it.
TEST(Inputs, NotAProfileAndFifo) {
  Result r = run({kTool, "report", "/etc/passwd"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("not a sprofil profile"), std::string::npos) << r.err;
  TempDir dir;
  const std::string fifo = dir / "fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // timeout(1) bounds a regression (it would hang forever); 124 would mean it hung.
  r = run({"timeout", "20", kTool, "report", fifo});
  EXPECT_EQ(r.status, 1) << describe(r);
  EXPECT_NE(r.err.find("FIFO"), std::string::npos) << r.err;
  r = run({"timeout", "20", kTool, "merge", "-o", dir / "m.sprof", fifo});
  EXPECT_EQ(r.status, 1) << describe(r);
}

// No profile named and none recorded here yet: report and annotate say to record one first, as
// perf report does; a named file that is missing gets the plain error.
TEST(Inputs, NoDefaultProfileYetSaysToRecordOne) {
  TempDir dir;
  for (const char* sub : {"report", "annotate"}) {
    Result r = run({kTool, sub}, {}, dir.path());
    EXPECT_EQ(r.status, 1) << describe(r);
    EXPECT_NE(r.err.find("sprofil.data: cannot open: No such file or directory (record one "
                         "first: sprofil record CMD)"),
              std::string::npos)
        << r.err;
  }
  Result r = run({kTool, "report", "other.sprof"}, {}, dir.path());
  EXPECT_EQ(r.status, 1) << describe(r);
  EXPECT_NE(r.err.find("other.sprof: cannot open"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("record one first"), std::string::npos) << r.err;
}

// Merge writes 0600 less the umask, devices in place, and refuses
// profiles of different programs unless forced.
TEST(Merge, ModesDevicesAndDifferentPrograms) {
  TempDir dir;
  const std::string a = dir / "a.sprof", b = dir / "b.sprof", c = dir / "c.sprof";
  ASSERT_EQ(record_nodash(a, {kProg, "burn", "0.05"}).status, 0);
  ASSERT_EQ(record_nodash(b, {kProg, "burn", "0.05"}).status, 0);
  ASSERT_EQ(
      record_nodash(c, {"sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"}).status, 0);
  const std::string m = dir / "m.sprof";
  Result r =
      run({"sh", "-c", "umask 077; exec \"$0\" merge -o \"$1\" \"$2\" \"$3\"", kTool, m, a, b});
  ASSERT_EQ(r.status, 0) << describe(r);
  struct stat st;
  ASSERT_EQ(stat(m.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  profile::Profile merged = read(m);
  EXPECT_EQ(merged.delivered, read(a).delivered + read(b).delivered);
  r = run({kTool, "merge", "-o", "/dev/null", a, b});
  EXPECT_EQ(r.status, 0) << describe(r);
  ASSERT_EQ(stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "/dev/null was replaced";
  r = run({kTool, "merge", "-o", dir / "x.sprof", a, c});
  EXPECT_EQ(r.status, 1) << describe(r);
  EXPECT_NE(r.err.find("program differs"), std::string::npos) << r.err;
  EXPECT_FALSE(exists(dir / "x.sprof"));
  r = run({kTool, "merge", "--force", "-o", dir / "x.sprof", a, c});
  EXPECT_EQ(r.status, 0) << describe(r);
  EXPECT_NE(r.err.find("warning: program differs"), std::string::npos) << r.err;
}

// One executable run from two paths (a copy, another checkout of the same build) is one program
// to merge: its build-id says so. Its text is one region of the merged profile, with both runs'
// samples.
TEST(Merge, OneExecutableRunFromTwoPathsIsOneProgram) {
  TempDir dir;
  const std::string copy = dir / "copy_of_prog";
  ASSERT_EQ(run({"cp", kProg, copy}).status, 0);
  const std::string a = dir / "a.sprof", b = dir / "b.sprof", m = dir / "m.sprof";
  ASSERT_EQ(record_nodash(a, {kProg, "burn", "0.05"}).status, 0);
  ASSERT_EQ(record_nodash(b, {copy, "burn", "0.05"}).status, 0);
  const Result r = run({kTool, "merge", "-o", m, a, b});
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(r.err.find("program differs"), std::string::npos) << r.err;
  const profile::Profile pa = read(a), pb = read(b), merged = read(m);
  auto main_text = [](const profile::Profile& p) {
    uint64_t n = 0, regions = 0;
    for (const profile::Region& reg : p.regions)
      if (reg.flags & SPROF_R_MAIN) {
        ++regions;
        for (const profile::Region::Bin& bin : reg.bins) n += bin.count;
      }
    return std::make_pair(regions, n);
  };
  ASSERT_FALSE(pa.regions.empty());
  EXPECT_EQ(main_text(merged).first, main_text(pa).first);
  EXPECT_EQ(main_text(merged).second, main_text(pa).second + main_text(pb).second);
  EXPECT_GT(main_text(pb).second, 0u);
}

// The agent names a library as the loader found it (libstdc++.so.6, a link; /lib, a link to
// /usr/lib on a merged /usr); record's default as the kernel maps it. The run profile names
// every object by its resolved path, so that one object reads the same in both modes (diff,
// --object): libstdc++.so.6.0.30, not libstdc++.so.6 in one run and the other in the next.
TEST(Record, TheAgentsObjectsAreNamedAsTheKernelNamesThem) {
  SKIP_WITHOUT_PERF();
  TempDir dir;
  const std::string agent = dir / "agent.sprof", outside = dir / "outside.sprof";
  ASSERT_EQ(
      run({kTool, "record", "--agent", "-q", "-o", agent, "--", kProg, "burn", "0.05"}).status, 0);
  ASSERT_EQ(run({kTool, "record", "-q", "-o", outside, "--", kProg, "burn", "0.05"}).status, 0);
  auto paths = [](const profile::Profile& p) {
    std::set<std::string> out;
    for (const profile::Region& r : p.regions)
      if (!r.path.empty() && r.path[0] == '/' && r.path.find("libsprofil") == std::string::npos)
        out.insert(r.path);
    return out;
  };
  // Every object the agent names by its resolved path; the objects of both runs (record's
  // default keeps those with samples), by the same path.
  std::map<std::pair<dev_t, ino_t>, std::string> agent_file;
  int libstdcxx = 0;
  for (const std::string& path : paths(read(agent))) {
    char buf[PATH_MAX];
    ASSERT_NE(realpath(path.c_str(), buf), nullptr) << path;
    EXPECT_EQ(path, buf);
    struct stat st;
    ASSERT_EQ(stat(path.c_str(), &st), 0) << path;
    agent_file[{st.st_dev, st.st_ino}] = path;
    libstdcxx += path.find("libstdc++.so.6.") != std::string::npos;
  }
  EXPECT_EQ(libstdcxx, 1) << "agent_prog is linked with libstdc++";
  int both = 0;
  for (const std::string& path : paths(read(outside))) {
    struct stat st;
    ASSERT_EQ(stat(path.c_str(), &st), 0) << path;
    const auto it = agent_file.find({st.st_dev, st.st_ino});
    if (it == agent_file.end()) continue;
    ++both;
    EXPECT_EQ(it->second, path);
  }
  EXPECT_GE(both, 1) << "the program, at least, is in both runs";
}

// With the agent, a process that changed its user ID cannot reach the run directory (record's
// user's, mode 0700): it has no file, and its CPU is in no profile. record says so, and what may
// be the cause; not for a shell loop of short processes, whose unsampled time is the agent's
// start-up in each.
TEST(Record, AgentWarnsOfTheCpuOfProcessesItCouldNotProfile) {
  if (geteuid() != 0) GTEST_SKIP() << "not root: no other user to become";
  if (run({"sh", "-c", "command -v setpriv"}).status != 0) GTEST_SKIP() << "no setpriv";
  TempDir dir;
  const std::string kWarning = "far more than the agent's start-up in the 1 process it saw";
  Result r = run({kTool, "record", "--agent", "-o", dir / "u.sprof", "--", "setpriv",
                  "--reuid=65534", "--regid=65534", "--clear-groups", kProg, "burn", "0.3"});
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_NE(r.err.find(kWarning), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("report from a process that changed its user ID"), std::string::npos)
      << r.err;
  r = run({kTool, "record", "--agent", "-o", dir / "a.sprof", "--", kProg, "burn", "0.3"});
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(r.err.find("the agent's start-up in"), std::string::npos) << r.err;
  r = run({kTool, "record", "--agent", "-o", dir / "l.sprof", "--", "sh", "-c",
           "i=0; while [ $i -lt 40 ]; do /bin/true; i=$((i+1)); done"});
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(r.err.find("the agent's start-up in"), std::string::npos) << r.err;
}

// Report output is written safely and its write errors are reported:
// a full device fails the command; the default gmon.out replaces a planted link, never
// writing through it.
TEST(Output, ReportWriteErrorsAndLinks) {
  TempDir dir;
  const std::string p = dir / "p.sprof";
  ASSERT_EQ(record_nodash(p, {kProg, "burn", "0.05"}).status, 0);
  Result r = run({"sh", "-c", "exec \"$0\" report \"$1\" > /dev/full", kTool, p});
  EXPECT_EQ(r.status, 1) << describe(r);
  EXPECT_NE(r.err.find("No space left"), std::string::npos) << r.err;
  r = run({kTool, "report", p, "-o", "/dev/full"});
  EXPECT_EQ(r.status, 1) << describe(r);
  const std::string victim = dir / "victim";
  { std::ofstream(victim) << "keep me"; }
  ASSERT_EQ(symlink(victim.c_str(), (dir / "gmon.out").c_str()), 0);
  r = run({kTool, "report", p, "--format", "gmon"}, {}, dir.path());
  EXPECT_EQ(r.status, 0) << describe(r);
  std::ifstream in(victim);
  std::string kept;
  std::getline(in, kept);
  EXPECT_EQ(kept, "keep me");
  struct stat st;
  ASSERT_EQ(lstat((dir / "gmon.out").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode)) << "gmon.out should be a new regular file, not the link";
  EXPECT_EQ(st.st_mode & 0077, 0u) << "created private";
}

// A name of one of the process's own descriptors ("-", /dev/fd/N, /dev/stdout) is that
// descriptor, as in a shell's redirection: record and report write there, never replace the
// name (/dev/stdout is a link: replacing it breaks the system's), and record's run directory
// goes to $TMPDIR, not beside the name. (/dev/stdout itself is not tried here: a regression
// would replace the test machine's.)
TEST(Output, DescriptorNamesAreWrittenThrough) {
  TempDir dir;
  const std::string tmp = dir / "tmp";
  ASSERT_EQ(mkdir(tmp.c_str(), 0700), 0);
  Result r =
      run({"sh", "-c", "exec \"$0\" record -q -o - -- \"$1\" burn 0.05 > out1.sprof", kTool, kProg},
          {{"TMPDIR", tmp}}, dir.path());
  ASSERT_EQ(r.status, 0) << describe(r);
  r = run({"sh", "-c", "exec \"$0\" record -q -o /dev/fd/3 -- \"$1\" burn 0.05 3> out2.sprof",
           kTool, kProg},
          {{"TMPDIR", tmp}}, dir.path());
  ASSERT_EQ(r.status, 0) << describe(r);
  for (const char* name : {"out1.sprof", "out2.sprof"}) {
    Result rep = run({kTool, "report", dir / name, "--format", "json"});
    ASSERT_EQ(rep.status, 0) << describe(rep);
    EXPECT_GT(nlohmann::json::parse(rep.out)["total_samples"].get<double>(), 20) << name;
  }
  EXPECT_EQ(run({"ls", "-A", dir.path()}).out, "out1.sprof\nout2.sprof\ntmp\n")
      << "no file named -, no run directory beside the output";
  EXPECT_EQ(run({"ls", "-A", tmp}).out, "") << "the run directories are removed";
  r = run({"sh", "-c", "exec \"$0\" report \"$1\" -o /dev/fd/3 3> report.txt", kTool,
           dir / "out1.sprof"},
          {}, dir.path());
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_NE(run({"cat", dir / "report.txt"}).out.find("sprofil flat profile"), std::string::npos);
  r = run({kTool, "report", dir / "out1.sprof", "-o", "/dev/fd/987"});
  EXPECT_EQ(r.status, 1) << describe(r);
  EXPECT_NE(r.err.find("/dev/fd/987: not an open file descriptor"), std::string::npos) << r.err;
}

// Sampled from outside (record's default), record makes no run directory: the command's images
// are in its memory. It made an empty `.OUT.sprofil-XXXXXX` beside the output, in the command's
// working directory by default, which `ls -A`, `tar` or `git status` saw. (With the agent the
// directory holds the processes' files while the command runs: --scratch puts it elsewhere.)
TEST(Output, CommandSampledFromOutsideSeesNoRunDirectory) {
  if (perf_probe() != 0) GTEST_SKIP() << "perf events denied: record samples with the agent";
  TempDir dir;
  const Result native = run({"ls", "-A"}, {}, dir.path());
  ASSERT_EQ(native.out, "");
  const Result r =
      run({kTool, "record", "-q", "-o", "prof.sprof", "--", "ls", "-A"}, {}, dir.path());
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(r.out, native.out);
  EXPECT_EQ(run({"ls", "-A", dir.path()}).out, "prof.sprof\n");
}

// Another user's file in a sticky directory (/tmp) cannot be replaced by the profile: record
// refuses it before the command runs (exit 2, the command not run, nothing left), where it ran
// the command, failed at the end's rename (exit 1) and left its run directory.
TEST(Output, AnotherUsersFileInAStickyDirectoryIsRefusedFirst) {
  if (geteuid() != 0) GTEST_SKIP() << "not root: no other user to become";
  if (run({"sh", "-c", "command -v setpriv"}).status != 0) GTEST_SKIP() << "no setpriv";
  TempDir dir;
  ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);
  const std::string sticky = dir / "sticky";
  ASSERT_EQ(mkdir(sticky.c_str(), 0777), 0);
  ASSERT_EQ(chmod(sticky.c_str(), 01777), 0);
  const std::string theirs = sticky + "/theirs.sprof";
  { std::ofstream(theirs).flush(); }
  ASSERT_EQ(chmod(theirs.c_str(), 0666), 0);  // empty and writable: only the rename fails
  for (const char* mode : {"--agentless", "--agent"}) {
    SCOPED_TRACE(mode);
    if (std::string(mode) == "--agentless" && perf_probe() != 0) continue;
    const Result r = run({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", kTool,
                          "record", mode, "-o", theirs, "--", "/bin/echo", "ran"});
    EXPECT_EQ(r.status, 2) << describe(r);
    EXPECT_EQ(r.out, "") << "the command did not run";
    EXPECT_NE(r.err.find("another user's file in a sticky directory"), std::string::npos) << r.err;
    EXPECT_EQ(run({"ls", "-A", sticky}).out, "theirs.sprof\n");
  }
}

// A script's process is named as the kernel names it, after the script (`sc.sh`), not after its
// interpreter (`sh`, argv[0]): record's default took the kernel's name from the start, the agent
// now writes it in its file's header (comm), so `report --comm sc.sh` finds it in both.
TEST(Record, ScriptsProcessIsNamedAfterTheScript) {
  TempDir dir;
  const std::string script = dir / "sc.sh";
  {
    std::ofstream f(script);
    f << "#!/bin/sh\ni=0; while [ $i -lt 200000 ]; do i=$((i+1)); done\n";
  }
  ASSERT_EQ(chmod(script.c_str(), 0755), 0);
  std::vector<std::string> modes{"--agent"};
  if (perf_probe() == 0) modes.push_back("--agentless");
  for (const std::string& mode : modes) {
    SCOPED_TRACE(mode);
    const std::string out = dir / "sc.sprof";
    Result r = run({kTool, "record", "-q", mode, "-o", out, "--", script});
    ASSERT_EQ(r.status, 0) << describe(r);
    r = run({kTool, "report", out, "--comm", "sc.sh", "--format", "json"});
    ASSERT_EQ(r.status, 0) << describe(r);
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_GT(j["total_samples"].get<double>(), 10) << r.out.substr(0, 400);
  }
}

}  // namespace
}  // namespace sprofil::record_test
