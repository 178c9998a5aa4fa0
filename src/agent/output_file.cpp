// The profile file of this process image, created as format/profile_file.hpp defines (a
// private temporary in the target directory, renamed into place under its name), or, for a
// forked child in drain mode, by the record parent. The agent holds no file descriptor after
// start-up: when the file must grow (dlopen) or be completed (exit, exec) it re-opens it by
// its absolute path and uses it only if it is still the file it created (st_dev, st_ino).
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "agent/state.hpp"
#include "clock/perf.hpp"
#include "format/profile_file.hpp"
#include "util/message.hpp"
#include "util/release_space.hpp"

namespace sprofil::agent {
namespace {

bool g_quiet = false;
bool g_detached = false;  // the file at g_path is not ours any more: nothing goes into it
dev_t g_dev = 0;          // the file the agent created
ino_t g_ino = 0;
char g_path[PATH_MAX];    // the profile's absolute path
const char* g_base = "";  // SPROFIL_OUTPUT, made absolute at start (the settings' string)

}  // namespace

void set_quiet(bool quiet) {
  g_quiet = quiet;
}

// Under `sprofil record` (SPROFIL_RECORD) the output's directory is the run's, which record
// removes when the run ends. A process that outlives the run (a background job, a daemon, a
// program one of them starts later) finds it gone: it is not profiled (no file can be made),
// and says nothing, for its stderr is the program's (natively nothing is printed there).
// Signal-safe.
bool run_is_over() {
  if (!env("SPROFIL_RECORD") || !*g_base) return false;
  char dir[PATH_MAX];
  const char* slash = strrchr(g_base, '/');
  const size_t n = slash ? static_cast<size_t>(slash - g_base) : 0;
  if (n == 0 || n >= sizeof dir) return false;
  memcpy(dir, g_base, n);
  dir[n] = '\0';
  const int saved = errno;
  struct stat st;
  const bool gone = stat(dir, &st) != 0 && errno == ENOENT;
  errno = saved;
  return gone;
}

void say(const char* fmt, const char* a, const char* b) {
  if (g_quiet || run_is_over()) return;
  char line[1024];
  const int n = snprintf(line, sizeof line, fmt, a, b);  // a long path may be cut short
  if (n > 0) util::message(line, std::min(static_cast<size_t>(n), sizeof line - 1));
}

void set_output_base(const char* absolute_base) {
  g_base = absolute_base;
}

const char* output_path() {
  return g_path;
}

// Whether [0, end) fits under RLIMIT_FSIZE: growing a file past it raises SIGXFSZ.
bool fits_fsize(uint64_t end) {
  rlimit rl;
  if (getrlimit(RLIMIT_FSIZE, &rl) != 0) return false;
  return rl.rlim_cur == RLIM_INFINITY || end <= rl.rlim_cur;
}

// Reserves [off, off + len) of the file on disk, so that stores through a shared mapping of it
// can never fault (SIGBUS on a full disk) nor raise SIGXFSZ. The file's size must be `off`.
// Returns 0 or an errno value; on failure the file is cut back to `off`.
int reserve(int fd, uint64_t off, uint64_t len) {
  if (!fits_fsize(off + len)) return EFBIG;
  const int e = posix_fallocate(fd, static_cast<off_t>(off), static_cast<off_t>(len));
  if (e != 0) (void)!ftruncate(fd, static_cast<off_t>(off));
  return e;
}

namespace {
// Grows the file (sparsely) to `end` if it is shorter.
int extend(int fd, uint64_t end) {
  if (!fits_fsize(end)) return EFBIG;
  struct stat st;
  if (fstat(fd, &st) != 0) return errno;
  if (static_cast<uint64_t>(st.st_size) >= end) return 0;
  return ftruncate(fd, static_cast<off_t>(end)) == 0 ? 0 : errno;
}
}  // namespace

// In drain mode the program never writes the arrays: reserving them all (13 MB for cmp-burn4
// at 1-byte bins) and giving back at the exit what no sample wrote made the file system
// allocate and free blocks for every process, which on a file system mounted with `discard`
// (the VM of docs/benchmarks.md) sent the disk discard requests, whose interrupts fell on the
// CPUs the programs ran on (about 5 per process, 40-50 us of a short process's CPU).
int reserve_span(int fd, uint64_t off, uint64_t len) {
  return g_lazy_arrays ? extend(fd, off + len) : reserve(fd, off, len);
}

// A record's page is written (its contents, filled by the caller), not allocated
// (util::write_zeros says why).
int reserve_record(int fd, uint64_t off, uint64_t len, bool spanned, const sprof_region* page) {
  if (!g_lazy_arrays) return spanned ? 0 : reserve(fd, off, len);
  int e = spanned ? 0 : extend(fd, off + len);
  if (e == 0) e = util::write_page<SPROF_PAGE>(fd, off, page);
  if (e != 0) (void)!ftruncate(fd, static_cast<off_t>(off));
  return e;
}

namespace {

// g_base split: its directory (dir[0, dlen)) and its file name.
struct BaseParts {
  char dir[PATH_MAX];
  size_t dlen = 0;
  const char* name = nullptr;
};

void split_base(BaseParts* b) {
  const char* slash = strrchr(g_base, '/');  // g_base is absolute
  b->dlen = slash == g_base ? 1 : static_cast<size_t>(slash - g_base);
  memcpy(b->dir, g_base, b->dlen);
  b->dir[b->dlen] = '\0';
  b->name = slash + 1;
}

// The file `fd` (st), named final_name in b's directory, is this image's profile from now on.
void set_output(const BaseParts& b, const char* final_name, const struct stat& st) {
  // g_path has room for a directory path, a slash and a name.
  size_t at = b.dlen;
  memcpy(g_path, b.dir, b.dlen);
  if (b.dlen > 1) g_path[at++] = '/';
  memcpy(g_path + at, final_name, strlen(final_name) + 1);
  g_dev = st.st_dev;
  g_ino = st.st_ino;
  g_detached = false;
}

}  // namespace

// Creates the profile file for this image and returns its fd (or -1 with errno set), with the
// header's page reserved (format/profile_file.hpp). The first image takes the base name
// itself; a forked child or a later image takes base.PID, or .PID.N, never replacing a file.
// Under `sprofil record` the record parent makes it (drain_proto.hpp's kDrainNewFile): the
// file system's work of making a file is then its time, not the program's; with_event (the
// agent's start), the main thread's perf event goes with the request. Sets g_path, g_dev and
// g_ino.
int create_output(bool first, bool with_event) {
  BaseParts b;
  split_base(&b);
  const int dirfd = open(b.dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) return -1;
  const int pid = first ? 0 : static_cast<int>(getpid());
  char final_name[NAME_MAX + 1];
  int k = 0;
  struct stat st;
  // (Where the header's page would not fit under RLIMIT_FSIZE, the agent finds out itself.)
  // The main thread's event goes with the request where the clock may be the perf clock.
  const bool perf = g_clock.kind == rt::ClockKind::kAuto || g_clock.kind == rt::ClockKind::kPerf;
  int fd = fits_fsize(SPROF_PAGE)
               ? rt::perf::drained_new_file(dirfd, b.name, first, &k,
                                            with_event && perf ? g_clock.interval_ns : 0)
               : -1;
  if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < SPROF_PAGE ||
                  !naming::profile_name(final_name, sizeof final_name, b.name, pid, k))) {
    close(fd);  // cannot happen with a file the parent made as asked
    fd = -1;
  }
  int err = 0;
  if (fd < 0)
    fd = naming::make_profile(dirfd, b.name, pid, final_name, sizeof final_name, &k, &err,
                              [&st](int f) {
                                const int e = reserve(f, 0, SPROF_PAGE);
                                return e == 0 && fstat(f, &st) != 0 ? errno : e;
                              });
  close(dirfd);
  if (fd < 0) {
    errno = err;
    return -1;
  }
  set_output(b, final_name, st);
  return fd;
}

// A forked child's kDrainChildFile / kAddPending fields (drain_proto.hpp): the records it has,
// the fork, the file it was forked with (the parent process's: g_dev and g_ino still name it
// in a pending child) and, with `dir`, a new O_PATH fd of the directory where the files of the
// run are.
bool drain_child(rt::perf::DrainChild* c, BaseParts* b, bool dir) {
  split_base(b);
  c->dirfd = dir ? open(b->dir, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
  c->region_count = g_fork_nfile;
  c->regions_end = g_fork_end;
  c->start_ns = g_fork_ns;
  c->ppid = g_fork_ppid;
  c->name = b->name;
  c->from_dev = g_dev;
  c->from_ino = g_ino;
  return !dir || c->dirfd >= 0;
}

// Drain mode's: whether this process is a forked child without its own file yet (g_pending),
// and with c, its fields (with `dir`, its dirfd too). c->name points into a static buffer
// (g_mu is held).
bool pending_child(rt::perf::DrainChild* c, bool dir) {
  if (!g_pending.load(std::memory_order_acquire)) return false;
  static BaseParts b;
  if (c && !drain_child(c, &b, dir)) c->dirfd = -1;
  return true;
}

// A forked child's file from the record parent (drain mode), made from the parent process's
// file `from`: the one made for its samples already, or a new one, the first g_nfile records
// copied, their space reserved up to g_file_end, the header filled. Its fd, or -1 (the child
// then makes it with create_output).
int drained_child_output(int from) {
  BaseParts b;
  rt::perf::DrainChild c;
  if (!drain_child(&c, &b, true)) return -1;
  int k = 0;
  const int fd = rt::perf::drained_child_file(from, c, &k);
  close(c.dirfd);
  char final_name[NAME_MAX + 1];
  struct stat st;
  if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      st.st_size >= static_cast<off_t>(g_file_end) &&
      naming::profile_name(final_name, sizeof final_name, b.name, static_cast<int>(getpid()), k)) {
    set_output(b, final_name, st);
    return fd;
  }
  if (fd >= 0) close(fd);
  return -1;
}

namespace {
// Opens g_path with `mode` only if it is still the file this process created: the fd, or -1
// with *err the open's errno (0 when the path names another file).
int open_ours(int mode, int* err) {
  const int fd = open(g_path, mode | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  struct stat st;
  if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_dev == g_dev &&
      st.st_ino == g_ino)
    return fd;
  *err = fd >= 0 ? 0 : errno;
  if (fd >= 0) close(fd);
  return -1;
}
}  // namespace

// Re-opens the profile by its path, only if it is still the file this process created;
// -1 otherwise (and from then on nothing is written to that path; said once).
int reopen_output(bool quiet) {
  if (g_detached) return -1;
  int err = 0;
  const int fd = open_ours(O_RDWR, &err);
  if (fd >= 0) return fd;
  g_detached = true;
  if (quiet) return -1;
  // The name is gone or names another file (ENOENT, ELOOP for a link, or a mismatch); or the
  // process may not open it any more (it dropped privileges, say).
  const bool gone = err == 0 || err == ENOENT || err == ELOOP;
  say("sprofil: %s %s: objects loaded from now on are not counted (their samples count as "
      "outside any object)\n",
      g_path, gone ? "is no longer the profile this process created" : strerror(err));
  return -1;
}

// The same, read-only and quiet (a forked child reading its parent's records).
int read_output() {
  int err = 0;
  return g_detached ? -1 : open_ours(O_RDONLY, &err);
}

// Removes the profile, if it still is ours.
void remove_output() {
  struct stat st;
  if (!g_detached && lstat(g_path, &st) == 0 && st.st_dev == g_dev && st.st_ino == g_ino)
    unlink(g_path);
}

void say_spilled(int err) {
  say("sprofil: %s cannot grow (%s): the counters of objects added from now on are kept in "
      "memory and written at a clean exit if they fit; a crash loses them\n",
      g_path, strerror(err));
}

}  // namespace sprofil::agent
