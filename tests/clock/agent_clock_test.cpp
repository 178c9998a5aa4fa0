// The clocks. The perf clock delivers its full rate (signal and ring modes), the
// profile and the report say which clock ran at which rate, the wall clock sees a sleeping
// thread that the CPU clock does not, and auto falls back to the sampler clock, saying why once,
// when perf_event_open is denied.
#include <algorithm>
#include <cmath>

#include "../agent/helpers.hpp"

namespace sprofil::clock_test {
using namespace agent_test;  // tests/agent/helpers.hpp

namespace {

struct PerfRate {
  const char* mode;  // SPROFIL_PERF_MODE
  unsigned hz;
};

void PrintTo(const PerfRate& r, std::ostream* os) {
  *os << r.mode << " " << r.hz << " Hz";
}

class PerfClock : public ::testing::TestWithParam<PerfRate> {};

// At least 99% of rate x CPU time is delivered, in the burning function and overall.
TEST_P(PerfClock, DeliversTheFullRate) {
  SKIP_WITHOUT_PERF();
  const PerfRate pr = GetParam();
  TempDir dir;
  const std::string out = dir / "perf.sprof", truth_file = dir / "truth";
  Result r =
      record(out, {"--clock", "perf", "-F", std::to_string(pr.hz)},
             {kProg, "--truth", truth_file, "burn", "0.4"}, {{"SPROFIL_PERF_MODE", pr.mode}});
  ASSERT_EQ(r.status, 0) << describe(r);
  auto truth = read_truth(truth_file);
  profile::Profile p = read(out);
  EXPECT_EQ(p.clock, profile::Clock::kPerf);
  EXPECT_EQ(p.requested_hz, pr.hz);
  // The perf clock's periods are task-clock time, which also counts the time the hypervisor
  // steals while the thread holds its vCPU; the thread's CPU clock (the truth) and rusage (the
  // file's cpu_ns) leave it out. Measured on this VM (agent_prog's burn_main_task_clock): up to
  // 0.5% of a 0.3 s burn on a quiet host, and the steal a busy host adds made this test fail
  // about half the time (process 1.024, burn_main 1.046). So the lower bounds hold against the
  // CPU time, the upper ones against the CPU time plus the steal the task clock counted.
  const double steal = steal_of(truth, "burn_main");
  const double burn_want = truth["burn_main"] * pr.hz;
  const double burn_got = samples_of(report_json(out), "burn_main");
  EXPECT_GE(burn_got, 0.99 * burn_want) << "burn_main: " << burn_got << " of " << burn_want;
  // Above: the kernel time before the first overflow (the agent reserving its file's space,
  // the loader's page faults) is credited to the first user pc, often in burn_main: up to 1-3%
  // of this short run under CI's load (seen: 1.026 at ring 20 kHz with system arrays, which
  // double the reservation).
  EXPECT_LE(burn_got, 1.04 * (truth["burn_main"] + steal) * pr.hz)
      << "burn_main: " << burn_got << " of " << burn_want << ", steal " << steal << " s";
  // The whole process, against the CPU time the agent measured at exit: 98%, since the
  // loader's work before the agent starts (a few ms) is not sampled; samples the kernel
  // dropped from a full ring are delivered but lost (the header's lost). In ring mode also the
  // agent's drainer thread, whose CPU time is the process's but is never sampled: at 20 kHz
  // under CI's load 7,948 samples for 8,198 periods of CPU were seen, burn_main complete: 95%.
  const double cpu = static_cast<double>(p.cpu_ns) * 1e-9;
  ASSERT_GT(cpu, 0);
  // Signal mode: 3%, where 98% held on an Intel Xeon VM; on an AMD EPYC VM the process
  // delivered 97.9-97.96% of its CPU time at 10 and 20 kHz in four CI runs (burn_main whole).
  const double unsampled_share = std::string(pr.mode) == "ring" ? 0.05 : 0.03;
  EXPECT_GE(static_cast<double>(p.total_samples() + p.lost), (1 - unsampled_share) * cpu * pr.hz)
      << p.lost << " lost";
  EXPECT_LE(static_cast<double>(p.total_samples()), 1.02 * (cpu + steal) * pr.hz)
      << "cpu " << cpu << " s, steal " << steal << " s";
  EXPECT_GE(p.effective_hz, (1 - unsampled_share) * pr.hz);
  RecordProperty("delivered_fraction_burn", std::to_string(burn_got / burn_want));
  RecordProperty("delivered_fraction_process",
                 std::to_string(static_cast<double>(p.total_samples()) / (cpu * pr.hz)));
  RecordProperty("task_clock_steal_s", std::to_string(steal));
}

INSTANTIATE_TEST_SUITE_P(Modes, PerfClock,
                         ::testing::Values(PerfRate{"signal", 10000}, PerfRate{"signal", 20000},
                                           PerfRate{"ring", 10000}, PerfRate{"ring", 20000}),
                         [](const auto& pi) {
                           return std::string(pi.param.mode) + "_" + std::to_string(pi.param.hz);
                         });

class ClockHeader : public ::testing::TestWithParam<const char*> {};

// The clock, the requested rate and the effective rate are in the file and the report header.
TEST_P(ClockHeader, NamesClockAndRates) {
  const std::string clock = GetParam();
  if (clock == "perf") SKIP_WITHOUT_PERF();
  TempDir dir;
  const std::string out = dir / "h.sprof";
  Result r = record(out, {"--clock", clock, "-F", "2000"}, {kProg, "burn", "0.15"});
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_NE(r.err.find("(" + clock + " clock, 2000 Hz requested)"), std::string::npos) << r.err;
  profile::Profile p = read(out);
  EXPECT_EQ(profile::clock_name(p.clock), clock);
  EXPECT_EQ(p.requested_hz, 2000u);
  EXPECT_EQ(p.tick_ns, 500000u);
  // Samples per CPU-second: the wall clock also samples the time off the CPU.
  if (clock != "wall") {
    EXPECT_NEAR(p.effective_hz, 2000, 200);
  }
  EXPECT_GT(p.effective_hz, 0);
  Result text = run({kTool, "report", out});
  ASSERT_EQ(text.status, 0) << describe(text);
  EXPECT_EQ(lines_with(text.out, "clock:").size(), 1u);
  EXPECT_NE(text.out.find("clock:          " + clock), std::string::npos) << text.out;
  char rate[128];
  snprintf(rate, sizeof rate, "rate:           requested 2000 Hz, effective %.1f Hz",
           p.effective_hz);
  EXPECT_NE(text.out.find(rate), std::string::npos) << rate << "\n" << text.out;
  Json j = report_json(out);
  EXPECT_EQ(j.value("clock", ""), clock);
  EXPECT_EQ(j.value("requested_hz", 0), 2000);
  EXPECT_NEAR(j.value("effective_hz", 0.0), p.effective_hz, 0.01);
}

INSTANTIATE_TEST_SUITE_P(Clocks, ClockHeader, ::testing::Values("cpu", "itimer", "perf", "wall"),
                         [](const auto& pi) { return std::string(pi.param); });

// Samples of the sleeping thread: rows of libc functions whose name mentions sleep.
double sleep_samples(const Json& j) {
  double n = 0;
  for (const Json& row : j["rows"])
    if (row.value("name", "").find("sleep") != std::string::npos) n += row.value("samples", 0.0);
  return n;
}

// One thread sleeps 0.5 s while another burns 0.5 s: the wall clock samples the sleep, the
// CPU clock does not.
TEST(WallClock, SeesTheSleepingThread) {
  TempDir dir;
  const unsigned hz = 1000;
  const std::string wall = dir / "wall.sprof", cpu = dir / "cpu.sprof";
  Result r = record(wall, {"--clock", "wall", "-F", std::to_string(hz)},
                    {kProg, "--truth", dir / "truth.wall", "sleepburn", "0.5"});
  ASSERT_EQ(r.status, 0) << describe(r);
  auto truth = read_truth(dir / "truth.wall");
  Json jw = report_json(wall);
  const double slept = sleep_samples(jw);
  EXPECT_GE(slept, 0.3 * truth["sleep_wall"] * hz) << jw["rows"].dump(1);
  EXPECT_GT(samples_of(jw, "burn_main"), 0.5 * truth["burn_main"] * hz);
  RecordProperty("wall_sleep_samples", std::to_string(slept));

  r = record(cpu, {"--clock", "cpu", "-F", std::to_string(hz)},
             {kProg, "--truth", dir / "truth.cpu", "sleepburn", "0.5"});
  ASSERT_EQ(r.status, 0) << describe(r);
  Json jc = report_json(cpu);
  EXPECT_LE(sleep_samples(jc), 0.02 * 0.5 * hz) << jc["rows"].dump(1);
  EXPECT_GT(samples_of(jc, "burn_main"), 0.9 * read_truth(dir / "truth.cpu")["burn_main"] * hz);
}

TEST(AutoClock, IsPerfWherePerfEventsWork) {
  SKIP_WITHOUT_PERF();
  TempDir dir;
  Result r = record(dir / "a.sprof", {"--clock", "auto"}, {kProg, "burn", "0.05"});
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(read(dir / "a.sprof").clock, profile::Clock::kPerf);
  EXPECT_TRUE(lines_with(r.err, "perf_event_open").empty()) << r.err;
}

class AutoFallback : public ::testing::TestWithParam<int> {};

// perf_event_open fails (seccomp) -> the sampler clock, and exactly one line saying why.
TEST_P(AutoFallback, FallsBackToSamplerAndSaysWhyOnce) {
  const int err = GetParam();
  TempDir dir;
  const std::string out = dir / "auto.sprof", truth_file = dir / "truth";
  Result r = run({kSeccomp, std::to_string(err), kTool, "record", "--clock", "auto", "-F", "2000",
                  "-o", out, "--", kProg, "--truth", truth_file, "burn", "0.1"});
  if (r.status == 125) GTEST_SKIP() << "cannot install a seccomp filter here: " << r.err;
  ASSERT_EQ(r.status, 0) << describe(r);
  profile::Profile p = read(out);
  EXPECT_EQ(static_cast<uint32_t>(p.clock), uint32_t{SPROF_CLOCK_SAMPLER});
  const auto why = lines_with(r.err, "perf_event_open");
  ASSERT_EQ(why.size(), 1u) << r.err;
  EXPECT_EQ(why[0].rfind("sprofil: ", 0), 0u) << why[0];
  EXPECT_NE(why[0].find(strerror(err)), std::string::npos) << why[0];
  // The samples stand for the process's CPU time from main on at least, and for no more than
  // all of it (the exec and the loader before the agent's start are not sampled: 13 ms on the
  // AMD EPYC VM in CI, a tenth of this run): 10% for the rate.
  auto truth = read_truth(truth_file);
  const double cpu = truth["process_cpu"], before_main = truth["process_cpu_at_main"];
  const double samples = static_cast<double>(p.total_samples());
  EXPECT_GE(samples, 0.9 * (cpu - before_main) * 2000)
      << "of " << cpu << " s, " << before_main << " s of it before main";
  EXPECT_LE(samples, 1.1 * cpu * 2000) << "of " << cpu << " s";
  // The explicit perf clock cannot fall back: it says so and the program still runs.
  Result forced = run({kSeccomp, std::to_string(err), kTool, "record", "--clock", "perf", "-o",
                       dir / "forced.sprof", "--", kProg, "burn", "0.01"});
  EXPECT_EQ(forced.status, 0) << describe(forced);
  EXPECT_EQ(lines_with(forced.err, "sprofil: not profiling").size(), 1u) << forced.err;
}

INSTANTIATE_TEST_SUITE_P(Errors, AutoFallback, ::testing::Values(EACCES, ENOSYS),
                         [](const auto& pi) {
                           return std::string(pi.param == EACCES ? "EACCES" : "ENOSYS");
                         });

}  // namespace
}  // namespace sprofil::clock_test
