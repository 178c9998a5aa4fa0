// The path of the running program, from /proc/self/exe: the one place every part of sprofil
// (the runtime and the host tools) reads it. Header-only and libc-only, so that both sides
// can include it; async-signal-safe (readlink).
#pragma once

#include <unistd.h>

#include <cstddef>

namespace sprofil::util {

// Writes the program's path, NUL-terminated, into out[0, n). Returns its length, or 0 (and
// out = "") when it cannot be read or does not fit: a cut path would name another file.
inline size_t self_exe(char* out, size_t n) {
  if (n == 0) return 0;
  out[0] = '\0';
  if (n < 2) return 0;
  const ssize_t got = readlink("/proc/self/exe", out, n - 1);
  if (got <= 0 || static_cast<size_t>(got) >= n - 1) {
    out[0] = '\0';
    return 0;
  }
  out[got] = '\0';
  return static_cast<size_t>(got);
}

}  // namespace sprofil::util
