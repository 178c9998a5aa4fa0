// Interposed socket and descriptor calls, for the sampler clock (sampler.cpp): on a socket with a
// receive timeout (SO_RCVTIMEO) a blocking read, recv, recvfrom, recvmsg, recvmmsg or accept,
// and on one with a send timeout (SO_SNDTIMEO) a blocking write, send, sendto, sendmsg,
// sendmmsg or connect, returns EINTR when a handled signal arrives, whatever SA_RESTART says
// (signal(7); the kernel's sock_intr_errno). The sampler clock's timers run on CLOCK_MONOTONIC
// and may expire while a thread waits in one, so while it runs such a call blocks sprofil's
// signal for its length (Quiet, quiet.hpp). Calls on descriptors without a timeout are left
// alone: a call costs one atomic load with any other clock, and a table lookup under the sampler.
//
// Which descriptors have a timeout: a byte per descriptor below 65536, "unknown" until a call
// that may wait asks getsockopt once. setsockopt of a timeout, close, dup, dup2 and dup3 make the
// descriptor's byte unknown again, and accept makes the new one's unknown. Descriptors at 65536
// and above ask getsockopt at each such call. Not seen: a descriptor closed inside libc (fclose)
// whose number is then given, by fcntl(F_DUPFD) or SCM_RIGHTS, to a socket with a timeout
// keeps its old byte; a socket read through stdio (libc's internal read) is not covered. Raw
// system calls are not covered either; parking bounds their exposure (sampler.cpp).
//
// The real functions are looked up at load (constructor): a program may call write in a signal
// handler, where dlsym may not run. Async-signal-safe where the real ones are: atomics,
// getsockopt and rt_sigprocmask; errno is kept.
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "clock/clock.hpp"
#include "clock/interpose.hpp"
#include "clock/quiet.hpp"
#include "util/export.hpp"

namespace sprofil::rt {
namespace {

constexpr int kTable = 1 << 16;
constexpr unsigned char kKnown = 1, kRecv = 2, kSend = 4;
constinit std::atomic<unsigned char> g_state[kTable]{};

bool has_timeout(int fd, int option, bool* socket) {
  timeval tv{};
  socklen_t len = sizeof tv;
  const bool ok = getsockopt(fd, SOL_SOCKET, option, &tv, &len) == 0;
  *socket = ok || errno != ENOTSOCK;
  return ok && (tv.tv_sec != 0 || tv.tv_usec != 0);
}

unsigned char ask(int fd) {
  const int e = errno;
  errno = 0;  // (the program's last error is not getsockopt's)
  bool socket = false;
  unsigned char s = kKnown;
  if (has_timeout(fd, SO_RCVTIMEO, &socket)) s |= kRecv;
  if (socket && has_timeout(fd, SO_SNDTIMEO, &socket)) s |= kSend;
  if (errno == EBADF) s = 0;  // no descriptor: nothing to remember
  errno = e;
  return s;
}

unsigned char state(int fd) {
  unsigned char s = fd < kTable ? g_state[fd].load(std::memory_order_relaxed) : 0;
  if ((s & kKnown) == 0) {
    s = ask(fd);
    if (fd < kTable) g_state[fd].store(s, std::memory_order_relaxed);
  }
  return s;
}

// Whether a call on fd that may wait may be ended by a sample: the sampler clock runs and the
// socket has a timeout in this direction (kRecv, kSend). Inline: with any other clock one load.
inline bool timed(int fd, unsigned char direction) {
  return sampler_runs() && fd >= 0 && (state(fd) & direction) != 0;
}

void forget(int fd) {
  if (fd >= 0 && fd < kTable) g_state[fd].store(0, std::memory_order_relaxed);
}

bool waits(int flags) {
  return (flags & MSG_DONTWAIT) == 0;
}

#define SPROFIL_SOCKET_CALLS_(X)                                                       \
  X(read, ssize_t, (int, void*, size_t))                                               \
  X(readv, ssize_t, (int, const iovec*, int))                                          \
  X(__read_chk, ssize_t, (int, void*, size_t, size_t))                                 \
  X(recv, ssize_t, (int, void*, size_t, int))                                          \
  X(__recv_chk, ssize_t, (int, void*, size_t, size_t, int))                            \
  X(recvfrom, ssize_t, (int, void*, size_t, int, sockaddr*, socklen_t*))               \
  X(__recvfrom_chk, ssize_t, (int, void*, size_t, size_t, int, sockaddr*, socklen_t*)) \
  X(recvmsg, ssize_t, (int, msghdr*, int))                                             \
  X(recvmmsg, int, (int, mmsghdr*, unsigned, int, timespec*))                          \
  X(accept, int, (int, sockaddr*, socklen_t*))                                         \
  X(accept4, int, (int, sockaddr*, socklen_t*, int))                                   \
  X(write, ssize_t, (int, const void*, size_t))                                        \
  X(writev, ssize_t, (int, const iovec*, int))                                         \
  X(send, ssize_t, (int, const void*, size_t, int))                                    \
  X(sendto, ssize_t, (int, const void*, size_t, int, const sockaddr*, socklen_t))      \
  X(sendmsg, ssize_t, (int, const msghdr*, int))                                       \
  X(sendmmsg, int, (int, mmsghdr*, unsigned, int))                                     \
  X(connect, int, (int, const sockaddr*, socklen_t))                                   \
  X(setsockopt, int, (int, int, int, const void*, socklen_t))                          \
  X(close, int, (int))                                                                 \
  X(dup, int, (int))                                                                   \
  X(dup2, int, (int, int))                                                             \
  X(dup3, int, (int, int, int))

#define SPROFIL_CACHE_(name, ret, args) std::atomic<ret(*) args> g_##name{nullptr};
SPROFIL_SOCKET_CALLS_(SPROFIL_CACHE_)
#undef SPROFIL_CACHE_

__attribute__((constructor(101))) void resolve_socket_calls() {
#define SPROFIL_RESOLVE_(name, ret, args) (void)real_fn(g_##name, #name);
  SPROFIL_SOCKET_CALLS_(SPROFIL_RESOLVE_)
#undef SPROFIL_RESOLVE_
}

}  // namespace
}  // namespace sprofil::rt

using namespace sprofil::rt;

namespace {

// The real function, looked up at load (resolve_socket_calls); out of line where it was not yet.
template <class F>
__attribute__((noinline)) F resolve(std::atomic<F>& cache, const char* name) {
  return real_fn(cache, name);
}
template <class F>
inline F real_of(std::atomic<F>& cache, const char* name) {
  const F f = cache.load(std::memory_order_acquire);
  return f ? f : resolve(cache, name);
}

// Under the sampler clock: the call, with sprofil's signal blocked around it where it may wait
// (`may_wait`: no MSG_DONTWAIT) on fd with a timeout in `direction`, or where `timed_anyway`
// (recvmmsg's own timeout).
template <class F, class... A>
__attribute__((noinline)) auto sampled_call(bool may_wait, bool timed_anyway, int fd,
                                            unsigned char direction, F real, A... args) {
  Quiet q(may_wait && (timed_anyway || timed(fd, direction)));
  return real(args...);
}

}  // namespace

#define SPROFIL_REAL_(name) real_of(g_##name, #name)

// The real call. With any clock but the sampler a call after one load, no more.
#define SPROFIL_PASS_(name, may_wait, timed_anyway, fd, direction, ...) \
  const auto real = SPROFIL_REAL_(name);                                \
  if (!sampler_runs()) return real(__VA_ARGS__);                        \
  return sampled_call(may_wait, timed_anyway, fd, direction, real, __VA_ARGS__)

SPROFIL_EXPORT ssize_t read(int fd, void* buf, size_t n) {
  SPROFIL_PASS_(read, true, false, fd, kRecv, fd, buf, n);
}

SPROFIL_EXPORT ssize_t readv(int fd, const iovec* iov, int n) {
  SPROFIL_PASS_(readv, true, false, fd, kRecv, fd, iov, n);
}

// The _FORTIFY_SOURCE forms: glibc's own call the internal read and recv, not through the PLT.
SPROFIL_EXPORT ssize_t __read_chk(int fd, void* buf, size_t n, size_t size) {
  SPROFIL_PASS_(__read_chk, true, false, fd, kRecv, fd, buf, n, size);
}

SPROFIL_EXPORT ssize_t recv(int fd, void* buf, size_t n, int flags) {
  SPROFIL_PASS_(recv, waits(flags), false, fd, kRecv, fd, buf, n, flags);
}

SPROFIL_EXPORT ssize_t __recv_chk(int fd, void* buf, size_t n, size_t size, int flags) {
  SPROFIL_PASS_(__recv_chk, waits(flags), false, fd, kRecv, fd, buf, n, size, flags);
}

SPROFIL_EXPORT ssize_t recvfrom(int fd, void* buf, size_t n, int flags, sockaddr* from,
                                socklen_t* len) {
  SPROFIL_PASS_(recvfrom, waits(flags), false, fd, kRecv, fd, buf, n, flags, from, len);
}

SPROFIL_EXPORT ssize_t __recvfrom_chk(int fd, void* buf, size_t n, size_t size, int flags,
                                      sockaddr* from, socklen_t* len) {
  SPROFIL_PASS_(__recvfrom_chk, waits(flags), false, fd, kRecv, fd, buf, n, size, flags, from, len);
}

SPROFIL_EXPORT ssize_t recvmsg(int fd, msghdr* msg, int flags) {
  SPROFIL_PASS_(recvmsg, waits(flags), false, fd, kRecv, fd, msg, flags);
}

// recvmmsg's own timeout ends it with EINTR on a signal too (signal(7)).
SPROFIL_EXPORT int recvmmsg(int fd, mmsghdr* vec, unsigned n, int flags, timespec* timeout) {
  SPROFIL_PASS_(recvmmsg, waits(flags), timeout != nullptr, fd, kRecv, fd, vec, n, flags, timeout);
}

SPROFIL_EXPORT int accept(int fd, sockaddr* addr, socklen_t* len) {
  int r;
  {
    Quiet q(timed(fd, kRecv));
    r = SPROFIL_REAL_(accept)(fd, addr, len);
  }
  forget(r);  // it inherits the listener's timeouts, and its number may have held another file
  return r;
}

SPROFIL_EXPORT int accept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
  int r;
  {
    Quiet q(timed(fd, kRecv));
    r = SPROFIL_REAL_(accept4)(fd, addr, len, flags);
  }
  forget(r);
  return r;
}

SPROFIL_EXPORT ssize_t write(int fd, const void* buf, size_t n) {
  SPROFIL_PASS_(write, true, false, fd, kSend, fd, buf, n);
}

SPROFIL_EXPORT ssize_t writev(int fd, const iovec* iov, int n) {
  SPROFIL_PASS_(writev, true, false, fd, kSend, fd, iov, n);
}

SPROFIL_EXPORT ssize_t send(int fd, const void* buf, size_t n, int flags) {
  SPROFIL_PASS_(send, waits(flags), false, fd, kSend, fd, buf, n, flags);
}

SPROFIL_EXPORT ssize_t sendto(int fd, const void* buf, size_t n, int flags, const sockaddr* to,
                              socklen_t len) {
  SPROFIL_PASS_(sendto, waits(flags), false, fd, kSend, fd, buf, n, flags, to, len);
}

SPROFIL_EXPORT ssize_t sendmsg(int fd, const msghdr* msg, int flags) {
  SPROFIL_PASS_(sendmsg, waits(flags), false, fd, kSend, fd, msg, flags);
}

SPROFIL_EXPORT int sendmmsg(int fd, mmsghdr* vec, unsigned n, int flags) {
  SPROFIL_PASS_(sendmmsg, waits(flags), false, fd, kSend, fd, vec, n, flags);
}

// connect waits as long as the send timeout says (the kernel's inet_stream_connect).
SPROFIL_EXPORT int connect(int fd, const sockaddr* addr, socklen_t len) {
  SPROFIL_PASS_(connect, true, false, fd, kSend, fd, addr, len);
}

SPROFIL_EXPORT int setsockopt(int fd, int level, int option, const void* value,
                              socklen_t len) __THROW {
  const int r = SPROFIL_REAL_(setsockopt)(fd, level, option, value, len);
  if (r == 0 && level == SOL_SOCKET &&
      (option == SO_RCVTIMEO_OLD || option == SO_SNDTIMEO_OLD || option == SO_RCVTIMEO_NEW ||
       option == SO_SNDTIMEO_NEW))
    forget(fd);
  return r;
}

SPROFIL_EXPORT int close(int fd) {
  const int r = SPROFIL_REAL_(close)(fd);
  forget(fd);  // closed even when it fails with EINTR (Linux)
  return r;
}

SPROFIL_EXPORT int dup(int fd) __THROW {
  const int r = SPROFIL_REAL_(dup)(fd);
  forget(r);
  return r;
}

SPROFIL_EXPORT int dup2(int fd, int to) __THROW {
  const int r = SPROFIL_REAL_(dup2)(fd, to);
  if (r >= 0) forget(to);
  return r;
}

SPROFIL_EXPORT int dup3(int fd, int to, int flags) __THROW {
  const int r = SPROFIL_REAL_(dup3)(fd, to, flags);
  if (r >= 0) forget(to);
  return r;
}
