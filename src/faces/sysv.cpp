// System V profil(): seed 001. Rules and tests: docs/faces.md, "System V".
#include "sprofil/sysv.h"

#include <cstdint>

#include "faces/common.hpp"

using namespace sprofil;

extern "C" int sysv_profil(unsigned short* buff, size_t bufsiz, unsigned long offset,
                           unsigned int scale) {
  faces::FaceLock lock;
  if (scale == 0 || scale == 1 || bufsiz < sizeof(unsigned short)) {
    faces::disable();  // scale 0 or 1: off; bufsiz 0: ineffective
    return 0;
  }
  if (scale > 0x10000) return faces::fail(EINVAL);
  if (reinterpret_cast<uintptr_t>(buff) % alignof(unsigned short)) return faces::fail(EINVAL);
  if (!buff || !util::mapped(buff, bufsiz, true)) return faces::fail(EFAULT);
  // Counter index = (((pc - offset) * scale) >> 16) / 2. Once a count reaches 32767 the
  // whole profile stops (Policy::kStopAll with limit 32767).
  engine::Region r;
  if (!faces::scaled_region({offset, scale, 0, 1},
                            {buff, bufsiz / 2, 2, engine::Policy::kStopAll, 32767}, &r))
    return faces::fail(EINVAL);
  if (int e = faces::apply(faces::Owner::kSysv, &r, 1, nullptr, faces::default_clock()))
    return faces::fail(e);
  return 0;
}
