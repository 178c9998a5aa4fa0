// Checks whether a range of this process's memory is mapped with the given access, from
// /proc/self/maps, so that the faces can answer EFAULT instead of faulting later.
#pragma once

#include <cstddef>

namespace sprofil::util {

// True when every byte of [p, p + n) is mapped readable (and writable if `write`).
// n == 0 is valid for any p.
bool mapped(const void* p, size_t n, bool write);

}  // namespace sprofil::util
