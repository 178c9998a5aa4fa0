// Drain mode, the agent's side (format/drain_proto.hpp has the protocol): each thread's perf event
// is opened and enabled here, handed to the `sprofil record` parent with the
// profile file's fd, and closed again. The program then holds no perf fd, gets no signal,
// and pays only the kernel's sampling cost; the parent drains the rings, jitters the
// periods and adds the samples into the file (src/record/drain.cpp). Called with the
// runtime mutex held, never from the signal handler.
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <sys/single_threaded.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "clock/clock.hpp"
#include "clock/perf.hpp"
#include "format/drain_proto.hpp"
#include "util/clock_ns.hpp"
#include "util/fd_passing.hpp"

namespace sprofil::rt::perf {
namespace {

static_assert(drain::kDrainSampleType == (PERF_SAMPLE_IP | PERF_SAMPLE_READ),
              "drain_proto.hpp's sample type, make_attr(kDrain)'s");

char g_sock[sizeof(sockaddr_un::sun_path)];  // SPROFIL_DRAIN, read at prepare (g_mu)
// The record parent answered this image's kDrainNewFile: drain_configure() need not connect
// once more to learn that it listens (taken by the first drain_configure after it). (g_mu)
bool g_answered = false;
// The process whose file the record parent made (kDrainNewFile), 0 if none: its events are
// handed over alone, the parent counts them into that file. A forked child is another pid.
pid_t g_file_by_parent = 0;
// The record parent watches that process's end (FileAnswer::watched): its exit sends no flush,
// the parent completes the file when it sees the process gone. Not after a flush before an
// exec (the parent let that file go; an exec that failed keeps it). (g_mu)
bool g_end_watched = false;
// The process a thread of which is sampled by something an exec does not remove (kept_at_exec),
// 0 if none: by pid, so that a forked child starts without it. (g_mu)
pid_t g_kept_pid = 0;
int (*g_open_file)() = nullptr;                // the agent's: a new fd of its profile file
bool (*g_child)(DrainChild*, bool) = nullptr;  // the agent's (set once, at start)

// m's kAddPending / kDrainChildFile fields from c; false if the name does not fit.
bool child_fields(const DrainChild& c, drain::DrainMsg* m) {
  const size_t len = c.name ? strlen(c.name) : sizeof m->name;
  if (len >= sizeof m->name) return false;
  memcpy(m->name, c.name, len + 1);
  m->region_count = c.region_count;
  m->regions_end = c.regions_end;
  m->start_ns = c.start_ns;
  m->ppid = c.ppid;
  m->from_dev = c.from_dev;
  m->from_ino = c.from_ino;
  return true;
}

constexpr size_t kPage = 4096;

// Data pages of a ring: about 0.4 s of records (24 bytes each) at the rate, a power of two
// from 2 to 32 (16 KiB at 1 kHz, 128 KiB at 10 kHz). The parent drains at a quarter of that
// (src/record/drain.cpp, tick_for), so a lapse of 0.2 s (a loaded machine) loses no record,
// and rarely: each of its passes costs a busy program a context switch. Rings this size also
// stay within the kernel's unprivileged locked allowance (perf_event_mlock_kb per CPU) for
// tens of threads; past it the parent halves them, and drains them more often.
size_t data_pages(uint64_t period_ns) {
  const uint64_t hz = period_ns ? 1000000000ull / period_ns : 1000;
  const uint64_t want = hz * 24 * 2 / 5 / kPage + 1;
  size_t p = 2;
  while (p < want && p < 32) p *= 2;
  return p;
}

// Whether no code of the program can run until the caller returns: the process has one
// thread (glibc's __libc_single_threaded: no pthread_create yet) and every signal is blocked
// in it (clock.hpp's BlockAll: a process image's start exchange, drained_new_file; the
// runtime's lock, held at an exec's flush, the restart after a failed exec, a forked child's
// hand-over). The fds of an exchange with the parent (the socket, an event until it is
// handed over, the file and the directory sent with it) are closed before the caller
// returns: they then stay where the kernel puts them. Moved out of the program's reach
// (place_out_of_reach), the first of them grows the process's fd table to its limit for good
// (FDSize in /proc/PID/status: 32768 instead of 256 at a limit of 20,000, kept across exec; the
// growth 8-9 us of CPU, bench/start_pieces.sh).
bool program_held_off() {
  if (!__libc_single_threaded) return false;
  sigset_t now;
  if (real_sigmask(SIG_BLOCK, nullptr, &now) != 0) return false;
  for (int s = 1; s < NSIG; ++s)  // (glibc's own 32 and 33 cannot be blocked)
    if (s != SIGKILL && s != SIGSTOP && (s < 32 || s >= SIGRTMIN) && !sigismember(&now, s))
      return false;
  return true;
}
int place(int fd) {
  return program_held_off() ? fd : place_out_of_reach(fd);
}

// The calling thread pinned to its CPU for an exchange with the parent, while no code of the
// program can run (program_held_off: a process image's start, a forked child's hand-over, an
// exec's flush). The thread sleeps until the answer, and the parent, woken by the request
// onto the thread's CPU (a Unix socket's wake-up is a synchronous one), answers from there: the
// scheduler then wakes the thread on the other, idle CPU. 290 of 300 short processes spawned
// under `sprofil record` moved so at their start; a process that has run on two CPUs makes the
// other flush its TLB when its memory is unmapped at its exit (an IPI that the exiting process
// waits for), and resumes with cold caches. Pinned, it resumes where it ran once the parent
// sleeps again (docs/benchmarks.md, "After db017fc": about 0.015 ms less CPU and 0.03 ms less
// time a process, and no TLB shootdown at its exit).
//
// The program's affinity is the same afterwards, and so is what the kernel keeps as its own
// request (since Linux 6.2 a sched_setaffinity() is also the mask a later change of the cpuset
// is intersected with; a process that never asked has none, which means every CPU). So the
// thread is pinned only where its mask (of two CPUs or more) is that of process 1 of its pid
// namespace (no taskset, no cpuset narrower than init's), and the mask given back is every
// CPU, which the kernel intersects with the cpuset's: checked to give the mask it had, else
// that mask is set. Not given back if the mask is no longer the pin (changed from outside
// meanwhile).
struct CpuPin {
  cpu_set_t was;
  cpu_set_t one;
  bool on = false;
};

void pin_here(CpuPin* p) {
  cpu_set_t init;  // (the kernel writes only its own mask's bytes)
  CPU_ZERO(&init);
  CPU_ZERO(&p->was);
  const int cpu = sched_getcpu();
  if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getaffinity(0, sizeof p->was, &p->was) != 0 ||
      !CPU_ISSET(cpu, &p->was) || CPU_COUNT(&p->was) < 2 ||  // (one CPU: nowhere to move)
      sched_getaffinity(1, sizeof init, &init) != 0 || !CPU_EQUAL(&p->was, &init))
    return;
  CPU_ZERO(&p->one);
  CPU_SET(cpu, &p->one);
  p->on = sched_setaffinity(0, sizeof p->one, &p->one) == 0;
}

void unpin(const CpuPin& p) {
  cpu_set_t now;
  CPU_ZERO(&now);
  if (!p.on || sched_getaffinity(0, sizeof now, &now) != 0 || !CPU_EQUAL(&now, &p.one)) return;
  cpu_set_t any;
  memset(&any, 0xff, sizeof any);
  if (sched_setaffinity(0, sizeof any, &any) == 0 && sched_getaffinity(0, sizeof now, &now) == 0 &&
      CPU_EQUAL(&now, &p.was))
    return;
  sched_setaffinity(0, sizeof p.was, &p.was);
}

// Sends m with fds to the parent at `sock` and waits (bounded) for the answer: `len` bytes into
// `answer`, and the fd that comes with them, if any, into *fd_in (-1 if none; close-on-exec).
// 0 or an errno value.
int exchange(const char* sock, const drain::DrainMsg& m, const int* fds, int nfds, void* answer,
             size_t len, int* fd_in) {
  if (fd_in) *fd_in = -1;
  const int s0 = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (s0 < 0) return errno;
  const bool held_off = program_held_off();
  const int s = held_off ? s0 : place_out_of_reach(s0);
  if (s < 0) return EMFILE;
  sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  memcpy(a.sun_path, sock, sizeof a.sun_path);
  const timeval tv{drain::kDrainAckMs / 1000, (drain::kDrainAckMs % 1000) * 1000};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int err = 0;
  if (connect(s, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    err = errno;
    close(s);
    return err;
  }
  CpuPin pin;
  if (held_off) pin_here(&pin);
  ssize_t n = util::send_with_fds(s, &m, sizeof m, fds, nfds);
  if (n != static_cast<ssize_t>(sizeof m)) err = n < 0 ? errno : EIO;
  if (err == 0) {
    int back = -1, nback = 0;
    n = util::recv_with_fds(s, answer, len, &back, 1, &nback);
    if (nback == 1) {
      if (fd_in)
        *fd_in = back;
      else
        close(back);
    }
    if (n != static_cast<ssize_t>(len)) err = n < 0 ? errno : EPIPE;
  }
  unpin(pin);
  close(s);
  return err;
}

// Sends m with fds and waits for the one-byte answer: 0 (kAckDone), an errno value, or
// ENOENT for kAckNeedFile.
int send_msg(const drain::DrainMsg& m, const int* fds, int nfds) {
  char ack = drain::kAckRefused;
  const int err = exchange(g_sock, m, fds, nfds, &ack, 1, nullptr);
  return err != 0 ? err : ack == drain::kAckDone ? 0 : ack == drain::kAckNeedFile ? ENOENT : EPROTO;
}

}  // namespace

bool drain_configure() {
  const char* p = secure_getenv("SPROFIL_DRAIN");
  if (!p || !*p || strlen(p) >= sizeof g_sock || !g_open_file) {
    g_sock[0] = '\0';
    return false;
  }
  memcpy(g_sock, p, strlen(p) + 1);
  // The hand-over needs fds out of the program's reach (RLIMIT_NOFILE with room above the
  // soft limit, or a large budget); without it, signal mode (whose threads then get CPU-time
  // timers, perf.hpp open_event).
  if (!fd_room()) {
    g_sock[0] = '\0';
    return false;
  }
  // A program that outlives its `sprofil record` (a daemon) finds no one listening: signal
  // mode then, as without the record parent. The parent that just made this image's file
  // listens.
  if (std::exchange(g_answered, false)) return true;
  const int fd0 = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  const int fd = fd0 < 0 ? -1 : place(fd0);
  sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  memcpy(a.sun_path, g_sock, sizeof a.sun_path);
  const bool up = fd >= 0 && connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
  if (fd >= 0) close(fd);
  if (!up) g_sock[0] = '\0';
  return up;
}

void set_drain_file(int (*open_file)()) {
  g_open_file = open_file;
}

void kept_at_exec() {
  g_kept_pid = getpid();
}

bool exec_removes_events() {
  return g_sock[0] && g_kept_pid != getpid() && g_child && g_child(nullptr, false);
}

namespace {
__attribute__((tls_model("initial-exec"))) thread_local uintptr_t t_start_pc;
}  // namespace

void set_thread_start(uintptr_t pc) {
  t_start_pc = pc;
}

uintptr_t thread_start() {
  return t_start_pc;
}

namespace {
// m's kDrainAdd fields for tid's event, with the thread's and the process's CPU clocks now (the
// event's opening: its counter is at 0).
void event_fields(pid_t tid, uint64_t period_ns, uint64_t first_ns, bool jitter, uintptr_t start_pc,
                  drain::DrainMsg* m) {
  // The parent maps the ring (and so makes it: src/record/drain.cpp add()) before it answers.
  m->pid = getpid();
  m->tid = tid;
  m->period_ns = period_ns;
  m->first_ns = first_ns == 0 || first_ns > period_ns ? period_ns : first_ns;
  m->ring_bytes = (1 + data_pages(period_ns)) * kPage;
  m->jitter = jitter ? 1 : 0;
  m->start_pc = start_pc;
  m->thread_cpu_ns = util::clock_ns(thread_cpu_clock(tid));
  m->process_cpu_ns = util::clock_ns(CLOCK_PROCESS_CPUTIME_ID);
}

// Opens tid's drain-mode event (counting from now: make_attr's kDrain), out of the program's
// reach, and fills m's kDrainAdd fields for it. The fd, or -1 with *err set.
int open_event_for(pid_t tid, uint64_t period_ns, uint64_t first_ns, bool jitter,
                   uintptr_t start_pc, drain::DrainMsg* m, int* err) {
  if (first_ns == 0 || first_ns > period_ns) first_ns = period_ns;
  perf_event_attr a = make_attr(first_overflow(period_ns, first_ns), Delivery::kDrain);
  bool at_exec = false;
  const int fd0 = open_drain_event(&a, tid, &at_exec);
  if (fd0 >= 0 && !at_exec) kept_at_exec();
  if (fd0 < 0) {
    *err = errno;
    return -1;
  }
  event_fields(tid, period_ns, first_ns, jitter, start_pc, m);
  const int fd = place(fd0);
  if (fd < 0) {
    *err = EMFILE;
    return -1;
  }
  return fd;
}

// The main thread's event handed over with this image's file (drained_new_file), which
// arm_thread adopts (take_early): its tid and period, 0 if none. (g_mu)
pid_t g_early_tid = 0;
uint64_t g_early_ns = 0;
}  // namespace

bool drain_asked() {
  const char* mode = secure_getenv("SPROFIL_PERF_MODE");
  return !mode || !*mode || strcmp(mode, "drain") == 0;
}

bool jitter_asked() {
  const char* jitter = secure_getenv("SPROFIL_JITTER");
  return !(jitter && strcmp(jitter, "0") == 0);
}

bool early_handed(uint64_t period_ns) {
  return g_early_tid != 0 && g_early_ns == period_ns && g_file_by_parent == getpid();
}

bool take_early(pid_t tid, uint64_t period_ns) {
  const bool yes = early_handed(period_ns) && g_early_tid == tid;
  if (yes) g_early_tid = 0;
  return yes;
}

int open_drained(pid_t tid, uint64_t period_ns, uint64_t first_ns, bool jitter,
                 uintptr_t start_pc) {
  if (!g_sock[0] || !g_open_file) return ENOTCONN;
  drain::DrainMsg m;
  m.kind = drain::kDrainAdd;
  int err = 0;
  const int fd = open_event_for(tid, period_ns, first_ns, jitter, start_pc, &m, &err);
  if (fd < 0) return err;
  // The event alone where the parent made this process's file (it counts into that one): no
  // re-open of the file by its path, no second fd. So too a forked child's, pending, forked
  // with a file the parent made (g_file_by_parent, inherited): the parent takes the file it
  // holds with that from_dev and from_ino, and the directory it made it in. Else, or if the
  // parent asks for them, with a new fd of the file (and the directory's, pending).
  DrainChild alone;
  if (g_file_by_parent == m.pid) {
    err = send_msg(m, &fd, 1);
  } else if (g_file_by_parent != 0 && g_child && g_child(&alone, false) &&
             child_fields(alone, &m)) {
    m.flags = drain::kAddPending;
    err = send_msg(m, &fd, 1);
    m.flags = 0;
  } else {
    err = ENOENT;
  }
  if (err == ENOENT) {
    const int file0 = g_open_file();
    const int file = file0 < 0 ? -1 : place(file0);
    if (file < 0) {
      err = errno ? errno : EBADF;
    } else {
      // A forked child without its own file: its samples go to the one the parent makes at
      // the first of them.
      DrainChild c;
      const bool pending = g_child && g_child(&c, true);
      const int dirfd = pending && c.dirfd >= 0 ? place(c.dirfd) : -1;
      if (pending && (dirfd < 0 || !child_fields(c, &m))) {
        err = dirfd < 0 ? EMFILE : ENAMETOOLONG;
      } else {
        if (pending) m.flags = drain::kAddPending;
        const int fds[3] = {fd, file, dirfd};
        err = send_msg(m, fds, pending ? 3 : 2);
      }
      if (dirfd >= 0) close(dirfd);
      close(file);
    }
  }
  // The parent holds the event and its ring now (or it failed: the event goes with our fd).
  close(fd);
  return err;
}

namespace {
bool g_release_at_flush = false;  // (g_mu)
bool g_released = false;          // a flush with kFlushRelease was answered (g_mu)

// One message of `kind` for this process, answered: 0 or an errno value; 0 (nothing sent)
// outside drain mode.
int ask(uint32_t kind, uint32_t flags = 0) {
  if (!g_sock[0]) return 0;
  drain::DrainMsg m;
  m.kind = kind;
  m.pid = getpid();
  m.flags = flags;
  // The end fields the agent would write (kFlushFinish), or the CPU time of a process that
  // exits (kFlushRelease: the parent removes the file of one that took no sample).
  if (flags & (drain::kFlushFinish | drain::kFlushRelease)) {
    rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    m.cpu_ns = static_cast<uint64_t>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000u +
               static_cast<uint64_t>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000u;
    m.end_ns = util::clock_ns(CLOCK_REALTIME);
  }
  return send_msg(m, nullptr, 0);
}
}  // namespace

int flush_drained() {
  uint32_t flags = g_release_at_flush ? drain::kFlushRelease : 0;
  if (g_child && g_child(nullptr, false)) flags |= drain::kFlushFinish;
  // An exit the parent sees (a pidfd): it drains every event of this process once the process
  // has ended, then gives the unused space back; the agent completes the file meanwhile. No
  // exchange, and the exit does not wait.
  if (g_release_at_flush && g_end_watched && g_file_by_parent == getpid() &&
      !(flags & drain::kFlushFinish) && g_sock[0]) {
    g_released = true;
    return 0;
  }
  if (!g_release_at_flush) g_end_watched = false;
  const int e = ask(drain::kDrainFlush, flags);
  g_released = g_release_at_flush && g_sock[0] && e == 0;
  return e;
}

void release_at_flush() {
  g_release_at_flush = true;
}

bool released_by_parent() {
  return g_released;
}

int sync_drained() {
  return ask(drain::kDrainSync);
}

void set_drain_child(bool (*pending)(DrainChild*, bool)) {
  g_child = pending;
}

int drained_new_file(int dirfd, const char* name, bool first, int* k, uint64_t period_ns) {
  const char* sock = secure_getenv("SPROFIL_DRAIN");
  const size_t len = strlen(name);
  drain::DrainMsg m;
  if (!sock || !*sock || strlen(sock) >= sizeof(sockaddr_un::sun_path) || len >= sizeof m.name)
    return -1;
  char path[sizeof(sockaddr_un::sun_path)] = {};
  memcpy(path, sock, strlen(sock));
  // The calling (main) thread's event with it, where drain mode will run, opened by the
  // parent (kNewOpenEvent): one exchange with the parent instead of two, no event's opening in
  // the program, and the agent's own start-up is sampled. Its phase is drawn as arm_thread
  // would; its pc before any user-space sample is the program's entry point.
  const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
  // Every signal blocked for the exchange (the agent's start holds no runtime lock): its fds
  // then stay low in a single-threaded process (program_held_off).
  const BlockAll held_off;
  const bool with_event = period_ns && tid == getpid() && drain_asked() && fd_room();
  m.flags = first ? drain::kNewFirst : 0;
  if (with_event) {
    event_fields(tid, period_ns, random_phase(period_ns), jitter_asked(),
                 static_cast<uintptr_t>(getauxval(AT_ENTRY)), &m);
    m.flags |= drain::kNewOpenEvent;
  }
  m.kind = drain::kDrainNewFile;
  m.pid = getpid();
  m.tid = tid;
  memcpy(m.name, name, len + 1);
  drain::FileAnswer a;
  a.err = EPROTO;
  int fd = -1;
  const int err = exchange(path, m, &dirfd, 1, &a, sizeof a, &fd);
  if (err != 0 || a.err != 0 || fd < 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  g_answered = true;
  g_file_by_parent = m.pid;
  g_end_watched = a.watched != 0;
  if (with_event && a.added) {
    g_early_tid = tid;
    g_early_ns = period_ns;
  }
  *k = a.k;
  return fd;
}

int drained_child_file(int from, const DrainChild& c, int* k) {
  if (!g_sock[0]) return -1;
  drain::DrainMsg m;
  m.kind = drain::kDrainChildFile;
  m.pid = getpid();
  m.tid = m.pid;
  if (!child_fields(c, &m)) return -1;
  // Without `from` (a pending child that cannot read it), the directory alone: the parent
  // makes the file from the one it holds.
  const int fds[2] = {from, c.dirfd};
  const bool with_from = from >= 0;
  drain::FileAnswer a;
  a.err = EPROTO;
  int fd = -1;
  const int err =
      exchange(g_sock, m, with_from ? fds : fds + 1, with_from ? 2 : 1, &a, sizeof a, &fd);
  if (err != 0 || a.err != 0 || fd < 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  *k = a.k;
  return fd;
}

}  // namespace sprofil::rt::perf
