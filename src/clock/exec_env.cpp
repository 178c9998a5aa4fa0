// The environment that an exec or a posix_spawn of the program passes (exec.cpp's with_env):
// the program's envp as it is, unless the program it starts could not run the agent, where
// sprofil's variables (SPROFIL_*) and libsprofil's entry in LD_PRELOAD come out of it:
// - the program installed a seccomp filter (sandbox.cpp), which the new program inherits:
//   the agent's start in it would make calls the filter denies;
// - libsprofil cannot be read at the path in LD_PRELOAD, as the new program would see it: the
//   program changed its root (chroot, a container's pivot_root) or its user (a daemon that
//   drops root for a user who cannot read the library's directory). The loader would print
//   "ERROR: ld.so: object ... cannot be preloaded" into the new program's stderr, which it
//   does not print natively (tests/harm `NoHarm.ChrootedProgramGetsNoLoaderError`);
// - the directory of SPROFIL_OUTPUT (under sprofil record, the run's private one, where the
//   drain socket is too) is not writable and searchable for the new program: the program
//   dropped root for another user (setpriv, su, a daemon's worker). The agent there would
//   print "sprofil: not profiling: cannot create ...: Permission denied" into its stderr, and
//   it could not profile it anyway (tests/harm
//   `NoHarm.PrivilegeDropOfASingleThreadedProgramAsNatively`).
// Both checks are made as the new program would make them: with the effective ids, which an
// exec keeps (a set-user-ID program runs without the agent: the loader ignores LD_PRELOAD's
// paths under AT_SECURE), and, for a program that is not root, without the capabilities it
// may hold now: an exec drops them (setpriv execs its command with the capabilities it used
// to change its ids still in effect).
// Every function here may run in a vfork child (which shares our memory): they change no
// state, and the copy the caller makes is on its stack.
#include <fcntl.h>
#include <linux/capability.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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

// Whether the calling thread holds any effective capability (capget, version 3).
bool has_effective_caps() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &hdr, data) != 0) return false;
  return data[0].effective != 0 || data[1].effective != 0;
}

// Whether st's mode bits give `want` (R_OK, W_OK, X_OK: the bits' own values) to these ids.
bool mode_allows(const struct stat& st, int want, uid_t euid, gid_t egid, const gid_t* groups,
                 int ngroups) {
  bool group = st.st_gid == egid;
  for (int i = 0; i < ngroups && !group; ++i) group = groups[i] == st.st_gid;
  const unsigned bits = st.st_uid == euid ? (st.st_mode >> 6) & 7u
                        : group           ? (st.st_mode >> 3) & 7u
                                          : st.st_mode & 7u;
  return (bits & static_cast<unsigned>(want)) == static_cast<unsigned>(want);
}

// The checks share one buffer on the caller's stack, which is small: an exec may be made from
// a signal handler on an alternate stack (a crash handler starting a reporter). A path that
// does not fit is taken as usable (the agent then says what it finds, as before).
constexpr size_t kPathBuf = 1024;

// Whether the new program of an exec may access the path in buf (NUL-terminated) for `want`.
// buf is restored as it was. errno is left as it was.
bool usable_after_exec(char* buf, int want) {
  const int saved = errno;
  const uid_t euid = geteuid();
  bool ok = true;
  if (euid == 0 || !has_effective_caps()) {
    ok = faccessat(AT_FDCWD, buf, want, AT_EACCESS) == 0;
  } else {
    // Not root, with capabilities that the exec drops: the mode bits of the file and of each
    // directory above it (search), against the ids alone (ACLs not read). Each directory is
    // looked at in place, its path cut at the next '/'.
    gid_t groups[32];
    const int ngroups = getgroups(32, groups);
    const gid_t egid = getegid();
    const size_t len = strlen(buf);
    for (size_t i = 1; ok && i <= len; ++i) {
      if (i < len && buf[i] != '/') continue;
      const char cut = buf[i];
      buf[i] = '\0';
      struct stat st;
      ok = stat(buf, &st) == 0 &&
           mode_allows(st, i == len ? want : X_OK, euid, egid, groups, ngroups < 0 ? 0 : ngroups);
      buf[i] = cut;
    }
  }
  errno = saved;
  return ok;
}

bool is_separator(char c) {
  return c == ':' || c == ' ';
}

// Whether an entry of LD_PRELOAD's value that names libsprofil by a path (a bare name is
// looked up by the loader, not checked) cannot be read: the loader would say so and go on
// without it.
bool preload_unreadable(const char* value, char* buf) {
  for (const char* p = value; *p;) {
    while (*p && is_separator(*p)) ++p;
    const char* end = p;
    while (*end && !is_separator(*end)) ++end;
    const size_t n = static_cast<size_t>(end - p);
    if (n > 0 && n < kPathBuf && is_ours(p, end) && memchr(p, '/', n)) {
      memcpy(buf, p, n);
      buf[n] = '\0';
      if (!usable_after_exec(buf, R_OK)) return true;
    }
    p = end;
  }
  return false;
}

// Whether the directory of SPROFIL_OUTPUT's value is not writable and searchable.
bool output_dir_closed(const char* output, char* buf) {
  const char* slash = strrchr(output, '/');
  const size_t n = !slash ? 1 : slash == output ? 1 : static_cast<size_t>(slash - output);
  if (n >= kPathBuf) return false;
  if (!slash)
    buf[0] = '.';
  else
    memcpy(buf, output, n);
  buf[n] = '\0';
  return !usable_after_exec(buf, W_OK | X_OK);
}

}  // namespace

bool is_sprofil_var(const char* entry) {
  return starts_with(entry, "SPROFIL_");
}

bool exec_unprofiled(char* const envp[]) {
  if (sandboxed() || vfork_child_sandboxed()) return true;
  const char* preload = nullptr;
  const char* output = nullptr;
  for (size_t i = 0; envp && envp[i]; ++i) {
    if (starts_with(envp[i], "LD_PRELOAD="))
      preload = envp[i] + 11;
    else if (starts_with(envp[i], "SPROFIL_OUTPUT="))
      output = envp[i] + 15;
  }
  if (!preload) return false;
  char buf[kPathBuf];
  return preload_unreadable(preload, buf) || (output && *output && output_dir_closed(output, buf));
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
