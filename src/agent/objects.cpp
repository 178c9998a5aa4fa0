// The loaded objects: one Found per executable PT_LOAD segment of every object the loader
// lists (dl_iterate_phdr): the main program, its shared libraries, the vDSO, dlopen'd objects;
// with the object's GNU build-id note.
#include <elf.h>
#include <link.h>
#include <stdio.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "agent/state.hpp"

namespace sprofil::agent {
namespace {

// The object's NT_GNU_BUILD_ID note, from its PT_NOTE segments in memory.
void read_build_id(const dl_phdr_info* info, Found* f) {
  f->build_id_len = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    auto* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    const char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      auto* nh = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const char* name = p + sizeof *nh;
      const char* desc = name + ((nh->n_namesz + 3) & ~3u);
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
          desc + nh->n_descsz <= end) {
        f->build_id_len = std::min<uint32_t>(nh->n_descsz, SPROF_BUILD_ID_MAX);
        memcpy(f->build_id, desc, f->build_id_len);
        return;
      }
      p = desc + ((nh->n_descsz + 3) & ~3u);
    }
  }
}

int collect(dl_phdr_info* info, size_t size, void* data) {
  auto* list = static_cast<FoundList*>(data);
  if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
    list->stamp = info->dlpi_adds + info->dlpi_subs, list->has_stamp = true;
  const char* name = info->dlpi_name ? info->dlpi_name : "";
  bool is_main = false, is_vdso = false;
  const char* path = name;
  if (strncmp(name, "linux-vdso", 10) == 0 || strncmp(name, "linux-gate", 10) == 0) {
    is_vdso = true;
    path = "[vdso]";
  } else if (!*name) {
    // The main program has no name here; the vDSO sometimes has none either.
    path = g_exe;
    is_main = true;
  }
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X) || ph.p_memsz == 0) continue;
    if (list->n == list->cap) {
      const size_t cap = list->cap ? list->cap * 2 : 32;
      auto* v = static_cast<Found*>(realloc(list->v, cap * sizeof(Found)));
      if (!v) return list->partial = true, 1;
      list->v = v;
      list->cap = cap;
    }
    Found& f = list->v[list->n++];
    f.obj_base = info->dlpi_addr;
    f.start = info->dlpi_addr + ph.p_vaddr;
    f.end = f.start + ph.p_memsz;
    f.file_offset = ph.p_offset;
    f.flags = (is_main ? SPROF_R_MAIN : 0u) | (is_vdso ? SPROF_R_VDSO : 0u);
    read_build_id(info, &f);
    snprintf(f.path, sizeof f.path, "%s", path);
  }
  return 0;
}

}  // namespace

FoundList scan() {
  FoundList list{nullptr, 0, 0, 0, false, false};
  dl_iterate_phdr(collect, &list);
  return list;
}

}  // namespace sprofil::agent
