// dlopen/dlmopen/dlclose: after the loader is done, bring the regions up to date. The scan
// runs without the agent's lock, against a reference to the last merged snapshot (it reads
// only the objects that snapshot does not hold); a scan older than the last one merged is
// dropped, and one that sees the same loader state (adds + subs) stops at the first object.
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>

#include "agent/state.hpp"
#include "clock/interpose.hpp"
#include "util/export.hpp"

using namespace sprofil;

namespace {

// Every object a scan finds after start-up was loaded after profiling started (SPROF_R_DLOPEN),
// whichever call's scan finds it: a dlclose racing another thread's dlopen can be first.
void refresh_after_loader() {
  using namespace sprofil::agent;
  if (!g_on.load(std::memory_order_acquire)) return;
  Snapshot* known;
  {
    Lock lock;
    known = acquire_snapshot();
  }
  FoundList list = scan(known);
  {
    Lock lock;
    if (g_on && !list.partial && (!list.has_stamp || list.stamp > g_stamp)) {
      const int m = merge(list, true, -1);
      if (m >= 0) g_stamp = list.stamp;  // else the next call looks again
      if (m > 0) publish();
    }
    release_snapshot(known);
  }
  free_list(&list);
}

using dlopen_fn = void* (*)(const char*, int);
using dlmopen_fn = void* (*)(Lmid_t, const char*, int);
using dlclose_fn = int (*)(void*);
std::atomic<dlopen_fn> g_dlopen{nullptr};
std::atomic<dlmopen_fn> g_dlmopen{nullptr};
std::atomic<dlclose_fn> g_dlclose{nullptr};

}  // namespace

SPROFIL_EXPORT void* dlopen(const char* file, int mode) {
  void* h = rt::real_fn(g_dlopen, "dlopen")(file, mode);
  if (h) refresh_after_loader();
  return h;
}

SPROFIL_EXPORT void* dlmopen(Lmid_t lmid, const char* file, int mode) {
  void* h = rt::real_fn(g_dlmopen, "dlmopen")(lmid, file, mode);
  if (h) refresh_after_loader();
  return h;
}

SPROFIL_EXPORT int dlclose(void* handle) {
  const int rc = rt::real_fn(g_dlclose, "dlclose")(handle);
  if (rc == 0) refresh_after_loader();
  return rc;
}
