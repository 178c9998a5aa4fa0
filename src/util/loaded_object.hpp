// What the runtime reads about a loaded object and about itself, the one way for the agent
// (objects.cpp, finish.cpp) and the live snapshots (live.cpp): an object's GNU build-id from
// its notes in memory, whether dl_iterate_phdr's name is the vDSO's, and this process's
// command line. Header-only and libc-only (the runtime includes it).
#pragma once

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

namespace sprofil::util {

// The object's NT_GNU_BUILD_ID note, from its PT_NOTE segments in memory, into out[0, max)
// (a longer one is cut at max). Its length, 0 if it has none.
inline uint32_t build_id_of(const dl_phdr_info* info, uint8_t* out, uint32_t max) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const auto* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    const char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) nh;
      memcpy(&nh, p, sizeof nh);
      const char* name = p + sizeof nh;
      const char* desc = name + ((nh.n_namesz + 3) & ~3u);
      const char* next = desc + ((nh.n_descsz + 3) & ~3u);
      if (next > end) break;
      if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
        const uint32_t n = nh.n_descsz < max ? nh.n_descsz : max;
        memcpy(out, desc, n);
        return n;
      }
      p = next;
    }
  }
  return 0;
}

// Whether dl_iterate_phdr's name for an object is the vDSO's (linux-gate on 32-bit x86).
inline bool is_vdso_name(const char* name) {
  return name && (strncmp(name, "linux-vdso", 10) == 0 || strncmp(name, "linux-gate", 10) == 0);
}

// The same bytes from the arguments a constructor is called with (glibc passes argc, argv and
// envp to every object's initializers): the kernel lays the arguments out as /proc/self/cmdline
// reads them, and nothing of the program has run yet to change them. Spares a fresh process's
// start its first /proc file (about 6 us of its CPU, bench/start_pieces.sh). Its length.
inline uint32_t join_argv(char* out, size_t max, int argc, char* const* argv) {
  size_t got = 0;
  for (int k = 0; argv && k < argc && argv[k] && got < max; ++k) {
    const size_t len = strlen(argv[k]) + 1;
    const size_t n = len < max - got ? len : max - got;
    memcpy(out + got, argv[k], n);
    got += n;
  }
  return static_cast<uint32_t>(got);
}

// /proc/self/cmdline (each argument NUL-terminated) into out[0, max). Its length.
inline uint32_t read_cmdline(char* out, size_t max) {
  const int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  size_t got = 0;
  while (got < max) {
    const ssize_t n = read(fd, out + got, max - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  return static_cast<uint32_t>(got);
}

}  // namespace sprofil::util
