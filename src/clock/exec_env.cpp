// The environment that an exec or a posix_spawn of the program passes (exec.cpp's with_env):
// the program's envp as it is, unless the program it starts could not run the agent, where
// sprofil's variables (SPROFIL_*) and libsprofil's entry in LD_PRELOAD come out of it:
// - the program installed a seccomp filter (sandbox.cpp), which the new program inherits:
//   the agent's start in it would make calls the filter denies;
// - libsprofil cannot be read at the path in LD_PRELOAD, as the new program would see it: the
//   program changed its root (chroot, a container's pivot_root) or its user (a daemon that
//   drops root for a user who cannot read the library's directory). The loader would print
//   "ERROR: ld.so: object ... cannot be preloaded" into the new program's stderr, which it
//   does not print natively (tests/harm `NoHarm.ChrootedProgramGetsNoLoaderError`).
// Every function here may run in a vfork child (which shares our memory): they change no
// state, and the copy the caller makes is on its stack.
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include <cerrno>

#include "clock/clock.hpp"

namespace sprofil::rt {
namespace {

bool starts_with(const char* s, const char* prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

// Whether one LD_PRELOAD entry (ends at `end`) names libsprofil: its base name starts so.
bool is_ours(const char* entry, const char* end) {
  const char* base = entry;
  for (const char* p = entry; p < end; ++p)
    if (*p == '/') base = p + 1;
  constexpr char kName[] = "libsprofil.so";
  return static_cast<size_t>(end - base) >= sizeof kName - 1 &&
         memcmp(base, kName, sizeof kName - 1) == 0;
}

bool is_separator(char c) {
  return c == ':' || c == ' ';
}

// Whether an entry of LD_PRELOAD's value that names libsprofil by a path (a bare name is
// looked up by the loader, not checked) cannot be read: the loader would say so and go on
// without it. errno is left as it was.
bool preload_unreadable(const char* value) {
  const int saved = errno;
  bool unreadable = false;
  for (const char* p = value; *p && !unreadable;) {
    while (*p && is_separator(*p)) ++p;
    const char* end = p;
    while (*end && !is_separator(*end)) ++end;
    if (end > p && is_ours(p, end) && memchr(p, '/', static_cast<size_t>(end - p))) {
      char path[PATH_MAX];
      const size_t n = static_cast<size_t>(end - p);
      if (n < sizeof path) {
        memcpy(path, p, n);
        path[n] = '\0';
        unreadable = access(path, R_OK) != 0;
      }
    }
    p = end;
  }
  errno = saved;
  return unreadable;
}

}  // namespace

bool is_sprofil_var(const char* entry) {
  return starts_with(entry, "SPROFIL_");
}

bool exec_unprofiled(char* const envp[]) {
  if (sandboxed() || vfork_child_sandboxed()) return true;
  for (size_t i = 0; envp && envp[i]; ++i)
    if (starts_with(envp[i], "LD_PRELOAD=")) return preload_unreadable(envp[i] + 11);
  return false;
}

void strip_preload(const char* value, char* out) {
  char* o = out;
  for (const char* p = value; *p;) {
    while (*p && is_separator(*p)) ++p;
    const char* end = p;
    while (*end && !is_separator(*end)) ++end;
    if (end > p && !is_ours(p, end)) {
      if (o != out) *o++ = ':';
      memcpy(o, p, static_cast<size_t>(end - p));
      o += end - p;
    }
    p = end;
  }
  *o = '\0';
}

size_t unprofiled_env_sizes(char* const envp[], size_t* preload_len) {
  size_t n = 0;
  *preload_len = 0;
  for (; envp && envp[n]; ++n)
    if (starts_with(envp[n], "LD_PRELOAD=")) *preload_len = strlen(envp[n]);
  return n;
}

void unprofiled_env(char* const envp[], char** out, char* preload) {
  size_t k = 0;
  for (size_t i = 0; envp && envp[i]; ++i) {
    const char* e = envp[i];
    if (is_sprofil_var(e)) continue;
    if (starts_with(e, "LD_PRELOAD=")) {
      memcpy(preload, "LD_PRELOAD=", 11);
      strip_preload(e + 11, preload + 11);
      if (preload[11] == '\0') continue;
      out[k++] = preload;
      continue;
    }
    out[k++] = const_cast<char*>(e);
  }
  out[k] = nullptr;
}

}  // namespace sprofil::rt
