// BSD/macOS profil(2): seed 002, first part. Rules and tests: docs/faces.md, "BSD".
#include "sprofil/bsd.h"

#include <cstdint>

#include "faces/common.hpp"

using namespace sprofil;

extern "C" int bsd_profil(char* samples, size_t size, unsigned long offset, unsigned int scale) {
  faces::FaceLock lock;
  if (scale == 0 || size < 2) {
    faces::disable();
    return 0;
  }
  if (scale > 65536) return faces::fail(EINVAL);
  if (reinterpret_cast<uintptr_t>(samples) % 2) return faces::fail(EINVAL);
  if (!samples || !util::mapped(samples, size, true)) {
    faces::disable();  // the seed: "profiling is terminated and errno is set"
    return faces::fail(EFAULT);
  }
  // bin = ((pc - offset) / 2) * scale / 65536: halve first (pre_shift 1). 16-bit bins that
  // wrap like the BSD kernel's addupc().
  engine::Region r;
  if (!faces::scaled_region({offset, scale, 1, 0}, {samples, size / 2, 2, engine::Policy::kWrap, 0},
                            &r))
    return faces::fail(EINVAL);
  if (int e = faces::apply(faces::Owner::kBsd, &r, 1, nullptr, faces::default_clock()))
    return faces::fail(e);
  return 0;
}
