// Internal to record's default, sampling from outside (agentless.hpp is its interface): the
// state of the thread that reads the rings, Agentless::State, and what it is made of. Its work
// is split by job:
// - agentless.cpp: the events opened on the command and their rings (attach), the thread's
//   loop, and the process images handed out (at the end, at checkpoints, live);
// - agentless_records.cpp: each pass's records, in time order, into the process images;
// - agentless_ends.cpp: the time that no sample stands for: throttled events, threads' ends;
// - elf_file.cpp: what is read of a mapped file (its text segments and build-id).
// Only the rings' thread touches this state, but for the live requests' (live_mu).
#pragma once

#include <asm/perf_regs.h>
#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "clock/perf_ring.hpp"
#include "profile/profile.hpp"
#include "record/agentless.hpp"
#include "record/elf_file.hpp"

namespace sprofil::record {
namespace agentless_impl {

constexpr size_t kPage = rt::perf::kRingPage;
// A CPU's ring at most: 512 KiB, perf record's (6,500 samples, 0.65 s at 10 kHz). The kernel
// wakes record each time half a ring's size has been written (wakeup_watermark), from the
// program's CPU (an irq_work): rings of 128 KiB woke it 12 times a second at 10 kHz, 3 now.
constexpr size_t kMaxDataPages = 128;
// The largest record a ring takes: an MMAP2 record's path (PATH_MAX) and its fixed fields.
constexpr uint64_t kRecordMaxBytes = 8192;
constexpr int kPassMs = 16;  // a pass over every ring at least this often
// A ring smaller than this is waited on at every pass (Ring::filling): 16 ms at 8 MB a second.
constexpr uint64_t kWakeRingBytes = 128 * 1024;
// After a pass that saw clones, the next this soon: the threads cloned meanwhile share the
// period that pass re-drew (Agentless::State::redraw).
constexpr int kClonePassMs = 4;
// Threads that run less than a period (a thread per small task) end before their first
// sample: an inherited copy's first period is a whole one. Where three quarters of the last
// kShortWindow threads to end (not a process's first) had samples for less than a nominal
// period, the threads cloned from then on get periods kShortenBy times shorter, no shorter
// than kShortestNs, each sample weighted by its own period (count()); where a quarter or less
// had, the nominal one again (note_thread_cpu()).
constexpr unsigned kShortWindow = 64;
constexpr uint64_t kShortenBy = 4;
constexpr uint64_t kShortestNs = 100000;
// A record read with a time this close to the pass's start, or later, waits for the pass after
// (Agentless::State::pass): the kernel stamps a record a few microseconds before it makes it
// readable, with preemption off between the two.
constexpr uint64_t kOrderSlackNs = 1000000;
// The samples' fields, in this order (perf_event_open(2)): ip, pid and tid, time, the id of
// the original event (record's: which set), the id of the event (each copy's own), the period,
// and where kernel time is sampled the user registers' ABI and pc (the pc the thread returns
// to from the kernel). The side-band records end with pid and tid, time and the two ids
// (sample_id_all). No cpu: a ring is one CPU's.
constexpr uint64_t kSampleType = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                                 PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_PERIOD;
constexpr size_t kSampleIdBytes = 32;
// Offsets in a sample record's body (kSampleType's fields).
constexpr size_t kSamplePid = 8, kSampleTime = 16, kSampleSet = 24, kSampleCopy = 32,
                 kSamplePeriod = 40, kSampleAbi = 48, kSampleUserPc = 56;
// The two sets of events (Agentless::State::swap): one enabled at a time, swapped at random
// intervals, at least kSwapMinMs long, and longer where the command's threads or CPUs are many
// or the rate is low: each swap interrupts each thread's CPU up to twice per CPU's event (an
// ioctl on an original reaches every copy, each on the CPU its thread last ran on), and the
// swaps' interrupts are kept to 1/kSwapIpiShare of the sampling's (an interrupt costs about as
// much as a sample: 36 us against 27 on the 2-core VM of docs/benchmarks.md).
constexpr uint64_t kSwapMinMs = 25;
constexpr uint64_t kSwapIpiShare = 100;
#if defined(__x86_64__)
constexpr uint64_t kUserPc = 1ull << PERF_REG_X86_IP;
#elif defined(__aarch64__)
constexpr uint64_t kUserPc = 1ull << PERF_REG_ARM64_PC;
#else
constexpr uint64_t kUserPc = 0;  // no kernel time: user time only
#endif

// A perf ring: the meta page and 2^n data pages, mapped read-write (record moves the tail).
struct Ring {
  int fd = -1;
  int set_b = -1;  // the second set's event on this CPU, its samples into this ring
  int track = -1;  // this CPU's event of the task, comm and mmap records, into this ring
  int cpu = -1;
  // The periods of the samples read from it (set off and on): what a record it dropped stands
  // for (lost_periods()).
  uint64_t sampled_ns = 0, sampled = 0;
  // A read found it within kRecordMaxBytes of full: the kernel may have dropped records since
  // the read before, whose LOST record may not have come (tell_last_losses()). Below that,
  // every record since fitted: the unread bytes only grow between two reads.
  bool nearly_full = false;
  // Record waits on its wake-ups (State::run()): it is smaller than kWakeRingBytes (the
  // user's perf_event_mlock_kb spent elsewhere), or at the rate its last read found written
  // since the read before, the longest wait between two passes (kPassMs) would fill an eighth
  // of it or more. A rate, not the bytes a read found: the passes come 1 to 16 ms apart. Rings
  // of 8 KiB waited on only by that rate dropped 17-144 records of 3,000 threads of 0.2 ms at
  // 10 kHz (and 1,084-1,189 by the bytes a read found), none waited on always.
  bool filling = false;
  uint64_t read_ns = 0;  // its last read (CLOCK_MONOTONIC)
  char* base = nullptr;
  size_t data = 0;  // bytes of data pages

  // Maps fd's ring with up to `pages` data pages, fewer where the locked-memory allowance
  // refuses them. False if not even one page could be mapped.
  bool map(int event_fd, size_t pages) {
    size_t bytes = 0;
    void* p = rt::perf::map_ring(event_fd, pages, &bytes);
    if (p == MAP_FAILED) return false;
    fd = event_fd;
    base = static_cast<char*>(p);
    data = bytes - kPage;
    filling = data < kWakeRingBytes;
    return true;
  }
  void close_all() {
    if (base) munmap(base, data + kPage);
    if (fd >= 0) close(fd);
    for (int* e : {&set_b, &track}) {
      if (*e >= 0) close(*e);
      *e = -1;
    }
    base = nullptr;
    fd = -1;
  }
  // Calls f(header, body bytes) for every complete record, then frees them; `now` is the
  // read's time.
  template <class F>
  void read(uint64_t now, F&& f) {
    if (!base) return;
    const uint64_t room = rt::perf::ring_room(base, data);
    if (room < kRecordMaxBytes) nearly_full = true;
    const unsigned __int128 size = rt::perf::ring_data(base, data).size;
    const uint64_t since = now > read_ns ? now - read_ns : 1;
    filling = size < kWakeRingBytes || (size - room) * kPassMs * 1000000 * 8 >= size * since;
    read_ns = now;
    std::vector<unsigned char> body;
    rt::perf::read_records(
        base, data, [&](const perf_event_header& h, const rt::perf::RingData& d, uint64_t at) {
          body.resize(h.size - sizeof h);
          d.copy(at + sizeof h, body.data(), body.size());
          f(h, body);
        });
  }
};

template <class T>
T field(const std::vector<unsigned char>& b, size_t off) {
  T v{};
  if (off + sizeof v <= b.size()) memcpy(&v, b.data() + off, sizeof v);
  return v;
}

// A sample or side-band record, in a pass's list sorted by time.
struct Rec {
  uint64_t time = 0;
  uint32_t type = 0;  // PERF_RECORD_*
  uint16_t misc = 0;
  uint32_t ring = 0;  // the ring (a CPU's) it came from
  std::vector<unsigned char> body;
};

// One CPU's copy of one thread's event (an inherited event counts a thread on one CPU: its
// time there): each of its samples ends a period.
struct Copy {
  // ns of its periods not counted yet, less what was counted ahead (each copy's period is its
  // own; count() rounds at random): within a period of 0.
  int64_t acc = 0;
};

// An executable mapping's samples.
struct Reg {
  profile::Region r;
  std::unordered_map<uint64_t, std::pair<uint64_t, uint64_t>> bins;  // index -> count, system
};

struct Img {
  pid_t pid = 0, ppid = 0;
  bool root = false, child = false, ended = false;
  bool finished = false;  // ended by an exec or an exit, not by a signal
  std::vector<std::string> argv;
  bool argv_pending = false;    // an exec's image whose arguments are not in place yet
  std::string comm;             // its name, for want of them
  uint64_t start = 0, end = 0;  // CLOCK_MONOTONIC
  std::vector<Reg> regs;
  std::map<uint64_t, size_t> live;  // start -> index in regs, the mappings of now
  uint64_t overflow = 0, delivered = 0, lost = 0, periods = 0;
  uint64_t throttled_lost = 0;  // of lost, the throttled time's (resumed())
  uint64_t entry_pc = 0;        // its program's entry point (_start), where a thread with no pc of
                                // its own is credited
  uint64_t before_entry = 0;    // periods of its exec's work before entry_pc was known (count())

  // The mapping of now that holds pc, or null.
  Reg* region_of(uint64_t pc) {
    auto it = live.upper_bound(pc);
    if (it == live.begin()) return nullptr;
    Reg& g = regs[std::prev(it)->second];
    return pc < g.r.end ? &g : nullptr;
  }
};

struct Proc {
  size_t img = 0;
  int threads = 0;
  int pidfd = -1;  // how it ended (process_end.hpp)
};

}  // namespace agentless_impl

struct Agentless::State {
  using Copy = agentless_impl::Copy;
  using Img = agentless_impl::Img;
  using Proc = agentless_impl::Proc;
  using Rec = agentless_impl::Rec;
  using Ring = agentless_impl::Ring;

  uint64_t period = 0;
  unsigned hz = 0;
  uint64_t real_minus_mono = 0;
  bool kernel = false;  // kernel time is sampled too (at the user pc: PERF_SAMPLE_REGS_USER)
  // The agent's settings, from the same variables (docs/agent.md, "Environment"): bytes of text
  // per counter (exact: the regions' counts are kept sparse in record's memory), and whether
  // each region gets its system-time array.
  uint32_t bin_bytes = 1;
  bool system = true;
  std::vector<Ring> rings;  // one a CPU: the events (record's) that the command inherits
  std::unordered_map<uint64_t, Copy> copies;    // by the copy's event id
  std::unordered_map<pid_t, uint64_t> last_pc;  // by tid: the pc of its last sample
  std::unordered_set<pid_t> execd;  // threads that made an exec and have no pc of the new image yet
  std::unordered_map<pid_t, uint64_t> last_ns;  // by tid: the time of its last sample or clone
  std::unordered_map<pid_t, std::vector<uint64_t>> ids_of;  // by tid: its copies' event ids
  std::unordered_map<pid_t, size_t> born_in;                // by tid: the image it was cloned in
  // By tid: the periods its own samples stood for, and whether the last was in user space.
  struct Own {
    uint64_t ns = 0;
    bool user = false;
  };
  std::unordered_map<pid_t, Own> own_of;
  // The last kShortWindow threads' ends, whether each had samples for less than a nominal period
  // (oldest first), how many, and whether the clones get shortened periods (note_thread_cpu()).
  std::deque<bool> ran_short;
  unsigned short_runs = 0;
  bool shortened = false;
  bool redraw_due = false;  // shortened changed: re-draw at the pass's end (pass())
  // By tid: EXIT records of threads whose FORK record had not been taken (exit()).
  std::unordered_map<pid_t, Rec> early_exits;
  std::unordered_map<pid_t, Proc> procs;  // by pid: the image running now
  // Threads and processes that ended, kept for two passes more: a sample on another CPU from
  // before a thread's EXIT record may be read a pass after it.
  struct Gone {
    int passes = 2;
    size_t img = ~size_t{0};  // the image it ended in
    uint64_t time = 0;        // its EXIT record's
  };
  std::unordered_map<pid_t, Gone> gone_tids;
  // The threads' ends, to take their share of the periods that no sample credited (run_end):
  // by (image, the thread's last pc), the sum of their weights, of those of threads that had
  // no sample of their own (their pc is their creator's), and of those whose last own sample
  // was in user space (their tail is taken for user time).
  struct Tail {
    uint64_t w = 0, unsampled_w = 0, user_w = 0;
  };
  std::map<std::pair<size_t, uint64_t>, Tail> ends;
  std::unordered_map<pid_t, std::pair<size_t, int>> gone_procs;  // pid -> image, passes left
  // Images that ended (an exit or an exec), each with the passes left till compact() drops
  // its mappings that no sample or thread's end needs: one pass more than gone_procs and
  // gone_tids keep theirs, so that no record can reach it but its threads' ends (ends).
  std::deque<std::pair<size_t, int>> ended_imgs;
  std::deque<Img> imgs;      // (a deque: an image's address stays while others are added)
  int unshared = -1;         // record's event the fork does not copy, till root() (attach)
  uint64_t attached_ns = 0;  // CLOCK_MONOTONIC of attach(): the command's first image's start
  bool jitter = true;        // re-draw the periods (SPROFIL_JITTER=0: not, as the agent's)
  std::map<std::pair<std::string, uint64_t>, ElfFile> files;  // by (path, inode)
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  std::vector<uint8_t> vdso_id = vdso_build_id();
  int stop_pipe[2] = {-1, -1};
  std::thread loop;
  std::atomic<bool> stopping{false};
  bool argv_pending = false;  // an exec's image waits for its arguments: the next pass is soon
  Stats stats;
  // The kernel throttles a copy's event (PERF_RECORD_THROTTLE: it took more than
  // perf_event_max_sample_rate / HZ samples since the CPU's last tick) till that CPU's next
  // tick, or till the thread is next switched in where it left the CPU before (each writes
  // PERF_RECORD_UNTHROTTLE). Its thread's CPU time meanwhile, taken as sampled time that no
  // sample stands for, is lost samples of its image, at no pc (as a full ring's): the time from
  // the throttle to the earliest of the resume, the CPU's next tick (at most a tick: the
  // resolution of CLOCK_MONOTONIC_COARSE), and another thread of the command sampled or
  // throttled on that CPU (it was switched out by then). Three threads on two CPUs throttled at
  // 4 kHz counted 155% of their CPU as delivered with the whole time to the resume, which takes
  // their time switched out too. A thread that ends while throttled gets no resume: its end
  // (its EXIT record) ends the time, and what is still throttled when the run ends, its end.
  struct Throttle {
    uint64_t at = 0;    // when it was throttled
    uint32_t ring = 0;  // the CPU's ring its records go to
    size_t img = ~size_t{0};
    pid_t tid = 0;
  };
  std::unordered_map<uint64_t, Throttle> throttled_at;  // a copy's id -> its throttle
  const uint64_t tick_ns = [] {
    timespec ts{};
    if (clock_getres(CLOCK_MONOTONIC_COARSE, &ts) != 0 || (ts.tv_sec == 0 && ts.tv_nsec == 0))
      return uint64_t{10000000};  // HZ 100, the longest tick
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
  }();
  // Live snapshots (record --live): the processes running now, and one request at a time for
  // a process's image, answered by the rings' thread after its next pass (a consistent image,
  // no lock held while the rings are read).
  std::mutex live_mu;
  std::condition_variable live_cv;
  std::vector<pid_t> live_pids;  // the processes running now (after each pass)
  pid_t live_want = 0;           // the process whose image is asked for; 0: none
  bool live_done = false;        // the answer is in live_answer (found: live_found)
  bool live_found = false;
  Agentless::Image live_answer;
  bool live_on = false;
  // Agentless::checkpoint's: the images to checkpoint_fn every checkpoint_ns.
  std::function<void(std::vector<Agentless::Image>)> checkpoint_fn;
  uint64_t checkpoint_ns = 0, checkpoint_at = 0, checkpoint_samples = 0;
  bool forked = false;  // a pass saw a clone (a thread or process)
  // The records read but not yet taken, oldest first: those of a pass's last kOrderSlackNs and
  // after, which a ring read later in that pass could still precede (pass()).
  std::vector<Rec> held;
  // The two sets (swap()): the originals' ids of the second; for each ring, when each swap took
  // effect on that CPU's events and which set it enabled (oldest first; the first set's from
  // the start); which set the last swap enabled; the next swap's time.
  std::vector<uint64_t> set_b_ids;
  std::vector<std::deque<std::pair<uint64_t, bool>>> swaps;  // a ring's (time, second set on)
  bool b_on = false;
  uint64_t next_swap = 0;
  // The swap under way: the ring whose CPU's events it swaps next (0: none under way; the
  // rings' count: the pass over every CPU's once more is next), and when it began.
  size_t swap_step = 0;
  uint64_t swap_began = 0;
  pid_t self = getpid();     // record: its thread that holds the originals is sampled too
  pid_t root_pid = 0;        // the command, whose samples before its exec are record's code
  bool root_execd = false;   // its exec was seen
  int go[2] = {-1, -1};      // the command waits to exec till its events are enabled
  uint64_t self_cpu_at = 0;  // this thread's CPU time when they were (run_end: not the command's)
  // The periods of the command's samples before its exec: counted time that is record's code
  // (run_end).
  uint64_t dropped_ns = 0;

  // The life cycle and the images handed out (agentless.cpp).
  ~State();
  void close_events();  // the rings and their events, the dummy
  void run();
  Agentless::Image image(Img& m, bool final);
  std::vector<Agentless::Image> images(bool final);
  void serve_live();
  void checkpoint();

  // Each pass's records into the process images (agentless_records.cpp).
  Copy& copy_of(uint64_t id, pid_t tid);
  Img& new_img(pid_t pid, pid_t ppid, uint64_t time);
  Img* img_of(pid_t pid);
  size_t img_index(pid_t pid) const;
  void end_img(size_t img, uint64_t time, bool finished);
  void compact(size_t img);
  static std::vector<std::string> cmdline(pid_t pid, bool* gone);
  void settle_argv(Img* m, bool ending);
  void pass(bool all = false);
  int next_pass_ms() const;
  void tell_last_losses();
  uint64_t lost_periods(const Ring& r, uint64_t records) const;
  void sample(const Rec& r);
  void count(pid_t pid, pid_t tid, uint64_t id, uint64_t ip, uint64_t time, uint64_t len,
             bool in_kernel);
  void add(Img* m, uint64_t ip, uint64_t w, uint64_t system_w);
  void add_before_entry(Img* m);
  void mmap2(const Rec& r);
  void fork(const Rec& r);
  void exit(const Rec& r);
  void comm(const Rec& r);
  void redraw();
  void note_thread_cpu(uint64_t ns);
  void enable(pid_t child);
  void close_go();
  void swap();
  bool keep(uint64_t set_id, uint32_t ring, uint64_t time) const;

  // The time that no sample stands for: throttled events, the threads' ends
  // (agentless_ends.cpp).
  void credit_at_end(Img* m, uint64_t pc, uint64_t w, uint64_t system_w);
  void throttled(const Rec& r);
  void ended_throttled(pid_t tid, uint64_t time);
  void unthrottled(const Rec& r);
  void ran_on(uint32_t ring, uint64_t id, uint64_t time);
  template <class Stop>
  void resume_if(Stop stop, uint64_t time);
  void resumed(const Throttle& t, uint64_t time);
  void bound_lost(uint64_t run_cpu_ns);
  void thread_end(pid_t tid, const Gone& g);
  void run_end();
};

}  // namespace sprofil::record
