// A profile file's disk space: a page reserved by writing it (the agent's record pages and the
// record parent's header pages in drain mode), and giving back the space reserved (fallocate)
// for arrays that no sample wrote (the agent at a clean exit outside drain mode,
// agent/finish.cpp; the `sprofil record` parent after a drain-mode process's last flush,
// record/drain_files.cpp). Header only; libc only.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace sprofil::util {

// Writes the kBytes (a page) at `page` to off: 0 or an errno value (ENOSPC for a short write).
template <size_t kBytes>
int write_page(int fd, uint64_t off, const void* page) {
  const ssize_t n = pwrite(fd, page, kBytes, static_cast<off_t>(off));
  return n == static_cast<ssize_t>(kBytes) ? 0 : n < 0 ? errno : ENOSPC;
}

// Writes kBytes of zeros (a page) at off: the write reserves its space (a full disk is this call's
// error, not a fault of a mapping later), where an allocation (fallocate) would make the file
// system allocate the blocks now and free them, a discard request on a file system mounted
// with `discard`, when the file goes; written, the page is allocated only when written back,
// which the file of a short process, removed when it has no sample, never needs. 0 or an
// errno value.
template <size_t kBytes>
int write_zeros(int fd, uint64_t off) {
  static const char zero[kBytes] = {};
  return write_page<kBytes>(fd, off, zero);
}

// Punches every hole of [lo, hi) in fd: to SEEK_HOLE, reserved space that was never written
// is a hole (ext4's unwritten extents with no page in the page cache), and so it is given
// back to the file system; data (counters a sample touched) is left as it is. Stops at the
// first error (a file system without SEEK_HOLE or PUNCH_HOLE keeps its reservation).
inline void release_unwritten(int fd, uint64_t lo, uint64_t hi) {
  uint64_t off = lo;
  while (off < hi) {
    const off_t h = lseek(fd, static_cast<off_t>(off), SEEK_HOLE);
    if (h < 0 || static_cast<uint64_t>(h) >= hi) return;
    const off_t d = lseek(fd, h, SEEK_DATA);
    const uint64_t end = d < 0 || static_cast<uint64_t>(d) > hi ? hi : static_cast<uint64_t>(d);
    if (end > static_cast<uint64_t>(h) &&
        fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, h,
                  static_cast<off_t>(end - static_cast<uint64_t>(h))) != 0)
      return;
    off = end;
  }
}

}  // namespace sprofil::util
