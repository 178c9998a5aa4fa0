// The order in which sampling from outside takes its rings' records (src/record/agentless*.cpp):
// record reads each CPU's ring in turn, so a record read from a later ring can be older than one
// an earlier ring took after its read. Here the rings are memory laid out as the kernel lays out
// a perf ring (its meta page, then the data), the records written into them by the test, in the
// orders the kernel's CPUs can make them readable, and the passes are Agentless::State's own.
#include <gtest/gtest.h>
#include <linux/perf_event.h>
#include <sys/mman.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "record/agentless.hpp"
#include "record/agentless_state.hpp"
#include "util/clock_ns.hpp"

namespace sprofil::record {

// The state of an Agentless that no command runs under: rings of the test's memory.
struct AgentlessProbe {
  using State = Agentless::State;
  static State& state(Agentless& a) { return *a.s_; }
};

namespace {

using agentless_impl::kOrderSlackNs;
using agentless_impl::kPage;

constexpr size_t kDataBytes = 16 * kPage;
// pids no process can have (above the kernel's pid_max, at most 2^22): pidfd_open fails, as for a
// process that ended before record looked.
constexpr pid_t kPid = 5000000, kChildPid = 5000100;

uint64_t now_ns() {
  return util::clock_ns(CLOCK_MONOTONIC);
}

// A FORK or EXIT record as the kernel writes it with sample_id_all and the sample type of
// record's events: pid, ppid, tid, ptid, time, then the sample_id (pid and tid, time, the ids).
void put_task(AgentlessProbe::State& s, size_t ring, uint32_t type, pid_t pid, pid_t ppid,
              pid_t tid, uint64_t time) {
  struct {
    perf_event_header h;
    uint32_t pid, ppid, tid, ptid;
    uint64_t time;
    uint32_t id_pid, id_tid;
    uint64_t id_time, id, stream_id;
  } rec{};
  static_assert(sizeof rec == sizeof(perf_event_header) + 24 + agentless_impl::kSampleIdBytes);
  rec.h.type = type;
  rec.h.size = sizeof rec;
  rec.pid = static_cast<uint32_t>(pid);
  rec.ppid = static_cast<uint32_t>(ppid);
  rec.tid = static_cast<uint32_t>(tid);
  rec.ptid = static_cast<uint32_t>(type == PERF_RECORD_FORK ? pid : tid);
  rec.time = rec.id_time = time;
  rec.id_pid = rec.pid;
  rec.id_tid = rec.tid;
  auto* meta = reinterpret_cast<perf_event_mmap_page*>(s.rings[ring].base);
  const uint64_t head = meta->data_head;
  ASSERT_LE(head + sizeof rec - meta->data_tail, kDataBytes);
  unsigned char* data = reinterpret_cast<unsigned char*>(s.rings[ring].base) + kPage;
  const auto* bytes = reinterpret_cast<const unsigned char*>(&rec);
  for (size_t i = 0; i < sizeof rec; ++i) data[(head + i) % kDataBytes] = bytes[i];
  __atomic_store_n(&meta->data_head, head + sizeof rec, __ATOMIC_RELEASE);
}

// Two CPUs' rings, and the command's first process kPid running with its first thread.
class Order : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int cpu = 0; cpu < 2; ++cpu) {
      void* p = mmap(nullptr, kPage + kDataBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      ASSERT_NE(p, MAP_FAILED);
      agentless_impl::Ring r;
      r.cpu = cpu;
      r.base = static_cast<char*>(p);
      r.data = kDataBytes;
      s.rings.push_back(r);  // (unmapped by the state's end: Ring::close_all)
    }
    s.period = 1000000;
    agentless_impl::Img& m = s.new_img(kPid, 1, now_ns());
    m.root = true;
    m.argv = {"command"};
    s.root_execd = true;
    s.procs[kPid] = agentless_impl::Proc{0, 1, -1};
    s.born_in[kPid] = 0;
  }
  // A pass once every record written so far is older than the slack.
  void later_pass() {
    std::this_thread::sleep_for(std::chrono::nanoseconds(2 * kOrderSlackNs));
    s.pass();
  }
  int threads(pid_t pid) const {
    const auto p = s.procs.find(pid);
    return p == s.procs.end() ? -1 : p->second.threads;
  }

  Agentless a;
  AgentlessProbe::State& s = AgentlessProbe::state(a);
};

// A thread cloned on CPU 0 just after ring 0's read, that exited on CPU 1 before ring 1's: its
// EXIT record is read a pass before its FORK record. The pass keeps it back (it is younger than
// the pass's start less the slack), and the next takes both in time order: the process runs on
// with its one thread, and counts its next thread. (Taken at once, the EXIT record made the
// process's count of threads fall to none, and its later threads went uncounted.)
TEST_F(Order, AnExitReadBeforeItsForkWaitsForTheNextPass) {
  const pid_t tid = kPid + 1;
  const uint64_t t = now_ns();
  put_task(s, 1, PERF_RECORD_EXIT, kPid, kPid, tid, t + 20000);
  s.pass();
  EXPECT_EQ(s.stats.tasks_ended, 0u);
  EXPECT_EQ(threads(kPid), 1);
  put_task(s, 0, PERF_RECORD_FORK, kPid, kPid, tid, t);
  later_pass();
  EXPECT_EQ(s.stats.tasks_started, 1u);
  EXPECT_EQ(s.stats.tasks_ended, 1u);
  EXPECT_EQ(threads(kPid), 1);
  put_task(s, 0, PERF_RECORD_FORK, kPid, kPid, tid + 1, now_ns());
  later_pass();
  EXPECT_EQ(s.stats.tasks_started, 2u);
  EXPECT_EQ(threads(kPid), 2);
  EXPECT_FALSE(s.imgs[0].ended);
}

// The same where the FORK record was made readable later than the slack allows for (a writer
// held up, as a virtual CPU the host does not run): the EXIT record, taken in its pass, waits
// for the thread's FORK record, and the process's count of threads never falls.
TEST_F(Order, AnExitOlderThanTheSlackWaitsForItsFork) {
  const pid_t tid = kPid + 1;
  const uint64_t t = now_ns() - 50 * kOrderSlackNs;
  put_task(s, 1, PERF_RECORD_EXIT, kPid, kPid, tid, t + 20000);
  s.pass();
  EXPECT_EQ(s.stats.tasks_ended, 0u);
  EXPECT_EQ(threads(kPid), 1);
  put_task(s, 0, PERF_RECORD_FORK, kPid, kPid, tid, t);
  s.pass();
  EXPECT_EQ(s.stats.tasks_started, 1u);
  EXPECT_EQ(s.stats.tasks_ended, 1u);
  EXPECT_EQ(threads(kPid), 1);
  EXPECT_FALSE(s.imgs[0].ended);
}

// A child process whose end was read before its fork: it is made at its FORK record and ended
// there, not left running for good (record would wait for it at the run's end), and its parent
// runs on.
TEST_F(Order, AProcessEndReadBeforeItsForkEndsIt) {
  const uint64_t t = now_ns() - 50 * kOrderSlackNs;
  put_task(s, 1, PERF_RECORD_EXIT, kChildPid, kPid, kChildPid, t + 20000);
  s.pass();
  EXPECT_EQ(s.procs.count(kChildPid), 0u);
  put_task(s, 0, PERF_RECORD_FORK, kChildPid, kPid, kChildPid, t);
  s.pass();
  EXPECT_EQ(s.stats.tasks_started, 1u);
  EXPECT_EQ(s.stats.tasks_ended, 1u);
  EXPECT_EQ(s.procs.count(kChildPid), 0u);
  ASSERT_EQ(s.imgs.size(), 2u);
  EXPECT_EQ(s.imgs[1].pid, kChildPid);
  EXPECT_TRUE(s.imgs[1].ended);
  EXPECT_EQ(threads(kPid), 1);
}

// The run's end takes every record held back, young or not.
TEST_F(Order, TheLastPassTakesEveryRecord) {
  const pid_t tid = kPid + 1;
  const uint64_t t = now_ns() + 1000000000ull;  // (a second ahead: young for any pass)
  put_task(s, 0, PERF_RECORD_FORK, kPid, kPid, tid, t);
  put_task(s, 1, PERF_RECORD_EXIT, kPid, kPid, tid, t + 20000);
  s.pass();
  EXPECT_EQ(s.stats.tasks_started, 0u);
  s.pass(true);
  EXPECT_EQ(s.stats.tasks_started, 1u);
  EXPECT_EQ(s.stats.tasks_ended, 1u);
  EXPECT_EQ(threads(kPid), 1);
}

}  // namespace
}  // namespace sprofil::record
