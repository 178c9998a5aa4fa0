// The profile files the parent counts into: made for the agents (a process image's, a forked
// child's), mapped with a table over their records, held while used, let go at the end.
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
#include "util/fd_passing.hpp"
#include "util/release_space.hpp"
#include "util/xorshift.hpp"

namespace sprofil::record {
namespace drain_impl {
namespace {

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

}  // namespace

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
    f->map_errno = m == MAP_FAILED ? errno : 0;
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

}  // namespace drain_impl

using namespace drain_impl;

// An exited process's file (fd, closed here): removed if it holds no sample (drop_if_empty),
// else its reserved space that no sample wrote given back.
void Drainer::State::let_go(int fd, uint64_t cpu_ns) {
  if (!drop_if_empty(fd, cpu_ns)) release_space(fd);
  close(fd);
}

// Drops a user of f: the file goes with its last.
void Drainer::State::unuse(File* f) {
  if (--f->users > 0) return;
  keep_ended(f);
  close_file(f);
  files.erase(std::find(files.begin(), files.end(), f));
  delete f;
}

// Moves the fds of f, made here and let go by its last user, to ended_files.
void Drainer::State::keep_ended(File* f) {
  if (f->fd < 0 || f->dirfd < 0) return;
  ended_files.push_back(Ended{f->dev, f->ino, f->fd, f->dirfd, mono_ns()});
  f->fd = f->dirfd = -1;
  trim_ended(mono_ns());
}

void Drainer::State::trim_ended(uint64_t now) {
  while (!ended_files.empty() &&
         (ended_files.size() > kEndedMax || ended_files.front().at_ns + kEndedKeepNs < now)) {
    close(ended_files.front().fd);
    close(ended_files.front().dirfd);
    ended_files.pop_front();
  }
}

// New fds of the file of that device and inode made here, and of its directory: held (its
// process lives) or ended a moment ago (ended_files). False if there is none.
bool Drainer::State::made_file(uint64_t dev, uint64_t ino, int* file_fd, int* dirfd) {
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
void Drainer::State::hold_own(pid_t pid, File* f) {
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
void Drainer::State::drop_own(pid_t pid) {
  if (const auto it = own_files.find(pid); it != own_files.end()) {
    File* f = it->second;
    own_files.erase(it);
    unuse(f);
  }
}

// The file a pending child made earlier (same pid and fork time), re-opened by its name in
// dirfd; -1 if none.
int Drainer::State::made_before(const drain::DrainMsg& m, int dirfd, int* k) {
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
int Drainer::State::child_file_for(const drain::DrainMsg& m, int from, int dirfd, int* k,
                                   int* err) {
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
File* Drainer::State::pending_file(Proc* p) {
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
File* Drainer::State::file_of(Event* e) {
  if (e->file) return e->file;
  return e->proc && e->proc->pending ? pending_file(e->proc) : nullptr;
}

// The file of that device and inode among those open here, or null.
File* Drainer::State::find_file(uint64_t dev, uint64_t ino) const {
  for (File* f : files)
    if (static_cast<uint64_t>(f->dev) == dev && static_cast<uint64_t>(f->ino) == ino) return f;
  return nullptr;
}

File* Drainer::State::file_for(int fd) {
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

// At its exit, the file (fd) of a process that took no sample: removed now, counted as a
// process without samples (with its CPU time), as record's collect() would at the end, but
// not the run's first image (always stored). Giving its space back first (release_space)
// left the file in as many extents as it has records, and removing such a file then cost
// ext4 0.41 ms a file at the end of a run (docs/benchmarks.md, "After 54574a1").
bool Drainer::State::drop_if_empty(int fd, uint64_t cpu_ns) {
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
  if (fstat(fd, &a) != 0 || lstat(where, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino ||
      unlink(where) != 0)
    return false;
  std::lock_guard<std::mutex> l(stats_mu);
  ++stats.dropped;
  stats.dropped_cpu_ns += cpu_ns;
  return true;
}

// Writes f's end fields (its process's CPU time and the end's time) and marks it finished,
// the agent's job at an exit or exec that a pending child leaves to the parent.
void Drainer::State::finish_file(File* f, uint64_t cpu_ns, uint64_t end_ns) {
  sprof_header h;
  if (pread(f->fd, &h, sizeof h, 0) == static_cast<ssize_t>(sizeof h)) {
    layout::finish_header(&h, cpu_ns, end_ns);
    h.flags |= SPROF_F_FINISHED;
    (void)!pwrite(f->fd, &h, sizeof h, 0);
  }
}

}  // namespace sprofil::record
