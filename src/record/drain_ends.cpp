// The ends of events (a thread exited, an exec removed its event) and of processes (a pidfd
// readable): drained to the end, credited, and a file its process did not complete completed.
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

#include "format/layout.hpp"
#include "format/profile_file.hpp"
#include "format/sprof_format.h"
#include "record/process_end.hpp"
#include "util/fd_passing.hpp"
#include "util/release_space.hpp"
#include "util/xorshift.hpp"

namespace sprofil::record {

using namespace drain_impl;

// Watches pid's end (a pidfd) if it is not watched yet; whether it is. Where pidfd_open is
// missing (Linux before 5.3) or refused, the agent flushes at its exit as before.
bool Drainer::State::watch(pid_t pid) {
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
void Drainer::State::gone(pid_t pid) {
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

// Drains e to the end and closes it; its file too once no event counts into it (a run of
// many processes holds only the files of those that sample now).
void Drainer::State::close_event(Event* e) {
  finalize(e);
  release(e);
}

// An event that the kernel ended (POLLHUP: its thread exited, or an exec removed it,
// perf.hpp's remove_on_exec), drained to its end and closed. The last of a forked child
// without its own file (pending), which makes no flush at its exec (and none at an _exit),
// completes the file made for its samples, if any, as kFlushFinish would: its end now, its
// CPU time the process's at its first event's opening (Proc::cpu_base) plus this counter
// (a child's time since the fork; exact for one thread, the usual fork-then-exec child).
void Drainer::State::event_ended(Event* e) {
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
void Drainer::State::end_ended_events_of(pid_t pid) {
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

// Frees a finalized e: its ring, fds, its process's entry with the last, its file with the
// last user.
void Drainer::State::release(Event* e) {
  munmap(e->ring, e->ring_bytes);
  close(e->fd);
  if (e->sched_fd >= 0) close(e->sched_fd);
  if (const auto p = procs.find(e->pid); p != procs.end() && --p->second.events == 0)
    procs.erase(p);
  File* f = e->file;
  delete e;
  if (f) unuse(f);
}

}  // namespace sprofil::record
