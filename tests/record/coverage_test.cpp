// The run's CPU in drain mode (the perf clock's default under `sprofil record`) with many short
// processes: the summary line's samples x period plus the CPU it reports without samples add
// up to the CPU the processes used, every period of a process is placed (the main thread's
// kernel time too), and a short process's samples stand for its CPU time.
#include <algorithm>
#include <cstdio>
#include <regex>

#include "helpers.hpp"

namespace sprofil::record_test {
using namespace agent_test;  // tests/agent/helpers.hpp

namespace {

// bash's `times`: "0m0.025s 0m0.171s" (user, system) for the shell, then for its children.
double times_total(const std::string& out) {
  const std::regex re("([0-9]+)m([0-9.]+)s ([0-9]+)m([0-9.]+)s");
  double total = 0;
  int lines = 0;
  for (std::sregex_iterator it(out.begin(), out.end(), re), end; it != end; ++it, ++lines)
    total += std::stod((*it)[1]) * 60 + std::stod((*it)[2]) + std::stod((*it)[3]) * 60 +
             std::stod((*it)[4]);
  return lines == 2 ? total : -1;
}

// 60 processes of about 6 ms of CPU each (the program's start-up, then burn_main for 4 ms, 4
// periods at 1 kHz) under `sprofil record`, run by bash, whose `times` measures the same CPU
// as record's wait4 independently of sprofil.
TEST(Coverage, ShortProcessesSamplesPlusUnsampledIsTheirCpu) {
  SKIP_WITHOUT_PERF();
  TempDir dir;
  const std::string out = dir / "c.sprof";
  const int n = 60;
  const unsigned hz = 1000;
  const std::string loop = "for i in $(seq " + std::to_string(n) + "); do '" + kProg +
                           "' --truth '" + (dir / "t.") + "'$i burn 0.004 || exit 1; done; times";
  Result r = run(
      {kTool, "record", "--agent", "-F", std::to_string(hz), "-o", out, "--", "bash", "-c", loop},
      {{"SPROFIL_DRAIN_STATS", "1"}});
  ASSERT_EQ(r.status, 0) << describe(r);
  const double cpu = times_total(r.out);
  ASSERT_GT(cpu, 0) << r.out;

  // The summary: "N samples (perf clock, ...); U s of the run's R s CPU has no sample (...)".
  std::smatch m;
  const std::regex summary(
      "([0-9]+) samples \\(perf clock.*; ([0-9.]+) s of the run's ([0-9.]+) "
      "s CPU has no sample");
  ASSERT_TRUE(std::regex_search(r.err, m, summary)) << r.err;
  const double samples = std::stod(m[1]), unsampled = std::stod(m[2]), run_cpu = std::stod(m[3]);
  const double sampled = samples / hz;
  // Within 10% of the children's CPU: both figures are rusage of the same processes (bash's
  // `times` misses only its own exit, a fraction of a millisecond), and the summary rounds to
  // the millisecond. Before, 0.2 s of these 0.5 s (each process's start-up before its event
  // opened: the loader, the agent) was in neither figure.
  EXPECT_NEAR(sampled + unsampled, cpu, 0.10 * cpu)
      << "samples " << sampled << " s + unsampled " << unsampled << " s vs " << cpu << " s";
  EXPECT_NEAR(run_cpu, cpu, 0.10 * cpu);
  // The samples never stand for more CPU than ran: 5% for the time the hypervisor steals,
  // which the task clock counts and rusage does not (tests/clock's perf-rate test).
  EXPECT_LE(sampled, 1.05 * cpu);
  EXPECT_GE(sampled, 0.3 * cpu) << "the burns alone are 0.24 s of the run";

  // Every period is placed: the main thread's kernel time when it had no user-space sample
  // goes to the program's entry point (before: bash's fork and wait time, counted nowhere).
  EXPECT_NE(r.err.find(" 0 not (no pc)"), std::string::npos) << r.err;

  // A 4 ms burn is 4 periods: the samples of 60 of them stand for their CPU time. The lower
  // bound is statistical (each process's count is its time in periods plus a uniform phase:
  // a standard deviation of at most 0.5 sample each, 4 samples in 240). Above it, burn_main
  // also gets the kernel time between its event's opening and its first user-space overflow
  // (the loader's and the agent's page faults and system calls after the open): an overflow
  // in the kernel is charged to the user pc the kernel returns to, and the first is in
  // burn_main. How much that is depends on the machine (0.2-0.4 ms a process on an Intel Xeon
  // VM, about 0.8 ms on an AMD EPYC VM whose page faults cost 11 us each), so the bound is each
  // process's own kernel time (its rusage, in its truth file): kernel time charged to
  // burn_main is kernel time its process spent (5% for the time the hypervisor steals, as
  // above). Its user samples stand for its own CPU time as its task clock measured it, with
  // the steal that the sampling event counts too, and the CPU time between the hand-over and
  // the first overflow: the record parent's re-draw at the hand-over restarts the period, so
  // the first overflow comes a drawn period (4P/5 to 4P/3) later, in burn_main, and takes
  // the rest of the agent's start and main's first instructions with it (src/record/drain.cpp
  // add(); 0.2-0.35 period a process on the AMD EPYC VM, 0.35-0.45 before the part of the
  // period the restart cuts, the agent's exchange, was credited as kernel time). 0.3 sample
  // a process for the phases (18, 4 standard deviations) and 0.4 for the hand-over.
  double truth = 0, task_clock = 0, system = 0;
  for (int i = 1; i <= n; ++i) {
    const auto t = read_truth(dir / ("t." + std::to_string(i)));
    truth += t.at("burn_main");
    task_clock += t.at("burn_main_task_clock");  // its CPU time and the steal the event counts
    system += t.at("process_system");
  }
  const Json report = report_json(out);
  const double burn = samples_of(report, "burn_main");
  const double burn_system = row_sum(report, "burn_main", "system_samples");
  EXPECT_GE(burn, 0.9 * truth * hz) << "burn_main " << burn << " of " << truth * hz;
  EXPECT_LE(burn - burn_system, std::max(truth, task_clock) * hz + 0.7 * n)
      << "burn_main's user samples " << burn - burn_system << " of " << truth * hz << " ("
      << task_clock * hz << " with the steal its task clock counted)";
  EXPECT_LE(burn_system, 1.05 * system * hz + 0.25 * n)
      << "burn_main's system samples " << burn_system << " of its processes' kernel time "
      << system * hz;
  RecordProperty("sampled_fraction", std::to_string(sampled / cpu));
  RecordProperty("unsampled_fraction", std::to_string(unsampled / cpu));
  RecordProperty("burn_fraction", std::to_string(burn / (truth * hz)));
}

}  // namespace
}  // namespace sprofil::record_test
