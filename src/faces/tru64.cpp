// Tru64 UNIX profil(2), traditional and extended forms: seed 002, second part.
// Rules and tests: docs/faces.md, "Tru64".
#include "sprofil/tru64.h"

#include <cstdint>

#include "faces/common.hpp"

using namespace sprofil;

namespace {

int extended(const tru64_profil_args* args, unsigned int n, unsigned long flags) {
  if (flags != 0) return EINVAL;  // reserved, must be 0
  if (n > TRU64_PROFIL_MAX_ARGS) return EINVAL;
  if (n == 0) {
    faces::disable();
    return 0;
  }
  if (!args || !util::mapped(args, n * sizeof *args, false)) return EFAULT;
  tru64_profil_args a[TRU64_PROFIL_MAX_ARGS];
  for (unsigned i = 0; i < n; ++i) a[i] = args[i];
  // Ordered by decreasing lowpc and not overlapping.
  for (unsigned i = 0; i < n; ++i) {
    if (reinterpret_cast<uintptr_t>(a[i].highpc) <= reinterpret_cast<uintptr_t>(a[i].lowpc))
      return EINVAL;
    if (reinterpret_cast<uintptr_t>(a[i].lowpc) < reinterpret_cast<uintptr_t>(a[i].offset))
      return EINVAL;
    if (i > 0 &&
        (reinterpret_cast<uintptr_t>(a[i].lowpc) >= reinterpret_cast<uintptr_t>(a[i - 1].lowpc) ||
         reinterpret_cast<uintptr_t>(a[i].highpc) > reinterpret_cast<uintptr_t>(a[i - 1].lowpc)))
      return EINVAL;
  }
  engine::Region regs[TRU64_PROFIL_MAX_ARGS];
  size_t nregs = 0;
  for (unsigned k = n; k-- > 0;) {  // ascending order for the engine
    const tru64_profil_args& p = a[k];
    if (p.scale == 0 || p.scale == 1) continue;  // this range is off
    const auto lo = reinterpret_cast<uintptr_t>(p.lowpc);
    const auto hi = reinterpret_cast<uintptr_t>(p.highpc);
    const auto off = reinterpret_cast<uintptr_t>(p.offset);
    // No buffer length is given: the buffer holds the counters the range maps to.
    const uint64_t scale = p.scale == 2 ? 0 : p.scale;  // 2: every pc onto the first element
    const engine::BinMap map{off, scale, 0, 2};
    const uint64_t nelems = map.index(hi - 1) + 1;
    if (reinterpret_cast<uintptr_t>(p.buffer) % alignof(unsigned int)) return EINVAL;
    if (!p.buffer || nelems > SIZE_MAX / 4 || !util::mapped(p.buffer, nelems * 4, true))
      return EFAULT;
    if (!faces::scaled_region({off, scale, 0, 2},
                              {p.buffer, nelems, 4, engine::Policy::kSaturate, 0}, &regs[nregs], lo,
                              hi))
      continue;
    ++nregs;
  }
  return faces::apply(faces::Owner::kTru64Ext, regs, nregs, nullptr, faces::default_clock());
}

int traditional(unsigned short* buf, unsigned int size, uintptr_t offset, unsigned long scale) {
  if (scale == 0 || scale == 1 || size < 2) {
    faces::disable();  // also profil(0, 0, 0, 0): stops either form
    return 0;
  }
  if (scale > UINT32_MAX) return EINVAL;
  if (reinterpret_cast<uintptr_t>(buf) % alignof(unsigned short)) return EINVAL;
  if (!buf || !util::mapped(buf, size, true)) return EFAULT;
  engine::Region r;
  const bool all_to_first = scale == 2;  // "a non-interrupting clock"
  if (!faces::scaled_region({all_to_first ? 0 : offset, all_to_first ? 0 : scale, 0, 1},
                            {buf, size / 2, 2, engine::Policy::kSaturate, 0}, &r))
    return EINVAL;
  return faces::apply(faces::Owner::kTru64, &r, 1, nullptr, faces::default_clock());
}

}  // namespace

extern "C" int tru64_profil(void* buffer, unsigned int buffer_size, void* offset,
                            unsigned long scale_or_flags) {
  faces::FaceLock lock;
  // Either form replaces whatever the other one started.
  const int e =
      offset == reinterpret_cast<void*>(-1)
          ? extended(static_cast<const tru64_profil_args*>(buffer), buffer_size, scale_or_flags)
          : traditional(static_cast<unsigned short*>(buffer), buffer_size,
                        reinterpret_cast<uintptr_t>(offset), scale_or_flags);
  return e ? faces::fail(e) : 0;
}
