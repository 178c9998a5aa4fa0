// How a process of the run ended (process_end.hpp).
#include "record/process_end.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "util/clock_ns.hpp"

namespace sprofil::record {

namespace {

// PIDFD_GET_INFO (Linux 6.15, <linux/pidfd.h>; Debian 12's headers predate it): the exit code of
// a process reaped since, kept with its pidfd. The first 64 bytes of struct pidfd_info.
struct PidfdInfo {
  uint64_t mask = 0, cgroupid = 0;
  uint32_t pid = 0, tgid = 0, ppid = 0, ruid = 0, rgid = 0, euid = 0, egid = 0, suid = 0, sgid = 0,
           fsuid = 0, fsgid = 0;
  int32_t exit_code = 0;
};
static_assert(sizeof(PidfdInfo) == 64, "PIDFD_INFO_SIZE_VER0");
constexpr unsigned long kPidfdGetInfo = _IOWR(0xFF, 11, PidfdInfo);
constexpr uint64_t kPidfdInfoExit = 1u << 3;

// The exit code field (the 52nd) of /proc/PID/stat, as wait(2) would give it, or -1.
int proc_exit_code(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char* c = strrchr(buf, ')');  // after the command name, which may hold spaces
  if (!c) return -1;
  int field = 2;
  for (; *c && field < 52; ++c)
    if (*c == ' ') ++field;
  return field == 52 && *c >= '0' && *c <= '9' ? atoi(c) : -1;
}

}  // namespace

End how_it_ended(pid_t pid, int pidfd) {
  End e;
  const uint64_t cpu = process_cpu_ns(pid);
  const int code = proc_exit_code(pid);
  if (code >= 0 && syscall(SYS_pidfd_send_signal, pidfd, 0, nullptr, 0) == 0) {
    e.exited = WIFEXITED(code);
    e.known = true;
    e.cpu_ns = cpu;
    return e;
  }
  PidfdInfo info;
  info.mask = kPidfdInfoExit;
  if (ioctl(pidfd, kPidfdGetInfo, &info) == 0 && (info.mask & kPidfdInfoExit)) {
    e.exited = WIFEXITED(info.exit_code);
    e.known = true;
  }
  return e;
}

uint64_t process_cpu_ns(pid_t pid) {
  clockid_t id;
  return clock_getcpuclockid(pid, &id) == 0 ? util::clock_ns(id) : 0;
}

}  // namespace sprofil::record
