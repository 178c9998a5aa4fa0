// The modern API's live source: sprofil_live_serve(session) (include/sprofil/sprofil.h).
#include <pthread.h>

#include <cerrno>
#include <cstring>

#include "clock/runtime.hpp"
#include "live/live.hpp"
#include "sprofil/sprofil.h"
#include "util/export.hpp"
#include "util/mutex.hpp"

using namespace sprofil;

namespace {

pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;  // orders serving against sprofil_destroy
sprofil_session* g_session = nullptr;

bool api_source(void*, live::Image* out) {
  sprofil_snapshot* snap = nullptr;
  {
    util::MutexGuard lock(&g_mu);
    if (g_session) snap = sprofil_snapshot_take(g_session);
  }
  if (!snap) return false;
  size_t total = SPROF_PAGE;
  for (size_t i = 0; i < snap->nregions; ++i)
    total += live::record_bytes(snap->regions[i].nbins, 8);
  bool ok = live::image_begin(out, total, SPROF_CLOCK_CPU, snap->tick_ns, snap->outside,
                              snap->delivered, snap->lost);
  for (size_t i = 0; ok && i < snap->nregions; ++i) {
    const sprofil_region_counts& r = snap->regions[i];
    uint8_t* dst = live::image_region(out, r.lo, r.hi, r.bin_bytes, 8);
    if (!dst) {
      live::image_free(out);
      ok = false;
      break;
    }
    memcpy(dst, r.counts, r.nbins * 8);  // little-endian hosts (x86-64, aarch64)
  }
  sprofil_snapshot_free(snap);
  if (ok) live::image_finish(out);
  return ok;
}

}  // namespace

SPROFIL_EXPORT int sprofil_live_serve(sprofil_session* s) {
  {
    util::MutexGuard lock(&g_mu);
    g_session = s;
  }
  if (!s) {
    live::forget(api_source, nullptr);
    return 0;
  }
  if (int e = live::start(api_source, nullptr)) {
    {
      util::MutexGuard lock(&g_mu);
      g_session = nullptr;
    }
    errno = e;
    return -1;
  }
  // Its hooks: a seccomp filter (src/clock/sandbox.cpp), a call for one thread (alone.cpp).
  rt::add_process_hooks({.sandboxed = live::retire, .pause = live::pause, .resume = live::resume});
  return 0;
}

extern "C" void sprofil_live_session_gone(sprofil_session* s) {
  util::MutexGuard lock(&g_mu);
  if (g_session == s) g_session = nullptr;
}
