// The names of a run's profile files, the one definition of the rule: the first image of a
// run writes FILE (SPROFIL_OUTPUT itself); a forked child, or a program exec'd later, writes
// FILE.PID, or FILE.PID.N (N = 1, 2, ...) when that name is taken. The agent makes the names;
// src/record recognises them in its run directory. Header-only and libc-only (the agent
// includes it).
#pragma once

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cstddef>

#include "util/join.hpp"

namespace sprofil::naming {

// The base the names are made from: SPROFIL_OUTPUT made absolute (the program may chdir; the
// files are re-opened by path), into base[0, n). False if the working directory cannot be
// read or the path does not fit.
inline bool absolute_base(const char* output, char* base, size_t n) {
  if (output[0] == '/') return util::Join(base, n).add(output).ok();
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) return false;
  return util::Join(base, n).add(strcmp(cwd, "/") == 0 ? "" : cwd).add("/").add(output).ok();
}

// The profile `sprofil record` writes and `report`, `annotate` and `diff` read when none is
// named, as perf's perf.data.
constexpr const char* kDefaultProfile = "sprofil.data";

// How many .PID.N names a later image tries before it gives up (N < kMaxNameTries).
constexpr int kMaxNameTries = 1000;

// The start of the name of a file being made (profile_file.hpp's create_temp), which is renamed
// to its profile name once complete: never a profile itself.
inline constexpr char kTempPrefix[] = ".sprofil-tmp-";

// Writes the k-th candidate name for `base` into out[0, n): base itself for the first image
// (pid <= 0), else base.PID (k = 0) or base.PID.k. Returns false if it does not fit.
inline bool profile_name(char* out, size_t n, const char* base, int pid, int k) {
  util::Join j(out, n);
  j.add(base);
  if (pid > 0) j.add(".").add(static_cast<long>(pid));
  if (pid > 0 && k != 0) j.add(".").add(static_cast<long>(k));
  return j.ok();
}

// Parses the part of a name after `base`: "" (the first image: *pid = 0, *k = 0), ".PID" or
// ".PID.N" (digits only, no sign, no leading zero, N >= 1). Returns false for anything else.
inline bool parse_profile_suffix(const char* suffix, int* pid, int* k) {
  auto number = [](const char** p, int* out) {
    const char* s = *p;
    if (*s < '1' || *s > '9') return false;
    long v = 0;
    while (*s >= '0' && *s <= '9') {
      v = v * 10 + (*s++ - '0');
      if (v > 0x7fffffff) return false;
    }
    *out = static_cast<int>(v);
    *p = s;
    return true;
  };
  *pid = 0;
  *k = 0;
  if (*suffix == '\0') return true;
  if (*suffix++ != '.' || !number(&suffix, pid)) return false;
  if (*suffix == '\0') return true;
  if (*suffix++ != '.' || !number(&suffix, k)) return false;
  return *suffix == '\0';
}

}  // namespace sprofil::naming
