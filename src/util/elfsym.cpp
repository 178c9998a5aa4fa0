#include "util/elfsym.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "util/self_exe.hpp"

namespace sprofil::util {
namespace {

// Searches one symbol table section (with its string table) of a mapped ELF file.
bool search_symtab(const unsigned char* base, size_t size, const ElfW(Shdr) & symtab,
                   const ElfW(Shdr) & strtab, uintptr_t file_addr, uintptr_t bias,
                   FunctionExtent* out) {
  if (symtab.sh_offset + symtab.sh_size > size || strtab.sh_offset + strtab.sh_size > size ||
      symtab.sh_entsize != sizeof(ElfW(Sym)))
    return false;
  const auto* syms = reinterpret_cast<const ElfW(Sym)*>(base + symtab.sh_offset);
  const size_t n = symtab.sh_size / sizeof(ElfW(Sym));
  for (size_t i = 0; i < n; ++i) {
    const ElfW(Sym)& s = syms[i];
    if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || s.st_size == 0 || s.st_shndx == SHN_UNDEF) continue;
    if (file_addr < s.st_value || file_addr >= s.st_value + s.st_size) continue;
    out->lo = bias + s.st_value;
    out->hi = out->lo + s.st_size;
    const char* name = "";
    if (s.st_name < strtab.sh_size)
      name = reinterpret_cast<const char*>(base + strtab.sh_offset + s.st_name);
    strncpy(out->name, name, sizeof out->name - 1);
    out->name[sizeof out->name - 1] = '\0';
    return true;
  }
  return false;
}

bool search_file(const char* path, uintptr_t addr, uintptr_t bias, FunctionExtent* out) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(ElfW(Ehdr)))) {
    close(fd);
    return false;
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return false;
  const auto* base = static_cast<const unsigned char*>(map);
  const auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(base);
  bool found = false;
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_shentsize == sizeof(ElfW(Shdr)) &&
      eh->e_shoff + static_cast<size_t>(eh->e_shnum) * sizeof(ElfW(Shdr)) <= size) {
    const auto* sh = reinterpret_cast<const ElfW(Shdr)*>(base + eh->e_shoff);
    for (int pass = 0; pass < 2 && !found; ++pass) {  // .symtab first, then .dynsym
      const unsigned type = pass == 0 ? SHT_SYMTAB : SHT_DYNSYM;
      for (unsigned i = 0; i < eh->e_shnum && !found; ++i)
        if (sh[i].sh_type == type && sh[i].sh_link < eh->e_shnum)
          found = search_symtab(base, size, sh[i], sh[sh[i].sh_link], addr - bias, bias, out);
    }
  }
  munmap(map, size);
  return found;
}

}  // namespace

bool function_extent(const void* addr, FunctionExtent* out) {
  Dl_info info;
  link_map* lm = nullptr;
  if (!addr || !dladdr1(addr, &info, reinterpret_cast<void**>(&lm), RTLD_DL_LINKMAP) || !lm)
    return false;
  char exe[4096];
  const char* path = lm->l_name;
  if (!path || !*path) {
    if (self_exe(exe, sizeof exe) == 0) return false;
    path = exe;
  }
  return search_file(path, reinterpret_cast<uintptr_t>(addr), lm->l_addr, out);
}

}  // namespace sprofil::util
