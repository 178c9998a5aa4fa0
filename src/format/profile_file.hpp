// Creating a run's profile file, the one definition of how: a private temporary in the target
// directory (O_CREAT | O_EXCL | O_NOFOLLOW, mode 0600, so the umask can only make it stricter,
// never through a link), renamed into place under the name profile_name.hpp defines. The first
// image's name replaces whatever was there (rename never follows a link nor truncates the old
// file); the others never replace anything (RENAME_NOREPLACE). The agent makes its files this
// way (agent/output_file.cpp) where no record parent listens, and so does the record parent
// when it makes a file for the agent (record/drain.cpp, drain_proto.hpp's kDrainNewFile and
// kDrainChildFile). Header-only and libc-only.
#pragma once

#include <fcntl.h>
#include <stdio.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>

#include "format/profile_name.hpp"

namespace sprofil::naming {

// Creates a temporary file in dirfd, its name in tmp[0, n) (n >= 32; kTempPrefix and 16 hex
// digits): the fd (O_RDWR, close-on-exec), or -1 with errno set.
inline int create_temp(int dirfd, char* tmp, size_t n) {
  static std::atomic<unsigned> seq{0};
  int fd = -1;
  for (int k = 0; k < 100 && fd < 0; ++k) {
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof r)) {
      timespec ts{};
      clock_gettime(CLOCK_REALTIME, &ts);
      r = static_cast<uint64_t>(ts.tv_nsec) ^ (static_cast<uint64_t>(getpid()) << 32) ^
          seq.fetch_add(1) * 0x9e3779b9u;
    }
    snprintf(tmp, n, "%s%016llx", kTempPrefix, static_cast<unsigned long long>(r));
    fd = openat(dirfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  return fd;
}

// Gives the temporary `tmp` in dirfd the name `name`: replacing an existing name if `replace`,
// else only if the name is free. Returns 0 or an errno value (EEXIST: the name is taken).
inline int publish_name(int dirfd, const char* tmp, const char* name, bool replace) {
  if (replace) return renameat(dirfd, tmp, dirfd, name) == 0 ? 0 : errno;
  if (renameat2(dirfd, tmp, dirfd, name, RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return errno;
  // A filesystem without RENAME_NOREPLACE: link fails on an existing name too.
  if (linkat(dirfd, tmp, dirfd, name, 0) != 0) return errno;
  unlinkat(dirfd, tmp, 0);
  return 0;
}

// Names the temporary `tmp` in dirfd after `base` (a file name, no directory): base itself for
// the first image (pid <= 0), else the first free base.PID, base.PID.k. Writes the name into
// out[0, n) and its k into *k. Returns 0 or an errno value.
inline int publish_profile(int dirfd, const char* tmp, const char* base, int pid, char* out,
                           size_t n, int* k) {
  int err = EEXIST;
  for (int i = 0; i < (pid <= 0 ? 1 : kMaxNameTries) && err == EEXIST; ++i) {
    err =
        profile_name(out, n, base, pid, i) ? publish_name(dirfd, tmp, out, pid <= 0) : ENAMETOOLONG;
    if (err == 0) *k = i;
  }
  return err;
}

// Makes a profile file in dirfd, the one sequence for it: a private temporary (create_temp),
// fill(fd) (reserve its space, write what it starts with: 0 or an errno value), then named
// after `base` for `pid` (publish_profile: base itself if pid <= 0), the name into out[0, n)
// and its k into *k. The fd, or -1 with *err set; nothing is left behind when it fails.
template <class Fill>
int make_profile(int dirfd, const char* base, int pid, char* out, size_t n, int* k, int* err,
                 Fill&& fill) {
  char tmp[64];
  const int fd = create_temp(dirfd, tmp, sizeof tmp);
  if (fd < 0) {
    *err = errno;
    return -1;
  }
  *err = fill(fd);
  if (*err == 0) *err = publish_profile(dirfd, tmp, base, pid, out, n, k);
  if (*err != 0) {
    unlinkat(dirfd, tmp, 0);
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace sprofil::naming
