// AIX profil subroutine, forms 1 and 2: seed 003. Rules and tests: docs/faces.md, "AIX".
#include "sprofil/aix.h"

#include <climits>
#include <cstdint>

#include "faces/common.hpp"

using namespace sprofil;

namespace {

constexpr size_t kMaxEntries = 4096;

bool aix_on() {
  return faces::owner() == faces::Owner::kAix1 || faces::owner() == faces::Owner::kAix2;
}

// Form 2: an array of struct aix_prof ended by p_high == 0.
int form2(const aix_prof* p) {
  if (!p || !util::mapped(p, sizeof *p, false)) return EFAULT;
  if (p[0].p_high == nullptr) {  // turn off, only what form 2 turned on
    if (faces::owner() == faces::Owner::kAix2) faces::disable();
    return 0;
  }
  if (aix_on()) return 0;  // already on: no effect
  size_t n = 0;
  while (true) {
    if (n == kMaxEntries) return EINVAL;
    if (!util::mapped(&p[n], sizeof *p, false)) return EFAULT;
    if (p[n].p_high == nullptr) break;
    ++n;
  }
  static engine::Region regs[kMaxEntries];
  size_t nregs = 0;
  for (size_t i = 0; i < n; ++i) {
    const aix_prof e = p[i];
    const auto lo = reinterpret_cast<uintptr_t>(e.p_low);
    const auto hi = reinterpret_cast<uintptr_t>(e.p_high);
    if (i > 0 && hi <= reinterpret_cast<uintptr_t>(p[i - 1].p_high)) return EINVAL;
    if (hi <= lo) return EINVAL;
    if (e.p_bufsize < 0 || !e.p_buff || reinterpret_cast<uintptr_t>(e.p_buff) % 2) return EFAULT;
    if (!util::mapped(e.p_buff, static_cast<size_t>(e.p_bufsize), true)) return EFAULT;
    // The buffers lie one after another in one contiguous space.
    if (i > 0 && reinterpret_cast<const char*>(e.p_buff) !=
                     reinterpret_cast<const char*>(p[i - 1].p_buff) + p[i - 1].p_bufsize)
      return EFAULT;
    uint64_t scale;
    if (e.p_scale == UINT_MAX) {
      // Computed so that [p_low, p_high) fills the buffer: bytes of buffer per byte of text.
      scale = (static_cast<uint64_t>(e.p_bufsize) << 16) / (hi - lo);
      if (scale > 0x10000) scale = 0x10000;
    } else {
      scale = e.p_scale & 0xffff;
    }
    if (scale == 0 || scale == 1) continue;  // this entry is off
    if (scale == 2) scale = 0;               // every pc of the range onto one counter
    if (e.p_bufsize < 2) continue;
    if (!faces::scaled_region(
            {lo, scale, 0, 1},
            {e.p_buff, static_cast<uint64_t>(e.p_bufsize) / 2, 2, engine::Policy::kSaturate, 0},
            &regs[nregs], lo, hi))
      continue;
    ++nregs;
  }
  return faces::apply(faces::Owner::kAix2, regs, nregs, nullptr, faces::default_clock());
}

int form1(unsigned short* buf, int bufsize, uintptr_t offset, unsigned int scale_arg) {
  const uint64_t scale = scale_arg & 0xffff;  // the high 16 bits are ignored
  if (scale == 0 || scale == 1) {             // turn off, only what form 1 turned on
    if (faces::owner() == faces::Owner::kAix1) faces::disable();
    return 0;
  }
  if (bufsize < 0) return EINVAL;
  if (bufsize < 2) return 0;  // BufferSize 0: ineffective
  if (aix_on()) return 0;     // already on: no effect
  if (!buf || reinterpret_cast<uintptr_t>(buf) % 2) return EFAULT;
  if (!util::mapped(buf, static_cast<size_t>(bufsize), true)) return EFAULT;
  engine::Region r;
  const bool one = scale == 2;
  if (!faces::scaled_region(
          {one ? 0 : offset, one ? 0 : scale, 0, 1},
          {buf, static_cast<uint64_t>(bufsize) / 2, 2, engine::Policy::kSaturate, 0}, &r))
    return 0;
  return faces::apply(faces::Owner::kAix1, &r, 1, nullptr, faces::default_clock());
}

}  // namespace

extern "C" int aix_profil(void* buf, int bufsize, unsigned long offset, unsigned int scale) {
  faces::FaceLock lock;
  const int e = bufsize == -1 ? form2(static_cast<const aix_prof*>(buf))
                              : form1(static_cast<unsigned short*>(buf), bufsize, offset, scale);
  return e ? faces::fail(e) : 0;
}
