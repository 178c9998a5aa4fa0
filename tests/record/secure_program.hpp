// A setuid or setgid program of the system that this user cannot profile: the dynamic loader
// ignores LD_PRELOAD for it. Found without root-only tricks: one of the system's own such
// programs that this user (group) does not own; as root, only setgid programs of another group
// qualify. Shared by record's check (check_command_test.cpp) and the tool's refusal
// (record_test.cpp).
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <string>

namespace sprofil::record_test {

// Its path, "" if the system has none.
inline std::string secure_program() {
  for (const char* p :
       {"/usr/bin/passwd", "/usr/bin/su", "/usr/bin/mount", "/usr/bin/chsh", "/usr/bin/chfn",
        "/usr/bin/newgrp", "/usr/bin/gpasswd", "/usr/bin/chage", "/usr/bin/expiry",
        "/usr/bin/ssh-agent", "/usr/bin/crontab", "/usr/bin/wall", "/usr/bin/write"}) {
    struct stat st;
    if (stat(p, &st) != 0 || !S_ISREG(st.st_mode) || access(p, X_OK) != 0) continue;
    if (((st.st_mode & S_ISUID) && st.st_uid != geteuid()) ||
        ((st.st_mode & S_ISGID) && st.st_gid != getegid()))
      return p;
  }
  return "";
}

// "setuid" or "setgid": what the refusal of `path` (a secure_program()) says it is, the bit
// that keeps this user from profiling it.
inline std::string secure_kind(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && (st.st_mode & S_ISUID) && st.st_uid != geteuid()
             ? "setuid"
             : "setgid";
}

}  // namespace sprofil::record_test
