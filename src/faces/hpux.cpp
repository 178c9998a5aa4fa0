// HP-UX sprofil(2) / profil(2): seed 000. Rules and tests: docs/faces.md, "HP-UX".
#include "sprofil/hpux.h"

#include <climits>
#include <cstdint>
#include <cstdlib>

#include "faces/common.hpp"

using namespace sprofil;

long hpux_profil_max(void) {
  return HPUX_PROFIL_MAX;
}

extern "C" int hpux_sprofil(struct hpux_prof* profp, int profcnt, struct timeval* tvp,
                            unsigned int flags) {
  faces::FaceLock lock;
  if (profcnt < 0 || profcnt > HPUX_PROFIL_MAX) return faces::fail(E2BIG);
  if (profcnt == 0) {
    faces::disable();
    return 0;
  }
  const size_t n = static_cast<size_t>(profcnt);
  if (!profp || !util::mapped(profp, n * sizeof(hpux_prof), false)) return faces::fail(EFAULT);
  if (tvp && !util::mapped(tvp, sizeof *tvp, true)) return faces::fail(EFAULT);
  uint8_t width;
  switch (flags) {
    case PROF_USHORT:
      width = 2;
      break;
    case PROF_UINT:
      width = 4;
      break;
    case PROF_UINT64:
      width = 8;
      break;
    default:
      return faces::fail(EINVAL);
  }
  // Work on a copy: the caller's array may change under us.
  auto* ents = static_cast<hpux_prof*>(malloc(n * sizeof(hpux_prof)));
  auto* regs = engine::alloc_regions(n);
  struct Free {
    void* a;
    void* b;
    ~Free() {
      free(a);
      free(b);
    }
  } guard{ents, regs};
  if (!ents || !regs) return faces::fail(ENOMEM);
  for (size_t i = 0; i < n; ++i) ents[i] = profp[i];

  const auto is_overflow_desc = [](const hpux_prof& p) {
    return p.pr_offset == nullptr && p.pr_scale == 2;
  };
  engine::Counters overflow;
  bool has_overflow = false;
  size_t nregs = 0;
  uintptr_t prev_offset = 0;
  bool have_prev = false;
  for (size_t i = 0; i < n; ++i) {
    const hpux_prof& p = ents[i];
    if (is_overflow_desc(p)) {
      // The overflow descriptor: last, exactly one element.
      if (i != n - 1 || p.pr_size != width) return faces::fail(EINVAL);
      if (reinterpret_cast<uintptr_t>(p.pr_base) % width) return faces::fail(EINVAL);
      if (!util::mapped(p.pr_base, width, true)) return faces::fail(EFAULT);
      overflow = engine::Counters{p.pr_base, 1, width, engine::Policy::kSaturate, 0};
      has_overflow = true;
      continue;
    }
    if (p.pr_scale == 0 || p.pr_scale == 1) continue;            // entry ignored
    const uint64_t max_size = (uint64_t{1} << 30) * p.pr_scale;  // (2^46 * scale) / 65536
    if (p.pr_size == 0 || p.pr_size % width != 0 || p.pr_size > max_size)
      return faces::fail(EINVAL);
    if (reinterpret_cast<uintptr_t>(p.pr_base) % width) return faces::fail(EINVAL);
    const auto off = reinterpret_cast<uintptr_t>(p.pr_offset);
    if (have_prev && off <= prev_offset) return faces::fail(EINVAL);  // not ascending
    prev_offset = off;
    have_prev = true;
    if (!util::mapped(p.pr_base, p.pr_size, true)) return faces::fail(EFAULT);
    const uint8_t post = width == 2 ? 1 : width == 4 ? 2 : 3;
    if (!faces::scaled_region({off, p.pr_scale, 0, post},
                              {p.pr_base, p.pr_size / width, width, engine::Policy::kSaturate, 0},
                              &regs[nregs]))
      continue;
    if (nregs > 0 && regs[nregs].lo <= regs[nregs - 1].last) return faces::fail(EINVAL);
    ++nregs;
  }
  const rt::ClockRequest clock = faces::default_clock();
  if (int e =
          faces::apply(faces::Owner::kHpux, regs, nregs, has_overflow ? &overflow : nullptr, clock))
    return faces::fail(e);
  if (tvp) {
    tvp->tv_sec = static_cast<time_t>(clock.interval_ns / 1000000000u);
    tvp->tv_usec = static_cast<suseconds_t>((clock.interval_ns % 1000000000u) / 1000u);
  }
  return 0;
}

extern "C" int hpux_profil(void* buff, size_t bufsiz, void* offset, unsigned int scale) {
  if (bufsiz > UINT_MAX) return faces::fail(EINVAL);
  hpux_prof p{buff, static_cast<unsigned int>(bufsiz), offset, scale};
  return hpux_sprofil(&p, 1, nullptr, PROF_USHORT);
}
