#include "faces/common.hpp"

#include <pthread.h>

#include <cstdlib>
#include <cstring>

#include "util/env.hpp"

namespace sprofil::faces {
namespace {
pthread_mutex_t g_face_mu = PTHREAD_MUTEX_INITIALIZER;
Owner g_owner = Owner::kNone;  // guarded by g_face_mu
}  // namespace

FaceLock::FaceLock() : MutexGuard(&g_face_mu) {}

Owner owner() {
  return g_owner;
}

rt::ClockRequest default_clock() {
  rt::ClockRequest c;
  if (const char* k = secure_getenv("SPROFIL_CLOCK")) rt::parse_clock(k, &c.kind);
  if (const char* why = nullptr; !util::hz_from_env(&c.interval_ns, &why)) util::hz_warn_once(why);
  return c;
}

int apply(Owner who, const engine::Region* regions, size_t n, const engine::Counters* overflow,
          const rt::ClockRequest& clock) {
  if (n == 0 && overflow == nullptr) {
    disable();
    return 0;
  }
  engine::Table* t = nullptr;
  const engine::Error e = engine::Table::create(regions, n, overflow, nullptr, &t);
  if (e == engine::Error::kNoMemory) return ENOMEM;
  if (e != engine::Error::kOk) return EINVAL;
  engine::Table* old = nullptr;
  if (int err = rt::install(engine::kFaceChannel, t, clock, &old)) {
    engine::Table::destroy(t);
    return err;
  }
  engine::Table::destroy(old);
  g_owner = who;
  return 0;
}

void disable() {
  engine::Table* old = nullptr;
  rt::install(engine::kFaceChannel, nullptr, rt::ClockRequest{}, &old);
  engine::Table::destroy(old);
  g_owner = Owner::kNone;
}

bool scaled_region(const engine::BinMap& map, const engine::Counters& counters, engine::Region* out,
                   uintptr_t clip_lo, uintptr_t clip_hi) {
  __extension__ using u128 = unsigned __int128;
  engine::Region r;
  r.counters = counters;
  r.map = map;
  const uintptr_t offset = map.base;
  const uint64_t scale = map.scale;
  const uint64_t nelems = counters.nelems;
  if (nelems == 0 || clip_hi <= clip_lo) return false;
  uintptr_t lo = clip_lo > offset ? clip_lo : offset;
  u128 end = static_cast<u128>(clip_hi);  // exclusive
  if (scale != 0) {
    // index < nelems  <=>  (pc - offset) >> pre_shift <= q, with q below.
    const u128 bound = (static_cast<u128>(nelems) << map.post_shift) << 16;
    const u128 q = (bound - 1) / scale;
    const u128 span = (q + 1) << map.pre_shift;
    const u128 span_end = static_cast<u128>(offset) + span;
    if (span_end < end) end = span_end;
  }
  if (end <= lo) return false;
  r.lo = lo;
  r.last = static_cast<uintptr_t>(end - 1);
  *out = r;
  return true;
}

}  // namespace sprofil::faces
