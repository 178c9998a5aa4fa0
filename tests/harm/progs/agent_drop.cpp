// Drops root for nobody (65534) and prints its ids: run as root (tests/harm).
// - no arguments: the way a daemon does (setgroups, setresgid, setresuid), with CPU work
//   before and after;
// - `keepcaps GO`: once the file GO exists (at most 10 s), the way setpriv --reuid --regid
//   --clear-groups does: prctl(PR_SET_KEEPCAPS), setresuid, capset (the effective set raised
//   back to the permitted one, which KEEPCAPS kept: the calling thread's alone), setresgid,
//   setgroups.
#include <grp.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "sig_common.hpp"

namespace {

bool wait_for(const char* path) {
  for (int i = 0; i < 1000; ++i) {
    if (access(path, F_OK) == 0) return true;
    const timespec tick{0, 10 * 1000 * 1000};
    nanosleep(&tick, nullptr);
  }
  return false;
}

int like_setpriv() {
  if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0 || setresuid(65534, 65534, 65534) != 0) return 1;
  __user_cap_header_struct head{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct caps[2];
  if (syscall(SYS_capget, &head, caps) != 0) return 1;
  for (__user_cap_data_struct& c : caps) c.effective = c.permitted;
  if (syscall(SYS_capset, &head, caps) != 0) return 1;
  if (setresgid(65534, 65534, 65534) != 0 || setgroups(0, nullptr) != 0) return 1;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "keepcaps") == 0) {
    if (!wait_for(argv[2])) {
      std::fprintf(stderr, "%s did not appear\n", argv[2]);
      return 2;
    }
    if (like_setpriv() != 0) {
      perror("dropping privileges");
      return 3;
    }
  } else {
    sig_burn(30000000);
    if (setgroups(0, nullptr) != 0 || setresgid(65534, 65534, 65534) != 0 ||
        setresuid(65534, 65534, 65534) != 0) {
      perror("dropping privileges");
      return 3;
    }
    sig_burn(30000000);
  }
  printf("uid %d gid %d\n", static_cast<int>(getuid()), static_cast<int>(getgid()));
  return 0;
}
