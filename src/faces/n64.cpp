// Nintendo 64 libultra osProfile*: seed 004. Rules and tests: docs/faces.md, "Nintendo 64".
// osProfileInit starts the I/O thread (src/live, docs/live.md) that serves the current
// histograms to `sprofil gperf PID`; osProfileFlush takes a consistent snapshot (kept for
// osProfileFlushSnapshot) and pushes it to `sprofil gperf --serve`, never blocking when no
// server runs (ERR_OSPROFILEFLUSH_HOST). The live service is called without FaceLock held
// (its source takes FaceLock on the I/O thread).
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "faces/common.hpp"
#include "live/live.hpp"
#include "sprofil/ultra64.h"

using namespace sprofil;

namespace {

struct Segment {
  void* histo;
  u32 histo_size;
  uintptr_t start;  // first instruction
  uintptr_t end;    // last instruction
};

// Guarded by FaceLock.
bool g_init = false;
bool g_running = false;
int g_last_error = 0;
u32 g_width = 2;
Segment* g_segs = nullptr;
u32 g_nsegs = 0;
void* g_snapshot = nullptr;  // counters copied by Flush, segment after segment
u32 g_flushes = 0;
u32 g_overflow = 0;            // the internal 32-bit overflow counter (updated by the handler)
uint64_t g_tick_ns = 1000000;  // the last osProfileStart period
uint32_t g_clock = 0;          // its clock (sprof_clock)

void set_error(int e) {
  g_last_error = e;
}

size_t counters_bytes(const Segment* s, u32 n, u32 width) {
  size_t b = 0;
  for (u32 i = 0; i < n; ++i) b += static_cast<size_t>(s[i].histo_size) * width;
  return b;
}

// Copies the counters of every segment (read atomically, as the handler writes them) into
// `dst`, segment after segment.
void copy_counters(unsigned char* dst) {
  for (u32 i = 0; i < g_nsegs; ++i) {
    const size_t bytes = static_cast<size_t>(g_segs[i].histo_size) * g_width;
    const engine::Counters c{g_segs[i].histo, g_segs[i].histo_size, static_cast<uint8_t>(g_width)};
    for (size_t k = 0; k < g_segs[i].histo_size; ++k) {
      const uint64_t v = engine::load(c, k);
      const u16 v16 = static_cast<u16>(v);
      const u32 v32 = static_cast<u32>(v);
      memcpy(dst + k * g_width, g_width == 2 ? static_cast<const void*>(&v16) : &v32, g_width);
    }
    dst += bytes;
  }
}

// A .sprof image of `counters` (laid out as copy_counters does). FaceLock held. Each segment
// is one region [text_start, text_end + 4) of one counter per 32-bit word; the counters past
// the last word (histo_size may be larger) are not part of it.
bool build_image(const unsigned char* counters, live::Image* im) {
  size_t total = SPROF_PAGE;
  for (u32 i = 0; i < g_nsegs; ++i)
    total += live::record_bytes((g_segs[i].end - g_segs[i].start) / 4 + 1, g_width);
  const u32 overflow = std::atomic_ref<u32>(g_overflow).load();
  if (!live::image_begin(im, total, g_clock, g_tick_ns, overflow, 0, 0)) return false;
  for (u32 i = 0; i < g_nsegs; ++i) {
    const Segment& s = g_segs[i];
    uint8_t* dst = live::image_region(im, s.start, s.end + 4, 4, g_width);
    if (!dst) return live::image_free(im), false;
    memcpy(dst, counters, ((s.end - s.start) / 4 + 1) * g_width);
    counters += static_cast<size_t>(s.histo_size) * g_width;
  }
  return true;
}

// The live source: the counters as they are now (the I/O thread, any time after Init).
bool live_source(void*, live::Image* out) {
  unsigned char* tmp = nullptr;
  {
    faces::FaceLock lock;
    if (!g_init) return false;
    tmp = static_cast<unsigned char*>(malloc(counters_bytes(g_segs, g_nsegs, g_width)));
    if (!tmp) return false;
    copy_counters(tmp);
    const bool ok = build_image(tmp, out);
    free(tmp);
    if (!ok) return false;
  }
  live::image_finish(out);
  return true;
}

}  // namespace

namespace {
void init_locked(OSProf* profp, u32 profcnt, u32 flags) {
  if (g_running) return set_error(ERR_OSPROFILEINIT_STR);
  if (profcnt == 0 || profcnt > PROF_MAX_SEGMENTS || (flags & ~OS_PROFILE_U32) || !profp ||
      !util::mapped(profp, profcnt * sizeof(OSProf), false))
    return set_error(ERR_OSPROFILEINIT_CNT);
  const u32 width = (flags & OS_PROFILE_U32) ? 4 : 2;
  auto* segs = static_cast<Segment*>(malloc(profcnt * sizeof(Segment)));
  if (!segs) return set_error(ERR_OSPROFILEINIT_CNT);
  for (u32 i = 0; i < profcnt; ++i) {
    const OSProf p = profp[i];
    const auto start = reinterpret_cast<uintptr_t>(p.text_start);
    const auto end = reinterpret_cast<uintptr_t>(p.text_end);
    int err = 0;
    if (!p.histo_base || reinterpret_cast<uintptr_t>(p.histo_base) % 4)
      err = ERR_OSPROFILEINIT_ALN;
    else if (start >= end)
      err = ERR_OSPROFILEINIT_ORD;
    else if (p.histo_size == 0 || p.histo_size < (end - start) / 4 + 1 ||
             !util::mapped(p.histo_base, static_cast<size_t>(p.histo_size) * width, true))
      err = ERR_OSPROFILEINIT_SIZ;
    if (err) {
      free(segs);
      return set_error(err);
    }
    segs[i] = Segment{p.histo_base, p.histo_size, start, end};
  }
  // The check for overlapping segments that the seed's BUGS section asks for.
  for (u32 i = 0; i < profcnt; ++i)
    for (u32 j = i + 1; j < profcnt; ++j)
      if (segs[i].start <= segs[j].end + 3 && segs[j].start <= segs[i].end + 3) {
        free(segs);
        return set_error(ERR_OSPROFILEINIT_OVL);
      }
  void* snap = malloc(counters_bytes(segs, profcnt, width));
  if (!snap) {
    free(segs);
    return set_error(ERR_OSPROFILEINIT_CNT);
  }
  free(g_segs);
  free(g_snapshot);
  g_segs = segs;
  g_nsegs = profcnt;
  g_snapshot = snap;
  g_width = width;
  for (u32 i = 0; i < profcnt; ++i) memset(segs[i].histo, 0, segs[i].histo_size * width);
  std::atomic_ref<u32>(g_overflow).store(0);
  g_flushes = 0;
  g_init = true;
  set_error(0);
}
}  // namespace

extern "C" void osProfileInitEx(OSProf* profp, u32 profcnt, u32 flags) {
  bool ok;
  {
    faces::FaceLock lock;
    init_locked(profp, profcnt, flags);
    ok = g_init && g_last_error == 0;
  }
  // The I/O thread (once per process; the errors of the service do not fail Init: the
  // program's profile works without it).
  if (ok) live::start(live_source, nullptr);
}

extern "C" void osProfileInit(OSProf* profp, u32 profcnt) {
  osProfileInitEx(profp, profcnt, 0);
}

extern "C" void osProfileStart(u32 microseconds) {
  faces::FaceLock lock;
  if (!g_init) return set_error(ERR_OSPROFILESTART_INIT);
  if (g_running) return set_error(ERR_OSPROFILESTART_FLAG);
  if (microseconds < PROF_MIN_INTERVAL) return set_error(ERR_OSPROFILESTART_TIME);
  // One counter per 32-bit word: index = (pc - text_start) >> 2, sorted for the engine.
  auto* regs = engine::alloc_regions(g_nsegs);
  if (!regs) return set_error(ERR_OSPROFILESTART_SYS);
  for (u32 i = 0; i < g_nsegs; ++i) {
    const Segment& s = g_segs[i];
    engine::Region& r = regs[i];
    r.lo = s.start;
    r.last = s.end + 3;
    r.map = engine::BinMap{s.start, 65536, 2, 0};
    // "No protection for overflow": 16-bit counters wrap; 32-bit ones (OS_PROFILE_U32) too.
    r.counters = engine::Counters{s.histo, s.histo_size, static_cast<uint8_t>(g_width),
                                  engine::Policy::kWrap, 0};
  }
  for (u32 i = 1; i < g_nsegs; ++i)  // insertion sort by start; profcnt is small
    for (u32 j = i; j > 0 && regs[j].lo < regs[j - 1].lo; --j) {
      const engine::Region t = regs[j];
      regs[j] = regs[j - 1];
      regs[j - 1] = t;
    }
  const engine::Counters overflow{&g_overflow, 1, 4, engine::Policy::kSaturate, 0};
  rt::ClockRequest clock = faces::default_clock();
  clock.interval_ns = uint64_t{microseconds} * 1000u;
  g_tick_ns = clock.interval_ns;
  g_clock = static_cast<uint32_t>(clock.kind);
  const int e = faces::apply(faces::Owner::kN64, regs, g_nsegs, &overflow, clock);
  free(regs);
  if (e) return set_error(ERR_OSPROFILESTART_SYS);
  g_running = true;
  set_error(0);
}

extern "C" void osProfileStop(void) {
  faces::FaceLock lock;
  if (!g_init) return set_error(ERR_OSPROFILESTOP_TIMER);
  if (!g_running) return set_error(ERR_OSPROFILESTOP_FLAG);
  if (faces::owner() == faces::Owner::kN64) faces::disable();
  g_running = false;
  set_error(0);
}

extern "C" void osProfileFlush(void) {
  live::Image im;
  {
    faces::FaceLock lock;
    set_error(0);
    if (!g_init) return;  // nothing to send yet: safe, and a no-op
    copy_counters(static_cast<unsigned char*>(g_snapshot));
    ++g_flushes;
    if (!build_image(static_cast<unsigned char*>(g_snapshot), &im)) {
      set_error(ERR_OSPROFILEFLUSH_HOST);
      return;
    }
  }
  // To the host tool in server mode, outside the lock: a non-blocking connect (no server:
  // back at once), at most kPushMs to hand it over, never SIGPIPE.
  constexpr int kPushMs = 1000;
  live::image_finish(&im);
  const int e = live::push(im, kPushMs);
  live::image_free(&im);
  if (e) {
    faces::FaceLock lock;
    set_error(ERR_OSPROFILEFLUSH_HOST);
  }
}

extern "C" int osProfileLastError(void) {
  faces::FaceLock lock;
  return g_last_error;
}

extern "C" u32 osProfileOverflowCount(void) {
  return std::atomic_ref<u32>(g_overflow).load(std::memory_order_relaxed);
}

extern "C" u32 osProfileFlushSnapshot(void* dst, u32 bytes) {
  faces::FaceLock lock;
  if (!g_init || g_flushes == 0 || !dst) return 0;
  const size_t have = counters_bytes(g_segs, g_nsegs, g_width);
  const size_t n = bytes < have ? bytes : have;
  memcpy(dst, g_snapshot, n);
  return static_cast<u32>(n);
}

extern "C" u32 osProfileFlushCount(void) {
  faces::FaceLock lock;
  return g_flushes;
}
