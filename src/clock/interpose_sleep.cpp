// Interposed sleeping calls, for the sampler clock (sampler.cpp): its timers run on
// CLOCK_MONOTONIC and may expire while a thread waits, and a signal would cut the wait short
// (nanosleep, poll, select and epoll_wait return EINTR whatever SA_RESTART says). While the
// sampler clock runs, each of these blocks sprofil's signal for the length of the call (the
// calls that take a mask get it added to theirs, as sigsuspend does in interpose_signals.cpp);
// an expiry during the wait is taken when the call returns, late, and credits nothing. With
// any other clock each costs one atomic load. glibc's sleep and usleep call nanosleep
// internally (not through the PLT): each has its own interposer. Raw system calls and
// libc-internal waits (sem_wait, pthread_cond_timedwait: futexes) are not covered; their
// exposure is bounded by parking (sampler.cpp). All are async-signal-safe where the real ones
// are (rt_sigprocmask and atomics only).
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "clock/clock.hpp"
#include "clock/interpose.hpp"
#include "util/export.hpp"
#include "util/nocopy.hpp"

namespace sprofil::rt {
namespace {

// Blocks sprofil's signal in this thread for its lifetime when the sampler clock runs.
class Quiet : sprofil::util::NoCopy {
 public:
  Quiet() {
    const int s = current_signal();
    if (s <= 0 || !sampler_runs()) return;
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, s);
    on_ = real_sigmask(SIG_BLOCK, &one, &old_) == 0;
  }
  ~Quiet() {
    if (!on_) return;
    const int e = errno;
    real_sigmask(SIG_SETMASK, &old_, nullptr);
    errno = e;
  }

 private:
  bool on_ = false;
  sigset_t old_;
};

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
