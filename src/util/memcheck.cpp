#include "util/memcheck.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace sprofil::util {
namespace {

// Reads all of /proc/self/maps into a NUL-terminated malloc'd buffer.
char* read_maps() {
  const int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  size_t cap = 1 << 16, len = 0;
  char* buf = static_cast<char*>(malloc(cap));
  while (buf) {
    if (len + 1 == cap) {
      char* n = static_cast<char*>(realloc(buf, cap * 2));
      if (!n) {
        free(buf);
        buf = nullptr;
        break;
      }
      buf = n;
      cap *= 2;
    }
    const ssize_t r = read(fd, buf + len, cap - 1 - len);
    if (r < 0) {
      free(buf);
      buf = nullptr;
      break;
    }
    if (r == 0) break;
    len += static_cast<size_t>(r);
  }
  close(fd);
  if (buf) buf[len] = '\0';
  return buf;
}

}  // namespace

bool mapped(const void* p, size_t n, bool write) {
  if (n == 0) return true;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p);
  if (lo + n < lo) return false;  // wraps the address space
  const uintptr_t hi = lo + n;
  char* maps = read_maps();
  if (!maps) return false;
  // Lines are sorted by address: walk them, extending the covered prefix [lo, cur).
  uintptr_t cur = lo;
  for (char* line = maps; *line && cur < hi;) {
    char* end = nullptr;
    const uintptr_t a = strtoull(line, &end, 16);
    const uintptr_t b = strtoull(end + 1, &end, 16);
    const bool r = end[1] == 'r', w = end[2] == 'w';
    if (a <= cur && cur < b) {
      if (!r || (write && !w)) break;
      cur = b;
    }
    char* nl = strchr(line, '\n');
    if (!nl) break;
    line = nl + 1;
  }
  free(maps);
  return cur >= hi;
}

}  // namespace sprofil::util
