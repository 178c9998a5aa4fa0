// Issue 10, goal 3: without perf events, on a loaded machine, every function's share is within
// 2 points of the truth. contend_workload alternates burn_a and burn_b (2:1 and 1:1 splits of
// its CPU time, measured by the program itself) beside two busy loops (threads of this test:
// with the workload, three runnable threads on this 2-core machine), recorded with
// `--clock auto` under a seccomp filter that makes perf_event_open fail (EACCES, ENOSYS), as on
// hosts whose policy denies perf events. auto must pick the sampler clock and say why in one
// line; the delivered rate at 1 kHz must be 1 kHz of the program's CPU time. The cpu clock
// (tick-driven CPU-time timers) gave 506:82 for the 2:1 split in the issue, and 5.9 and 4.4
// points of error on the two splits when this test was written; the sampler clock gave 0.9 to
// 3 points under the far heavier load of five helpers building on the same 2 cores, and under
// 2 with only the busy loops.
#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "../agent/helpers.hpp"

namespace sprofil::agent_test {
namespace {

const std::string kWorkload = CONTEND_WORKLOAD;

// Two threads that spin until destroyed (and at most 120 s: bounded whatever happens).
class BusyLoops {
 public:
  BusyLoops() {
    for (auto& t : threads_)
      t = std::thread([this] {
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(120);
        volatile unsigned long x = 0;
        while (!stop_.load(std::memory_order_relaxed) && std::chrono::steady_clock::now() < end)
          for (int i = 0; i < 100000; ++i) x = x + 1;
      });
  }
  ~BusyLoops() {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread threads_[2];
};

struct Split {
  int a_ms, b_ms;
  int err;  // what perf_event_open fails with
};

void PrintTo(const Split& s, std::ostream* os) {
  *os << s.a_ms << ":" << s.b_ms << " " << strerror(s.err);
}

class Contention : public ::testing::TestWithParam<Split> {};

TEST_P(Contention, SharesWithin2PointsWithoutPerf) {
  const Split s = GetParam();
  TempDir dir;
  const std::string out = dir / "c.sprof", truth_file = dir / "truth";
  Result r;
  {
    BusyLoops busy;
    // 3 s of the workload's CPU: about 3000 samples at 1 kHz.
    r = run({kSeccomp, std::to_string(s.err), kTool, "record", "--clock", "auto", "-F", "1000",
             "-o", out, "--", kWorkload, std::to_string(s.a_ms), std::to_string(s.b_ms), "3",
             truth_file});
  }
  if (r.status == 125) GTEST_SKIP() << "cannot install a seccomp filter here: " << r.err;
  ASSERT_EQ(r.status, 0) << describe(r);
  // auto picked the sampler clock, and said why in one line.
  profile::Profile p = read(out);
  EXPECT_EQ(static_cast<uint32_t>(p.clock), uint32_t{SPROF_CLOCK_SAMPLER});
  const auto why = lines_with(r.err, "perf_event_open");
  ASSERT_EQ(why.size(), 1u) << r.err;
  EXPECT_NE(why[0].find(strerror(s.err)), std::string::npos) << why[0];
  EXPECT_NE(why[0].find("sampler clock"), std::string::npos) << why[0];

  auto truth = read_truth(truth_file);
  const double ta = truth["burn_a"], tb = truth["burn_b"];
  ASSERT_GT(ta + tb, 2.9);
  const Json j = report_json(out);
  const double total = static_cast<double>(p.total_samples());
  ASSERT_GT(total, 0);
  // Every function's share of all samples (the rest of the program -- main, the loader, the
  // clock_gettime calls inside the burns -- is under 1% of its CPU time) within 2 points of
  // its share of the CPU time: the requirement.
  const double share_a = 100 * samples_of(j, "burn_a") / total;
  const double share_b = 100 * samples_of(j, "burn_b") / total;
  EXPECT_NEAR(share_a, 100 * ta / (ta + tb), 2.0);
  EXPECT_NEAR(share_b, 100 * tb / (ta + tb), 2.0);
  RecordProperty("share_a", std::to_string(share_a));
  RecordProperty("share_b", std::to_string(share_b));
  // The delivered rate: 1 kHz of the process's CPU time (weights count whole periods of each
  // thread's CPU time; the loader's few ms before the agent starts are not sampled): 5%.
  const double cpu = static_cast<double>(p.cpu_ns) * 1e-9;
  EXPECT_GE(total, 0.95 * cpu * 1000) << "cpu " << cpu;
  EXPECT_LE(total, 1.02 * cpu * 1000) << "cpu " << cpu;
}

INSTANTIATE_TEST_SUITE_P(Splits, Contention,
                         ::testing::Values(Split{10, 20, EACCES}, Split{15, 15, ENOSYS}),
                         [](const auto& pi) {
                           return std::to_string(pi.param.a_ms) + "to" +
                                  std::to_string(pi.param.b_ms) +
                                  (pi.param.err == EACCES ? "_EACCES" : "_ENOSYS");
                         });

}  // namespace
}  // namespace sprofil::agent_test
