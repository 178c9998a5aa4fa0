#include "record/drain.hpp"

#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "clock/perf.hpp"
#include "engine/engine.hpp"
#include "format/drain_proto.hpp"
#include "format/layout.hpp"
#include "format/profile_file.hpp"
#include "format/sprof_format.h"
#include "util/clock_ns.hpp"
#include "util/fd_passing.hpp"
#include "util/release_space.hpp"
#include "util/xorshift.hpp"

namespace sprofil::record {
namespace {

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
constexpr uint64_t kSampleBytes = 24;  // a sample record: header, ip, value

// The tick for a ring of `data` bytes at period `period` ns: a quarter of its time.
uint64_t tick_for(uint64_t data, uint64_t period) {
  const uint64_t ms = data / kSampleBytes * period / 4 / 1000000;
  return std::clamp(ms, kMinTickMs, kMaxTickMs);
}

uint64_t mono_ns() {
  return util::clock_ns(CLOCK_MONOTONIC);
}

// One process image's profile file, mapped shared, and the engine table over its records.
struct File {
  dev_t dev = 0;
  ino_t ino = 0;
  int fd = -1;
  char* map = nullptr;
  size_t len = 0;
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

struct File;

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
  // That restart came while the thread waited in the kernel for the parent's answer (the
  // hand-over's, add()): the part of the period it cut is kernel time (restarted()).
  bool cut_in_exchange = false;
  bool jitter = true;
  uint64_t rng = 1;
  uint64_t records = 0;        // drained since the last re-draw
  uint64_t jitter_after = 0;   // records before the next re-draw
  uint64_t drawn_ns = 0;       // monotonic time of the last re-draw
  uint64_t ns_per_record = 1;  // of wall time, in the last block (P before one)
  uintptr_t last_pc = 0;       // of the last sample record; before the first, the thread's start
                               // routine (0 if unknown)
  rt::perf::Credit credit;
  int sched_fd = -1;  // /proc/PID/task/TID/schedstat, opened at the first look (cpu_ns)
};

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

// A process's CPU clock (clock_getcpuclockid: any process's may be read), which keeps the
// time of its threads that are gone; 0 if the process is gone.
uint64_t process_cpu_ns(pid_t pid) {
  clockid_t id;
  return clock_getcpuclockid(pid, &id) == 0 ? util::clock_ns(id) : 0;
}

// How a watched process ended (its pidfd readable: every thread of it has exited).
struct End {
  bool exited = false;  // known to have exited (exit, _exit, a raw exit_group), not by a signal
  uint64_t cpu_ns = 0;  // its CPU time, where it could be read (not yet reaped); else 0
};

// PIDFD_GET_INFO (Linux 6.15, <linux/pidfd.h>; Debian 12's headers predate it): the exit code of
// a process reaped since, kept with its pidfd. The first 64 bytes of struct pidfd_info.
struct PidfdInfo {
  uint64_t mask = 0, cgroupid = 0;
  uint32_t pid = 0, tgid = 0, ppid = 0, ruid = 0, rgid = 0, euid = 0, egid = 0, suid = 0, sgid = 0,
           fsuid = 0, fsgid = 0;
  int32_t exit_code = 0;
};
static_assert(sizeof(PidfdInfo) == 64, "PIDFD_INFO_SIZE_VER0");
constexpr unsigned long kPidfdGetInfo = _IOWR(0xFF, 11, PidfdInfo);
constexpr uint64_t kPidfdInfoExit = 1u << 3;

// The exit code field (the 52nd) of /proc/PID/stat, as wait(2) would give it, or -1.
int proc_exit_code(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char* c = strrchr(buf, ')');  // after the command name, which may hold spaces
  if (!c) return -1;
  int field = 2;
  for (; *c && field < 52; ++c)
    if (*c == ' ') ++field;
  return field == 52 && *c >= '0' && *c <= '9' ? atoi(c) : -1;
}

// How pid ended. While its parent has not reaped it (a zombie: the pidfd can still signal it,
// checked after the reads, so they were of this process and not of a new one with its pid),
// /proc/PID/stat has its exit code and its CPU clock its whole CPU time. Once reaped, only the
// exit code, from the pidfd (Linux 6.15; before 6.15 nothing), and the CPU time is reckoned
// (gone(), Watch).
End how_it_ended(pid_t pid, int pidfd) {
  End e;
  const uint64_t cpu = process_cpu_ns(pid);
  const int code = proc_exit_code(pid);
  if (code >= 0 && syscall(SYS_pidfd_send_signal, pidfd, 0, nullptr, 0) == 0) {
    e.exited = WIFEXITED(code);
    e.cpu_ns = cpu;
    return e;
  }
  PidfdInfo info;
  info.mask = kPidfdInfoExit;
  if (ioctl(pidfd, kPidfdGetInfo, &info) == 0 && (info.mask & kPidfdInfoExit))
    e.exited = WIFEXITED(info.exit_code);
  return e;
}

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

void close_file(File* f) {
  engine::Table::destroy(f->table);
  f->table = nullptr;
  if (f->map) munmap(f->map, f->len);
  f->map = nullptr;
  if (f->fd >= 0) close(f->fd);
  f->fd = -1;
  if (f->dirfd >= 0) close(f->dirfd);
  f->dirfd = -1;
}

// (Re)maps the file and builds the table over its committed records: live ones first, an
// unloaded one where no live one overlaps (its samples were taken before the dlclose).
void refresh(File* f) {
  f->refreshed = true;
  struct stat st;
  if (fstat(f->fd, &st) != 0 || st.st_size < static_cast<off_t>(SPROF_PAGE)) return;
  const size_t size = static_cast<size_t>(st.st_size);
  if (size != f->len) {
    engine::Table::destroy(f->table);
    f->table = nullptr;
    if (size < f->len) f->recs_off = 0;  // shrunk (a record given up): every record read again
    // A file that grew keeps its mapped pages (mremap moves their page-table entries): a new
    // mapping took a page fault on every record's header again at each rebuild.
    void* m = f->map ? mremap(f->map, f->len, size, MREMAP_MAYMOVE)
                     : mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd, 0);
    if (m == MAP_FAILED && f->map) munmap(f->map, f->len);  // a failed mremap keeps the old one
    f->map = m == MAP_FAILED ? nullptr : static_cast<char*>(m);
    f->len = f->map ? size : 0;
    if (!f->map) return;
    madvise(f->map, f->len, MADV_RANDOM);
  }
  auto* h = reinterpret_cast<sprof_header*>(f->map);
  // Read first: a change after it moves the number again and brings another rebuild.
  f->seen_changes = std::atomic_ref<uint32_t>(h->regions_changes).load(std::memory_order_acquire);
  const uint32_t count = std::atomic_ref<uint32_t>(h->region_count).load(std::memory_order_acquire);
  const uint64_t end = std::atomic_ref<uint64_t>(h->regions_end).load(std::memory_order_acquire);
  f->seen_count = count;
  f->seen_end = end;
  // Only the records added since the last read, unless committed ones changed. A program that
  // dlopens objects one by one added a record each time, and each rebuild read every record's
  // page again: with 5,000 objects most of this process's CPU (docs/benchmarks.md, "After
  // 3005695").
  if (f->recs_off == 0 || f->recs_changes != f->seen_changes || count < f->recs_count) {
    f->recs.clear();
    f->recs_count = 0;
    f->recs_off = SPROF_PAGE;
    f->recs_changes = f->seen_changes;
  }
  uint64_t off = f->recs_off;
  uint32_t i = f->recs_count;
  for (; i < count && off + SPROF_PAGE <= std::min<uint64_t>(end, f->len); ++i) {
    auto* rec = reinterpret_cast<sprof_region*>(f->map + off);
    const uint64_t rs = rec->record_size;
    if (rec->magic != SPROF_REGION_MAGIC || rs < SPROF_PAGE || off + rs > f->len) break;
    const uint32_t width = rec->counter_width, bin = rec->bin_size;
    if (rec->end > rec->start && rec->nbins && (width == 2 || width == 4 || width == 8) && bin &&
        (bin & (bin - 1)) == 0 && rec->counters_offset + rec->nbins * width <= f->len) {
      File::Rec r;
      r.lo = rec->start;
      r.last = rec->end - 1;
      r.counters_off = rec->counters_offset;
      r.nbins = rec->nbins;
      r.shift = static_cast<uint8_t>(__builtin_ctz(bin));
      r.width = static_cast<uint8_t>(width);
      if ((rec->flags & SPROF_R_SYSTEM) && rec->system_offset &&
          rec->system_offset + rec->nbins * width <= f->len)
        r.system_off = rec->system_offset;
      r.live = (rec->flags & SPROF_R_UNLOADED) == 0;
      f->recs.push_back(r);
    }
    off += rs;
  }
  f->recs_count = i;
  f->recs_off = off;
  struct Cand {
    engine::Region r;
    bool live;
  };
  std::vector<Cand> c;
  c.reserve(f->recs.size());
  for (const File::Rec& x : f->recs) {
    // (a record read before the file grew lies inside it still: a file that shrank is read anew)
    engine::Region r;
    r.lo = x.lo;
    r.last = x.last;
    r.map = engine::BinMap{x.lo, 65536, 0, x.shift};
    r.counters =
        engine::Counters{f->map + x.counters_off, x.nbins, x.width, engine::Policy::kSaturate, 0};
    if (x.system_off) r.system = f->map + x.system_off;
    c.push_back(Cand{r, x.live});
  }
  std::sort(c.begin(), c.end(), [](const Cand& a, const Cand& b) {
    return a.r.lo != b.r.lo ? a.r.lo < b.r.lo : a.live > b.live;
  });
  std::vector<Cand> kept;
  for (const Cand& x : c) {
    if (!kept.empty() && x.r.lo <= kept.back().r.last) {
      if (x.live && !kept.back().live) kept.back() = x;  // the live object wins
      continue;
    }
    kept.push_back(x);
  }
  // Replacing a kept entry may have made it overlap the one before: drop such pairs' later.
  std::vector<engine::Region> regs;
  for (const Cand& x : kept)
    if (regs.empty() || x.r.lo > regs.back().last) regs.push_back(x.r);
  engine::Table* t = nullptr;
  auto* tallies = reinterpret_cast<engine::Tallies*>(&h->overflow);
  if (engine::Table::create(regs.data(), regs.size(), nullptr, tallies, &t) != engine::Error::kOk)
    return;
  engine::Table::destroy(f->table);
  f->table = t;
}

// Gives back the reserved space of a finished process's file that no sample wrote: the
// arrays of every region record, walked by pread (the agent's exit asked for it with its last
// flush, kFlushRelease; the agent no longer writes them, and no event counts into them).
void release_space(int fd) {
  sprof_header h;
  if (pread(fd, &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h) ||
      memcmp(h.magic, SPROF_MAGIC, sizeof h.magic) != 0)
    return;
  uint64_t off = SPROF_PAGE;
  for (uint32_t i = 0; i < h.region_count && off < h.regions_end; ++i) {
    sprof_region r;
    if (pread(fd, &r, sizeof r, static_cast<off_t>(off)) != static_cast<ssize_t>(sizeof r) ||
        r.magic != SPROF_REGION_MAGIC || r.record_size < SPROF_PAGE)
      return;
    util::release_unwritten(fd, off + SPROF_PAGE, off + r.record_size);
    off += r.record_size;
  }
}

// Whether m.name is a file's base name: not empty, NUL-terminated, no '/', not "." or "..".
bool valid_name(const drain::DrainMsg& m) {
  const size_t nlen = strnlen(m.name, sizeof m.name);
  return nlen != 0 && nlen != sizeof m.name && !memchr(m.name, '/', nlen) && strcmp(m.name, ".") &&
         strcmp(m.name, "..");
}

// A forked child's profile file (drain_proto.hpp's kDrainChildFile), made in dirfd from its
// parent process's file `from` as the child would have made it (agent/fork.cpp): a private
// temporary of m.regions_end bytes, the first m.region_count records' pages copied (written,
// so their space is the file's; the arrays stay holes, reserved page by page as samples are
// counted into them: reserve_counter), the header filled, then renamed to the first free
// name for the child's pid. The fd, or -1 with *err set.
int make_child_file(int from, int dirfd, const drain::DrainMsg& m, int* k, int* err) {
  struct stat st;
  if (!valid_name(m) || m.region_count == 0 || m.regions_end <= SPROF_PAGE ||
      fstat(from, &st) != 0 || !S_ISREG(st.st_mode) ||
      m.regions_end > static_cast<uint64_t>(st.st_size)) {
    *err = EINVAL;
    return -1;
  }
  char name[NAME_MAX + 1];
  return naming::make_profile(dirfd, m.name, m.pid, name, sizeof name, k, err, [&](int fd) {
    if (ftruncate(fd, static_cast<off_t>(m.regions_end)) != 0) return errno;
    std::vector<char> page(SPROF_PAGE);
    // The header: the forked-from process's clock, rate and command line (a fork keeps them),
    // the child's pid, parent and fork time; the records the child has.
    if (pread(from, page.data(), SPROF_PAGE, 0) != SPROF_PAGE ||
        memcmp(page.data(), SPROF_MAGIC, 8) != 0)
      return EINVAL;
    sprof_header from_h;
    memcpy(&from_h, page.data(), sizeof from_h);
    layout::HeaderInfo i;
    i.flags = SPROF_F_CHILD;
    i.clock = from_h.clock;
    i.tick_ns = from_h.tick_ns;
    i.start_ns = m.start_ns;
    i.pid = m.pid;
    i.ppid = m.ppid;
    i.cmdline = from_h.cmdline;
    i.cmdline_len = std::min<uint32_t>(from_h.cmdline_len, SPROF_CMDLINE_MAX);
    auto* h = reinterpret_cast<sprof_header*>(page.data());
    layout::fill_header(h, i);
    h->regions_end = m.regions_end;
    h->region_count = m.region_count;
    if (pwrite(fd, page.data(), SPROF_PAGE, 0) != SPROF_PAGE) return errno ? errno : EIO;
    uint64_t off = SPROF_PAGE;
    for (uint32_t r = 0; r < m.region_count; ++r) {
      auto* rec = reinterpret_cast<const sprof_region*>(page.data());
      if (pread(from, page.data(), SPROF_PAGE, static_cast<off_t>(off)) != SPROF_PAGE ||
          rec->magic != SPROF_REGION_MAGIC || rec->record_size < SPROF_PAGE ||
          rec->record_size > m.regions_end - off)
        return EINVAL;
      if (pwrite(fd, page.data(), SPROF_PAGE, static_cast<off_t>(off)) != SPROF_PAGE)
        return errno ? errno : EIO;
      off += rec->record_size;
    }
    return off == m.regions_end ? 0 : EINVAL;
  });
}

// A process image's own profile file (drain_proto.hpp's kDrainNewFile), made in dirfd as the
// agent makes it (agent/output_file.cpp): its first page written (zeros), named m.name (kNewFirst)
// or m.name.PID[.k]. The agent fills the header. The fd, or -1 with *err set.
int make_new_file(int dirfd, const drain::DrainMsg& m, int* k, int* err) {
  if (!valid_name(m)) {
    *err = EINVAL;
    return -1;
  }
  char name[NAME_MAX + 1];
  const int pid = (m.flags & drain::kNewFirst) ? 0 : m.pid;
  return naming::make_profile(dirfd, m.name, pid, name, sizeof name, k, err,
                              [](int fd) { return util::write_zeros<SPROF_PAGE>(fd, 0); });
}

// Whether the peer of conn is process pid (SO_PEERCRED): a file named for a pid is made only
// for that pid. Where the peer is in another pid namespace it is not, and makes its own.
bool peer_is(int conn, pid_t pid) {
  ucred cred{};
  socklen_t cl = sizeof cred;
  return getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0 && cred.pid == pid;
}

}  // namespace

struct Drainer::State {
  std::string path;
  std::string run_dir, base;  // where the agent's files are, and their base name
  std::string own_dir;        // a directory made for the socket (removed at finish), or ""
  int listen_fd = -1;
  int wake[2] = {-1, -1};
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

  // Watches pid's end (a pidfd) if it is not watched yet; whether it is. Where pidfd_open is
  // missing (Linux before 5.3) or refused, the agent flushes at its exit as before.
  bool watch(pid_t pid) {
    if (const auto it = watched.find(pid); it != watched.end()) {
      pollfd p{it->second.fd, POLLIN, 0};
      if (poll(&p, 1, 0) != 1) return true;
      gone(pid);  // ended, and its pid is another process's now: that one is watched anew
    }
    const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));  // close-on-exec
    if (fd < 0) return false;
    watched[pid] = Watch{fd};
    return true;
  }

  // A watched process ended (all its threads). Its events are drained to their end and its
  // own file let go, as its exit's flush with kFlushRelease would have had them (flush()).
  // The file, if the agent's exit completed it (SPROF_F_FINISHED, the end fields, without a
  // flush), gets its effective rate from every sample counted, and its unused space back or,
  // empty, is removed (let_go). If the agent did not complete it but the process exited (not
  // killed by a signal: how_it_ended), its exit is one the agent does not see (a raw
  // exit_group, as Go's runtime makes; glibc's own calls of _exit, as daemon() makes; an _exit
  // whose agent's mutex was held): the file is completed here, its end now and its CPU time
  // the process's where it could still be read. A file of a process killed by a signal, or
  // whose end is not known, is left as it is (the report says it did not finish cleanly).
  void gone(pid_t pid) {
    End how;
    if (const auto it = watched.find(pid); it != watched.end())
      how = how_it_ended(pid, it->second.fd);
    drain::DrainMsg m;
    m.pid = pid;
    m.flags = drain::kFlushRelease;
    const int fd = flush(m);  // its events' last counters go into its Watch
    if (const auto it = watched.find(pid); it != watched.end()) {
      if (how.exited && how.cpu_ns == 0 && it->second.base_ns)  // reaped already: reckoned
        how.cpu_ns = it->second.base_ns + it->second.counted_ns;
      close(it->second.fd);
      watched.erase(it);
    }
    if (fd < 0) return;
    sprof_header h;
    if (pread(fd, &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h) ||
        memcmp(h.magic, SPROF_MAGIC, sizeof h.magic) != 0 ||
        (!(h.flags & SPROF_F_FINISHED) && !how.exited)) {
      close(fd);  // not completed (SIGKILL, say): left as it is
      return;
    }
    const bool here = !(h.flags & SPROF_F_FINISHED);
    if (here) {
      h.flags |= SPROF_F_FINISHED;
      h.cpu_ns = how.cpu_ns;
      h.end_ns = util::clock_ns(CLOCK_REALTIME);
    }
    layout::finish_header(&h, h.cpu_ns, h.end_ns);
    (void)!pwrite(fd, &h, sizeof h, 0);
    {
      std::lock_guard<std::mutex> l(stats_mu);
      ++(here ? stats.exits_completed : stats.exits_seen);
    }
    let_go(fd, h.cpu_ns);
  }

  // An exited process's file (fd, closed here): removed if it holds no sample (drop_if_empty),
  // else its reserved space that no sample wrote given back.
  void let_go(int fd, uint64_t cpu_ns) {
    if (!drop_if_empty(fd, cpu_ns)) release_space(fd);
    close(fd);
  }

  // Drops a user of f: the file goes with its last.
  void unuse(File* f) {
    if (--f->users > 0) return;
    keep_ended(f);
    close_file(f);
    files.erase(std::find(files.begin(), files.end(), f));
    delete f;
  }

  // Moves the fds of f, made here and let go by its last user, to ended_files.
  void keep_ended(File* f) {
    if (f->fd < 0 || f->dirfd < 0) return;
    ended_files.push_back(Ended{f->dev, f->ino, f->fd, f->dirfd, mono_ns()});
    f->fd = f->dirfd = -1;
    trim_ended(mono_ns());
  }

  void trim_ended(uint64_t now) {
    while (!ended_files.empty() &&
           (ended_files.size() > kEndedMax || ended_files.front().at_ns + kEndedKeepNs < now)) {
      close(ended_files.front().fd);
      close(ended_files.front().dirfd);
      ended_files.pop_front();
    }
  }

  // New fds of the file of that device and inode made here, and of its directory: held (its
  // process lives) or ended a moment ago (ended_files). False if there is none.
  bool made_file(uint64_t dev, uint64_t ino, int* file_fd, int* dirfd) {
    int f = -1, d = -1;
    if (const File* from = find_file(dev, ino); from && from->dirfd >= 0) {
      f = from->fd;
      d = from->dirfd;
    } else {
      trim_ended(mono_ns());
      for (const Ended& e : ended_files)
        if (static_cast<uint64_t>(e.dev) == dev && static_cast<uint64_t>(e.ino) == ino) {
          f = e.fd;
          d = e.dirfd;
        }
    }
    *file_fd = f >= 0 ? fcntl(f, F_DUPFD_CLOEXEC, 0) : -1;
    *dirfd = d >= 0 ? fcntl(d, F_DUPFD_CLOEXEC, 0) : -1;
    if (*file_fd >= 0 && *dirfd >= 0) return true;
    if (*file_fd >= 0) close(*file_fd);
    if (*dirfd >= 0) close(*dirfd);
    *file_fd = *dirfd = -1;
    return false;
  }

  // Holds f as pid's own file, in place of the one before (an exec'd image of the same pid).
  void hold_own(pid_t pid, File* f) {
    ++f->users;
    if (own_files.size() >= 4096) {  // let go of the processes gone (SIGKILL: no flush)
      for (auto it = own_files.begin(); it != own_files.end();) {
        if (kill(it->first, 0) != 0 && errno == ESRCH) {
          unuse(it->second);
          it = own_files.erase(it);
        } else {
          ++it;
        }
      }
    }
    auto [it, added] = own_files.try_emplace(pid, f);
    if (!added) {
      unuse(it->second);
      it->second = f;
    }
  }

  // Lets go of pid's own file (its flush).
  void drop_own(pid_t pid) {
    if (const auto it = own_files.find(pid); it != own_files.end()) {
      File* f = it->second;
      own_files.erase(it);
      unuse(f);
    }
  }

  // The file a pending child made earlier (same pid and fork time), re-opened by its name in
  // dirfd; -1 if none.
  int made_before(const drain::DrainMsg& m, int dirfd, int* k) {
    const auto it = made_files.find(m.pid);
    if (it == made_files.end() || it->second.start_ns != m.start_ns) return -1;
    char name[NAME_MAX + 1];
    if (!naming::profile_name(name, sizeof name, m.name, m.pid, it->second.k)) return -1;
    const int fd = openat(dirfd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == it->second.dev &&
        st.st_ino == it->second.ino) {
      *k = it->second.k;
      return fd;
    }
    if (fd >= 0) close(fd);
    return -1;
  }

  // Makes (or finds again) a file for m's pid from `from` in dirfd; the fd or -1 (*err).
  int child_file_for(const drain::DrainMsg& m, int from, int dirfd, int* k, int* err) {
    int fd = made_before(m, dirfd, k);
    if (fd >= 0) return fd;
    fd = make_child_file(from, dirfd, m, k, err);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0) {
      if (made_files.size() >= 4096)  // forget the children that are gone
        for (auto it = made_files.begin(); it != made_files.end();)
          it = kill(it->first, 0) != 0 && errno == ESRCH ? made_files.erase(it) : std::next(it);
      made_files[m.pid] = Made{st.st_dev, st.st_ino, *k, m.start_ns};
    }
    std::lock_guard<std::mutex> l(stats_mu);
    ++(fd >= 0 ? stats.child_files : stats.child_files_refused);
    return fd;
  }

  // A pending child's file: the one made for it, or made now (at its first sample, or when it
  // asks for it) and given to every event of its process. Null if it could not be.
  File* pending_file(Proc* p) {
    Pending& pd = *p->pending;
    if (p->made || pd.failed) return p->made;
    int err = 0;
    const int fd = child_file_for(pd.msg, pd.from, pd.dirfd, &pd.k, &err);
    File* f = fd >= 0 ? file_for(fd) : nullptr;
    pd.failed = f == nullptr;
    p->made = f;
    for (Event* x : events)
      if (f && x->proc == p && !x->file) {
        x->file = f;
        ++f->users;
      }
    return f;
  }

  // e's file; a pending child's is made at its first sample. Null if it could not be.
  File* file_of(Event* e) {
    if (e->file) return e->file;
    return e->proc && e->proc->pending ? pending_file(e->proc) : nullptr;
  }

  void add_sample(Event* e, uintptr_t pc, uint64_t w, uint64_t system_w) {
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
  static bool reserve_counter(File* f, const char* at) {
    const uint64_t page = static_cast<uint64_t>(at - f->map) / kPage;
    if (page < f->reserved.size() && f->reserved[page]) return true;
    if (page >= f->reserved.size()) f->reserved.resize(page + 1);
    const off_t off = static_cast<off_t>(page * kPage);
    if (pwrite(f->fd, f->map + off, kPage, off) != static_cast<ssize_t>(kPage)) return false;
    f->reserved[page] = true;
    return true;
  }

  // n samples the kernel dropped: delivered and lost in the file's tallies (the header's).
  void add_lost(Event* e, uint64_t n) {
    File* f = file_of(e);
    if (f && !f->table && !f->refreshed) refresh(f);
    if (f && f->table) {
      f->table->record_lost(n);
      return;
    }
    std::lock_guard<std::mutex> l(stats_mu);
    stats.unplaced += n;
  }

  static bool changed(const File* f) {
    auto* h = reinterpret_cast<sprof_header*>(f->map);
    return std::atomic_ref<uint32_t>(h->regions_changes).load(std::memory_order_acquire) !=
           f->seen_changes;
  }

  // Whether a pc that misses may be in a record the table does not have yet: the agent added
  // one (region_count, regions_end) that regions_changes does not tell (at start-up). Code
  // outside every object (JIT) misses every time: it must not rebuild the table at each miss.
  static bool stale(const File* f) {
    auto* h = reinterpret_cast<sprof_header*>(f->map);
    return std::atomic_ref<uint32_t>(h->region_count).load(std::memory_order_acquire) !=
               f->seen_count ||
           std::atomic_ref<uint64_t>(h->regions_end).load(std::memory_order_acquire) != f->seen_end;
  }

  // Reads every complete record of e's ring.
  void drain(Event* e) {
    auto* meta = reinterpret_cast<perf_event_mmap_page*>(e->ring);
    const uint64_t size = meta->data_size ? meta->data_size : e->ring_bytes - kPage;
    const uint64_t off = meta->data_offset ? meta->data_offset : kPage;
    const uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
    uint64_t tail = meta->data_tail;
    const unsigned char* data = reinterpret_cast<unsigned char*>(e->ring) + off;
    uint64_t samples = 0, lost = 0;
    while (tail < head) {
      perf_event_header h;
      for (size_t i = 0; i < sizeof h; ++i)  // a record may wrap: copy piecewise
        reinterpret_cast<unsigned char*>(&h)[i] = data[(tail + i) % size];
      if (h.size < sizeof h) break;
      uint64_t body[2] = {0, 0};  // SAMPLE: ip, value; LOST: id, count
      for (size_t i = 0; i < sizeof body && sizeof h + i < h.size; ++i)
        reinterpret_cast<unsigned char*>(body)[i] = data[(tail + sizeof h + i) % size];
      if (h.type == PERF_RECORD_SAMPLE) {
        ++samples;
        ++e->records;
        const uint64_t value = body[1] + e->phase;
        const bool before_restart = e->restart_pending && tail < e->restart_mark;
        if (e->restart_pending && !before_restart) restarted(e, value);
        // Credited with the length of the period that just ended.
        e->credit.next_ns = before_restart ? e->old_period : e->cur_period;
        uint64_t system_w = 0;
        const uint64_t w = rt::perf::credit(steal_free(e, value), e->period, &e->credit, &system_w);
        note_credit(e, w);
        e->boundary = value;
        e->last_pc = static_cast<uintptr_t>(body[0]);
        if (w) add_sample(e, e->last_pc, w, system_w);
      } else if (h.type == PERF_RECORD_LOST) {
        lost += body[1];
        rt::perf::drop_lost(body[1], e->cur_period, &e->credit);
        note_credit(e, body[1]);
        add_lost(e, body[1]);
      }
      tail += h.size;
    }
    __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
    if (samples || lost) {
      std::lock_guard<std::mutex> l(stats_mu);
      stats.samples += samples;
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
  void jitter(Event* e) {
    if (e->restart_pending) return;  // the last restart is not placed yet
    uint64_t next = e->period;
    if (e->jitter) next = rt::perf::jittered_period(e->period, &e->rng);
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
  void restarted(Event* e, uint64_t value) {
    e->restart_pending = false;
    uint64_t at = value > e->cur_period ? value - e->cur_period : 0;
    if (at < e->boundary) at = e->boundary;  // not before the last overflow seen
    const uint64_t partial = rt::perf::into_period(at, e->boundary, e->old_period);
    // The hand-over's restart (cut_in_exchange): the period ran from the event's opening
    // through the agent's exchange (clock reads, then socket, connect, the pin, sendmsg) and
    // was cut while the thread waited in recvmsg; it is the kernel's, left out of the user
    // periods. Credited as user time, as the proportion of an event that has had no overflow
    // yet made it, it went to the user samples at the first sample's pc: 0.3 to 0.45 of a
    // period per process on the AMD EPYC VM of docs/benchmarks.md (tests/record's Coverage).
    const bool in_exchange = std::exchange(e->cut_in_exchange, false);
    if (partial && !in_exchange) {
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
  static bool ring_full(const Event* e) {
    auto* meta = reinterpret_cast<const perf_event_mmap_page*>(e->ring);
    const uint64_t size = meta->data_size ? meta->data_size : e->ring_bytes - kPage;
    const uint64_t used = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE) - meta->data_tail;
    return used + kMaxRecord > size;
  }

  // Drains e to the end and closes it; its file too once no event counts into it (a run of
  // many processes holds only the files of those that sample now).
  void close_event(Event* e) {
    finalize(e);
    release(e);
  }

  // An event that the kernel ended (POLLHUP: its thread exited, or an exec removed it,
  // perf.hpp's remove_on_exec), drained to its end and closed. The last of a forked child
  // without its own file (pending), which makes no flush at its exec (and none at an _exit),
  // completes the file made for its samples, if any, as kFlushFinish would: its end now, its
  // CPU time the process's at its first event's opening (Proc::cpu_base) plus this counter
  // (a child's time since the fork; exact for one thread, the usual fork-then-exec child).
  void event_ended(Event* e) {
    Proc* p = e->proc;
    const bool last_pending = p && p->events == 1 && (p->pending || p->made);
    const uint64_t counter = finalize(e);
    File* made = last_pending ? p->made : nullptr;
    if (made && counter) {
      finish_file(made, (p->based ? p->cpu_base : 0) + counter + e->phase,
                  util::clock_ns(CLOCK_REALTIME));
      std::lock_guard<std::mutex> l(stats_mu);
      ++stats.finished_at_end;
    }
    release(e);
  }

  // The events of pid that have ended (POLLHUP) where this pass has not seen them end: an
  // exec removed them (perf.hpp's remove_on_exec), and the new image's first request can
  // come before the pass that sees their end. Ended first, so that no sample of the old image
  // counts into the new one's file. Live events of pid stay: a forked child that cannot have
  // the file made from its parent's asks for a new one while it samples (agent/fork.cpp).
  void end_ended_events_of(pid_t pid) {
    for (size_t i = 0; i < events.size();) {
      Event* e = events[i];
      pollfd pf{e->fd, 0, 0};
      if (e->pid != pid || poll(&pf, 1, 0) != 1 || !(pf.revents & (POLLHUP | POLLERR))) {
        ++i;
        continue;
      }
      events.erase(events.begin() + static_cast<std::ptrdiff_t>(i));
      event_ended(e);
    }
  }

  // Writes f's end fields (its process's CPU time and the end's time) and marks it finished,
  // the agent's job at an exit or exec that a pending child leaves to the parent.
  static void finish_file(File* f, uint64_t cpu_ns, uint64_t end_ns) {
    sprof_header h;
    if (pread(f->fd, &h, sizeof h, 0) == static_cast<ssize_t>(sizeof h)) {
      layout::finish_header(&h, cpu_ns, end_ns);
      h.flags |= SPROF_F_FINISHED;
      (void)!pwrite(f->fd, &h, sizeof h, 0);
    }
  }

  // Disables e and counts all it has: its records, and the periods since the last one. Its
  // counter at the end (0 if it could not be read).
  uint64_t finalize(Event* e) {
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

  // Frees a finalized e: its ring, fds, its process's entry with the last, its file with the
  // last user.
  void release(Event* e) {
    munmap(e->ring, e->ring_bytes);
    close(e->fd);
    if (e->sched_fd >= 0) close(e->sched_fd);
    if (const auto p = procs.find(e->pid); p != procs.end() && --p->second.events == 0)
      procs.erase(p);
    File* f = e->file;
    delete e;
    if (f) unuse(f);
  }

  // The file of that device and inode among those open here, or null.
  File* find_file(uint64_t dev, uint64_t ino) const {
    for (File* f : files)
      if (static_cast<uint64_t>(f->dev) == dev && static_cast<uint64_t>(f->ino) == ino) return f;
    return nullptr;
  }

  File* file_for(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      close(fd);
      return nullptr;
    }
    if (File* f = find_file(st.st_dev, st.st_ino)) {
      close(fd);
      return f;
    }
    // No readahead for this file's reads (the header at an exit, the records to release):
    // around them is space reserved and unwritten, which a readahead fills with zeroed page
    // cache pages; that was most of this process's CPU in a run of many short processes.
    posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
    auto* f = new File;
    f->dev = st.st_dev;
    f->ino = st.st_ino;
    f->fd = fd;
    files.push_back(f);
    return f;
  }

  // kDrainChildFile: makes the file and answers with it. Only for the peer's own pid (the
  // name is the pid's): where the peer is in another pid namespace, the child makes its file.
  void child_file(int conn, const drain::DrainMsg& m, int from, int dirfd) {
    drain::FileAnswer a;
    int fd = -1;
    if (!peer_is(conn, m.pid)) {
      a.err = EPERM;
    } else if (auto p = procs.find(m.pid); p != procs.end() && p->second.pending) {
      // Pending: the file made for its samples (made now if it had none), then it is the
      // child's own and its events are no longer pending.
      Proc& pr = p->second;
      File* f = pending_file(&pr);
      fd = f ? fcntl(f->fd, F_DUPFD_CLOEXEC, 0) : -1;
      a.err = fd >= 0 ? 0 : EIO;
      a.k = pr.pending->k;
      pr.pending.reset();
      pr.made = nullptr;
    } else {
      fd = child_file_for(m, from, dirfd, &a.k, &a.err);
    }
    (void)util::send_with_fds(conn, &a, sizeof a, &fd, fd >= 0 ? 1 : 0);
    if (fd >= 0) close(fd);
  }

  // kDrainNewFile: makes a process image's file and answers with it (for the peer's own pid).
  // With event_fd (>= 0, taken), the asking thread's event, added into the file made; with
  // kNewOpenEvent, the asking (main) thread's event opened here.
  void new_file(int conn, const drain::DrainMsg& m, int dirfd, int event_fd) {
    drain::FileAnswer a;
    const bool peer = peer_is(conn, m.pid);
    if (peer) end_ended_events_of(m.pid);
    const int fd = peer ? make_new_file(dirfd, m, &a.k, &a.err) : -1;
    if (fd < 0 && a.err == 0) a.err = EPERM;
    if (event_fd < 0 && fd >= 0 && (m.flags & drain::kNewOpenEvent) && m.tid == m.pid) {
      event_fd = open_event(m);
      std::lock_guard<std::mutex> l(stats_mu);
      ++(event_fd >= 0 ? stats.main_events : stats.main_events_refused);
    }
    if (fd >= 0)
      if (File* f = file_for(fcntl(fd, F_DUPFD_CLOEXEC, 0))) {
        a.watched = watch(m.pid);
        hold_own(m.pid, f);
        if (f->dirfd < 0) f->dirfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
      }
    if (event_fd >= 0 && fd >= 0) {
      drain::DrainMsg add_msg = m;
      add_msg.kind = drain::kDrainAdd;
      add_msg.flags = 0;  // kNewFirst is not kAddPending
      a.added = add(add_msg, event_fd, -1, -1) == drain::kAckDone;
    } else if (event_fd >= 0) {
      close(event_fd);
    }
    {
      std::lock_guard<std::mutex> l(stats_mu);
      ++(fd >= 0 ? stats.new_files : stats.new_files_refused);
    }
    (void)util::send_with_fds(conn, &a, sizeof a, &fd, fd >= 0 ? 1 : 0);
    if (fd >= 0) close(fd);
  }

  // The drain-mode event of thread m.tid (the peer's main thread, waiting for the answer), as
  // the agent would open it (perf.hpp's make_attr): counting from now, its first period
  // m.first_ns. -1 if it cannot be opened (the agent then opens it itself, kDrainAdd).
  static int open_event(const drain::DrainMsg& m) {
    if (m.period_ns == 0) return -1;
    const uint64_t first = m.first_ns && m.first_ns <= m.period_ns ? m.first_ns : m.period_ns;
    perf_event_attr a = rt::perf::make_attr(rt::perf::first_overflow(m.period_ns, first),
                                            rt::perf::Delivery::kDrain);
    bool at_exec = false;  // (an image the parent made the file of flushes at its exec)
    return rt::perf::open_drain_event(&a, m.tid, &at_exec);
  }

  // At its exit, the file (fd) of a process that took no sample: removed now, counted as a
  // process without samples (with its CPU time), as record's collect() would at the end, but
  // not the run's first image (always stored). Giving its space back first (release_space)
  // left the file in as many extents as it has records, and removing such a file then cost
  // ext4 0.41 ms a file at the end of a run (docs/benchmarks.md, "After 54574a1").
  bool drop_if_empty(int fd, uint64_t cpu_ns) {
    sprof_header h;
    if (run_dir.empty() || pread(fd, &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h) ||
        memcmp(h.magic, SPROF_MAGIC, sizeof h.magic) != 0 ||
        std::atomic_ref<uint64_t>(h.delivered).load() != 0)
      return false;
    char link[64], where[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    const ssize_t n = readlink(link, where, sizeof where - 1);
    if (n <= 0) return false;
    where[n] = '\0';
    const char* slash = strrchr(where, '/');
    int pid = 0, k = 0;
    if (!slash || std::string(where, static_cast<size_t>(slash - where)) != run_dir ||
        strncmp(slash + 1, base.c_str(), base.size()) != 0 ||
        !naming::parse_profile_suffix(slash + 1 + base.size(), &pid, &k) || pid == 0)
      return false;
    struct stat a, b;
    if (fstat(fd, &a) != 0 || lstat(where, &b) != 0 || a.st_dev != b.st_dev ||
        a.st_ino != b.st_ino || unlink(where) != 0)
      return false;
    std::lock_guard<std::mutex> l(stats_mu);
    ++stats.dropped;
    stats.dropped_cpu_ns += cpu_ns;
    return true;
  }

  // One connection: one message, then the answer.
  void serve(int conn) {
    const timeval tv{1, 0};
    setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    drain::DrainMsg m;
    int fds[util::kMaxPassedFds];
    int nfds = 0;
    const ssize_t n = util::recv_with_fds(conn, &m, sizeof m, fds, util::kMaxPassedFds, &nfds);
    char ack = 1;
    int release_fd = -1;  // kFlushRelease: the process's file, worked on after the answer
    if (n == static_cast<ssize_t>(sizeof m) && m.magic == drain::kDrainMagic) {
      if (m.kind == drain::kDrainAdd && (nfds == 2 || nfds == 3)) {
        ack = add(m, fds[0], fds[1], nfds == 3 ? fds[2] : -1);
        nfds = 0;                                            // add() took them
      } else if (m.kind == drain::kDrainAdd && nfds == 1) {  // into the process's own file
        // (or, pending, the file it was forked with: add()). add() takes the event whatever
        // it answers.
        const bool peer = peer_is(conn, m.pid);
        ack = peer ? add(m, fds[0], -1, -1) : drain::kAckNeedFile;
        if (peer) nfds = 0;
      } else if (m.kind == drain::kDrainFlush) {
        release_fd = flush(m);
        ack = 0;
        std::lock_guard<std::mutex> l(stats_mu);
        ++stats.flushes;
      } else if (m.kind == drain::kDrainSync) {
        for (Event* e : events)
          if (e->pid == m.pid) drain(e);
        ack = 0;
      } else if ((m.kind == drain::kDrainChildFile && (nfds == 1 || nfds == 2)) ||
                 (m.kind == drain::kDrainNewFile && (nfds == 1 || nfds == 2))) {
        if (m.kind == drain::kDrainNewFile) {
          new_file(conn, m, fds[0], nfds == 2 ? fds[1] : -1);
          nfds = 1;  // new_file() took the event
        } else {
          child_file(conn, m, nfds == 2 ? fds[0] : -1, fds[nfds - 1]);
        }
        for (int i = 0; i < nfds; ++i) close(fds[i]);
        close(conn);
        return;
      }
    }
    for (int i = 0; i < nfds; ++i) close(fds[i]);
    (void)!send(conn, &ack, 1, MSG_NOSIGNAL);
    close(conn);
    if (release_fd >= 0) let_go(release_fd, m.cpu_ns);
  }

  // A thread's event (kDrainAdd), counting into the file file_fd names, or, for a forked child
  // without its own file (kAddPending, with dirfd), into the one made at its first sample.
  // A pending event that comes alone (the caller checked that the peer is m.pid) takes the
  // file it was forked with from those held here, and its directory.
  char add(const drain::DrainMsg& m, int fd, int file_fd, int dirfd) {
    const uint64_t data = m.ring_bytes > kPage ? m.ring_bytes - kPage : 0;
    const bool pending = (m.flags & drain::kAddPending) != 0;
    // A later event of a pending child whose first one brought the fds to make its file with
    // (its Proc keeps them): it needs none. The file it was forked with may be gone meanwhile
    // (its process ended, and the file was removed, empty: a daemon's launcher).
    const auto known = pending ? procs.find(m.pid) : procs.end();
    const bool kept = known != procs.end() && (known->second.pending || known->second.made);
    if (pending && file_fd < 0 && dirfd < 0 && !kept) {
      // A file made here (it has its directory), held or just ended (made_file).
      if (!made_file(m.from_dev, m.from_ino, &file_fd, &dirfd)) {
        close(fd);
        return drain::kAckNeedFile;
      }
      std::lock_guard<std::mutex> l(stats_mu);
      ++stats.pending_alone;
    }
    // Without a file fd: the process's own file, made here (kDrainNewFile). The caller
    // checked that the peer is m.pid.
    File* own = nullptr;
    if (file_fd < 0 && !pending)
      if (const auto it = own_files.find(m.pid); it != own_files.end()) own = it->second;
    if (data == 0 || data > 64 * kPage || (data & (data - 1)) != 0 || m.period_ns == 0 ||
        (pending ? dirfd < 0 && !kept : dirfd >= 0) || (file_fd < 0 && !own && !pending)) {
      close(fd);
      if (file_fd >= 0) close(file_fd);
      if (dirfd >= 0) close(dirfd);
      return file_fd < 0 && !pending ? drain::kAckNeedFile : drain::kAckRefused;
    }
    // The ring is made here, by the first mapping, not in the program: its pages are
    // allocated, pinned and charged to this process's locked memory, and the program neither
    // pays for them nor unmaps them (a TLB shootdown across its other threads' CPUs). The
    // thread waits for the answer, so no record of its is lost for want of a ring. Halved
    // down to one data page when the locked-memory allowance (perf_event_mlock_kb per user,
    // RLIMIT_MEMLOCK) refuses the size asked.
    size_t bytes = m.ring_bytes;
    void* r = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    while (r == MAP_FAILED && bytes > 2 * kPage) {
      bytes = kPage + (bytes - kPage) / 2;
      r = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    File* f = nullptr;
    if (r != MAP_FAILED && pending) {
      // Its process's first pending event keeps the fds to make the file with.
      Proc& p = procs[m.pid];
      if (!p.pending && !p.made) {
        posix_fadvise(file_fd, 0, 0, POSIX_FADV_RANDOM);  // as file_for's
        p.pending = std::make_unique<Pending>(file_fd, dirfd, m);
      } else {
        if (file_fd >= 0) close(file_fd);
        if (dirfd >= 0) close(dirfd);
      }
      f = p.made;  // null until its first sample
    } else if (r != MAP_FAILED) {
      f = own ? own : file_for(file_fd);
    }
    if (!f && !(pending && r != MAP_FAILED)) {
      if (r != MAP_FAILED)
        munmap(r, bytes);
      else if (file_fd >= 0)
        close(file_fd);
      if (dirfd >= 0 && r == MAP_FAILED) close(dirfd);
      close(fd);
      return drain::kAckRefused;
    }
    auto* e = new Event;
    e->fd = fd;
    e->pid = m.pid;
    e->tid = m.tid;
    e->ring = static_cast<char*>(r);
    e->ring_bytes = bytes;
    e->file = f;
    if (f) ++f->users;
    e->period = e->ns_per_record = m.period_ns;
    const uint64_t first = m.first_ns && m.first_ns <= m.period_ns ? m.first_ns : m.period_ns;
    e->phase = m.period_ns - first;
    // The phase is added to the counter but is no time of the thread: it counts as user time,
    // so that perf::credit's kernel part (counter - user periods) starts at 0, as in signal
    // and ring mode (whose first period is credited as a whole P of user time). Without it
    // each event lent its kernel part phase/P periods (half a period on average) of user time.
    e->credit.user_ns = e->phase;
    e->boundary = e->phase;
    e->cur_period = rt::perf::first_overflow(m.period_ns, first);  // the kernel's
    e->jitter = m.jitter != 0;
    e->last_pc = static_cast<uintptr_t>(m.start_pc);  // until its first sample
    e->rng = (static_cast<uint64_t>(m.tid) + 1) * 0x9e3779b97f4a7c15ull ^ mono_ns();
    if (e->rng == 0) e->rng = 1;
    if (m.thread_cpu_ns) rt::perf::base_at_open(m.thread_cpu_ns, e->phase, &e->credit);
    Proc& p = procs[e->pid];
    ++p.events;
    e->proc = &p;
    if (!p.based && m.process_cpu_ns) {  // its other threads' time before this counts too
      p.cpu_base = m.process_cpu_ns > e->phase ? m.process_cpu_ns - e->phase : 0;
      p.based = true;
      if (const auto w = watched.find(e->pid); w != watched.end() && w->second.base_ns == 0)
        w->second.base_ns = m.process_cpu_ns;
    }
    // The first period drawn now, while the thread waits for the answer: off its CPU, the
    // ioctl interrupts no CPU (from the loop, right after the answer, it was an IPI of the
    // thread's CPU, about 70 us of its time, once per thread), and the first block is as
    // jittered as the others. The restart also throws away the agent's random first period:
    // the first overflow now comes one drawn period (4P/5 to 4P/3) after the hand-over, and
    // the CPU time of what runs in between (the rest of the agent's start, main's first
    // instructions) is charged to the function that runs then (tests/record's Coverage
    // measures it: 0.2 to 0.35 of a period per process on the AMD EPYC VM). The other way, a
    // re-draw after the first record, is an interrupt of the running thread's CPU.
    redraw(e);
    e->cut_in_exchange = e->restart_pending;
    events.push_back(e);
    std::lock_guard<std::mutex> l(stats_mu);
    ++stats.events;
    return drain::kAckDone;
  }

  // A new period for e and the length of its next block (perf.hpp's schedule).
  void redraw(Event* e) {
    jitter(e);
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
  static uint64_t redraw_due(const Event* e, uint64_t now) {
    if (e->records >= e->jitter_after || now <= e->drawn_ns) return ~0ull;
    const double per_record =
        e->records ? double(now - e->drawn_ns) / double(e->records) : double(e->ns_per_record);
    const uint64_t due = e->drawn_ns + static_cast<uint64_t>(per_record * double(e->jitter_after));
    if (!e->records && due <= now) return ~0ull;
    return std::max(due, now + kMinTickMs * 1000000);
  }

  // kDrainFlush: counts and closes every event of m.pid. With kFlushFinish (a forked child
  // without its own file), writes the end fields of the file made for its samples, if any.
  // With kFlushRelease, returns a new fd of the file they counted into (-1 if none), for
  // drop_if_empty() or release_space() after the answer.
  int flush(const drain::DrainMsg& m) {
    for (Event* e : events)
      if (e->pid == m.pid) finalize(e);  // a pending child's file may be made here
    File* f = nullptr;
    if (const auto it = own_files.find(m.pid); it != own_files.end()) f = it->second;
    for (Event* e : events)
      if (e->pid == m.pid && e->file) f = e->file;
    if (f && (m.flags & drain::kFlushFinish)) finish_file(f, m.cpu_ns, m.end_ns);
    const int file_fd =
        f && (m.flags & drain::kFlushRelease) ? fcntl(f->fd, F_DUPFD_CLOEXEC, 0) : -1;
    for (size_t i = 0; i < events.size();) {
      if (events[i]->pid != m.pid) {
        ++i;
        continue;
      }
      Event* e = events[i];
      events[i] = events.back();
      events.pop_back();
      release(e);
    }
    drop_own(m.pid);
    return file_fd;
  }

  // The tick: the shortest of the open events' (tick_for), kMaxTickMs without any.
  uint64_t tick_ms() const {
    uint64_t t = kMaxTickMs;
    for (const Event* e : events) t = std::min(t, tick_for(e->ring_bytes - kPage, e->period));
    return t;
  }

  void loop() {
    uint64_t next_tick = mono_ns() + tick_ms() * 1000000ull;
    uint64_t wake_at = next_tick;  // the tick's, or a re-draw's if sooner (redraw_due)
    std::vector<pollfd> p;
    // The watched processes of this pass's poll and their pidfds; the pid 0 if not ended.
    std::vector<std::pair<pid_t, int>> ended;
    for (;;) {
      const bool stopping = stop.load(std::memory_order_acquire);
      p.clear();
      p.push_back(pollfd{listen_fd, POLLIN, 0});
      p.push_back(pollfd{wake[0], POLLIN, 0});
      // The pidfds before the events: a process seen ended here has its events' ends seen
      // below (their ends came first), in this pass.
      ended.clear();
      for (const auto& [pid, w] : watched) {
        p.push_back(pollfd{w.fd, POLLIN, 0});
        ended.emplace_back(pid, w.fd);
      }
      const size_t first_event = p.size();
      for (Event* e : events) p.push_back(pollfd{e->fd, POLLIN, 0});
      const uint64_t now = mono_ns();
      const int timeout = stopping         ? 0
                          : now >= wake_at ? 0
                                           : static_cast<int>((wake_at - now) / 1000000 + 1);
      // Every end wakes this thread, a process's too (its main thread's event and its pidfd),
      // although a wake-up of it asleep on the other, idle CPU costs the ending process 12-18
      // us of CPU on a VM (bench/start_pieces.sh). Tried without (a61cbb3): 0.02-0.04 ms less
      // CPU for each of 300 spawned short processes, but the ends were seen at the next pass,
      // up to a tick later, so the files' work of the processes that ended meanwhile ran beside
      // the program's next ones (cmp-burn4 started by a python3 shim that runs 40 processes
      // first: +0.5 and +0.8 ms of its CPU), and the rings of ended processes stayed mapped,
      // against the locked-memory limit, for that tick (docs/benchmarks.md, "After 968321f").
      poll(p.data(), p.size(), timeout);
      if (p[1].revents & POLLIN) {
        char b[64];
        (void)!read(wake[0], b, sizeof b);
      }
      for (File* f : files) f->refreshed = false;
      // Every ring, whatever poll said (an empty one costs two loads); threads that ended
      // (POLLHUP) are drained to the end and closed.
      for (size_t i = 2; i < first_event; ++i)
        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) ended[i - 2].first = 0;
      for (size_t i = first_event; i < p.size(); ++i) {
        Event* e = nullptr;
        for (Event* x : events)
          if (x->fd == p[i].fd) e = x;
        if (!e) continue;
        if (p[i].revents & (POLLHUP | POLLERR | POLLNVAL)) {
          events.erase(std::find(events.begin(), events.end(), e));
          event_ended(e);
        }
      }
      // Then new events and flushes (before the pollfds above could name a reused fd).
      for (int k = 0; k < 64; ++k) {
        const int conn = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (conn < 0) break;
        serve(conn);
      }
      for (Event* e : events) drain(e);
      for (const auto& [pid, fd] : ended)  // (unless already seen ended, by a watch() above)
        if (const auto w = watched.find(pid); pid != 0 && w != watched.end() && w->second.fd == fd)
          gone(pid);
      if (stopping) break;
      for (Event* e : events)
        if (e->records >= e->jitter_after) redraw(e);
      const uint64_t t = mono_ns(), tick = tick_ms() * 1000000ull;
      if (t >= next_tick || next_tick - t > tick) next_tick = t + tick;  // or a new event's
      wake_at = next_tick;
      for (const Event* e : events) wake_at = std::min(wake_at, redraw_due(e, t));
    }
    while (!events.empty()) {
      close_event(events.back());
      events.pop_back();
    }
    for (const auto& [pid, w] : watched) close(w.fd);  // those that outlive the run
    watched.clear();
    own_files.clear();
    for (File* f : files) {  // those held for their processes (own_files): the others went
      close_file(f);         // with their last event
      delete f;
    }
    files.clear();
    for (const Ended& e : ended_files) {
      close(e.fd);
      close(e.dirfd);
    }
    ended_files.clear();
  }
};

Drainer::Drainer() : s_(new State) {}

Drainer::~Drainer() {
  finish();
}

bool Drainer::start(const std::string& dir, const std::string& base, std::string* why) {
  State& s = *s_;
  // As /proc/self/fd names the files (drop_if_empty): absolute, without links.
  if (char* real = realpath(dir.c_str(), nullptr)) {
    s.run_dir = real;
    free(real);
  }
  s.base = base;
  std::string path = dir + "/drain.sock";
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    const char* tmp = getenv("TMPDIR");
    std::string t = std::string(tmp && *tmp ? tmp : "/tmp") + "/sprofil-drain-XXXXXX";
    std::vector<char> b(t.begin(), t.end());
    b.push_back('\0');
    if (!mkdtemp(b.data())) {
      *why = std::string("mkdtemp: ") + strerror(errno);
      return false;
    }
    s.own_dir = b.data();
    path = s.own_dir + "/s";
    if (path.size() >= sizeof(sockaddr_un::sun_path)) {
      rmdir(s.own_dir.c_str());
      *why = "no short path for the socket";
      return false;
    }
  }
  s.listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  memcpy(a.sun_path, path.c_str(), path.size() + 1);
  if (s.listen_fd < 0 || bind(s.listen_fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      listen(s.listen_fd, 128) != 0 || pipe2(s.wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    *why = std::string("socket: ") + strerror(errno);
    if (s.listen_fd >= 0) close(s.listen_fd);
    s.listen_fd = -1;
    unlink(path.c_str());
    if (!s.own_dir.empty()) rmdir(s.own_dir.c_str());
    return false;
  }
  s.path = path;
  // One fd per live thread of the program (and one per process file): the soft limit goes up
  // to the hard one for this process (record gives the program its own limit back).
  rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    s.saved_nofile = rl;
    s.nofile_raised = true;
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  s.thread = std::thread([this] { s_->loop(); });
  return true;
}

const std::string& Drainer::path() const {
  return s_->path;
}

void Drainer::restore_limits_in_child() const {
  if (s_->nofile_raised) setrlimit(RLIMIT_NOFILE, &s_->saved_nofile);
}

void Drainer::finish() {
  State& s = *s_;
  if (s.finished || s.listen_fd < 0) return;
  s.finished = true;
  s.stop.store(true, std::memory_order_release);
  (void)!write(s.wake[1], "x", 1);
  s.thread.join();
  close(s.listen_fd);
  close(s.wake[0]);
  close(s.wake[1]);
  unlink(s.path.c_str());
  if (!s.own_dir.empty()) rmdir(s.own_dir.c_str());
}

Drainer::Stats Drainer::stats() const {
  std::lock_guard<std::mutex> l(s_->stats_mu);
  Stats st = s_->stats;
  st.redraws = s_->redraws.load(std::memory_order_relaxed);
  return st;
}

}  // namespace sprofil::record
