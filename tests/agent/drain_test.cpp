// The default mode of `sprofil record` with perf events (drain mode:
// the record parent holds, drains and jitters every thread's perf event; the program gets no
// signal). Every thread is sampled whatever its signal mask; a SIGKILL at any moment loses no
// sample taken before it; the rate is the one asked for. Needs perf events (skips otherwise).
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "helpers.hpp"

namespace sprofil::agent_test {
namespace {

const std::string kBlocked = DRAIN_BLOCKED;

// "key N" in a program's output; -1 if absent.
double value_of(const std::string& out, const std::string& key) {
  std::istringstream in(out);
  std::string k;
  double v;
  while (in >> k >> v)
    if (k == key) return v;
  return -1;
}

class BlockedSignals : public ::testing::TestWithParam<const char*> {};

// Workers created after the program blocked every signal (as `xz -T2` does; "raw" blocks
// them with the system call, behind the interposers' back) are sampled in full: the samples
// cover at least 90% of their CPU time (their thread clocks). Before drain
// mode, the raw variant got 0 samples (signal mode).
TEST_P(BlockedSignals, WorkersAreSampledByDefault) {
  SKIP_WITHOUT_PERF();
  TempDir dir;
  const std::string out = dir / "blocked.sprof";
  Result r = record(out, {"-F", "1000"}, {kBlocked, GetParam(), "0.4"});
  ASSERT_EQ(r.status, 0) << describe(r);
  const double worker_s = value_of(r.out, "worker_cpu_ns") / 1e9;
  ASSERT_GT(worker_s, 0.5) << r.out;
  Json j = report_json(out);
  double total = 0;
  for (const auto& row : j["rows"]) total += row.value("samples", 0.0);
  const double sampled_s = total / 1000.0;  // 1 ms per sample
  RecordProperty("coverage", std::to_string(sampled_s / worker_s));
  // The weights are the task clock between samples: only each thread's last partial period
  // (< 1 ms) misses; the main thread adds its few ms of start-up and joining.
  EXPECT_GE(sampled_s, 0.9 * worker_s) << "sampled " << sampled_s << " s of " << worker_s;
  EXPECT_LE(sampled_s, 1.02 * worker_s + 0.02) << "sampled " << sampled_s << " s of " << worker_s;
  EXPECT_GT(samples_of(j, "blocked_worker"), 0.8 * total) << j.dump();
}

INSTANTIATE_TEST_SUITE_P(Drain, BlockedSignals, ::testing::Values("libc", "raw"));

// A dynamically linked Go program (cgo): the Go runtime installs handlers on every signal and
// makes its threads with pthread_create. Built here with the installed go (skips without).
TEST(Drain, CgoGoProgramIsSampled) {
  SKIP_WITHOUT_PERF();
  const std::string go = GO_EXECUTABLE;
  if (go.empty() || go.find("NOTFOUND") != std::string::npos || access(go.c_str(), X_OK) != 0)
    GTEST_SKIP() << "go is not installed (golang-go): the cgo test needs it";
  const std::string work = GO_WORK;
  std::filesystem::create_directories(work);
  const std::string bin = work + "/cgo_burn";
  Result b = run({go, "build", "-o", bin, "main.go"},
                 {{"GOFLAGS", "-mod=mod"},
                  {"GOCACHE", work + "/cache"},
                  {"GOPATH", work + "/gopath"},
                  {"CGO_ENABLED", "1"},
                  {"GO111MODULE", "off"}},
                 CGO_SOURCE);
  ASSERT_EQ(b.status, 0) << "go build failed: " << describe(b);
  TempDir dir;
  const std::string out = dir / "go.sprof";
  Result r = record(out, {"-F", "1000"}, {bin, "0.5"});
  ASSERT_EQ(r.status, 0) << describe(r);
  const double cpu_s = value_of(r.out, "cpu_ns") / 1e9;  // the process's CPU before it exits
  ASSERT_GT(cpu_s, 0.1) << r.out;
  Json j = report_json(out);
  double total = 0;
  for (const auto& row : j["rows"]) total += row.value("samples", 0.0);
  const double sampled_s = total / 1000.0;
  RecordProperty("coverage", std::to_string(sampled_s / cpu_s));
  EXPECT_GE(sampled_s, 0.9 * cpu_s) << "sampled " << sampled_s << " s of " << cpu_s;
  EXPECT_GT(samples_of(j, "main.goBurn"), 0.8 * total) << j.dump();
  // Go's runtime exits with a raw exit_group, which the agent does not see: the record parent
  // completes the file (drain_ends.cpp, gone()), its CPU time the process's at its end.
  const profile::Profile p = read(out);
  EXPECT_TRUE(p.finished());
  EXPECT_GE(static_cast<double>(p.cpu_ns) / 1e9, cpu_s);
  EXPECT_LE(static_cast<double>(p.cpu_ns) / 1e9, 1.1 * cpu_s + 0.02);
  EXPECT_GT(p.effective_hz, 0.0);
}

// SIGKILL of the program at a random moment: every sample the kernel took up to the kill is
// in the profile. The run's CPU (wait4's rusage of the killed program) is what the samples
// must cover: within 5% and 20 ms (the dynamic loader runs before the agent, and each thread's
// last partial period is not sampled; the weights are exact task-clock time otherwise).
TEST(Drain, SigkillAtARandomMomentLosesNoSample) {
  SKIP_WITHOUT_PERF();
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> delay_ms(50, 900);
  TempDir dir;
  for (int k = 0; k < 3; ++k) {
    const int delay = delay_ms(rng);
    SCOPED_TRACE("seed " + std::to_string(seed) + ", run " + std::to_string(k) + ", kill after " +
                 std::to_string(delay) + " ms");
    const std::string out = dir / ("kill" + std::to_string(k) + ".sprof");
    const std::string pidfile = dir / ("pid" + std::to_string(k));
    pid_t child = 0;
    Result r = record_killed_after("--agent", out, pidfile, delay, &child);
    ASSERT_GT(child, 0) << "the program never started: " << describe(r);
    EXPECT_EQ(r.status, 128 + SIGKILL) << describe(r);
    profile::Profile p = read(out);
    EXPECT_FALSE(p.finished());
    expect_consistent(p, "SIGKILL");
    ASSERT_GT(p.run_cpu_ns, 0u);
    const double cpu_s = static_cast<double>(p.run_cpu_ns) / 1e9;
    const double sampled_s =
        static_cast<double>(p.total_samples()) * static_cast<double>(p.tick_ns) / 1e9;
    EXPECT_NEAR(sampled_s, cpu_s, 0.05 * cpu_s + 0.02) << "sampled " << sampled_s << " s";
  }
}

// In drain mode the program never writes its counters: its file's arrays are not reserved
// (agent/output_file.cpp, reserve_span), and the record parent reserves each counter page as it
// counts into it (record/drain_rings.cpp, reserve_counter). While agent_prog burns under `sprofil
// record`, its file in the run directory has megabytes of arrays (1-byte bins over its text,
// libc's, libstdc++'s and libm's) and at most a quarter of them takes disk space; before, all
// of it did until the exit's release.
TEST(Drain, ArraysTakeSpaceOnlyWhereCounted) {
  SKIP_WITHOUT_PERF();
  TempDir dir;
  const std::string out = dir / "lazy.sprof";
  Spawned s =
      spawn({kTool, "record", "--agent", "-F", "1000", "-o", out, "--", kProg, "burn", "1.5"});
  bool seen = false;
  uint64_t blocks = 0, size = 0;
  for (int i = 0; i < 1000 && !seen; ++i) {  // at most 10 s
    std::error_code ec;
    for (const auto& d : std::filesystem::directory_iterator(dir.path(), ec)) {
      if (!d.is_directory()) continue;
      for (const auto& f : std::filesystem::directory_iterator(d.path(), ec)) {
        profile::Profile p;
        std::string err;
        if (!profile::read_profile(f.path().string(), &p, &err) || p.argv.empty() ||
            p.argv[0] != kProg || p.delivered < 100)
          continue;  // not agent_prog's, or not counting yet
        struct stat st;
        if (::stat(f.path().c_str(), &st) != 0) continue;
        seen = true;
        blocks = static_cast<uint64_t>(st.st_blocks) * 512;
        size = static_cast<uint64_t>(st.st_size);
      }
    }
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Result r = finish(s);
  ASSERT_EQ(r.status, 0) << describe(r);
  ASSERT_TRUE(seen) << "no counting file of agent_prog in the run directory";
  EXPECT_GT(size, uint64_t{1} << 20) << "the arrays should span megabytes";
  EXPECT_LE(blocks, size / 4) << blocks << " bytes of " << size << " take disk space";
  // What the parent counted is all there.
  const profile::Profile p = read(out);
  expect_consistent(p, "lazy");
  EXPECT_GT(p.total_samples(), 1000u);
}

// In drain mode the record parent, not the program, gives back the disk space reserved for
// counter pages that no sample touched, right after answering the exit's last flush
// (kFlushRelease): an exited process's file in the run directory is sparse again while the
// run goes on. agent_prog's counters cover its text, libc's, libstdc++'s and libm's (megabytes
// at 1-byte bins); a 0.3 s burn touches a few pages. The bound of AgentLimits'
// UntouchedReservationIsReleasedAtExit: at most a quarter of the file's size stays allocated.
TEST(Drain, ParentReleasesUntouchedSpaceAtExit) {
  SKIP_WITHOUT_PERF();
  TempDir dir;
  const std::string out = dir / "rel.sprof", pidfile = dir / "pid";
  // The shell waits (as `sleep`) once the burn has exited, until the test kills it.
  const std::string script = "'" + kProg + "' burn 0.3 && echo $$ > '" + pidfile + ".tmp' && mv '" +
                             pidfile + ".tmp' '" + pidfile + "' && exec sleep 60";
  Spawned s =
      spawn({kTool, "record", "--agent", "-F", "1000", "-o", out, "--", "/bin/sh", "-c", script});
  pid_t waiter = 0;
  for (int i = 0; i < 3000 && waiter == 0; ++i) {  // at most 30 s
    std::ifstream in(pidfile);
    if (!(in >> waiter)) {
      waiter = 0;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  bool found = false, released = false;
  uint64_t blocks = 0, size = 0;
  for (int i = 0; i < 500 && waiter > 0 && !released; ++i) {  // at most 5 s
    for (const auto& d : std::filesystem::directory_iterator(dir.path())) {
      if (!d.is_directory()) continue;
      for (const auto& f : std::filesystem::directory_iterator(d.path())) {
        profile::Profile p;
        std::string err;
        if (!profile::read_profile(f.path().string(), &p, &err) || !p.finished() ||
            p.argv.empty() || p.argv[0] != kProg)
          continue;  // the shell's and sleep's files, still being written
        struct stat st;
        if (::stat(f.path().c_str(), &st) != 0) continue;
        found = true;
        blocks = static_cast<uint64_t>(st.st_blocks) * 512;
        size = static_cast<uint64_t>(st.st_size);
        released = blocks <= size / 4;
      }
    }
    if (!released) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (waiter > 0) kill(waiter, SIGKILL);
  Result r = finish(s);
  ASSERT_GT(waiter, 0) << "the burn never ended: " << describe(r);
  ASSERT_TRUE(found) << "no finished file of agent_prog in the run directory";
  EXPECT_TRUE(released) << blocks << " bytes allocated of " << size;
  EXPECT_EQ(r.status, 128 + SIGKILL) << describe(r);
}

// The rate asked for, counted in full: samples x period = the process's CPU time at 1 kHz and
// 10 kHz. Below by at most 3% (start-up before the agent, the exit after its flush: 9-10 ms a
// run on the AMD EPYC VM of docs/benchmarks.md, which made 0.970-0.984 of a 0.4 s burn; the
// burn is 0.8 s). Above by
// at most 2% of the CPU time plus the time the hypervisor stole from burn_main: the task clock
// counts steal, rusage does not (tests/clock's perf-rate test); the kernel time of the agent's
// start-up, credited at the first pc, is in both. (A CI run saw 1.027 at 10 kHz against the
// CPU time alone; measured here: 0.991-0.995 against the CPU time plus the steal.)
class DrainRate : public ::testing::TestWithParam<int> {};

TEST_P(DrainRate, SamplesCoverTheProcessCpu) {
  SKIP_WITHOUT_PERF();
  const int hz = GetParam();
  TempDir dir;
  const std::string out = dir / "rate.sprof", truth_file = dir / "truth";
  Result r = record(out, {"-F", std::to_string(hz)}, {kProg, "--truth", truth_file, "burn", "0.8"});
  ASSERT_EQ(r.status, 0) << describe(r);
  profile::Profile p = read(out);
  ASSERT_TRUE(p.finished());
  ASSERT_GT(p.cpu_ns, 0u);
  auto truth = read_truth(truth_file);
  const double steal = steal_of(truth, "burn_main");
  const double cpu = static_cast<double>(p.cpu_ns) / 1e9;
  const double ratio = static_cast<double>(p.total_samples()) / (cpu * hz);
  const double with_steal = static_cast<double>(p.total_samples()) / ((cpu + steal) * hz);
  RecordProperty("delivered_fraction", std::to_string(ratio));
  RecordProperty("delivered_fraction_with_steal", std::to_string(with_steal));
  EXPECT_GT(ratio, 0.97);
  EXPECT_LT(with_steal, 1.02) << "ratio " << ratio << ", steal " << steal << " s";
}

INSTANTIATE_TEST_SUITE_P(Drain, DrainRate, ::testing::Values(1000, 10000));

}  // namespace
}  // namespace sprofil::agent_test
