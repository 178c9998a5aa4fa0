// The modern C API (include/sprofil/sprofil.h) over the engine's API channel.
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "api/version.h"
#include "clock/runtime.hpp"
#include "engine/engine.hpp"
#include "format/layout.hpp"
#include "format/sprof_format.h"
#include "live/live.hpp"
#include "sprofil/sprofil.h"
#include "util/elfsym.hpp"
#include "util/export.hpp"
#include "util/grow.hpp"
#include "util/mutex.hpp"
#include "util/self_exe.hpp"

using namespace sprofil;

namespace {

struct ApiRegion {
  uintptr_t lo, hi;
  void* mem;  // counters: anonymous memory, backed only where written
  size_t mem_bytes;
  uint64_t nbins;
  char name[256];
};

pthread_mutex_t g_api_mu = PTHREAD_MUTEX_INITIALIZER;
sprofil_session* g_running = nullptr;  // guarded by g_api_mu

struct ApiLock : util::MutexGuard {
  ApiLock() : MutexGuard(&g_api_mu) {}
};

int fail(int e) {
  errno = e;
  return -1;
}

unsigned log2u(unsigned v) {
  unsigned s = 0;
  while ((1u << s) < v) ++s;
  return s;
}

}  // namespace

struct sprofil_session {
  sprofil_options opt;
  ApiRegion* regs;
  size_t n, cap;
  engine::Tallies tallies;  // outlives every table of this session
};

namespace {

// Builds the engine table for the session's regions (sorted by start). EINVAL on overlap.
int build_table(sprofil_session* s, engine::Table** out) {
  auto* regs = engine::alloc_regions(s->n);
  if (!regs) return ENOMEM;
  const unsigned shift = log2u(s->opt.bin_bytes);
  for (size_t i = 0; i < s->n; ++i) {
    const ApiRegion& a = s->regs[i];
    regs[i].lo = a.lo;
    regs[i].last = a.hi - 1;
    regs[i].map = engine::BinMap{a.lo, 65536, 0, static_cast<uint8_t>(shift)};
    regs[i].counters = engine::Counters{a.mem, a.nbins, static_cast<uint8_t>(s->opt.counter_width),
                                        engine::Policy::kSaturate, 0};
  }
  std::sort(regs, regs + s->n,
            [](const engine::Region& a, const engine::Region& b) { return a.lo < b.lo; });
  const engine::Error e = engine::Table::create(regs, s->n, nullptr, &s->tallies, out);
  free(regs);
  if (e == engine::Error::kNoMemory) return ENOMEM;
  return e == engine::Error::kOk ? 0 : EINVAL;
}

// The public sprofil_clock numbers (include/sprofil/sprofil.h) are released and the table's
// (SPROF_CLOCKS, src/format/sprof_format.h) are on disk: neither ever changes. They agree up to
// WALL; the public API numbers AUTO 4 and SAMPLER 5 where the table numbers the sampler 4. Every
// number on both sides is pinned here, so a renumbering of either fails to compile.
static_assert(SPROFIL_CLOCK_CPU == 0 && SPROF_CLOCK_CPU == 0);
static_assert(SPROFIL_CLOCK_ITIMER == 1 && SPROF_CLOCK_ITIMER == 1);
static_assert(SPROFIL_CLOCK_PERF == 2 && SPROF_CLOCK_PERF == 2);
static_assert(SPROFIL_CLOCK_WALL == 3 && SPROF_CLOCK_WALL == 3);
static_assert(SPROFIL_CLOCK_SAMPLER == 5 && SPROF_CLOCK_SAMPLER == 4);
static_assert(SPROFIL_CLOCK_AUTO == 4);
static_assert(SPROF_CLOCK_COUNT == 5, "a new row of SPROF_CLOCKS: pin its public number above");

// The one mapping from the public clock to the runtime's: each row of SPROF_CLOCKS by its NAME
// (a row without its SPROFIL_CLOCK_NAME does not compile; -Wswitch flags a public clock
// without its case), and auto. Empty for a number that is no sprofil_clock.
constexpr std::optional<rt::ClockKind> kind_of(sprofil_clock c) {
  switch (c) {
#define SPROFIL_API_CLOCK_(NAME, id, name, description, off_cpu) \
  case SPROFIL_CLOCK_##NAME:                                     \
    return static_cast<rt::ClockKind>(SPROF_CLOCK_##NAME);
    SPROF_CLOCKS(SPROFIL_API_CLOCK_)
#undef SPROFIL_API_CLOCK_
    case SPROFIL_CLOCK_AUTO:
      return rt::ClockKind::kAuto;
  }
  return std::nullopt;
}
static_assert(kind_of(SPROFIL_CLOCK_CPU) == rt::ClockKind::kCpu &&
              kind_of(SPROFIL_CLOCK_ITIMER) == rt::ClockKind::kItimer &&
              kind_of(SPROFIL_CLOCK_PERF) == rt::ClockKind::kPerf &&
              kind_of(SPROFIL_CLOCK_WALL) == rt::ClockKind::kWall &&
              kind_of(SPROFIL_CLOCK_SAMPLER) == rt::ClockKind::kSampler &&
              kind_of(SPROFIL_CLOCK_AUTO) == rt::ClockKind::kAuto &&
              !kind_of(static_cast<sprofil_clock>(6)));

rt::ClockRequest clock_of(const sprofil_options& o) {
  return rt::ClockRequest{*kind_of(o.clock), 1000000000ull / o.hz};  // checked by create
}

// Publishes a fresh table when the session runs.
int republish(sprofil_session* s) {
  engine::Table* t = nullptr;
  if (int e = build_table(s, &t)) return e;
  if (g_running != s) {
    engine::Table::destroy(t);  // validated only
    return 0;
  }
  engine::Table* old = nullptr;
  if (int e = rt::install(engine::kApiChannel, t, clock_of(s->opt), &old)) {
    engine::Table::destroy(t);
    return e;
  }
  engine::Table::destroy(old);
  return 0;
}

int add_region(sprofil_session* s, uintptr_t lo, uintptr_t hi, const char* name) {
  if (!s || hi <= lo) return EINVAL;
  if (!util::grow(&s->regs, &s->cap, s->n + 1, 16)) return ENOMEM;
  const uint64_t nbins = layout::nbins_for(hi - lo, s->opt.bin_bytes);
  const size_t bytes = nbins * s->opt.counter_width;
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED) return ENOMEM;
  ApiRegion& r = s->regs[s->n++];
  r = ApiRegion{lo, hi, mem, bytes, nbins, {}};
  strncpy(r.name, name ? name : "", sizeof r.name - 1);
  if (int e = republish(s)) {
    munmap(mem, bytes);
    --s->n;
    return e;
  }
  return 0;
}

struct ObjectQuery {
  uintptr_t addr;  // 0: every object
  sprofil_session* s;
  int err;
  int added;
};

int add_object_segments(dl_phdr_info* info, size_t, void* data) {
  auto* q = static_cast<ObjectQuery*>(data);
  bool contains = q->addr == 0;
  for (int i = 0; !contains && i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && q->addr >= lo && q->addr < lo + ph.p_memsz) contains = true;
  }
  if (!contains) return 0;
  char exe[PATH_MAX];
  const char* name = info->dlpi_name;
  if (!name || !*name) {
    util::self_exe(exe, sizeof exe);
    name = exe;
  }
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X) || ph.p_memsz == 0) continue;
    const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (int e = add_region(q->s, lo, lo + ph.p_memsz, name)) {
      q->err = e;
      return 1;
    }
    ++q->added;
  }
  return q->addr != 0;  // one object: stop after it
}

int add_objects(sprofil_session* s, uintptr_t addr) {
  ObjectQuery q{addr, s, 0, 0};
  dl_iterate_phdr(add_object_segments, &q);
  if (q.err) return q.err;
  return q.added ? 0 : ENOENT;
}

}  // namespace

extern "C" {

const char* sprofil_version(void) {
  return SPROFIL_VERSION_STRING;
}

void sprofil_options_init(sprofil_options* opt) {
  *opt = sprofil_options{SPROFIL_CLOCK_CPU, 1000, 4, 4};
}

sprofil_session* sprofil_create(const sprofil_options* opt) {
  sprofil_options o;
  sprofil_options_init(&o);
  if (opt) o = *opt;
  if ((o.counter_width != 2 && o.counter_width != 4 && o.counter_width != 8) || o.hz == 0 ||
      o.hz > 1000000 || o.bin_bytes == 0 || (o.bin_bytes & (o.bin_bytes - 1)) ||
      !kind_of(o.clock)) {
    errno = EINVAL;
    return nullptr;
  }
  auto* s = static_cast<sprofil_session*>(calloc(1, sizeof(sprofil_session)));
  if (!s) {
    errno = ENOMEM;
    return nullptr;
  }
  s->opt = o;
  return s;
}

void sprofil_destroy(sprofil_session* s) {
  if (!s) return;
  sprofil_live_session_gone(s);  // src/live: never served after this
  sprofil_stop(s);
  for (size_t i = 0; i < s->n; ++i) munmap(s->regs[i].mem, s->regs[i].mem_bytes);
  free(s->regs);
  free(s);
}

int sprofil_add_range(sprofil_session* s, const void* lo, const void* hi, const char* name) {
  ApiLock lock;
  const int e =
      add_region(s, reinterpret_cast<uintptr_t>(lo), reinterpret_cast<uintptr_t>(hi), name);
  return e ? fail(e) : 0;
}

int sprofil_add_function(sprofil_session* s, const void* fn) {
  util::FunctionExtent f;
  if (!util::function_extent(fn, &f)) return fail(ENOENT);
  ApiLock lock;
  const int e = add_region(s, f.lo, f.hi, f.name);
  return e ? fail(e) : 0;
}

int sprofil_add_symbol(sprofil_session* s, const char* name) {
  if (!name) return fail(EINVAL);
  const void* fn = dlsym(RTLD_DEFAULT, name);
  if (!fn) return fail(ENOENT);
  return sprofil_add_function(s, fn);
}

int sprofil_add_object(sprofil_session* s, const void* addr) {
  if (!s || !addr) return fail(EINVAL);
  ApiLock lock;
  const int e = add_objects(s, reinterpret_cast<uintptr_t>(addr));
  return e ? fail(e) : 0;
}

int sprofil_add_all_objects(sprofil_session* s) {
  if (!s) return fail(EINVAL);
  ApiLock lock;
  const int e = add_objects(s, 0);
  return e ? fail(e) : 0;
}

int sprofil_start(sprofil_session* s) {
  if (!s) return fail(EINVAL);
  ApiLock lock;
  if (g_running == s) return 0;
  if (g_running) return fail(EBUSY);
  if (s->n == 0) return fail(EINVAL);
  g_running = s;
  if (int e = republish(s)) {
    g_running = nullptr;
    return fail(e);
  }
  return 0;
}

int sprofil_stop(sprofil_session* s) {
  if (!s) return fail(EINVAL);
  ApiLock lock;
  if (g_running != s) return 0;
  engine::Table* old = nullptr;
  rt::install(engine::kApiChannel, nullptr, rt::ClockRequest{}, &old);
  engine::Table::destroy(old);
  g_running = nullptr;
  return 0;
}

int sprofil_reset(sprofil_session* s) {
  if (!s) return fail(EINVAL);
  ApiLock lock;
  // Dropping the private anonymous pages zeroes them and gives their memory back.
  for (size_t i = 0; i < s->n; ++i) madvise(s->regs[i].mem, s->regs[i].mem_bytes, MADV_DONTNEED);
  std::atomic_ref<uint64_t>(s->tallies.delivered).store(0);
  std::atomic_ref<uint64_t>(s->tallies.overflow).store(0);
  std::atomic_ref<uint64_t>(s->tallies.lost).store(0);
  return 0;
}

sprofil_snapshot* sprofil_snapshot_take(sprofil_session* s) {
  if (!s) {
    errno = EINVAL;
    return nullptr;
  }
  ApiLock lock;
  // One allocation the caller owns: the snapshot, its region table, the counts and the
  // regions' names (copied: the session's region table moves when it grows and is freed by
  // sprofil_destroy, and the snapshot must not depend on either).
  size_t bytes = sizeof(sprofil_snapshot) + s->n * sizeof(sprofil_region_counts);
  for (size_t i = 0; i < s->n; ++i) bytes += s->regs[i].nbins * sizeof(uint64_t);
  for (size_t i = 0; i < s->n; ++i) bytes += strlen(s->regs[i].name) + 1;
  auto* mem = static_cast<char*>(malloc(bytes));
  if (!mem) {
    errno = ENOMEM;
    return nullptr;
  }
  auto* snap = reinterpret_cast<sprofil_snapshot*>(mem);
  auto* regs = reinterpret_cast<sprofil_region_counts*>(mem + sizeof(sprofil_snapshot));
  auto* counts = reinterpret_cast<uint64_t*>(regs + s->n);
  size_t total_bins = 0;
  for (size_t i = 0; i < s->n; ++i) total_bins += s->regs[i].nbins;
  char* names = reinterpret_cast<char*>(counts + total_bins);
  const unsigned w = s->opt.counter_width;
  for (size_t i = 0; i < s->n; ++i) {
    const ApiRegion& a = s->regs[i];
    const size_t name_len = strlen(a.name) + 1;
    memcpy(names, a.name, name_len);
    regs[i] = sprofil_region_counts{a.lo, a.hi, s->opt.bin_bytes, a.nbins, counts, names};
    names += name_len;
    const engine::Counters c{a.mem, a.nbins, static_cast<uint8_t>(w), engine::Policy::kSaturate};
    for (uint64_t k = 0; k < a.nbins; ++k) counts[k] = engine::load(c, k);
    counts += a.nbins;
  }
  *snap = sprofil_snapshot{s->n,
                           regs,
                           std::atomic_ref<uint64_t>(s->tallies.delivered).load(),
                           std::atomic_ref<uint64_t>(s->tallies.overflow).load(),
                           std::atomic_ref<uint64_t>(s->tallies.lost).load(),
                           1000000000ull / s->opt.hz};
  return snap;
}

void sprofil_snapshot_free(sprofil_snapshot* snap) {
  free(snap);
}

}  // extern "C"

// Diagnostics, not in the public header: what Engine::exchange did so far (exchanges, tables
// retired because a handler still read them, tables leaked). Tests look it up with dlsym.
SPROFIL_EXPORT int sprofil_debug_engine_stats(uint64_t out[3]) {
  if (!out) return -1;
  const engine::Engine::Stats s = engine::global().stats();
  out[0] = s.exchanges;
  out[1] = s.retired;
  out[2] = s.leaked;
  return 0;
}
