// The record parent's drain (drain.hpp): the socket the agents' requests come on
// (drain_proto.hpp), each served (an event added, a file made, a flush), and the passes over the
// rings. drain_state.hpp lists the other files.
#include "record/drain.hpp"

#include <sys/un.h>

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
#include <system_error>

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

// Whether the peer of conn is process pid (SO_PEERCRED): a file named for a pid is made only
// for that pid. Where the peer is in another pid namespace it is not, and makes its own.
bool peer_is(int conn, pid_t pid) {
  ucred cred{};
  socklen_t cl = sizeof cred;
  return getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0 && cred.pid == pid;
}

}  // namespace
}  // namespace drain_impl

using namespace drain_impl;

// One connection: one message, then the answer.
void Drainer::State::serve(int conn) {
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
char Drainer::State::add(const drain::DrainMsg& m, int fd, int file_fd, int dirfd,
                         const FirstDraw* drawn) {
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
  size_t bytes = 0;
  void* r =
      rt::perf::map_ring(fd, m.ring_bytes > kPage ? (m.ring_bytes - kPage) / kPage : 0, &bytes);
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
  // An event opened here with its drawn period counts from that open: no phase.
  const uint64_t first = drawn                                     ? m.period_ns
                         : m.first_ns && m.first_ns <= m.period_ns ? m.first_ns
                                                                   : m.period_ns;
  e->phase = m.period_ns - first;
  // The phase is added to the counter but is no time of the thread: it counts as user time,
  // so that perf::credit's kernel part (counter - user periods) starts at 0, as in signal
  // and ring mode (whose first period is credited as a whole P of user time). Without it
  // each event lent its kernel part phase/P periods (half a period on average) of user time.
  e->credit.user_ns = e->phase;
  e->boundary = e->phase;
  e->cur_period = drawn ? drawn->period : rt::perf::first_overflow(m.period_ns, first);
  e->jitter = m.jitter != 0;
  e->last_pc = static_cast<uintptr_t>(m.start_pc);  // until its first sample
  e->rng = drawn ? drawn->rng : first_rng(m.tid);
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
  // An event opened here (new_file) started with its drawn period: no restart to make. The
  // other, the agent's, keeps the random first period the agent opened it with, so that the
  // thread's first sample falls anywhere in its first period, and its later ones anywhere in
  // its work: restarted here with a drawn whole period (4P/5 to 4P/3, while the thread waits
  // for the answer: no interrupt of the thread), no thread was sampled in the first 4/5 of a
  // period after its hand-over, and threads that all run the same work put their samples at
  // the same points of it (bench/thread_phase.sh: 400 threads of fa, fb, fc, fd, a quarter
  // each, gave 27-31%, 18-19%, 19-22% and 30-34%). The first period repeats until the period
  // is re-drawn, so its block is one record: the pass after that record re-draws it, an IPI of
  // the thread's CPU while it runs (about 46 us of its time on the AMD EPYC VM, once per
  // thread that takes a sample; redraw_due looks every period for it). A thread that takes no
  // sample for kFirstWaitNs (it waits, say) is re-drawn then, not interrupted.
  if (drawn) {
    redraws.fetch_add(1, std::memory_order_relaxed);  // (its draw, made at the open)
    start_block(e);
  } else {
    start_first_block(e);
  }
  events.push_back(e);
  std::lock_guard<std::mutex> l(stats_mu);
  ++stats.events;
  return drain::kAckDone;
}

// kDrainChildFile: makes the file and answers with it. Only for the peer's own pid (the
// name is the pid's): where the peer is in another pid namespace, the child makes its file.
void Drainer::State::child_file(int conn, const drain::DrainMsg& m, int from, int dirfd) {
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
void Drainer::State::new_file(int conn, const drain::DrainMsg& m, int dirfd, int event_fd) {
  drain::FileAnswer a;
  const bool peer = peer_is(conn, m.pid);
  if (peer) end_ended_events_of(m.pid);
  const int fd = peer ? make_new_file(dirfd, m, &a.k, &a.err) : -1;
  if (fd < 0 && a.err == 0) a.err = EPERM;
  FirstDraw drawn;
  const bool open_here =
      event_fd < 0 && fd >= 0 && (m.flags & drain::kNewOpenEvent) && m.tid == m.pid;
  if (open_here) {
    // Its first period drawn before the open, as jitter() would draw it: an ioctl on the
    // event of a thread of another CPU interrupts that CPU even while the thread sleeps (an
    // IPI per process, docs/benchmarks.md "At 82e2841").
    drawn.rng = first_rng(m.tid);
    drawn.period = next_period(m.period_ns, m.jitter != 0, &drawn.rng);
    event_fd = open_event(m, drawn.period);
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
    a.added = add(add_msg, event_fd, -1, -1, open_here ? &drawn : nullptr) == drain::kAckDone;
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
// `period` (new_file's draw). -1 if it cannot be opened (the agent then opens it itself,
// kDrainAdd).
int Drainer::State::open_event(const drain::DrainMsg& m, uint64_t period) {
  if (m.period_ns == 0 || period == 0) return -1;
  perf_event_attr a = rt::perf::make_attr(period, rt::perf::Delivery::kDrain);
  bool at_exec = false;  // (an image the parent made the file of flushes at its exec)
  return rt::perf::open_drain_event(&a, m.tid, &at_exec);
}

// kDrainFlush: counts and closes every event of m.pid. With kFlushFinish (a forked child
// without its own file), writes the end fields of the file made for its samples, if any.
// With kFlushRelease, returns a new fd of the file they counted into (-1 if none), for
// drop_if_empty() or release_space() after the answer.
int Drainer::State::flush(const drain::DrainMsg& m) {
  for (Event* e : events)
    if (e->pid == m.pid) finalize(e);  // a pending child's file may be made here
  File* f = nullptr;
  if (const auto it = own_files.find(m.pid); it != own_files.end()) f = it->second;
  for (Event* e : events)
    if (e->pid == m.pid && e->file) f = e->file;
  if (f && (m.flags & drain::kFlushFinish)) finish_file(f, m.cpu_ns, m.end_ns);
  const int file_fd = f && (m.flags & drain::kFlushRelease) ? fcntl(f->fd, F_DUPFD_CLOEXEC, 0) : -1;
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
uint64_t Drainer::State::tick_ms() const {
  uint64_t t = kMaxTickMs;
  for (const Event* e : events) t = std::min(t, tick_for(e->ring_bytes - kPage, e->period));
  return t;
}

void Drainer::State::loop() {
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
    const uint64_t t = mono_ns(), tick = tick_ms() * 1000000ull;
    for (Event* e : events)
      if (e->records >= e->jitter_after || (e->first_pending && t - e->drawn_ns >= kFirstWaitNs))
        redraw(e);
    if (t >= next_tick || next_tick - t > tick) next_tick = t + tick;  // or a new event's
    wake_at = next_tick;
    // (From the time after the re-draws: a block drawn above starts after t, and redraw_due
    // takes a block that starts after `now` for one that has not started, due at no time: the
    // parent then slept to its tick, and a 0.4 s run had 4 blocks where 8 to 25 were due.)
    const uint64_t drawn = mono_ns();
    for (const Event* e : events) wake_at = std::min(wake_at, redraw_due(e, drawn));
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
    s.close_socket(path);
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
  // The thread can fail to start where little address space is left (ulimit -v: its stack):
  // then no drain mode, said by record, and the agents use a signal per sample.
  try {
    s.thread = std::thread([this] { s_->loop(); });
  } catch (const std::system_error& e) {
    *why = std::string("cannot start its thread: ") + strerror(e.code().value());
    if (s.nofile_raised) setrlimit(RLIMIT_NOFILE, &s.saved_nofile);
    s.nofile_raised = false;
    s.close_socket(path);
    return false;
  }
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
  s.close_socket(s.path);
}

void Drainer::State::close_socket(const std::string& at) {
  for (int* fd : {&listen_fd, &wake[0], &wake[1]}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
  unlink(at.c_str());
  if (!own_dir.empty()) rmdir(own_dir.c_str());
}

Drainer::Stats Drainer::stats() const {
  std::lock_guard<std::mutex> l(s_->stats_mu);
  Stats st = s_->stats;
  st.redraws = s_->redraws.load(std::memory_order_relaxed);
  return st;
}

}  // namespace sprofil::record
