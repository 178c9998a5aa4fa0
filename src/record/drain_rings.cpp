// An event's ring into its file's counters: each sample weighted by the task clock since the
// one before (less steal), the kernel's drops counted lost, and the period re-drawn in blocks.
#include "record/drain_state.hpp"

#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "clock/perf_ring.hpp"
#include "format/layout.hpp"
#include "format/profile_file.hpp"
#include "format/sprof_format.h"
#include "util/fd_passing.hpp"
#include "util/release_space.hpp"
#include "util/xorshift.hpp"

namespace sprofil::record {
namespace drain_impl {
namespace {

// Another process's thread's CPU clock, from its schedstat (the sum of its run times, as
// updated at its last tick or switch: up to a scheduler tick behind; kStealSlackNs). The file
// stays open for the next look unless its fd is in the upper half of the fd limit: the
// events handed over need those.
uint64_t cpu_ns(Event* e) {
  if (e->sched_fd == -2) return 0;
  int fd = e->sched_fd;
  if (fd < 0) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", static_cast<int>(e->pid),
             static_cast<int>(e->tid));
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT || errno == EACCES || errno == ESRCH) e->sched_fd = -2;  // for good
      return 0;
    }
    rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && static_cast<rlim_t>(fd) < rl.rlim_cur / 2)
      e->sched_fd = fd;
  }
  char buf[96];
  const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  if (fd != e->sched_fd) close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  return strtoull(buf, nullptr, 10);  // 0 if it holds no number
}

// The slack of perf::steal_free for a CPU clock read from /proc: a scheduler tick at 100 Hz.
constexpr uint64_t kStealSlackNs = 10000000;

// Where the thread is gone (its records drained late, as under a busy host), the process's
// credits are held to its CPU clock instead: what v would credit beyond that is steal.
uint64_t process_capped(Event* e, uint64_t v) {
  Proc* p = e->proc;
  const uint64_t cpu = p && p->based ? process_cpu_ns(e->pid) : 0;
  if (cpu == 0) return v;
  const uint64_t budget = (cpu > p->cpu_base ? cpu - p->cpu_base : 0) + kStealSlackNs + e->period;
  const uint64_t whole = v / e->period;
  const uint64_t adds = whole > e->credit.periods ? (whole - e->credit.periods) * e->period : 0;
  if (p->credited + adds <= budget) return v;
  const uint64_t room = budget > p->credited ? budget - p->credited : 0;
  const uint64_t cut = adds - room;
  e->credit.stolen += cut;
  return v - cut;
}

// A record's counter (+ phase) less the steal (perf::steal_free): checked against the
// thread's CPU clock, or its process's where the thread is gone.
uint64_t steal_free(Event* e, uint64_t value) {
  bool gone = false;
  const uint64_t v =
      rt::perf::steal_free(value, e->period, kStealSlackNs + e->period, &e->credit, [e, &gone] {
        const uint64_t cpu = cpu_ns(e);
        gone = cpu == 0;
        return cpu;
      });
  return gone ? process_capped(e, v) : v;
}

// Counts w periods credited to e in its process's total.
void note_credit(Event* e, uint64_t w) {
  if (e->proc) e->proc->credited += w * e->period;
}

}  // namespace

}  // namespace drain_impl

using namespace drain_impl;

void Drainer::State::add_sample(Event* e, uintptr_t pc, uint64_t w, uint64_t system_w) {
  File* f = file_of(e);
  if (!f) {
    std::lock_guard<std::mutex> l(stats_mu);
    stats.unplaced += w;
    return;
  }
  // A table over records the agent has changed since (one unloaded, reloaded elsewhere, or
  // added where an unloaded one was) would count into the wrong object: it is rebuilt when
  // regions_changes moves. Samples drained after such a change that were taken before it
  // (at most a pass, kMaxTickMs) go by the new records.
  if ((!f->table && !f->refreshed) || (f->table && changed(f))) refresh(f);
  const engine::Region* r = f->table ? f->table->find(pc, &f->hint) : nullptr;
  if (f->table && !r && !f->refreshed && stale(f)) {
    refresh(f);
    r = f->table ? f->table->find(pc, &f->hint) : nullptr;
  }
  if (!f->table) {
    std::lock_guard<std::mutex> l(stats_mu);
    stats.unplaced += w;
    if (f->map_errno) stats.unplaced_errno = f->map_errno;
    return;
  }
  if (r) {
    const uint64_t at = r->map.index(pc) * r->counters.width;
    if (!reserve_counter(f, static_cast<char*>(r->counters.base) + at) ||
        (system_w && r->system && !reserve_counter(f, static_cast<char*>(r->system) + at))) {
      f->table->record_lost(w);
      std::lock_guard<std::mutex> l(stats_mu);
      stats.no_space += w;
      return;
    }
  }
  f->table->record(pc, w, system_w, &f->hint);
}

// In drain mode the agent reserves only its records' pages (agent/output_file.cpp,
// reserve_span): the page of a counter is reserved here before its first count, so that a
// full disk costs the sample (counted lost) and not this process a SIGBUS on the mapping.
// Reserving every array up front, and giving back at each exit what no sample wrote, made
// the file system free blocks at every process's end: on a file system mounted with
// `discard`, a discard request per record and its interrupts on the CPUs the programs ran
// on (docs/benchmarks.md, "After d50d147").
// The page is written over itself (from the mapping): the write reserves its space, where
// an allocation would make the file system allocate it now and free it (a discard) when the
// file goes; written, it is allocated only when written back.
bool Drainer::State::reserve_counter(File* f, const char* at) {
  const uint64_t page = static_cast<uint64_t>(at - f->map) / kPage;
  if (page < f->reserved.size() && f->reserved[page]) return true;
  if (page >= f->reserved.size()) f->reserved.resize(page + 1);
  const off_t off = static_cast<off_t>(page * kPage);
  if (pwrite(f->fd, f->map + off, kPage, off) != static_cast<ssize_t>(kPage)) return false;
  f->reserved[page] = true;
  return true;
}

// n samples the kernel dropped: delivered and lost in the file's tallies (the header's).
void Drainer::State::add_lost(Event* e, uint64_t n) {
  File* f = file_of(e);
  if (f && !f->table && !f->refreshed) refresh(f);
  if (f && f->table) {
    f->table->record_lost(n);
    return;
  }
  std::lock_guard<std::mutex> l(stats_mu);
  stats.unplaced += n;
}

bool Drainer::State::changed(const File* f) {
  auto* h = reinterpret_cast<sprof_header*>(f->map);
  return std::atomic_ref<uint32_t>(h->regions_changes).load(std::memory_order_acquire) !=
         f->seen_changes;
}

// Whether a pc that misses may be in a record the table does not have yet: the agent added
// one (region_count, regions_end) that regions_changes does not tell (at start-up). Code
// outside every object (JIT) misses every time: it must not rebuild the table at each miss.
bool Drainer::State::stale(const File* f) {
  auto* h = reinterpret_cast<sprof_header*>(f->map);
  return std::atomic_ref<uint32_t>(h->region_count).load(std::memory_order_acquire) !=
             f->seen_count ||
         std::atomic_ref<uint64_t>(h->regions_end).load(std::memory_order_acquire) != f->seen_end;
}

// Reads every complete record of e's ring.
void Drainer::State::drain(Event* e) {
  uint64_t samples = 0, lost = 0, throttles = 0;
  rt::perf::read_records(
      e->ring, e->ring_bytes - kPage,
      [&](const perf_event_header& h, const rt::perf::RingData& d, uint64_t at) {
        uint64_t body[2];  // SAMPLE: ip, value; LOST: id, count
        d.body(at, h, body, sizeof body);
        if (h.type == PERF_RECORD_SAMPLE) {
          ++samples;
          ++e->records;
          const uint64_t value = body[1] + e->phase;
          const bool before_restart = e->restart_pending && at < e->restart_mark;
          if (e->restart_pending && !before_restart) restarted(e, value);
          const uint64_t v = steal_free(e, value);
          if (e->unthrottled) {  // the periods counted while throttled: lost samples
            e->unthrottled = false;
            if (const uint64_t n =
                    rt::perf::drop_throttled(v, e->period, e->cur_period, &e->credit)) {
              note_credit(e, n);
              add_lost(e, n);
            }
          }
          // Credited with the length of the period that just ended.
          e->credit.next_ns = before_restart ? e->old_period : e->cur_period;
          uint64_t system_w = 0;
          const uint64_t w = rt::perf::credit(v, e->period, &e->credit, &system_w);
          note_credit(e, w);
          e->boundary = value;
          e->last_pc = static_cast<uintptr_t>(body[0]);
          if (w) add_sample(e, e->last_pc, w, system_w);
        } else if (h.type == PERF_RECORD_LOST) {
          lost += body[1];
          rt::perf::drop_lost(body[1], e->cur_period, &e->credit);
          note_credit(e, body[1]);
          add_lost(e, body[1]);
        } else if (h.type == PERF_RECORD_UNTHROTTLE) {  // the kernel let the event sample again
          ++throttles;
          e->unthrottled = true;
        }
      });
  if (samples || lost || throttles) {
    std::lock_guard<std::mutex> l(stats_mu);
    stats.samples += samples;
    stats.throttled += throttles;
    stats.lost_records += lost;
  }
}

// A new period for e, rt::perf::jittered_period() (or P without jitter). The ioctl restarts the
// period: the part of the running one that elapsed is neither a user-space period nor a
// kernel one; perf::credit would take all of it for kernel time, so its user share is added
// to the user periods (restarted()). Where the restart fell is inferred from the next record
// instead of read: a read(2) of the counter of a thread that runs on another CPU is an
// interrupt of that CPU (perf_event_read's IPI), as the ioctl is; on the AMD EPYC VM of
// docs/benchmarks.md the two cost cmp-burn4 about 80 ms of its 1.7 s at 10 kHz, against
// SPROFIL_JITTER=0, and the read was half of it.
void Drainer::State::jitter(Event* e) {
  if (e->restart_pending) return;  // the last restart is not placed yet
  const uint64_t next = next_period(e->period, e->jitter, &e->rng);
  if (!e->jitter && e->cur_period == next) return;
  if (ioctl(e->fd, PERF_EVENT_IOC_PERIOD, &next) != 0) return;
  redraws.fetch_add(1, std::memory_order_relaxed);
  // The ioctl returned after the restart ran on the thread's CPU: every record before the
  // ring's head now is of the old period, and the thread cannot have finished a new one.
  auto* meta = reinterpret_cast<const perf_event_mmap_page*>(e->ring);
  e->restart_mark = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
  e->restart_pending = true;
  e->old_period = e->cur_period;
  e->cur_period = next;
}

// The first record after a restart, at counter (+ phase) `value`: the restart was one new
// period before it (or more, if the new period's first overflows fell in the kernel and left
// no record; then the estimate is late by whole periods, which shifts only the user share
// of the partial period below, by less than one period).
void Drainer::State::restarted(Event* e, uint64_t value) {
  e->restart_pending = false;
  uint64_t at = value > e->cur_period ? value - e->cur_period : 0;
  if (at < e->boundary) at = e->boundary;  // not before the last overflow seen
  const uint64_t partial = rt::perf::into_period(at, e->boundary, e->old_period);
  if (partial) {
    // Split in the proportion seen so far: the partial period's end is a moment whose
    // state (user or kernel) nobody saw.
    const rt::perf::Credit& c = e->credit;
    const double user =
        c.periods ? 1.0 - static_cast<double>(c.system) / static_cast<double>(c.periods) : 1.0;
    e->credit.user_ns += static_cast<uint64_t>(static_cast<double>(partial) * user);
  }
  e->boundary = at;
}

// Whether e's ring has no room for another record: the kernel then drops the thread's
// samples and says so (PERF_RECORD_LOST) only at its next record that fits, which a thread
// that ends meanwhile never writes.
bool Drainer::State::ring_full(const Event* e) {
  return rt::perf::ring_room(e->ring, e->ring_bytes - kPage) < kMaxRecord;
}

// Disables e and counts all it has: its records, and the periods since the last one. Its
// counter at the end (0 if it could not be read).
uint64_t Drainer::State::finalize(Event* e) {
  ioctl(e->fd, PERF_EVENT_IOC_DISABLE, 0);
  const bool full = ring_full(e);
  drain(e);
  // The whole periods counted since the last record: every one of them ended while the
  // thread was in the kernel (a period that ends in user space leaves a record, all of them
  // drained now), often in its exit. They are credited as kernel time at the thread's last
  // user pc, as a later sample would have been; so count x P is the thread's task clock to
  // within a period, even for a thread shorter than one (whose lone period boundary, when
  // it fell in the kernel, was lost before: tests/harm ShortThreadsKeepTheirShare).
  uint64_t value = 0;
  if (read(e->fd, &value, sizeof value) != static_cast<ssize_t>(sizeof value)) value = 0;
  if (const auto w = watched.find(e->pid); w != watched.end()) w->second.counted_ns += value;
  if (value) {
    const uint64_t elapsed = steal_free(e, value + e->phase) / e->period;
    if (elapsed > e->credit.periods) {
      const uint64_t w = elapsed - e->credit.periods;
      e->credit.periods = elapsed;
      note_credit(e, w);
      if (full)  // samples the full ring dropped, unannounced: lost, not kernel time
        add_lost(e, w);
      else if (e->last_pc)
        add_sample(e, e->last_pc, w, w);
      std::lock_guard<std::mutex> l(stats_mu);
      (full ? stats.lost_records : e->last_pc ? stats.exit_credited : stats.exit_unplaced) += w;
    }
  }
  return value;
}

// A new period for e and the length of its next block (perf.hpp's schedule).
void Drainer::State::redraw(Event* e) {
  jitter(e);
  start_block(e);
  e->first_pending = false;
}

// The block of the agent's random first period (add()): one record long.
void Drainer::State::start_first_block(Event* e) {
  e->records = 0;
  e->drawn_ns = mono_ns();
  e->jitter_after = 1;
  e->first_pending = true;
}

// The block that starts now, at e's period: its length drawn, its records counted from 0.
void Drainer::State::start_block(Event* e) {
  const uint64_t now = mono_ns();
  if (e->records && now > e->drawn_ns) e->ns_per_record = (now - e->drawn_ns) / e->records;
  e->records = 0;
  e->drawn_ns = now;
  e->jitter_after = rt::perf::jitter_block(&e->rng, e->period, e->credit.periods);
}

// When the next pass is due for e's re-draw: when its block will have its records at the
// rate they came since the re-draw (before its first, the last block's), at least kMinTickMs
// from now. ~0 for a thread that has had no record since and is past that time: it waits,
// and the tick will do.
uint64_t Drainer::State::redraw_due(const Event* e, uint64_t now) {
  // At the agent's first period: a look every period (at least kMinTickMs) until its first
  // record, or until kFirstWaitNs have passed.
  if (e->first_pending && !e->records)
    return std::max(std::min(now + e->period, e->drawn_ns + kFirstWaitNs),
                    now + kMinTickMs * 1000000);
  if (e->records >= e->jitter_after || now <= e->drawn_ns) return ~0ull;
  const double per_record =
      e->records ? double(now - e->drawn_ns) / double(e->records) : double(e->ns_per_record);
  const uint64_t due = e->drawn_ns + static_cast<uint64_t>(per_record * double(e->jitter_after));
  if (!e->records && due <= now) return ~0ull;
  return std::max(due, now + kMinTickMs * 1000000);
}

}  // namespace sprofil::record
