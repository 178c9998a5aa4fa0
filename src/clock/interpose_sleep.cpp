// Interposed waiting calls, for the sampler clock (sampler.cpp): its timers run on
// CLOCK_MONOTONIC and may expire while a thread waits, and a signal would cut the wait short
// (nanosleep, poll, select, epoll_wait, thrd_sleep, pause and the System V IPC waits semop,
// semtimedop, msgrcv and msgsnd return EINTR whatever SA_RESTART says: signal(7)). While the
// sampler clock runs, each of these blocks sprofil's signal for the length of the call (Quiet,
// quiet.hpp; the calls that take a mask get it added to theirs, as sigsuspend does in
// interpose_signals.cpp). With any other clock each costs one atomic load. pause waits as
// sigsuspend does with every clock: in the thread's mask with sprofil's signal added. glibc's
// sleep, usleep and thrd_sleep call nanosleep internally (not through the PLT): each has its
// own interposer. Sockets with a timeout are interpose_sockets.cpp's. Raw system calls are not
// covered; their exposure is bounded by parking (sampler.cpp). The waits that SA_RESTART
// restarts (futexes: sem_wait, pthread_cond_timedwait; read, wait) need nothing. All are
// async-signal-safe where the real ones are (rt_sigprocmask and atomics only).
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/msg.h>
#include <sys/select.h>
#include <sys/sem.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "clock/clock.hpp"
#include "clock/interpose.hpp"
#include "clock/quiet.hpp"
#include "clock/runtime.hpp"
#include "util/export.hpp"

namespace sprofil::rt {
namespace {

// A call's own mask with sprofil's signal added (null stays null: Quiet covers it).
const sigset_t* with_ours(const sigset_t* mask, sigset_t* copy) {
  const int s = current_signal();
  if (!mask || s <= 0 || !sampler_runs() || sigismember(mask, s) == 1) return mask;
  *copy = *mask;
  sigaddset(copy, s);
  return copy;
}

#define SPROFIL_REAL_(name, type)          \
  static std::atomic<type> cache{nullptr}; \
  const type real = real_fn(cache, name)

}  // namespace
}  // namespace sprofil::rt

using sprofil::rt::Quiet;
using sprofil::rt::real_fn;
using sprofil::rt::with_ours;

SPROFIL_EXPORT int nanosleep(const timespec* req, timespec* rem) {
  using fn = int (*)(const timespec*, timespec*);
  SPROFIL_REAL_("nanosleep", fn);
  Quiet q;
  return real(req, rem);
}

SPROFIL_EXPORT int clock_nanosleep(clockid_t c, int flags, const timespec* req, timespec* rem) {
  using fn = int (*)(clockid_t, int, const timespec*, timespec*);
  SPROFIL_REAL_("clock_nanosleep", fn);
  Quiet q;
  return real(c, flags, req, rem);
}

SPROFIL_EXPORT unsigned int sleep(unsigned int s) {
  using fn = unsigned int (*)(unsigned int);
  SPROFIL_REAL_("sleep", fn);
  Quiet q;
  return real(s);
}

SPROFIL_EXPORT int usleep(useconds_t us) {
  using fn = int (*)(useconds_t);
  SPROFIL_REAL_("usleep", fn);
  Quiet q;
  return real(us);
}

SPROFIL_EXPORT int poll(pollfd* fds, nfds_t n, int timeout) {
  using fn = int (*)(pollfd*, nfds_t, int);
  SPROFIL_REAL_("poll", fn);
  Quiet q;
  return real(fds, n, timeout);
}

SPROFIL_EXPORT int ppoll(pollfd* fds, nfds_t n, const timespec* t, const sigset_t* mask) {
  using fn = int (*)(pollfd*, nfds_t, const timespec*, const sigset_t*);
  SPROFIL_REAL_("ppoll", fn);
  Quiet q;
  sigset_t copy;
  return real(fds, n, t, with_ours(mask, &copy));
}

SPROFIL_EXPORT int select(int n, fd_set* r, fd_set* w, fd_set* e, timeval* t) {
  using fn = int (*)(int, fd_set*, fd_set*, fd_set*, timeval*);
  SPROFIL_REAL_("select", fn);
  Quiet q;
  return real(n, r, w, e, t);
}

SPROFIL_EXPORT int pselect(int n, fd_set* r, fd_set* w, fd_set* e, const timespec* t,
                           const sigset_t* mask) {
  using fn = int (*)(int, fd_set*, fd_set*, fd_set*, const timespec*, const sigset_t*);
  SPROFIL_REAL_("pselect", fn);
  Quiet q;
  sigset_t copy;
  return real(n, r, w, e, t, with_ours(mask, &copy));
}

SPROFIL_EXPORT int epoll_wait(int fd, epoll_event* ev, int n, int timeout) {
  using fn = int (*)(int, epoll_event*, int, int);
  SPROFIL_REAL_("epoll_wait", fn);
  Quiet q;
  return real(fd, ev, n, timeout);
}

SPROFIL_EXPORT int epoll_pwait(int fd, epoll_event* ev, int n, int timeout, const sigset_t* mask) {
  using fn = int (*)(int, epoll_event*, int, int, const sigset_t*);
  SPROFIL_REAL_("epoll_pwait", fn);
  Quiet q;
  sigset_t copy;
  return real(fd, ev, n, timeout, with_ours(mask, &copy));
}

SPROFIL_EXPORT int epoll_pwait2(int fd, epoll_event* ev, int n, const timespec* timeout,
                                const sigset_t* mask) {
  using fn = int (*)(int, epoll_event*, int, const timespec*, const sigset_t*);
  SPROFIL_REAL_("epoll_pwait2", fn);
  if (!real) {  // a glibc before 2.35
    errno = ENOSYS;
    return -1;
  }
  Quiet q;
  sigset_t copy;
  return real(fd, ev, n, timeout, with_ours(mask, &copy));
}

SPROFIL_EXPORT int thrd_sleep(const timespec* req, timespec* rem) {
  using fn = int (*)(const timespec*, timespec*);
  SPROFIL_REAL_("thrd_sleep", fn);
  Quiet q;
  return real(req, rem);
}

// pause ends at any handled signal: it waits in sigsuspend with the thread's mask and
// sprofil's signal added, with every clock (a sample must not end it).
SPROFIL_EXPORT int pause() {
  using fn = int (*)();
  SPROFIL_REAL_("pause", fn);
  using suspend_fn = int (*)(const sigset_t*);
  static std::atomic<suspend_fn> suspend_cache{nullptr};
  const int s = sprofil::rt::current_signal();
  sigset_t mask;
  if (s <= 0 || sprofil::rt::real_sigmask(SIG_BLOCK, nullptr, &mask) != 0) return real();
  sigaddset(&mask, s);
  return real_fn(suspend_cache, "sigsuspend")(&mask);
}

// The System V IPC waits: each may block unless IPC_NOWAIT is given (semop's flags are per
// operation: it is covered whatever they say).
SPROFIL_EXPORT int semop(int id, sembuf* ops, size_t n) {
  using fn = int (*)(int, sembuf*, size_t);
  SPROFIL_REAL_("semop", fn);
  Quiet q;
  return real(id, ops, n);
}

SPROFIL_EXPORT int semtimedop(int id, sembuf* ops, size_t n, const timespec* timeout) {
  using fn = int (*)(int, sembuf*, size_t, const timespec*);
  SPROFIL_REAL_("semtimedop", fn);
  Quiet q;
  return real(id, ops, n, timeout);
}

SPROFIL_EXPORT ssize_t msgrcv(int id, void* msg, size_t size, long type, int flags) {
  using fn = ssize_t (*)(int, void*, size_t, long, int);
  SPROFIL_REAL_("msgrcv", fn);
  Quiet q((flags & IPC_NOWAIT) == 0);
  return real(id, msg, size, type, flags);
}

SPROFIL_EXPORT int msgsnd(int id, const void* msg, size_t size, int flags) {
  using fn = int (*)(int, const void*, size_t, int);
  SPROFIL_REAL_("msgsnd", fn);
  Quiet q((flags & IPC_NOWAIT) == 0);
  return real(id, msg, size, flags);
}
