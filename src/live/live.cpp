// The live I/O service (live.hpp, docs/live.md).
#include "live/live.hpp"

#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "format/layout.hpp"
#include "util/clock_ns.hpp"
#include "util/loaded_object.hpp"
#include "util/mutex.hpp"
#include "util/self_exe.hpp"
#include "util/thread_gone.hpp"

namespace sprofil::live {
namespace {

constexpr int kIoTimeoutMs = 1000;     // per read/write of one client (stall: dropped)
constexpr int kClientBudgetMs = 5000;  // whole exchange with one client
constexpr int kHighFdFloor = 512;      // fds are moved to >= this (or the soft limit's top)

// Moves fd out of the low numbers the program uses (like src/clock's perf fds): to the top
// 64 of the soft NOFILE limit when it is large enough, else >= kHighFdFloor when allowed.
int place_fd(int fd) {
  if (fd < 0) return fd;
  rlimit rl;
  if (syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, nullptr, &rl) != 0) return fd;
  const uint64_t soft = rl.rlim_cur;
  int floor = -1;
  if (soft >= 1024 && soft <= (1u << 20))
    floor = static_cast<int>(soft - 64);
  else if (soft > kHighFdFloor + 64u)
    floor = kHighFdFloor;
  if (floor < 0 || fd >= floor) return fd;
  const int nfd = fcntl(fd, F_DUPFD_CLOEXEC, floor);
  if (nfd < 0) return fd;  // no room up there: keep the low one
  close(fd);
  return nfd;
}

// ---------------------------------------------------------------------------------------
// Images

struct ObjectQuery {
  uint64_t addr;
  sprof_region* r;
  bool found;
};

int find_object(dl_phdr_info* info, size_t, void* data) {
  auto* q = static_cast<ObjectQuery*>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const uint64_t lo = info->dlpi_addr + ph.p_vaddr;
    if (q->addr < lo || q->addr >= lo + ph.p_memsz) continue;
    sprof_region* r = q->r;
    r->load_bias = info->dlpi_addr;
    r->file_offset = q->addr - lo + ph.p_offset;
    const char* name = info->dlpi_name;
    char exe[SPROF_PATH_MAX];
    if (!name || !*name) {
      util::self_exe(exe, sizeof exe);
      name = exe;
      r->flags |= SPROF_R_MAIN;
    } else if (util::is_vdso_name(name)) {
      name = "[vdso]";
      r->flags |= SPROF_R_VDSO;
    }
    size_t len = strlen(name);
    if (len > SPROF_PATH_MAX) len = SPROF_PATH_MAX;
    memcpy(r->path, name, len);
    r->path_len = static_cast<uint32_t>(len);
    r->build_id_len = util::build_id_of(info, r->build_id, SPROF_BUILD_ID_MAX);
    q->found = true;
    return 1;
  }
  return 0;
}

uint64_t g_start_ns = 0;  // when the service started (the snapshots' start_ns)

}  // namespace

size_t record_bytes(uint64_t nbins, uint32_t width) {
  return layout::shape_of(nbins, width, false).record_size;
}

bool image_begin(Image* im, size_t total, uint32_t clock, uint64_t tick_ns, uint64_t overflow,
                 uint64_t delivered, uint64_t lost) {
  *im = Image{};
  if (total < SPROF_PAGE) total = SPROF_PAGE;
  im->data = static_cast<uint8_t*>(calloc(1, total));
  if (!im->data) return false;
  im->size = total;
  im->used = SPROF_PAGE;
  auto* h = reinterpret_cast<sprof_header*>(im->data);
  layout::HeaderInfo info;
  info.clock = clock < SPROF_CLOCK_COUNT ? clock : uint32_t{SPROF_CLOCK_CPU};
  info.tick_ns = tick_ns;
  info.start_ns = g_start_ns;
  info.pid = getpid();
  info.ppid = getppid();
  layout::fill_header(h, info);
  h->overflow = overflow;
  h->delivered = delivered;
  h->lost = lost;
  h->cmdline_len = util::read_cmdline(h->cmdline, SPROF_CMDLINE_MAX);
  return true;
}

uint8_t* image_region(Image* im, uint64_t start, uint64_t end, uint32_t bin_size, uint32_t width) {
  if (!im->data || start >= end || bin_size == 0) return nullptr;
  const layout::RegionShape shape = layout::region_shape(end - start, bin_size, width, false);
  if (shape.record_size > im->size - im->used) return nullptr;
  auto* r = reinterpret_cast<sprof_region*>(im->data + im->used);
  layout::RegionInfo info;
  info.start = start;
  info.end = end;
  info.bin_size = bin_size;
  info.counter_width = width;
  info.load_ns = g_start_ns;
  layout::fill_region(r, shape, im->used, info);
  uint8_t* counters = im->data + im->used + shape.counters_at;
  im->used += shape.record_size;
  ++im->count;
  return counters;
}

void image_finish(Image* im) {
  if (!im->data) return;
  auto* h = reinterpret_cast<sprof_header*>(im->data);
  h->region_count = im->count;
  h->regions_end = im->used;
  size_t off = SPROF_PAGE;
  for (uint32_t i = 0; i < im->count; ++i) {
    auto* r = reinterpret_cast<sprof_region*>(im->data + off);
    ObjectQuery q{r->start, r, false};
    dl_iterate_phdr(find_object, &q);
    off += r->record_size;
  }
  im->size = im->used;  // the tail (unused room) is not sent
}

void image_free(Image* im) {
  free(im->data);
  *im = Image{};
}

// ---------------------------------------------------------------------------------------
// The per-user directory

bool user_dir(char* buf, size_t n) {
  const char* xdg = secure_getenv("XDG_RUNTIME_DIR");
  int len;
  if (xdg && xdg[0] == '/')
    len = snprintf(buf, n, "%s/sprofil", xdg);
  else
    len = snprintf(buf, n, "/tmp/sprofil-%u", static_cast<unsigned>(geteuid()));
  if (len < 0 || static_cast<size_t>(len) >= n) {
    errno = ENAMETOOLONG;
    return false;
  }
  if (mkdir(buf, 0700) != 0 && errno != EEXIST) return false;
  // Never through a link: O_NOFOLLOW on the last component, then check what we opened.
  const int fd = open(buf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  const bool ok = fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
                  (st.st_mode & 077) == 0;
  close(fd);
  if (!ok) {
    errno = EPERM;
    return false;
  }
  return true;
}

bool gperf_socket(char* buf, size_t n) {
  if (const char* s = secure_getenv("SPROFIL_GPERF_SOCKET"); s && *s) {
    const int len = snprintf(buf, n, "%s", s);
    return len >= 0 && static_cast<size_t>(len) < n;
  }
  if (!user_dir(buf, n)) return false;
  const size_t len = strlen(buf);
  const int more = snprintf(buf + len, n - len, "/gperf.sock");
  return more >= 0 && static_cast<size_t>(more) < n - len;
}

// ---------------------------------------------------------------------------------------
// The service

namespace {

pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;  // the source; held while it runs
Source g_source = nullptr;
void* g_ctx = nullptr;
bool g_started = false;  // in this process (guarded by g_mu)
int g_listen = -1;
char g_sock_path[sizeof(sockaddr_un::sun_path)];
pid_t g_sock_pid = 0;  // the process that created g_sock_path (removed only by it)
bool g_hooks = false;

// Waits until fd is ready for `events` or the deadline passes.
bool wait_fd(int fd, short events, uint64_t deadline) {
  for (;;) {
    const uint64_t now = util::clock_ns(CLOCK_MONOTONIC);
    if (now >= deadline) return false;
    uint64_t ms = (deadline - now) / 1000000 + 1;
    if (ms > kIoTimeoutMs) ms = kIoTimeoutMs;
    pollfd p{fd, events, 0};
    const int r = poll(&p, 1, static_cast<int>(ms));
    if (r > 0) return true;
    if (r == 0) return false;  // one timeout without progress: the peer stalls
    if (errno != EINTR) return false;
  }
}

bool send_all(int fd, const void* data, size_t n, uint64_t deadline) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && wait_fd(fd, POLLOUT, deadline))
      continue;
    return false;
  }
  return true;
}

bool recv_all(int fd, void* data, size_t n, uint64_t deadline) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    const ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return false;
    if (errno == EINTR) continue;
    if ((errno == EAGAIN || errno == EWOULDBLOCK) && wait_fd(fd, POLLIN, deadline)) continue;
    return false;
  }
  return true;
}

void answer(int fd, uint32_t status, const void* payload, size_t n, uint64_t deadline) {
  Message m{};
  memcpy(m.magic, kAnswerMagic, 4);
  m.version = kVersion;
  m.op_or_status = status;
  m.length = n;
  if (send_all(fd, &m, sizeof m, deadline) && n) send_all(fd, payload, n, deadline);
}

void answer_text(int fd, uint32_t status, const char* text, uint64_t deadline) {
  answer(fd, status, text, strlen(text), deadline);
}

void serve_with(int fd, Source source, void* ctx) {
  const uint64_t deadline = util::clock_ns(CLOCK_MONOTONIC) + kClientBudgetMs * 1000000ull;
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
      (cred.uid != geteuid() && cred.uid != 0)) {
    answer_text(fd, kRefused, "refused: the profiled process belongs to another user", deadline);
    return;
  }
  Message req;
  if (!recv_all(fd, &req, sizeof req, deadline)) return;  // stalled or gone: drop it
  if (memcmp(req.magic, kRequestMagic, 4) != 0 || req.reserved != 0)
    return answer_text(fd, kBadRequest, "bad request: not the sprofil live protocol", deadline);
  if (req.version != kVersion)
    return answer_text(fd, kBadVersion, "unsupported protocol version (this process speaks 1)",
                       deadline);
  if (req.op_or_status != kOpSnapshot || req.length != 0)
    return answer_text(fd, kBadRequest, "bad request: unknown operation", deadline);
  Image im;
  const bool have = source(ctx, &im);
  if (!have) return answer_text(fd, kNoData, "no profile to serve yet", deadline);
  answer(fd, kOk, im.data, im.size, deadline);
  image_free(&im);
}

// The process's own source, under g_mu.
bool current_source(void*, Image* im) {
  util::MutexGuard lock(&g_mu);
  return g_source && g_source(g_ctx, im);
}

void serve_client(int fd) {
  serve_with(fd, current_source, nullptr);
}

char g_dir[sizeof(sockaddr_un::sun_path)];  // the per-user directory (set by launch)

// Removes the sockets of processes that are gone (killed, or ended with _exit: no atexit),
// so the directory does not fill with them: only "<digits>.sock" sockets of ours whose pid
// no longer exists. Bounded: at most 4096 entries looked at.
void sweep_stale() {
  const int dfd = open(g_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) return;
  DIR* d = fdopendir(dfd);
  if (!d) {
    close(dfd);
    return;
  }
  int seen = 0;
  while (dirent* e = readdir(d)) {
    if (++seen > 4096) break;
    char* end = nullptr;
    const long pid = strtol(e->d_name, &end, 10);
    if (pid <= 0 || end == e->d_name || strcmp(end, ".sock") != 0) continue;
    if (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    struct stat st;
    if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISSOCK(st.st_mode) &&
        st.st_uid == geteuid())
      unlinkat(dfd, e->d_name, 0);
  }
  closedir(d);
}

// pause(): the I/O thread closes the listening fd and says it ended.
std::atomic<bool> g_pausing{false}, g_io_ended{false};
std::atomic<pid_t> g_io_tid{0};  // the I/O thread's (0: none started)
// The connection the I/O thread serves (-1: none), which pause() shuts down so that the thread
// ends at once. Under g_client_mu: the thread clears it before it closes the fd, so a shutdown
// never reaches a number the program has reused since.
pthread_mutex_t g_client_mu = PTHREAD_MUTEX_INITIALIZER;
int g_client = -1;

void* io_thread(void* arg) {
  g_io_tid.store(static_cast<pid_t>(syscall(SYS_gettid)), std::memory_order_release);
  const int lfd = static_cast<int>(reinterpret_cast<intptr_t>(arg));
  sweep_stale();
  for (;;) {
    // Waits in poll, not in accept: a blocked accept holds the lowest free descriptor number
    // (the kernel takes it before it waits), and the program's next open would get another
    // number than natively. The listening socket is non-blocking (launch).
    // A shut-down socket (retire, pause) polls as hung up, where a non-blocking accept would
    // say EAGAIN for ever: it is the socket gone, below.
    pollfd ready{lfd, POLLIN, 0};
    if (poll(&ready, 1, -1) < 0 && errno == EINTR) continue;
    const bool gone = (ready.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0;
    const int c = gone ? (errno = EINVAL, -1)
                       : place_fd(accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (c < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        const timespec pause{0, 50 * 1000000};  // let the fds come back, do not spin
        nanosleep(&pause, nullptr);
        continue;
      }
      // The socket is gone: retired (the fd stays: a close the filter may deny), or paused,
      // where the fd is this thread's to close (the program may reuse its number at once).
      if (g_pausing.load(std::memory_order_acquire)) {
        close(lfd);
        g_io_ended.store(true, std::memory_order_release);
      }
      return nullptr;
    }
    {
      util::MutexGuard lock(&g_client_mu);
      g_client = c;
    }
    if (!g_pausing.load(std::memory_order_acquire)) serve_client(c);
    {
      util::MutexGuard lock(&g_client_mu);
      g_client = -1;
    }
    close(c);
  }
}

void remove_socket() {
  if (g_sock_path[0] && g_sock_pid == getpid()) unlink(g_sock_path);
}

// Creates this process's socket and thread. g_mu held.
int launch() {
  char dir[sizeof g_sock_path];
  if (!user_dir(dir, sizeof dir)) return errno;
  memcpy(g_dir, dir, sizeof g_dir);
  char path[sizeof g_sock_path];
  const int len = snprintf(path, sizeof path, "%s/%d.sock", dir, static_cast<int>(getpid()));
  if (len < 0 || static_cast<size_t>(len) >= sizeof path) return ENAMETOOLONG;
  const int fd = place_fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (fd < 0) return errno;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  memcpy(a.sun_path, path, static_cast<size_t>(len) + 1);
  unlink(path);  // a stale socket of an earlier process with our pid
  // Made with the program's umask, then owner-only. Not under umask(077): the umask is the
  // process's, and a file another thread of the program made meanwhile would get the wrong
  // mode. Until the chmod the directory (user_dir: ours, 0700) keeps others out.
  const int b = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  if (b == 0) chmod(path, 0600);
  if (b != 0 || listen(fd, 128) != 0) {
    const int e = errno;
    close(fd);
    return e;
  }
  // The thread blocks every signal but the ones sprofil's sampling clock may use (SIGPROF,
  // the real-time signals: src/clock picks one) and the synchronous faults: signals sent to
  // the process go to the program's threads, and the runtime never finds its signal blocked
  // here (it would warn). A fault raised by this thread itself reaches the program's handler
  // as it would from any thread (blocked, the kernel would kill the process unseen).
  // It is sampled only while it serves (it sleeps in accept otherwise).
  sigset_t all, saved;
  sigfillset(&all);
  sigdelset(&all, SIGPROF);
  for (int s = SIGRTMIN; s <= SIGRTMAX; ++s) sigdelset(&all, s);
  constexpr int kFaults[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS};
  for (int s : kFaults) sigdelset(&all, s);
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_t t;
  const int e = pthread_create(&t, &attr, io_thread, reinterpret_cast<void*>(intptr_t{fd}));
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  if (e != 0) {
    close(fd);
    unlink(path);
    return e;
  }
#ifdef __GLIBC__
  pthread_setname_np(t, "sprofil-live");
#endif
  memcpy(g_sock_path, path, static_cast<size_t>(len) + 1);
  g_sock_pid = getpid();
  g_listen = fd;
  g_started = true;
  return 0;
}

// g_mu is held across fork (never fork while the I/O thread is inside a source).
using ForkSafe = util::ForkSafeMutex<&g_mu>;
bool g_retired = false;  // retire(): nothing more in this process or its children (g_mu)

void atfork_child() {
  ForkSafe::child();
  // The client the parent's thread was serving: its fd is not the child's to keep (no thread
  // here serves it), and the lock may have been held by that thread.
  pthread_mutex_init(&g_client_mu, nullptr);
  if (g_client >= 0) close(g_client);
  g_client = -1;
  if (g_retired) return;
  // The parent's socket and thread are not ours: close the fd, keep the parent's file.
  if (g_listen >= 0) close(g_listen);
  g_listen = -1;
  const bool was = g_started;
  g_started = false;
  g_sock_path[0] = '\0';
  if (was && g_source) launch();
}

}  // namespace

void serve_connection(int fd, Source source, void* ctx) {
  serve_with(fd, source, ctx);
}

int start(Source source, void* ctx) {
  util::MutexGuard lock(&g_mu);
  if (g_start_ns == 0) g_start_ns = util::clock_ns(CLOCK_REALTIME);
  g_source = source;
  g_ctx = ctx;
  int e = 0;
  if (!g_started) {
    e = launch();
    if (e == 0 && !g_hooks) {
      g_hooks = true;
      atexit(remove_socket);
      pthread_atfork(ForkSafe::prepare, ForkSafe::parent, atfork_child);
    }
  }
  return e;
}

void retire() {
  util::MutexGuard lock(&g_mu);
  g_retired = true;
  g_source = nullptr;
  g_ctx = nullptr;
  if (!g_started || g_sock_pid != getpid()) return;
  shutdown(g_listen, SHUT_RDWR);  // the thread's accept4 fails: it returns
  unlink(g_sock_path);
  g_sock_path[0] = '\0';  // remove_socket at exit: nothing
  g_started = false;
}

bool pause() {
  {
    util::MutexGuard lock(&g_mu);
    if (g_retired || !g_started || g_sock_pid != getpid()) return false;
    g_io_ended.store(false);
    g_pausing.store(true, std::memory_order_release);
    shutdown(g_listen, SHUT_RDWR);  // its accept4 fails: the thread closes the fd and returns
    unlink(g_sock_path);
    g_sock_path[0] = '\0';
    g_listen = -1;
    g_started = false;
  }
  // The client it serves is cut off: its exchange fails at once (the tools say the snapshot
  // failed), where it held the thread up to kClientBudgetMs.
  {
    util::MutexGuard lock(&g_client_mu);
    if (g_client >= 0) shutdown(g_client, SHUT_RDWR);
  }
  // Its end (without g_mu, which a source it is serving takes). The wait is bounded by a
  // client's budget and a second for the thread to be scheduled. It was 20 ms, and a thread
  // that lived on through the caller's call broke it: a credential change that glibc applies
  // to every thread (setresgid after setpriv's capset, which gave back the capabilities to the
  // calling thread alone) failed in that thread and glibc aborted the program (a CI run under
  // load; a client connected: tests/harm `NoHarm.PrivilegeDropWhileALiveClientIsServedAs
  // Natively`).
  const uint64_t until = util::clock_ns(CLOCK_MONOTONIC) + (kClientBudgetMs + 1000) * 1000000ull;
  while (!g_io_ended.load(std::memory_order_acquire) && util::clock_ns(CLOCK_MONOTONIC) < until) {
    const timespec tick{0, 100 * 1000};
    nanosleep(&tick, nullptr);
  }
  // It said it ended a moment before it leaves the process: gone from it too (the caller's
  // call may need a process of one thread).
  if (g_io_ended.load(std::memory_order_acquire))
    util::wait_thread_gone(g_io_tid.exchange(0), until);
  return true;
}

void resume() {
  util::MutexGuard lock(&g_mu);
  g_pausing.store(false, std::memory_order_release);
  if (!g_retired && !g_started && g_source) launch();
}

void forget(Source source, void* ctx) {
  util::MutexGuard lock(&g_mu);
  if (g_source == source && g_ctx == ctx) {
    g_source = nullptr;
    g_ctx = nullptr;
  }
}

int push(const Image& im, int timeout_ms) {
  char path[sizeof(sockaddr_un::sun_path)];
  if (!gperf_socket(path, sizeof path)) return errno ? errno : ENAMETOOLONG;
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return errno;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  memcpy(a.sun_path, path, strlen(path) + 1);
  // Unix-domain connect never waits with SOCK_NONBLOCK: no server -> ENOENT/ECONNREFUSED,
  // a full backlog -> EAGAIN: all "no server to take it now".
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    const int e = errno;
    close(fd);
    return e == EAGAIN ? ECONNREFUSED : e;
  }
  const uint64_t deadline =
      util::clock_ns(CLOCK_MONOTONIC) + static_cast<uint64_t>(timeout_ms) * 1000000u;
  Message m{};
  memcpy(m.magic, kRequestMagic, 4);
  m.version = kVersion;
  m.op_or_status = kOpPush;
  m.length = im.size;
  const bool ok = send_all(fd, &m, sizeof m, deadline) && send_all(fd, im.data, im.size, deadline);
  close(fd);
  return ok ? 0 : ETIMEDOUT;
}

}  // namespace sprofil::live
