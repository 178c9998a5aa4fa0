// Internal to the record parent's drain mode (drain.hpp is its interface): the state of the
// draining thread, Drainer::State, and what it is made of. Its work is split by job:
// - drain.cpp: the requests of the agents (drain_proto.hpp) and the passes over the rings;
// - drain_rings.cpp: an event's ring into its file's counters, and its period's re-draws;
// - drain_files.cpp: the profile files counted into: made, found, held and let go;
// - drain_ends.cpp: the ends of events and of processes.
// Only the draining thread touches this state, but for `stats` (stats_mu) and `redraws`.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "clock/perf.hpp"
#include "engine/engine.hpp"
#include "format/drain_proto.hpp"
#include "record/drain.hpp"
#include "record/process_end.hpp"
#include "util/clock_ns.hpp"

namespace sprofil::record {
namespace drain_impl {

constexpr size_t kPage = 4096;
// Room for two records (a sample is 24 bytes: header, ip, value): less is a full ring.
constexpr uint64_t kMaxRecord = 48;
// Each event's period is re-drawn on perf.hpp's schedule (rt::perf::jitter_block, the signal
// handler's) at a pass: fewer restarts leave fewer partial periods, whose kernel share is
// estimated (jitter()). Counted in records, not wall time:
// a thread that waits or shares its core with many others is re-drawn no more often per period
// than one running alone, and costs no read, ioctl (each an interrupt of the thread's CPU) while
// it waits. A pass comes when a block is due (redraw_due), or the blocks would be the tick's
// length: at 1 kHz a tick is about 170 ms, and a 0.4 s run was 3 blocks, not 3 to 8 of 48 ms.
//
// The parent passes over the rings at a tick of a quarter of the smallest ring's time at the
// nominal rate (so a ring is drained by a third full even at the shortest jittered period, and a
// late pass loses nothing), between kMinTickMs and kMaxTickMs; connections and ended threads wake
// it between ticks. A pass is a wake-up of this process (on a machine whose cores the program
// keeps busy, one that preempts a program thread) and a look at every ring: with a fixed 4 ms
// tick, `sprofil record -F 10000` of cmp-burn4 made about 980 voluntary context switches and
// took 1.96 s of tree CPU, against 68 and 1.80 s with this tick (6 runs each, medians,
// docs/benchmarks.md); the program's own CPU did not measurably change.
constexpr uint64_t kMinTickMs = 4;
constexpr uint64_t kMaxTickMs = 200;
// How long a thread at the agent's random first period may go without a sample before its
// period is re-drawn all the same (Event::first_pending): at most this long a thread that
// waits right after its start keeps the parent looking every period.
constexpr uint64_t kFirstWaitNs = 50000000;
constexpr uint64_t kSampleBytes = 24;  // a sample record: header, ip, value

// The tick for a ring of `data` bytes at period `period` ns: a quarter of its time.
inline uint64_t tick_for(uint64_t data, uint64_t period) {
  const uint64_t ms = data / kSampleBytes * period / 4 / 1000000;
  return std::clamp(ms, kMinTickMs, kMaxTickMs);
}

inline uint64_t mono_ns() {
  return util::clock_ns(CLOCK_MONOTONIC);
}

// A thread's period generator, seeded from its tid and the time (never 0: xorshift's fixed
// point).
inline uint64_t first_rng(pid_t tid) {
  const uint64_t r = (static_cast<uint64_t>(tid) + 1) * 0x9e3779b97f4a7c15ull ^ mono_ns();
  return r ? r : 1;
}

// An event's next period: drawn (rt::perf::jittered_period) with jitter, else P itself.
inline uint64_t next_period(uint64_t period, bool jitter, uint64_t* rng) {
  return jitter ? rt::perf::jittered_period(period, rng) : period;
}

// One process image's profile file, mapped shared, and the engine table over its records.
struct File {
  dev_t dev = 0;
  ino_t ino = 0;
  int fd = -1;
  char* map = nullptr;
  size_t len = 0;
  int map_errno = 0;  // why the last mapping of it failed (0: it did not)
  engine::Table* table = nullptr;
  uint32_t seen_count = UINT32_MAX;
  uint64_t seen_end = 0;
  bool refreshed = false;  // in this pass
  uint64_t hint = 0;
  int users = 0;              // events counting into it, and own_files' hold
  uint32_t seen_changes = 0;  // header.regions_changes when the table was built
  int dirfd = -1;  // made here (kDrainNewFile): its directory, for its process's forked children
  std::vector<bool> reserved;  // the file's pages known reserved (reserve_counter)
  // The records read so far (refresh), by their offsets in the file: a later refresh reads only
  // those added since (a change to these moves regions_changes: all are read again).
  struct Rec {
    uintptr_t lo = 0, last = 0;
    uint64_t counters_off = 0, nbins = 0, system_off = 0;  // system_off 0: none
    uint8_t shift = 0, width = 0;
    bool live = false;
  };
  std::vector<Rec> recs;
  uint32_t recs_count = 0;    // records read (valid or not)
  uint64_t recs_off = 0;      // where the next one starts
  uint32_t recs_changes = 0;  // regions_changes when recs was started
};

// A forked child without its own file yet (drain_proto.hpp's kAddPending): where to make it.
struct Pending {
  int from = -1;        // the file of the process it was forked from (read-only)
  int dirfd = -1;       // the run's directory (O_PATH)
  drain::DrainMsg msg;  // name, region_count, regions_end, start_ns, ppid
  bool failed = false;  // could not be made: its samples are unplaced
  int k = 0;            // the made file's name (profile_name.hpp)
  Pending(int f, int d, const drain::DrainMsg& m) : from(f), dirfd(d), msg(m) {}
  Pending(const Pending&) = delete;
  Pending& operator=(const Pending&) = delete;
  ~Pending() {
    close(from);
    close(dirfd);
  }
};

// A process's credits against its CPU clock (steal_free's fallback when a thread is gone).
struct Proc {
  uint64_t cpu_base = 0;  // its CPU clock minus its first event's counter (+ phase), if based
  bool based = false;
  uint64_t credited = 0;             // ns: the periods credited to all its events
  int events = 0;                    // open events of this pid (the entry goes with the last)
  std::unique_ptr<Pending> pending;  // a forked child that has no file of its own yet
  File* made = nullptr;              // the file made for a pending child's samples
};

struct Event {
  int fd = -1;
  Proc* proc = nullptr;
  pid_t pid = 0, tid = 0;
  char* ring = nullptr;
  size_t ring_bytes = 0;
  File* file = nullptr;
  uint64_t period = 1;      // P
  uint64_t phase = 0;       // P - first period: added to the counter
  uint64_t boundary = 0;    // counter (+ phase) where the running period started
  uint64_t cur_period = 1;  // the period running now
  // A re-draw whose restart's counter is not known yet (jitter()): the records before
  // restart_mark in the ring are of the period before it, old_period.
  bool restart_pending = false;
  uint64_t restart_mark = 0;
  uint64_t old_period = 1;
  bool jitter = true;
  uint64_t rng = 1;
  uint64_t records = 0;        // drained since the last re-draw
  uint64_t jitter_after = 0;   // records before the next re-draw
  uint64_t drawn_ns = 0;       // monotonic time of the last re-draw
  uint64_t ns_per_record = 1;  // of wall time, in the last block (P before one)
  // At the agent's random first period (add()): re-drawn at the pass after its first record,
  // or after kFirstWaitNs without one.
  bool first_pending = false;
  bool unthrottled = false;  // the kernel resumed it after a throttle: no sample since
  uintptr_t last_pc = 0;     // of the last sample record; before the first, the thread's start
                             // routine (0 if unknown)
  rt::perf::Credit credit;
  int sched_fd = -1;  // /proc/PID/task/TID/schedstat, opened at the first look (cpu_ns)
};

// Shared by the parts (each defined, with its comment, where it belongs).
using record::process_cpu_ns;                                              // process_end.hpp
void close_file(File* f);                                                  // drain_files.cpp
void refresh(File* f);                                                     // drain_files.cpp
int make_new_file(int dirfd, const drain::DrainMsg& m, int* k, int* err);  // drain_files.cpp

}  // namespace drain_impl

using drain_impl::Event;
using drain_impl::File;
using drain_impl::Pending;
using drain_impl::Proc;

struct Drainer::State {
  std::string path;
  std::string run_dir, base;  // where the agent's files are, and their base name
  std::string own_dir;        // a directory made for the socket (removed at finish), or ""
  int listen_fd = -1;
  int wake[2] = {-1, -1};
  // Closes the listening socket and the wake pipe (those open), removes the socket `at` and
  // the directory made for it: at finish, and where start fails after making them.
  void close_socket(const std::string& at);
  std::thread thread;
  std::atomic<bool> stop{false};
  bool finished = false;
  std::vector<File*> files;
  std::vector<Event*> events;
  std::unordered_map<pid_t, Proc> procs;  // node-based: Event::proc stays valid

  // The files made here (kDrainNewFile) whose last user let go (their process ended or
  // exec'd), with their directory: kept open for kEndedKeepNs, the newest kEndedMax. A forked
  // child's first hand-over (kAddPending alone, by the file's device and inode) may come
  // after its parent process's end was seen here and that file, empty, was removed: a
  // launcher that exits right after its fork (ForkDrain.DaemonOfALauncherThatExitsAtOnce).
  struct Ended {
    dev_t dev;
    ino_t ino;
    int fd, dirfd;
    uint64_t at_ns;
  };
  static constexpr size_t kEndedMax = 64;
  static constexpr uint64_t kEndedKeepNs = 5'000'000'000;
  std::deque<Ended> ended_files;
  std::atomic<uint64_t> redraws{0};  // PERF_EVENT_IOC_PERIOD calls
  rlimit saved_nofile{};
  bool nofile_raised = false;
  mutable std::mutex stats_mu;
  Stats stats;

  // A forked child's made file: when it has to be made (its first sample), or found again
  // (the child re-added its events after a failed exec: made_files).
  struct Made {
    dev_t dev = 0;
    ino_t ino = 0;
    int k = 0;
    uint64_t start_ns = 0;
  };
  std::unordered_map<pid_t, Made> made_files;

  // The file made for each process image (kDrainNewFile), held (a user of it) until the
  // process flushes (its exit or exec) or is found gone: its threads' events come without a
  // file fd (drain_proto.hpp), and count into it.
  std::unordered_map<pid_t, File*> own_files;

  // A pidfd (pidfd_open) of each process whose image's file was made here (kDrainNewFile),
  // until it ends: its exit then needs no flush (FileAnswer::watched), the end is seen here.
  // With what its CPU time at its end is reckoned from where the process was reaped before
  // this saw it end (gone()): its CPU clock at its first event's opening (the agent's
  // process_cpu_ns) and its events' counters at their ends (their threads' CPU time since).
  struct Watch {
    int fd = -1;
    uint64_t base_ns = 0;  // 0: not known
    uint64_t counted_ns = 0;
  };
  std::unordered_map<pid_t, Watch> watched;

  // The requests of the agents and the passes (drain.cpp).
  void serve(int conn);
  // The first period of an event opened here (new_file): drawn before the open, so that the
  // event starts with it and needs no PERF_EVENT_IOC_PERIOD; rng, the generator after the draw.
  struct FirstDraw {
    uint64_t period = 0;
    uint64_t rng = 1;
  };
  char add(const drain::DrainMsg& m, int fd, int file_fd, int dirfd,
           const FirstDraw* drawn = nullptr);
  void child_file(int conn, const drain::DrainMsg& m, int from, int dirfd);
  void new_file(int conn, const drain::DrainMsg& m, int dirfd, int event_fd);
  static int open_event(const drain::DrainMsg& m, uint64_t period);
  int flush(const drain::DrainMsg& m);
  uint64_t tick_ms() const;
  void loop();

  // The ends of events and of processes (drain_ends.cpp).
  bool watch(pid_t pid);
  void gone(pid_t pid);
  void close_event(Event* e);
  void event_ended(Event* e);
  void end_ended_events_of(pid_t pid);
  void release(Event* e);

  // The profile files counted into: made, found, held and let go (drain_files.cpp).
  void let_go(int fd, uint64_t cpu_ns);
  void unuse(File* f);
  void keep_ended(File* f);
  void trim_ended(uint64_t now);
  bool made_file(uint64_t dev, uint64_t ino, int* file_fd, int* dirfd);
  void hold_own(pid_t pid, File* f);
  void drop_own(pid_t pid);
  int made_before(const drain::DrainMsg& m, int dirfd, int* k);
  int child_file_for(const drain::DrainMsg& m, int from, int dirfd, int* k, int* err);
  File* pending_file(Proc* p);
  File* file_of(Event* e);
  File* find_file(uint64_t dev, uint64_t ino) const;
  File* file_for(int fd);
  bool drop_if_empty(int fd, uint64_t cpu_ns);
  static void finish_file(File* f, uint64_t cpu_ns, uint64_t end_ns);

  // An event's ring into its file's counters, and its period's re-draws (drain_rings.cpp).
  void add_sample(Event* e, uintptr_t pc, uint64_t w, uint64_t system_w);
  static bool reserve_counter(File* f, const char* at);
  void add_lost(Event* e, uint64_t n);
  static bool changed(const File* f);
  static bool stale(const File* f);
  void drain(Event* e);
  void jitter(Event* e);
  void restarted(Event* e, uint64_t value);
  static bool ring_full(const Event* e);
  uint64_t finalize(Event* e);
  void redraw(Event* e);
  void start_block(Event* e);
  void start_first_block(Event* e);
  static uint64_t redraw_due(const Event* e, uint64_t now);
};

}  // namespace sprofil::record
