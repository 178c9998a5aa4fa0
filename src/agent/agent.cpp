// The preloaded agent: profiles an unmodified program when libsprofil.so is loaded with
// SPROFIL_OUTPUT set (sprofil record does this through LD_PRELOAD). It builds one region per
// executable segment of every loaded object (the main program, shared libraries, the vDSO,
// and objects dlopen'd later) and keeps the counters in the output file itself, through a
// shared mapping: whatever happens to the process (exit, _exit, abort, SIGKILL) the file holds
// every sample taken. The counter space is reserved on disk when a region is added
// (fallocate), so a full disk cannot fault a sample later; memory grows only with the pages
// of counters actually hit.
//
// Environment (docs/agent.md), read with secure_getenv and not at all under AT_SECURE (a
// setuid or setgid program: the agent does not start):
//   SPROFIL_OUTPUT       output file (the agent runs only when this is set)
//   SPROFIL_HZ           samples per second and thread (default 1000)
//   SPROFIL_CLOCK        auto (default: perf where allowed, else cpu), cpu, perf, itimer, wall
//   SPROFIL_PERF_MODE    signal (default) or ring, for the perf clock
//   SPROFIL_BIN_BYTES    bytes of text per counter, a power of two (default 4)
//   SPROFIL_SIGNAL       the signal to use (default SIGPROF, else a free real-time signal)
//   SPROFIL_QUIET        no message on stderr
// Set by the agent for its descendants: SPROFIL_STARTED (a later image of the same run).
//
// Files: the first image writes SPROFIL_OUTPUT; a forked child writes SPROFIL_OUTPUT.PID
// (from zero counts); a program exec'd later writes SPROFIL_OUTPUT.PID, or .PID.N if that
// exists. Every file is created as a private temporary (O_EXCL, mode 0600, never through a
// link) in the target directory and renamed into place: the first image's name replaces
// whatever was there (rename never follows a link nor truncates the old file), the others
// never replace anything (RENAME_NOREPLACE). The agent holds no file descriptor after
// start-up: when the file must grow (dlopen) or be completed (exit, exec) it re-opens it by
// its absolute path and uses it only if it is still the file it created (st_dev, st_ino).
// Counters that cannot go into the file (RLIMIT_FSIZE, no space, the file is gone) live in
// anonymous memory and are written at a clean exit if they fit.
// The signal handler never runs agent code: it only sees the engine table that publish()
// builds (engine/engine.cpp has the audit).
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "clock/interpose.hpp"
#include "clock/runtime.hpp"
#include "engine/engine.hpp"
#include "profile/sprof_format.h"
#include "util/env.hpp"
#include "util/mutex.hpp"

using namespace sprofil;

static_assert(offsetof(sprof_header, overflow) + 8 == offsetof(sprof_header, delivered) &&
                  offsetof(sprof_header, delivered) + 8 == offsetof(sprof_header, lost) &&
                  sizeof(engine::Tallies) == 24,
              "engine::Tallies must match the header's overflow, delivered, lost");

namespace {

struct AgentRegion {
  sprof_region* rec;  // the record's page: in the file mapping, or anonymous (!in_file)
  void* counters;     // its counters, just after it
  size_t counters_bytes;
  uint64_t record_offset;  // where the record is (or goes) in the file
  uintptr_t obj_base;      // dlpi_addr, with start: identifies the object across rescans
  bool live;
  bool in_file;         // a shared mapping of reserved file space; else anonymous memory
  uint64_t written_at;  // !in_file: where the record was written into the file (0: not yet)
};

pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
// Read without the lock by the dlopen fast path; written under g_mu.
std::atomic<bool> g_on{false};
// Guarded by g_mu.
sprof_header* g_hdr = nullptr;
AgentRegion* g_regs = nullptr;
size_t g_nregs = 0, g_capregs = 0;
size_t g_nfile = 0;       // regions [0, g_nfile) are in the file mapping (a prefix)
uint64_t g_file_end = 0;  // end of those records in the file
uint64_t g_next_off = 0;  // where the next record goes (past g_file_end once spilled)
bool g_spilled = false;   // a record did not fit in the file: it and all later ones are anonymous
bool g_detached = false;  // the file at g_path is not ours any more: nothing goes into it
uint64_t g_stamp = 0;     // the loader's adds + subs at the last merged scan
dev_t g_dev = 0;          // the file the agent created
ino_t g_ino = 0;
uint32_t g_bin_bytes = 4;
rt::ClockRequest g_clock;
char g_path[PATH_MAX];       // the profile's absolute path
char g_base[PATH_MAX];       // SPROFIL_OUTPUT, made absolute at start
char g_exe[SPROF_PATH_MAX];  // the main program's path (read once: rescans run often)
bool g_quiet = false;

struct Lock : util::MutexGuard {
  Lock() : MutexGuard(&g_mu) {}
};

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t page_round(uint64_t n) {
  return (n + SPROF_PAGE - 1) / SPROF_PAGE * SPROF_PAGE;
}

// Every SPROFIL_* variable is read through this: nothing under AT_SECURE.
const char* env(const char* name) {
  return secure_getenv(name);
}

void say(const char* fmt, const char* a, const char* b) {
  if (g_quiet) return;
  char line[1024];
  const int n = snprintf(line, sizeof line, fmt, a, b);  // a long path may be cut short
  if (n > 0) (void)!write(2, line, std::min(static_cast<size_t>(n), sizeof line - 1));
}

// --- the output file ------------------------------------------------------------------------

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

void random_name(char* out, size_t n) {
  static std::atomic<unsigned> seq{0};
  uint64_t r = 0;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof r))
    r = now_ns() ^ (static_cast<uint64_t>(getpid()) << 32) ^ seq.fetch_add(1) * 0x9e3779b9u;
  snprintf(out, n, ".sprofil-tmp-%016llx", static_cast<unsigned long long>(r));
}

// Gives the temporary `tmp` in dirfd the name `name`: replacing an existing name if `replace`
// (rename never follows a link nor touches the old file's data), else only if the name is
// free. Returns 0 or an errno value (EEXIST: the name is taken).
int publish_name(int dirfd, const char* tmp, const char* name, bool replace) {
  if (replace) return renameat(dirfd, tmp, dirfd, name) == 0 ? 0 : errno;
  if (renameat2(dirfd, tmp, dirfd, name, RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return errno;
  // A filesystem without RENAME_NOREPLACE: link fails on an existing name too.
  if (linkat(dirfd, tmp, dirfd, name, 0) != 0) return errno;
  unlinkat(dirfd, tmp, 0);
  return 0;
}

// Creates the profile file for this image and returns its fd (or -1 with errno set), with the
// header's page reserved: a private temporary in the target directory (O_CREAT | O_EXCL |
// O_NOFOLLOW, mode 0600, so the umask can only make it stricter), renamed into place. The
// first image takes g_base itself; a forked child or a later image takes g_base.PID, or
// .PID.N, never replacing a file. Sets g_path, g_dev and g_ino.
int create_output(bool first) {
  const char* slash = strrchr(g_base, '/');  // g_base is absolute
  char dir[PATH_MAX];
  const size_t dlen = slash == g_base ? 1 : static_cast<size_t>(slash - g_base);
  memcpy(dir, g_base, dlen);
  dir[dlen] = '\0';
  const char* name = slash + 1;
  const int dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) return -1;
  char tmp[64];
  int fd = -1;
  for (int k = 0; k < 100 && fd < 0; ++k) {
    random_name(tmp, sizeof tmp);
    fd = openat(dirfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  int err = fd < 0 ? errno : reserve(fd, 0, SPROF_PAGE);
  struct stat st;
  if (err == 0 && fstat(fd, &st) != 0) err = errno;
  char final_name[NAME_MAX + 1];
  if (err == 0) {
    err = EEXIST;
    for (int k = 0; k < (first ? 1 : 1000) && err == EEXIST; ++k) {
      int n;
      if (first)
        n = snprintf(final_name, sizeof final_name, "%s", name);
      else if (k == 0)
        n = snprintf(final_name, sizeof final_name, "%s.%d", name, static_cast<int>(getpid()));
      else
        n = snprintf(final_name, sizeof final_name, "%s.%d.%d", name, static_cast<int>(getpid()),
                     k);
      err = n < static_cast<int>(sizeof final_name) ? publish_name(dirfd, tmp, final_name, first)
                                                    : ENAMETOOLONG;
    }
  }
  if (err != 0) {
    if (fd >= 0) {
      unlinkat(dirfd, tmp, 0);
      close(fd);
    }
    close(dirfd);
    errno = err;
    return -1;
  }
  close(dirfd);
  // g_path has room for a directory path, a slash and a name.
  size_t at = dlen;
  memcpy(g_path, dir, dlen);
  if (dlen > 1) g_path[at++] = '/';
  memcpy(g_path + at, final_name, strlen(final_name) + 1);
  g_dev = st.st_dev;
  g_ino = st.st_ino;
  return fd;
}

// Re-opens the profile by its path, only if it is still the file this process created;
// -1 otherwise (and from then on nothing is written to that path; said once).
int reopen_output() {
  if (g_detached) return -1;
  const int fd = open(g_path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  struct stat st;
  if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_dev == g_dev &&
      st.st_ino == g_ino)
    return fd;
  const int err = fd >= 0 ? 0 : errno;
  if (fd >= 0) close(fd);
  g_detached = true;
  // The name is gone or names another file (ENOENT, ELOOP for a link, or a mismatch); or the
  // process may not open it any more (it dropped privileges, say).
  const bool gone = err == 0 || err == ENOENT || err == ELOOP;
  say("sprofil: %s %s: objects loaded from now on are not counted (their samples count as "
      "outside any object)\n",
      g_path, gone ? "is no longer the profile this process created" : strerror(err));
  return -1;
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

// --- the loaded objects ---------------------------------------------------------------------

// One executable segment found by dl_iterate_phdr.
struct Found {
  uintptr_t obj_base, start, end, file_offset;
  uint32_t flags;
  uint8_t build_id[SPROF_BUILD_ID_MAX];
  uint32_t build_id_len;
  char path[SPROF_PATH_MAX];
};

struct FoundList {
  Found* v;
  size_t n, cap;
  uint64_t stamp;  // the loader's adds + subs when it was taken
  bool has_stamp;  // false on a libc without dlpi_adds: every scan is merged
  bool partial;    // out of memory: not everything loaded is listed (not merged)
};

void read_build_id(const dl_phdr_info* info, Found* f) {
  f->build_id_len = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    auto* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    const char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      auto* nh = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const char* name = p + sizeof *nh;
      const char* desc = name + ((nh->n_namesz + 3) & ~3u);
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
          desc + nh->n_descsz <= end) {
        f->build_id_len = std::min<uint32_t>(nh->n_descsz, SPROF_BUILD_ID_MAX);
        memcpy(f->build_id, desc, f->build_id_len);
        return;
      }
      p = desc + ((nh->n_descsz + 3) & ~3u);
    }
  }
}

int collect(dl_phdr_info* info, size_t size, void* data) {
  auto* list = static_cast<FoundList*>(data);
  if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
    list->stamp = info->dlpi_adds + info->dlpi_subs, list->has_stamp = true;
  const char* name = info->dlpi_name ? info->dlpi_name : "";
  bool is_main = false, is_vdso = false;
  const char* path = name;
  if (strncmp(name, "linux-vdso", 10) == 0 || strncmp(name, "linux-gate", 10) == 0) {
    is_vdso = true;
    path = "[vdso]";
  } else if (!*name) {
    // The main program has no name here; the vDSO sometimes has none either.
    path = g_exe;
    is_main = true;
  }
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X) || ph.p_memsz == 0) continue;
    if (list->n == list->cap) {
      const size_t cap = list->cap ? list->cap * 2 : 32;
      auto* v = static_cast<Found*>(realloc(list->v, cap * sizeof(Found)));
      if (!v) return list->partial = true, 1;
      list->v = v;
      list->cap = cap;
    }
    Found& f = list->v[list->n++];
    f.obj_base = info->dlpi_addr;
    f.start = info->dlpi_addr + ph.p_vaddr;
    f.end = f.start + ph.p_memsz;
    f.file_offset = ph.p_offset;
    f.flags = (is_main ? SPROF_R_MAIN : 0u) | (is_vdso ? SPROF_R_VDSO : 0u);
    read_build_id(info, &f);
    snprintf(f.path, sizeof f.path, "%s", path);
  }
  return 0;
}

// What is loaded now. Needs no agent lock (the loader's own lock keeps it consistent).
FoundList scan() {
  FoundList list{nullptr, 0, 0, 0, false, false};
  dl_iterate_phdr(collect, &list);
  return list;
}

// Adds a region record with its counters: in the file (fd, at g_next_off, space reserved)
// while everything so far fit, else in anonymous memory. A record in the file is committed
// by raising region_count only once it is complete.
bool add_region(int fd, const Found& f, bool dlopened) {
  if (g_nregs == g_capregs) {
    const size_t cap = g_capregs ? g_capregs * 2 : 64;
    auto* v = static_cast<AgentRegion*>(realloc(g_regs, cap * sizeof(AgentRegion)));
    if (!v) return false;
    g_regs = v;
    g_capregs = cap;
  }
  const uint64_t nbins = (f.end - f.start + g_bin_bytes - 1) / g_bin_bytes;
  const uint64_t cbytes = page_round(nbins * 4);
  const uint64_t off = g_next_off, len = SPROF_PAGE + cbytes;
  void* rec = MAP_FAILED;
  if (!g_spilled && fd >= 0) {
    int e = reserve(fd, off, len);
    if (e == 0) {
      rec = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(off));
      if (rec == MAP_FAILED) {
        e = errno;
        (void)!ftruncate(fd, static_cast<off_t>(off));
      }
    }
    if (e != 0) {
      g_spilled = true;
      say_spilled(e);
    }
  }
  const bool in_file = rec != MAP_FAILED;
  if (!in_file) {
    rec = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
               -1, 0);
    if (rec == MAP_FAILED) return false;
  }
  // Counters are hit at random: no readahead, so only the pages hit become resident.
  madvise(rec, len, MADV_RANDOM);
  auto* r = static_cast<sprof_region*>(rec);
  r->magic = SPROF_REGION_MAGIC;
  r->flags = f.flags | (dlopened ? SPROF_R_DLOPEN : 0u);
  r->record_size = len;
  r->counters_offset = off + SPROF_PAGE;
  r->start = f.start;
  r->end = f.end;
  r->load_bias = f.obj_base;
  r->file_offset = f.file_offset;
  r->nbins = nbins;
  r->bin_size = g_bin_bytes;
  r->counter_width = 4;
  r->load_ns = now_ns();
  r->build_id_len = f.build_id_len;
  memcpy(r->build_id, f.build_id, f.build_id_len);
  r->path_len = static_cast<uint32_t>(strnlen(f.path, SPROF_PATH_MAX));
  memcpy(r->path, f.path, r->path_len);
  g_next_off = off + len;
  g_regs[g_nregs++] = AgentRegion{
      r, static_cast<char*>(rec) + SPROF_PAGE, cbytes, off, f.obj_base, true, in_file, 0};
  if (in_file) {
    g_nfile = g_nregs;
    g_file_end = g_next_off;
    std::atomic_ref<uint64_t>(g_hdr->regions_end).store(g_file_end, std::memory_order_release);
    std::atomic_ref<uint32_t>(g_hdr->region_count)
        .store(static_cast<uint32_t>(g_nfile), std::memory_order_release);
  }
  return true;
}

// Builds the engine table over the live regions and publishes it on the agent channel.
int publish() {
  auto* regs = static_cast<engine::Region*>(malloc((g_nregs + 1) * sizeof(engine::Region)));
  if (!regs) return ENOMEM;
  size_t n = 0;
  const uint8_t shift = static_cast<uint8_t>(__builtin_ctz(g_bin_bytes));
  for (size_t i = 0; i < g_nregs; ++i) {
    const AgentRegion& a = g_regs[i];
    if (!a.live) continue;
    engine::Region& r = regs[n++];
    r.lo = a.rec->start;
    r.last = a.rec->end - 1;
    r.map = engine::BinMap{a.rec->start, 65536, 0, shift};
    r.counters = engine::Counters{a.counters, a.rec->nbins, 4, engine::Policy::kSaturate, 0};
  }
  std::sort(regs, regs + n,
            [](const engine::Region& a, const engine::Region& b) { return a.lo < b.lo; });
  // Objects can overlap only if the loader reused an address; keep the newer one.
  size_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    if (m > 0 && regs[i].lo <= regs[m - 1].last) continue;
    regs[m++] = regs[i];
  }
  engine::Table* t = nullptr;
  auto* tallies = reinterpret_cast<engine::Tallies*>(&g_hdr->overflow);
  const engine::Error e = engine::Table::create(regs, m, nullptr, tallies, &t);
  free(regs);
  if (e != engine::Error::kOk) return e == engine::Error::kNoMemory ? ENOMEM : EINVAL;
  engine::Table* old = nullptr;
  if (int err = rt::install(engine::kAgentChannel, t, g_clock, &old)) {
    engine::Table::destroy(t);
    return err;
  }
  engine::Table::destroy(old);
  return 0;
}

bool same_segment(const AgentRegion& a, const Found& f) {
  const sprof_region* r = a.rec;
  return r->file_offset == f.file_offset && r->end - r->start == f.end - f.start &&
         r->build_id_len == f.build_id_len &&
         memcmp(r->build_id, f.build_id, f.build_id_len) == 0 &&
         r->path_len == strnlen(f.path, SPROF_PATH_MAX) &&
         memcmp(r->path, f.path, r->path_len) == 0 &&
         (r->flags & (SPROF_R_MAIN | SPROF_R_VDSO)) == (f.flags & (SPROF_R_MAIN | SPROF_R_VDSO));
}

// Brings the regions in line with a scan: objects that are gone are marked unloaded (their
// counts stay), an object loaded again gets its old record back (same path, build-id, segment
// offset and size: the bins are relative to the segment, so a new address is fine), other new
// objects get a new record. Returns true if anything changed. The cost is bounded by the
// objects loaded and the distinct objects ever loaded, not by the number of dlopen calls.
bool merge(const FoundList& list, bool dlopened) {
  bool changed = false;
  for (size_t k = 0; k < g_nregs; ++k) {
    if (!g_regs[k].live) continue;
    bool present = false;
    for (size_t i = 0; i < list.n && !present; ++i)
      present = list.v[i].obj_base == g_regs[k].obj_base && list.v[i].start == g_regs[k].rec->start;
    if (!present) {
      g_regs[k].live = false;
      g_regs[k].rec->flags |= SPROF_R_UNLOADED;
      g_regs[k].rec->unload_ns = now_ns();
      changed = true;
    }
  }
  int fd = -1;
  bool opened = false;
  for (size_t i = 0; i < list.n; ++i) {
    const Found& f = list.v[i];
    size_t k = 0;
    while (k < g_nregs &&
           !(g_regs[k].live && g_regs[k].obj_base == f.obj_base && g_regs[k].rec->start == f.start))
      ++k;
    if (k < g_nregs) continue;  // known
    for (k = 0; k < g_nregs && (g_regs[k].live || !same_segment(g_regs[k], f)); ++k) {
    }
    if (k < g_nregs) {  // loaded again: the same record, at its new address
      AgentRegion& a = g_regs[k];
      a.rec->start = f.start;
      a.rec->end = f.end;
      a.rec->load_bias = f.obj_base;
      a.rec->unload_ns = 0;
      std::atomic_ref<uint32_t>(a.rec->flags).fetch_and(~SPROF_R_UNLOADED);
      a.obj_base = f.obj_base;
      a.live = true;
      changed = true;
      continue;
    }
    if (!opened && !g_spilled) {
      fd = reopen_output();
      opened = true;
    }
    if (fd < 0 && !g_spilled) continue;  // not our file any more: new objects go uncounted
    if (add_region(fd, f, dlopened)) changed = true;
  }
  if (fd >= 0) close(fd);
  return changed;
}

bool all_zero(const void* p, size_t n) {
  static const uint64_t zero[SPROF_PAGE / 8] = {};
  for (size_t off = 0; off < n; off += SPROF_PAGE)
    if (memcmp(static_cast<const char*>(p) + off, zero, SPROF_PAGE) != 0) return false;
  return true;
}

// Writes one record kept in memory at file offset `at` (its counters_offset set to match):
// the record page and the counter pages that are not zero (the rest stays a hole).
bool write_record(int fd, const AgentRegion& a, uint64_t at) {
  const uint64_t len = SPROF_PAGE + a.counters_bytes;
  sprof_region rec = *a.rec;
  rec.counters_offset = at + SPROF_PAGE;
  bool ok = fits_fsize(at + len) && ftruncate(fd, static_cast<off_t>(at + len)) == 0 &&
            pwrite(fd, &rec, SPROF_PAGE, static_cast<off_t>(at)) == SPROF_PAGE;
  for (uint64_t p = 0; p < a.counters_bytes && ok; p += SPROF_PAGE) {
    const char* page = static_cast<const char*>(a.counters) + p;
    if (!all_zero(page, SPROF_PAGE))
      ok = pwrite(fd, page, SPROF_PAGE, static_cast<off_t>(at + SPROF_PAGE + p)) == SPROF_PAGE;
  }
  return ok;
}

// Writes the records kept in anonymous memory into the file (fd) after the committed ones, as
// far as they fit (RLIMIT_FSIZE, disk space): first those with counts, then the others, each
// placed at the end of the file if it fits there (a small object is kept even when a large one
// before it is not). A record written once (before an exec that failed) is rewritten in place.
// Used at a clean exit and before an exec.
void write_spilled(int fd) {
  uint32_t committed = std::atomic_ref<uint32_t>(g_hdr->region_count).load();
  uint64_t end = std::atomic_ref<uint64_t>(g_hdr->regions_end).load();
  size_t lost = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t k = g_nfile; k < g_nregs; ++k) {
      AgentRegion& a = g_regs[k];
      const bool counted = !all_zero(a.counters, a.counters_bytes);
      if (counted != (pass == 0)) continue;
      if (a.written_at != 0) {
        if (!write_record(fd, a, a.written_at)) lost += counted;
        continue;
      }
      if (!write_record(fd, a, end)) {
        (void)!ftruncate(fd, static_cast<off_t>(end));  // keep no partial record behind
        lost += counted;
        continue;
      }
      a.written_at = end;
      end += SPROF_PAGE + a.counters_bytes;
      ++committed;
      std::atomic_ref<uint64_t>(g_hdr->regions_end).store(end, std::memory_order_release);
      std::atomic_ref<uint32_t>(g_hdr->region_count).store(committed, std::memory_order_release);
    }
  }
  if (lost > 0) {
    char n[32];
    snprintf(n, sizeof n, "%zu", lost);
    say("sprofil: %s: the counts of %s objects kept in memory did not fit and are lost\n", g_path,
        n);
  }
}

void fill_header(sprof_header* h, uint32_t flags) {
  memcpy(h->magic, SPROF_MAGIC, 8);
  h->version = SPROF_VERSION;
  h->header_size = SPROF_PAGE;
  h->flags = flags;
  h->clock = static_cast<uint32_t>(g_clock.kind);
  h->requested_hz = static_cast<uint32_t>(1000000000ull / g_clock.interval_ns);
  h->tick_ns = g_clock.interval_ns;
  h->start_ns = now_ns();
  h->pid = getpid();
  h->ppid = getppid();
  h->regions_end = SPROF_PAGE;
  const int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    const ssize_t n = read(fd, h->cmdline, SPROF_CMDLINE_MAX);
    h->cmdline_len = n > 0 ? static_cast<uint32_t>(n) : 0;
    close(fd);
  }
}

// Writes the end fields. The counts are already in the file.
void finish_header() {
  if (!g_hdr) return;
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  const uint64_t cpu =
      static_cast<uint64_t>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000u +
      static_cast<uint64_t>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000u;
  g_hdr->cpu_ns = cpu;
  // The clock may have moved (itimer to cpu when the program took ITIMER_PROF or SIGPROF).
  // (last_clock_kind, not running_clock: the exec hook runs with the runtime mutex held.)
  if (g_on) g_hdr->clock = static_cast<uint32_t>(rt::last_clock_kind());
  const uint64_t delivered = std::atomic_ref<uint64_t>(g_hdr->delivered).load();
  __extension__ using u128 = unsigned __int128;
  if (cpu > 0)
    g_hdr->effective_hz_milli =
        static_cast<uint64_t>(static_cast<u128>(delivered) * 1000000000000ull / cpu);
  g_hdr->end_ns = now_ns();
  std::atomic_ref<uint32_t>(g_hdr->flags).fetch_or(SPROF_F_FINISHED);
}

// A forked child's file that never got a sample (the usual fork-then-exec) holds nothing:
// remove it rather than leave empty files behind.
bool drop_empty_child_file() {
  if ((g_hdr->flags & SPROF_F_CHILD) && std::atomic_ref<uint64_t>(g_hdr->delivered).load() == 0) {
    remove_output();
    return true;
  }
  return false;
}

void stop_sampling() {
  engine::Table* old = nullptr;
  rt::install(engine::kAgentChannel, nullptr, g_clock, &old);
  engine::Table::destroy(old);
}

// At a clean exit, with sampling stopped for good: gives back the disk space reserved for
// counter pages that no sample touched (to the filesystem they are holes again, as untouched
// reserved space reads: SEEK_HOLE reports reserved space with no data as a hole).
void release_untouched(int fd) {
  for (size_t k = 0; k < g_nfile; ++k) {
    const uint64_t lo = g_regs[k].record_offset + SPROF_PAGE, hi = lo + g_regs[k].counters_bytes;
    uint64_t off = lo;
    while (off < hi) {
      const off_t h = lseek(fd, static_cast<off_t>(off), SEEK_HOLE);
      if (h < 0 || static_cast<uint64_t>(h) >= hi) break;
      const off_t d = lseek(fd, h, SEEK_DATA);
      const uint64_t end = d < 0 ? hi : std::min<uint64_t>(static_cast<uint64_t>(d), hi);
      if (end > static_cast<uint64_t>(h) &&
          fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, h,
                    static_cast<off_t>(end - static_cast<uint64_t>(h))) != 0)
        break;
      off = end;
    }
  }
}

// The end of this image (sampling stopped): drops an empty child's file, else writes the
// counters kept in memory and the end fields, and at an exit releases untouched space. One
// re-open of the file, only when it is needed.
void complete_file(bool at_exit) {
  if (drop_empty_child_file()) return;
  const bool spilled = g_nfile < g_nregs;
  const int fd = spilled || (at_exit && g_nfile > 0) ? reopen_output() : -1;
  if (fd >= 0 && spilled) write_spilled(fd);
  finish_header();
  if (fd >= 0 && at_exit) release_untouched(fd);
  if (fd >= 0) close(fd);
}

void agent_exit() {
  Lock lock;
  if (!g_on) return;
  stop_sampling();
  complete_file(true);
  g_on = false;
}

// Gives up profiling in a forked child that cannot have a file of its own: it must not write
// into the parent's.
void child_stops(const char* why) {
  g_on = false;
  engine::Table* old = engine::global().exchange(engine::kAgentChannel, nullptr);
  (void)old;  // its memory belongs to the parent's copy; leave it
  say("sprofil: no profile file for the forked child: %s%s\n", why, "");
}

// In the forked child, before its timers are armed: the same regions at the same addresses
// (so the published table stays valid) but backed by a new file FILE.PID whose counts start
// at zero: file space where it can be reserved, anonymous memory after that.
void after_fork_child() {
  if (!g_on) return;
  auto* saved = static_cast<sprof_region*>(malloc((g_nregs + 1) * sizeof(sprof_region)));
  if (!saved) return child_stops(strerror(ENOMEM));
  const sprof_header hdr = *g_hdr;
  for (size_t i = 0; i < g_nregs; ++i) saved[i] = *g_regs[i].rec;
  const int fd = create_output(false);
  if (fd < 0) {
    free(saved);
    return child_stops(strerror(errno));
  }
  const int rw = PROT_READ | PROT_WRITE;
  if (mmap(g_hdr, SPROF_PAGE, rw, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
    close(fd);
    free(saved);
    remove_output();
    return child_stops(strerror(errno));
  }
  g_detached = false;
  g_spilled = false;
  g_nfile = 0;
  g_file_end = SPROF_PAGE;
  int err = 0;
  for (size_t i = 0; i < g_nregs; ++i) {
    AgentRegion& a = g_regs[i];
    const uint64_t len = SPROF_PAGE + a.counters_bytes;
    void* at = a.rec;
    if (!g_spilled) {
      err = reserve(fd, a.record_offset, len);
      if (err == 0 && mmap(at, len, rw, MAP_SHARED | MAP_FIXED, fd,
                           static_cast<off_t>(a.record_offset)) == MAP_FAILED) {
        err = errno;
        (void)!ftruncate(fd, static_cast<off_t>(a.record_offset));
      }
      g_spilled = err != 0;
    }
    if (g_spilled && mmap(at, len, rw, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
                          0) == MAP_FAILED) {
      close(fd);
      free(saved);
      return child_stops(strerror(errno));
    }
    madvise(at, len, MADV_RANDOM);
    a.in_file = !g_spilled;
    a.written_at = 0;
    if (a.in_file) {
      g_nfile = i + 1;
      g_file_end = a.record_offset + len;
    }
  }
  close(fd);
  if (g_spilled) say_spilled(err);
  fill_header(g_hdr, SPROF_F_CHILD);
  g_hdr->clock = hdr.clock;
  for (size_t i = 0; i < g_nregs; ++i) *g_regs[i].rec = saved[i];
  free(saved);
  g_hdr->regions_end = g_file_end;
  g_hdr->region_count = static_cast<uint32_t>(g_nfile);
}

void before_exec() {
  if (!g_on) return;
  complete_file(false);  // no release: a failed exec resumes sampling into the same pages
}

void after_failed_exec() {
  if (g_hdr) std::atomic_ref<uint32_t>(g_hdr->flags).fetch_and(~SPROF_F_FINISHED);
}

// g_mu is held only for a merge of a scan and a publish (never across dl_iterate_phdr), so a
// fork does not wait behind a long rescan (util::ForkSafeMutex, installed at start).

bool parse_env(const char** why) {
  g_clock = rt::ClockRequest{};
  g_clock.kind = rt::ClockKind::kAuto;
  if (const char* c = env("SPROFIL_CLOCK"); c && *c) {
    if (!rt::parse_clock(c, &g_clock.kind))
      return *why = "SPROFIL_CLOCK is not auto, cpu, perf, itimer or wall", false;
  }
  if (!util::hz_from_env(&g_clock.interval_ns, why)) return false;
  if (const char* b = env("SPROFIL_BIN_BYTES"); b && *b) {
    const long v = atol(b);
    if (v <= 0 || v > 65536 || (v & (v - 1)))
      return *why = "SPROFIL_BIN_BYTES must be a power of two", false;
    g_bin_bytes = static_cast<uint32_t>(v);
  }
  return true;
}

// SPROFIL_OUTPUT made absolute (the program may chdir; the file is re-opened by path).
bool set_base(const char* out) {
  if (out[0] == '/')
    return snprintf(g_base, sizeof g_base, "%s", out) < static_cast<int>(sizeof g_base);
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) return false;
  return snprintf(g_base, sizeof g_base, "%s/%s", strcmp(cwd, "/") == 0 ? "" : cwd, out) <
         static_cast<int>(sizeof g_base);
}

__attribute__((constructor(200))) void agent_start() {
  // A setuid or setgid program: the caller's environment must not steer it. Not even read.
  if (getauxval(AT_SECURE)) return;
  const char* out = env("SPROFIL_OUTPUT");
  if (!out || !*out) return;
  g_quiet = env("SPROFIL_QUIET") != nullptr;
  Lock lock;
  const char* why = nullptr;
  if (!parse_env(&why)) {
    say("sprofil: not profiling: %s%s\n", why, "");
    return;
  }
  if (!set_base(out)) {
    say("sprofil: not profiling: %s: %s\n", out, strerror(errno ? errno : ENAMETOOLONG));
    return;
  }
  const bool first = env("SPROFIL_STARTED") == nullptr;
  const int fd = create_output(first);
  void* h =
      fd < 0 ? MAP_FAILED : mmap(nullptr, SPROF_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (h == MAP_FAILED) {
    const int e = errno;
    if (fd >= 0) {
      remove_output();
      close(fd);
    }
    say("sprofil: not profiling: cannot create %s: %s\n", out, strerror(e));
    return;
  }
  g_hdr = static_cast<sprof_header*>(h);
  g_file_end = g_next_off = SPROF_PAGE;
  setenv("SPROFIL_STARTED", "1", 1);  // later images of this run write files of their own
  fill_header(g_hdr, 0);
  const ssize_t n = readlink("/proc/self/exe", g_exe, sizeof g_exe - 1);
  g_exe[n > 0 ? n : 0] = '\0';
  FoundList list = scan();
  g_stamp = list.stamp;
  for (size_t i = 0; i < list.n; ++i) add_region(fd, list.v[i], false);
  free(list.v);
  close(fd);  // from now on the agent holds no descriptor
  util::ForkSafeMutex<&g_mu>::install();
  rt::set_hooks(rt::Hooks{after_fork_child, before_exec, after_failed_exec});
  if (int e = publish()) {
    say("sprofil: not profiling: cannot start the clock: %s%s\n", strerror(e),
        e == EBUSY ? " (the program has its own handler on the profiling signal; "
                     "set SPROFIL_SIGNAL)"
                   : "");
    return;
  }
  // From now on the clock is the one "auto" resolved to: forked children and later
  // publishes use (and write) that one.
  rt::ClockRequest running;
  if (rt::running_clock(&running)) g_clock = running;
  g_hdr->clock = static_cast<uint32_t>(g_clock.kind);
  if (const char* reason = rt::auto_fallback_reason(); *reason) say("sprofil: %s%s\n", reason, "");
  g_on = true;
  atexit(agent_exit);
}

// dlopen/dlclose: after the loader is done, bring the regions up to date. The scan runs
// without the agent's lock; a scan older than the last one merged is dropped, and one that
// sees the same loader state (adds + subs) is a no-op.
void refresh_after_loader(bool opened) {
  if (!g_on.load(std::memory_order_acquire)) return;
  FoundList list = scan();
  {
    Lock lock;
    if (g_on && !list.partial && (!list.has_stamp || list.stamp > g_stamp)) {
      g_stamp = list.stamp;
      if (merge(list, opened)) publish();
    }
  }
  free(list.v);
}

using dlopen_fn = void* (*)(const char*, int);
using dlmopen_fn = void* (*)(Lmid_t, const char*, int);
using dlclose_fn = int (*)(void*);
std::atomic<dlopen_fn> g_dlopen{nullptr};
std::atomic<dlmopen_fn> g_dlmopen{nullptr};
std::atomic<dlclose_fn> g_dlclose{nullptr};

}  // namespace

#include "util/export.hpp"

SPROFIL_EXPORT void* dlopen(const char* file, int mode) {
  void* h = rt::real_fn(g_dlopen, "dlopen")(file, mode);
  if (h) refresh_after_loader(true);
  return h;
}

SPROFIL_EXPORT void* dlmopen(Lmid_t lmid, const char* file, int mode) {
  void* h = rt::real_fn(g_dlmopen, "dlmopen")(lmid, file, mode);
  if (h) refresh_after_loader(true);
  return h;
}

SPROFIL_EXPORT int dlclose(void* handle) {
  const int rc = rt::real_fn(g_dlclose, "dlclose")(handle);
  if (rc == 0) refresh_after_loader(false);
  return rc;
}
