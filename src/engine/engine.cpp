// Signal-safety audit of the handler path (Engine::sample -> Table::record -> find, bump):
// - Table memory (n_, los_, regions_, overflow_, has_overflow_, generation_) is written only
//   before the table is published by Engine::exchange's seq_cst store and never after, so the
//   handler's seq_cst load of the table pointer makes all of it visible.
// - A table is freed only after exchange() has taken it off its channel and seen the
//   channel's reader count at zero: a handler raises the count before loading the pointer and
//   lowers it after its last access (seq_cst on both sides, see Engine::exchange).
// - Counters are written only with std::atomic_ref operations; tallies likewise.
// - The last-hit hint is an initial-exec TLS array of plain integers: no allocation on
//   first access, no lazy TLS resolution inside the handler.
// - Nothing here calls a library function, allocates, locks, or touches errno.
#include "engine/engine.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

namespace sprofil::engine {
namespace {

std::atomic<uint32_t> g_generation{1};

uint64_t width_max(uint8_t width) {
  return width == 8 ? std::numeric_limits<uint64_t>::max() : (uint64_t{1} << (8 * width)) - 1;
}

template <class T>
uint64_t bump_as(T* p, uint64_t w, Policy policy, uint64_t limit, bool* at_limit) {
  std::atomic_ref<T> a(*p);
  if (policy == Policy::kWrap) {
    a.fetch_add(static_cast<T>(w), std::memory_order_relaxed);
    return w;
  }
  T cur = a.load(std::memory_order_relaxed);
  for (;;) {
    if (cur >= limit) {
      *at_limit = true;
      return 0;
    }
    const uint64_t room = limit - cur;
    const uint64_t add = w < room ? w : room;
    if (a.compare_exchange_weak(cur, static_cast<T>(cur + add), std::memory_order_relaxed)) {
      *at_limit = add == room;
      return add;
    }
  }
}

// error_name's messages, in the order of enum Error.
constexpr const char* kErrorNames[] = {
    "ok",
    "out of memory",
    "counter width is not 2, 4 or 8",
    "counter array not aligned to its width",
    "empty text range or counter array",
    "text range maps past the counter array",
    "regions not sorted by start address",
    "regions overlap",
};
constexpr size_t kErrors = sizeof kErrorNames / sizeof kErrorNames[0];
static_assert(kErrors == static_cast<size_t>(Error::kOverlap) + 1, "one message per Error");

}  // namespace

const char* error_name(Error e) {
  const auto i = static_cast<size_t>(e);
  return i < kErrors ? kErrorNames[i] : "unknown";
}

uint64_t bump(const Counters& c, uint64_t index, uint64_t w, bool* at_limit) {
  *at_limit = false;
  // A limit above what the width holds would let the counter wrap: clamp it.
  const uint64_t limit = c.limit ? std::min(c.limit, width_max(c.width)) : width_max(c.width);
  switch (c.width) {
    case 2:
      return bump_as(static_cast<uint16_t*>(c.base) + index, w, c.policy, limit, at_limit);
    case 4:
      return bump_as(static_cast<uint32_t*>(c.base) + index, w, c.policy, limit, at_limit);
    default:
      return bump_as(static_cast<uint64_t*>(c.base) + index, w, c.policy, limit, at_limit);
  }
}

uint64_t load(const Counters& c, uint64_t index) {
  switch (c.width) {
    case 2:
      return std::atomic_ref<uint16_t>(static_cast<uint16_t*>(c.base)[index])
          .load(std::memory_order_relaxed);
    case 4:
      return std::atomic_ref<uint32_t>(static_cast<uint32_t*>(c.base)[index])
          .load(std::memory_order_relaxed);
    default:
      return std::atomic_ref<uint64_t>(static_cast<uint64_t*>(c.base)[index])
          .load(std::memory_order_relaxed);
  }
}

Region* alloc_regions(size_t n) {
  if (n == 0) n = 1;
  if (n > SIZE_MAX / sizeof(Region)) return nullptr;
  auto* regs = static_cast<Region*>(std::malloc(n * sizeof(Region)));
  if (regs)
    for (size_t i = 0; i < n; ++i) new (&regs[i]) Region();
  return regs;
}

static Error check_counters(const Counters& c) {
  if (c.width != 2 && c.width != 4 && c.width != 8) return Error::kBadWidth;
  if (c.base == nullptr || c.nelems == 0) return Error::kEmptyRange;
  if (reinterpret_cast<uintptr_t>(c.base) % c.width != 0) return Error::kMisaligned;
  return Error::kOk;
}

Error Table::create(const Region* regions, size_t n, const Counters* overflow, Tallies* tallies,
                    Table** out) {
  *out = nullptr;
  for (size_t i = 0; i < n; ++i) {
    const Region& r = regions[i];
    if (Error e = check_counters(r.counters); e != Error::kOk) return e;
    if (r.last < r.lo) return Error::kEmptyRange;
    // wide_index() is monotonic in pc from the map's base, so checking both ends (in 128
    // bits: the 64-bit index could wrap) checks the whole range.
    if (r.lo < r.map.base || r.map.wide_index(r.lo) >= r.counters.nelems ||
        r.map.wide_index(r.last) >= r.counters.nelems)
      return Error::kIndexOutside;
    if (i > 0 && r.lo <= regions[i - 1].lo) return Error::kUnsorted;
    if (i > 0 && r.lo <= regions[i - 1].last) return Error::kOverlap;
  }
  if (overflow) {
    if (Error e = check_counters(*overflow); e != Error::kOk) return e;
  }
  // One allocation: the table, then the packed starts, then the regions.
  const size_t head = (sizeof(Table) + alignof(Region) - 1) / alignof(Region) * alignof(Region);
  const size_t bytes = head + n * (sizeof(Region) + sizeof(uintptr_t));
  void* mem = std::malloc(bytes);
  if (!mem) return Error::kNoMemory;
  std::memset(mem, 0, bytes);
  Table* t = new (mem) Table();
  auto* base = static_cast<char*>(mem);
  t->regions_ = reinterpret_cast<Region*>(base + head);
  t->los_ = reinterpret_cast<uintptr_t*>(base + head + n * sizeof(Region));
  t->n_ = n;
  for (size_t i = 0; i < n; ++i) {
    t->regions_[i] = regions[i];
    t->los_[i] = regions[i].lo;
  }
  t->has_overflow_ = overflow != nullptr;
  for (size_t i = 0; i < n && !t->has_system_; ++i) t->has_system_ = regions[i].system != nullptr;
  if (overflow) t->overflow_ = *overflow;
  t->tallies_ = tallies ? tallies : &t->own_tallies_;
  t->generation_ = g_generation.fetch_add(1, std::memory_order_relaxed);
  *out = t;
  return Error::kOk;
}

void Table::destroy(Table* t) {
  if (!t) return;
  t->~Table();
  std::free(t);
}

const Region* Table::find(uintptr_t pc, uint64_t* hint) const {
  // The hint holds (generation << 32) | (index + 1) of the last hit in this table.
  const uint64_t h = *hint;
  if ((h >> 32) == generation_) {
    const uint64_t i = (h & 0xffffffffu) - 1;
    if (i < n_ && pc >= regions_[i].lo && pc <= regions_[i].last) return &regions_[i];
  }
  // First start above pc; the candidate is the region before it. Correct below the lowest
  // region (count 0), above the highest, and on every boundary.
  size_t lo = 0, hi = n_;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (los_[mid] <= pc)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0) return nullptr;
  const Region* r = &regions_[lo - 1];
  if (pc > r->last) return nullptr;
  *hint = (uint64_t{generation_} << 32) | static_cast<uint64_t>(lo);
  return r;
}

// The delivered tally is raised last, once the sample is in a bin or in another tally: a
// process killed in between (SIGKILL stops it at any instruction) leaves a count that
// delivered does not have yet, which the reader of a profile that did not finish takes back
// into delivered, never a delivered sample that no bin holds (it was raised first before, and
// a kill in between left delivered ahead of the counts, 116 against 113, as if lost).
void Table::record(uintptr_t pc, uint64_t w, uint64_t system_w, uint64_t* hint) {
  Tallies& tl = *tallies_;
  std::atomic_ref<uint64_t> delivered(tl.delivered);
  if (stopped_.load(std::memory_order_relaxed)) {
    std::atomic_ref<uint64_t>(tl.lost).fetch_add(w, std::memory_order_relaxed);
    delivered.fetch_add(w, std::memory_order_relaxed);
    return;
  }
  const Region* r = find(pc, hint);
  const Counters* c = nullptr;
  uint64_t index = 0;
  if (r) {
    c = &r->counters;
    index = r->map.index(pc);
  } else {
    std::atomic_ref<uint64_t>(tl.overflow).fetch_add(w, std::memory_order_relaxed);
    if (!has_overflow_) {
      delivered.fetch_add(w, std::memory_order_relaxed);
      return;
    }
    c = &overflow_;
  }
  bool at_limit = false;
  const uint64_t added = bump(*c, index, w, &at_limit);
  if (added != w)
    std::atomic_ref<uint64_t>(tl.lost).fetch_add(w - added, std::memory_order_relaxed);
  if (r && r->system && system_w && added) {
    Counters sys = *c;
    sys.base = r->system;
    sys.policy = Policy::kSaturate;
    sys.limit = 0;
    bool sys_limit = false;
    bump(sys, index, system_w < added ? system_w : added, &sys_limit);
  }
  delivered.fetch_add(w, std::memory_order_relaxed);
  if (at_limit && c->policy == Policy::kStopAll) stopped_.store(1, std::memory_order_relaxed);
}

void Table::record_lost(uint64_t w) {
  std::atomic_ref<uint64_t>(tallies_->delivered).fetch_add(w, std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(tallies_->lost).fetch_add(w, std::memory_order_relaxed);
}

namespace {
// Last-hit hints, one per channel and thread. Initial-exec TLS: a fixed offset from the
// thread pointer, so the handler never triggers lazy TLS allocation.
__attribute__((tls_model("initial-exec"))) thread_local uint64_t t_hint[kChannels];
}  // namespace

// Runs f(table, channel) for every channel's table, holding the channel's reader count
// around the access (see exchange()). Signal-safe.
template <class F>
void Engine::for_each_table(F f) {
  for (unsigned ch = 0; ch < kChannels; ++ch) {
    if (tables_[ch].load(std::memory_order_relaxed) == nullptr) continue;
    readers_[ch].fetch_add(1, std::memory_order_seq_cst);
    if (Table* t = tables_[ch].load(std::memory_order_seq_cst)) f(t, ch);
    readers_[ch].fetch_sub(1, std::memory_order_release);
  }
}

void Engine::sample(uintptr_t pc, uint64_t w, uint64_t system_w) {
  for_each_table([&](Table* t, unsigned ch) { t->record(pc, w, system_w, &t_hint[ch]); });
}

void Engine::lost(uint64_t w) {
  for_each_table([&](Table* t, unsigned) { t->record_lost(w); });
}

namespace {
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}
}  // namespace

Table* Engine::exchange(Channel ch, Table* next) {
  exchanges_.fetch_add(1, std::memory_order_relaxed);
  Table* old = tables_[ch].exchange(next, std::memory_order_seq_cst);
  if (next && next->has_system())
    system_channels_.fetch_or(1u << ch, std::memory_order_relaxed);
  else
    system_channels_.fetch_and(~(1u << ch), std::memory_order_relaxed);
  // A handler that loaded `old` raised readers_ before that load, which came before our
  // exchange; so it is counted until it is done. Handlers take well under a microsecond and
  // run with every signal blocked, so a count is never left raised by a siglongjmp; but a
  // handler's thread can be preempted (or stopped by a debugger) inside it. So: a short
  // bounded spin, no OS call; then the old table is retired, not freed.
  bool clear = false;
  for (int i = 0; i < kSpin && !clear; ++i) {
    clear = readers_[ch].load(std::memory_order_seq_cst) == 0;
    if (!clear) cpu_relax();
  }
  if (clear) {
    // No handler reads any table of this channel now: the retired ones can go too.
    free_retired(ch);
    return old;
  }
  if (!old) return nullptr;
  retired_count_.fetch_add(1, std::memory_order_relaxed);
  if (nretired_[ch]++ >= kRetiredMax) leaked_.fetch_add(1, std::memory_order_relaxed);
  old->retired_next_ = retired_[ch];
  retired_[ch] = old;
  return nullptr;
}

void Engine::free_retired(Channel ch) {
  while (Table* t = retired_[ch]) {
    retired_[ch] = t->retired_next_;
    Table::destroy(t);
  }
  nretired_[ch] = 0;
}

// Only an engine with no handler left running ends (a test's, or the process's at exit).
Engine::~Engine() {
  for (unsigned ch = 0; ch < kChannels; ++ch) free_retired(static_cast<Channel>(ch));
}

Engine::Stats Engine::stats() const {
  Stats s;
  s.exchanges = exchanges_.load(std::memory_order_relaxed);
  s.retired = retired_count_.load(std::memory_order_relaxed);
  s.leaked = leaked_.load(std::memory_order_relaxed);
  return s;
}

bool Engine::any() const {
  for (unsigned ch = 0; ch < kChannels; ++ch)
    if (tables_[ch].load(std::memory_order_relaxed)) return true;
  return false;
}

namespace {
// Constant-initialised (usable before any constructor runs) and never destroyed: handlers may
// still run while the process exits.
union GlobalEngine {
  constexpr GlobalEngine() : engine() {}
  ~GlobalEngine() {}
  Engine engine;
};
constinit GlobalEngine g_engine;
}  // namespace

Engine& global() {
  return g_engine.engine;
}

}  // namespace sprofil::engine
