// The preloaded agent: profiles an unmodified program when libsprofil.so is loaded with
// SPROFIL_OUTPUT set (sprofil record does this through LD_PRELOAD). It builds one region per
// executable segment of every loaded object (the main program, shared libraries, the vDSO,
// and objects dlopen'd later) and keeps the counters in the output file itself, through a
// shared mapping: whatever happens to the process (exit, _exit, abort, SIGKILL) the file holds
// every sample taken. The counters are a sparse file region, so memory and disk grow only
// with the code actually hit.
//
// Environment (docs/agent.md):
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
// exists. The signal handler never runs agent code: it only sees the engine table that
// publish() builds (engine/engine.cpp has the audit).
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sys/mman.h>
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

using namespace sprofil;

static_assert(offsetof(sprof_header, overflow) + 8 == offsetof(sprof_header, delivered) &&
                  offsetof(sprof_header, delivered) + 8 == offsetof(sprof_header, lost) &&
                  sizeof(engine::Tallies) == 24,
              "engine::Tallies must match the header's overflow, delivered, lost");

namespace {

struct AgentRegion {
  sprof_region* rec;  // the record's page in the file mapping
  void* counters;     // its counters in the file mapping
  size_t counters_bytes;
  uint64_t record_offset;
  uintptr_t obj_base;  // dlpi_addr, with start: identifies the object across rescans
  bool live;
};

pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
// Guarded by g_mu.
bool g_on = false;
int g_fd = -1;
sprof_header* g_hdr = nullptr;
AgentRegion* g_regs = nullptr;
size_t g_nregs = 0, g_capregs = 0;
uint64_t g_file_end = 0;
uint32_t g_bin_bytes = 4;
rt::ClockRequest g_clock;
char g_path[4096];

struct Lock {
  Lock() { pthread_mutex_lock(&g_mu); }
  ~Lock() { pthread_mutex_unlock(&g_mu); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;
};

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t page_round(uint64_t n) {
  return (n + SPROF_PAGE - 1) / SPROF_PAGE * SPROF_PAGE;
}

bool quiet() {
  return getenv("SPROFIL_QUIET") != nullptr;
}

void say(const char* fmt, const char* a, const char* b) {
  if (quiet()) return;
  char line[1024];
  snprintf(line, sizeof line, fmt, a, b);
  (void)!write(2, line, strlen(line));
}

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

int collect(dl_phdr_info* info, size_t, void* data) {
  auto* list = static_cast<FoundList*>(data);
  const char* name = info->dlpi_name ? info->dlpi_name : "";
  bool is_main = false, is_vdso = false;
  char path[SPROF_PATH_MAX];
  if (strncmp(name, "linux-vdso", 10) == 0 || strncmp(name, "linux-gate", 10) == 0) {
    is_vdso = true;
    snprintf(path, sizeof path, "[vdso]");
  } else if (!*name) {
    // The main program has no name here; the vDSO sometimes has none either.
    const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    path[n > 0 ? n : 0] = '\0';
    is_main = true;
  } else {
    snprintf(path, sizeof path, "%s", name);
  }
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X) || ph.p_memsz == 0) continue;
    if (list->n == list->cap) {
      const size_t cap = list->cap ? list->cap * 2 : 32;
      auto* v = static_cast<Found*>(realloc(list->v, cap * sizeof(Found)));
      if (!v) return 1;
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

// Grows the file and maps a new region record with its counters; commits it by raising
// region_count only once the record is complete.
bool add_region(const Found& f, bool dlopened) {
  if (g_nregs == g_capregs) {
    const size_t cap = g_capregs ? g_capregs * 2 : 64;
    auto* v = static_cast<AgentRegion*>(realloc(g_regs, cap * sizeof(AgentRegion)));
    if (!v) return false;
    g_regs = v;
    g_capregs = cap;
  }
  const uint64_t nbins = (f.end - f.start + g_bin_bytes - 1) / g_bin_bytes;
  const uint64_t cbytes = page_round(nbins * 4);
  const uint64_t off = g_file_end;
  if (ftruncate(g_fd, static_cast<off_t>(off + SPROF_PAGE + cbytes)) != 0) return false;
  void* rec = mmap(nullptr, SPROF_PAGE + cbytes, PROT_READ | PROT_WRITE, MAP_SHARED, g_fd,
                   static_cast<off_t>(off));
  if (rec == MAP_FAILED) return false;
  // Counters are hit at random: no readahead, so only the pages hit become resident.
  madvise(rec, SPROF_PAGE + cbytes, MADV_RANDOM);
  auto* r = static_cast<sprof_region*>(rec);
  r->magic = SPROF_REGION_MAGIC;
  r->flags = f.flags | (dlopened ? SPROF_R_DLOPEN : 0u);
  r->record_size = SPROF_PAGE + cbytes;
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
  g_file_end = off + SPROF_PAGE + cbytes;
  g_regs[g_nregs++] =
      AgentRegion{r, static_cast<char*>(rec) + SPROF_PAGE, cbytes, off, f.obj_base, true};
  std::atomic_ref<uint64_t>(g_hdr->regions_end).store(g_file_end, std::memory_order_release);
  std::atomic_ref<uint32_t>(g_hdr->region_count)
      .store(static_cast<uint32_t>(g_nregs), std::memory_order_release);
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

// Brings the regions in line with what is loaded now: new objects are added, objects that
// are gone are marked unloaded (their counts stay in the file). Returns true if anything
// changed.
bool rescan(bool dlopened) {
  FoundList list{nullptr, 0, 0};
  dl_iterate_phdr(collect, &list);
  bool changed = false;
  for (size_t i = 0; i < list.n; ++i) {
    const Found& f = list.v[i];
    bool known = false;
    for (size_t k = 0; k < g_nregs && !known; ++k)
      known = g_regs[k].live && g_regs[k].obj_base == f.obj_base && g_regs[k].rec->start == f.start;
    if (!known && add_region(f, dlopened)) changed = true;
  }
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
  free(list.v);
  return changed;
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

// Opens the output file: O_TRUNC for the first image, O_EXCL with a free name otherwise.
int open_output(const char* base, bool first) {
  if (first) {
    snprintf(g_path, sizeof g_path, "%s", base);
    return open(g_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }
  for (int k = 0; k < 1000; ++k) {
    if (k == 0)
      snprintf(g_path, sizeof g_path, "%s.%d", base, static_cast<int>(getpid()));
    else
      snprintf(g_path, sizeof g_path, "%s.%d.%d", base, static_cast<int>(getpid()), k);
    const int fd = open(g_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;
}

bool map_header() {
  if (ftruncate(g_fd, SPROF_PAGE) != 0) return false;
  void* h = mmap(nullptr, SPROF_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, g_fd, 0);
  if (h == MAP_FAILED) return false;
  g_hdr = static_cast<sprof_header*>(h);
  g_file_end = SPROF_PAGE;
  return true;
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
void drop_empty_child_file() {
  if ((g_hdr->flags & SPROF_F_CHILD) && std::atomic_ref<uint64_t>(g_hdr->delivered).load() == 0)
    unlink(g_path);
}

void stop_sampling() {
  engine::Table* old = nullptr;
  rt::install(engine::kAgentChannel, nullptr, g_clock, &old);
  engine::Table::destroy(old);
}

void agent_exit() {
  Lock lock;
  if (!g_on) return;
  stop_sampling();
  finish_header();
  drop_empty_child_file();
  g_on = false;
}

// In the forked child, before its timers are armed: the same regions, mapped at the same
// addresses (so the published table stays valid) but backed by a new file FILE.PID whose
// counts start at zero.
void after_fork_child() {
  if (!g_on) return;
  const char* base = getenv("SPROFIL_OUTPUT");
  char parent_path[sizeof g_path];
  memcpy(parent_path, g_path, sizeof g_path);
  const int fd = base ? open_output(base, false) : -1;
  const size_t nregs = g_nregs;
  auto* saved = static_cast<sprof_region*>(malloc((nregs + 1) * sizeof(sprof_region)));
  if (fd < 0 || !saved || ftruncate(fd, static_cast<off_t>(g_file_end)) != 0) {
    // Cannot give the child its own file: stop it from writing into the parent's.
    g_on = false;
    engine::Table* old = engine::global().exchange(engine::kAgentChannel, nullptr);
    (void)old;  // its memory belongs to the parent's copy; leave it
    if (fd >= 0) close(fd);
    free(saved);
    say("sprofil: %s: no profile file for the forked child%s\n", parent_path, "");
    return;
  }
  sprof_header hdr = *g_hdr;
  for (size_t i = 0; i < nregs; ++i) saved[i] = *g_regs[i].rec;
  const int fixed = MAP_SHARED | MAP_FIXED;
  bool ok = mmap(g_hdr, SPROF_PAGE, PROT_READ | PROT_WRITE, fixed, fd, 0) != MAP_FAILED;
  for (size_t i = 0; i < nregs && ok; ++i)
    ok = mmap(g_regs[i].rec, SPROF_PAGE + g_regs[i].counters_bytes, PROT_READ | PROT_WRITE, fixed,
              fd, static_cast<off_t>(g_regs[i].record_offset)) != MAP_FAILED;
  close(g_fd);
  g_fd = fd;
  if (!ok) {
    g_on = false;
    engine::global().exchange(engine::kAgentChannel, nullptr);
    free(saved);
    return;
  }
  fill_header(g_hdr, SPROF_F_CHILD);
  g_hdr->region_count = hdr.region_count;
  g_hdr->regions_end = hdr.regions_end;
  for (size_t i = 0; i < nregs; ++i) *g_regs[i].rec = saved[i];
  free(saved);
}

void before_exec() {
  if (!g_on) return;
  finish_header();
  drop_empty_child_file();
}

void after_failed_exec() {
  if (g_hdr) std::atomic_ref<uint32_t>(g_hdr->flags).fetch_and(~SPROF_F_FINISHED);
}

void atfork_prepare() {
  pthread_mutex_lock(&g_mu);
}
void atfork_parent() {
  pthread_mutex_unlock(&g_mu);
}
void atfork_child() {
  pthread_mutex_init(&g_mu, nullptr);
}

bool parse_env(const char** why) {
  g_clock = rt::ClockRequest{};
  g_clock.kind = rt::ClockKind::kAuto;
  if (const char* c = getenv("SPROFIL_CLOCK"); c && *c) {
    if (!rt::parse_clock(c, &g_clock.kind))
      return *why = "SPROFIL_CLOCK is not auto, cpu, perf, itimer or wall", false;
  }
  if (const char* hz = getenv("SPROFIL_HZ"); hz && *hz) {
    const long v = atol(hz);
    if (v <= 0 || v > 1000000) return *why = "SPROFIL_HZ must be 1..1000000", false;
    g_clock.interval_ns = 1000000000ull / static_cast<uint64_t>(v);
  }
  if (const char* b = getenv("SPROFIL_BIN_BYTES"); b && *b) {
    const long v = atol(b);
    if (v <= 0 || v > 65536 || (v & (v - 1)))
      return *why = "SPROFIL_BIN_BYTES must be a power of two", false;
    g_bin_bytes = static_cast<uint32_t>(v);
  }
  return true;
}

__attribute__((constructor(200))) void agent_start() {
  const char* out = getenv("SPROFIL_OUTPUT");
  if (!out || !*out) return;
  Lock lock;
  const char* why = nullptr;
  if (!parse_env(&why)) {
    say("sprofil: not profiling: %s%s\n", why, "");
    return;
  }
  const bool first = getenv("SPROFIL_STARTED") == nullptr;
  g_fd = open_output(out, first);
  if (g_fd < 0 || !map_header()) {
    say("sprofil: not profiling: cannot create %s: %s\n", out, strerror(errno));
    if (g_fd >= 0) close(g_fd);
    g_fd = -1;
    return;
  }
  setenv("SPROFIL_STARTED", "1", 1);  // later images of this run write files of their own
  fill_header(g_hdr, 0);
  rescan(false);
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
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

// dlopen/dlclose: after the loader is done, bring the regions up to date.
void refresh_after_loader(bool opened) {
  Lock lock;
  if (!g_on) return;
  if (rescan(opened)) publish();
}

using dlopen_fn = void* (*)(const char*, int);
using dlmopen_fn = void* (*)(Lmid_t, const char*, int);
using dlclose_fn = int (*)(void*);
std::atomic<dlopen_fn> g_dlopen{nullptr};
std::atomic<dlmopen_fn> g_dlmopen{nullptr};
std::atomic<dlclose_fn> g_dlclose{nullptr};

}  // namespace

#define SPROFIL_EXPORT extern "C" __attribute__((visibility("default")))

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
