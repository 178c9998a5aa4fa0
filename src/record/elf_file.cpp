// What record reads of a mapped file (elf_file.hpp), with elfutils' libelf.
#include "record/elf_file.hpp"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "format/sprof_format.h"
#include "util/loaded_object.hpp"

namespace sprofil::record {

ElfFile read_elf(const std::string& path, uint64_t ino) {
  ElfFile f;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return f;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (ino && st.st_ino != ino)) {
    close(fd);
    return f;
  }
  elf_version(EV_CURRENT);
  if (Elf* e = elf_begin(fd, ELF_C_READ_MMAP, nullptr)) {
    size_t n = 0;
    GElf_Ehdr eh;
    if (gelf_getehdr(e, &eh)) f.entry = eh.e_entry;
    if (elf_getphdrnum(e, &n) == 0) {
      f.read = true;
      for (size_t i = 0; i < n; ++i) {
        GElf_Phdr ph;
        if (!gelf_getphdr(e, static_cast<int>(i), &ph)) continue;
        if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && ph.p_memsz != 0)
          f.text.push_back(Segment{ph.p_vaddr, ph.p_offset, ph.p_memsz});
        if (ph.p_type != PT_NOTE || !f.build_id.empty()) continue;
        Elf_Data* d =
            elf_getdata_rawchunk(e, static_cast<int64_t>(ph.p_offset), ph.p_filesz, ELF_T_NHDR);
        GElf_Nhdr nh;
        size_t name_at = 0, desc_at = 0;
        for (size_t at = 0; d && (at = gelf_getnote(d, at, &nh, &name_at, &desc_at)) != 0;) {
          if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
              memcmp(static_cast<char*>(d->d_buf) + name_at, "GNU", 4) == 0) {
            const auto* id = static_cast<const uint8_t*>(d->d_buf) + desc_at;
            f.build_id.assign(id, id + std::min<size_t>(nh.n_descsz, SPROF_BUILD_ID_MAX));
            break;
          }
        }
      }
    }
    elf_end(e);
  }
  close(fd);
  return f;
}

std::vector<uint8_t> vdso_build_id() {
  std::vector<uint8_t> id;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        if (!util::is_vdso_name(info->dlpi_name)) return 0;
        uint8_t b[SPROF_BUILD_ID_MAX];
        const uint32_t n = util::build_id_of(info, b, sizeof b);
        static_cast<std::vector<uint8_t>*>(out)->assign(b, b + n);
        return 1;
      },
      &id);
  return id;
}

}  // namespace sprofil::record
