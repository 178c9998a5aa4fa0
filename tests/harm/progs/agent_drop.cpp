// Drops root for nobody (65534) the way a daemon does (setgroups, setresgid, setresuid), with
// CPU work before and after, and prints its ids: run as root (tests/harm).
#include <grp.h>
#include <unistd.h>

#include <cstdio>

#include "sig_common.hpp"

int main() {
  sig_burn(30000000);
  if (setgroups(0, nullptr) != 0 || setresgid(65534, 65534, 65534) != 0 ||
      setresuid(65534, 65534, 65534) != 0) {
    perror("dropping privileges");
    return 3;
  }
  sig_burn(30000000);
  printf("uid %d gid %d\n", static_cast<int>(getuid()), static_cast<int>(getgid()));
  return 0;
}
