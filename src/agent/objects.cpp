// The loaded objects: one Found per executable PT_LOAD segment of every object the loader
// lists (dl_iterate_phdr): the main program, its shared libraries, the vDSO, dlopen'd objects;
// with the object's GNU build-id note.
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "agent/state.hpp"
#include "util/grow.hpp"
#include "util/loaded_object.hpp"

namespace sprofil::agent {
namespace {

// Whether the object is one the snapshot holds (marked seen): first at the cursor, where the
// loader's stable order puts it, else by key.
bool known_object(FoundList* list, const ObjKey& key) {
  const Snapshot* s = list->known;
  if (!s) return false;
  long i = -1;
  if (list->cursor < s->n && key_eq(s->obj[list->cursor].key, key))
    i = static_cast<long>(list->cursor);
  else
    i = s->find(key);
  if (i < 0 || list->seen[i]) return false;
  list->seen[i] = 1;
  ++list->nseen;
  list->cursor = static_cast<size_t>(i) + 1;
  return true;
}

// Adds the object info describes, not held by the scan's snapshot, with its executable
// segments. 0, or 1 (stop) where memory ran out.
int add_object(FoundList* list, const dl_phdr_info* info) {
  const ObjKey key{info->dlpi_addr, info->dlpi_phdr, info->dlpi_name};
  if (!util::grow(&list->objs, &list->objs_cap, list->nobjs + 1)) return list->partial = true, 1;
  NewObj& obj = list->objs[list->nobjs++];
  obj.key = key;
  obj.found_first = static_cast<uint32_t>(list->n);
  obj.found_n = 0;
  const char* name = info->dlpi_name ? info->dlpi_name : "";
  bool is_main = false, is_vdso = false;
  const char* path = name;
  if (util::is_vdso_name(name)) {
    is_vdso = true;
    path = "[vdso]";
  } else if (!*name) {
    // The main program has no name here; the vDSO sometimes has none either.
    path = g_exe;
    is_main = true;
  }
  // A name relative to the working directory (dlopen("./plugin.so"), LD_LIBRARY_PATH=.), as the
  // loader opened it a moment ago: made absolute, so that the profile names the file wherever
  // it is read, as the kernel's maps do.
  char absolute[SPROF_PATH_MAX];
  if (*path != '/' && *path != '[' && getcwd(absolute, sizeof absolute) != nullptr) {
    const char* rel = path[0] == '.' && path[1] == '/' ? path + 2 : path;
    size_t at = strlen(absolute);
    if (at > 1) absolute[at++] = '/';  // (getcwd's result never ends in '/' but for "/")
    const size_t rel_len = strlen(rel);
    if (at + rel_len < sizeof absolute) {
      memcpy(absolute + at, rel, rel_len + 1);
      path = absolute;
    }
  }
  // The path, once per object, in the list's arena.
  const size_t len = strnlen(path, SPROF_PATH_MAX - 1);
  bool named = false;
  uint32_t path_off = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X) || ph.p_memsz == 0) continue;
    if (!named) {
      if (!util::grow(&list->names, &list->names_cap, list->names_len + len + 1, 4096))
        return list->partial = true, 1;
      path_off = static_cast<uint32_t>(list->names_len);
      memcpy(list->names + list->names_len, path, len);
      list->names[list->names_len + len] = '\0';
      list->names_len += len + 1;
      named = true;
    }
    if (!util::grow(&list->v, &list->cap, list->n + 1)) return list->partial = true, 1;
    Found& f = list->v[list->n++];
    f.obj_base = info->dlpi_addr;
    f.start = info->dlpi_addr + ph.p_vaddr;
    f.end = f.start + ph.p_memsz;
    f.file_offset = ph.p_offset;
    f.flags = (is_main ? SPROF_R_MAIN : 0u) | (is_vdso ? SPROF_R_VDSO : 0u);
    f.build_id_len = util::build_id_of(info, f.build_id, SPROF_BUILD_ID_MAX);
    f.path_off = path_off;
    f.path_len = static_cast<uint32_t>(len);
    ++obj.found_n;
  }
  return 0;
}

std::atomic<bool> g_walk_off{false};  // LD_AUDIT (objects may stand in for others), dlinfo refused
// This library's own object in the loader's list (it is never unloaded), where a scan's walk
// to the list's end starts; found by the first scan after start-up (find_self_map).
std::atomic<const link_map*> g_self_map{nullptr};

// Outside the loader's callbacks: dladdr1 takes the loader's lock, which a callback would take
// again out of order with a concurrent dlopen.
void find_self_map() {
  if (g_self_map.load(std::memory_order_acquire) || g_walk_off.load(std::memory_order_relaxed))
    return;
  const char* audit = secure_getenv("LD_AUDIT");
  Dl_info info;
  link_map* self = nullptr;
  if ((audit && *audit) ||
      !dladdr1(reinterpret_cast<void*>(&find_self_map), &info, reinterpret_cast<void**>(&self),
               RTLD_DL_LINKMAP) ||
      !self)
    g_walk_off.store(true, std::memory_order_relaxed);
  else
    g_self_map.store(self, std::memory_order_release);
}

// The objects the loader added after the snapshot's last one, read from its list. The loader
// appends each object it maps to the end of its namespace's list, and dl_iterate_phdr lists
// the objects of its caller's namespace (the agent's: the base one) in that order; while no
// object was unloaded since the snapshot (the loader's subs unchanged) its last object is
// still there and every object before it is one the snapshot holds. So a dlopen's scan reads
// the new objects alone instead of stepping over every object loaded (5,000 dlopens of goal 5:
// 12.5 million steps, each a few cache misses in the loader's maps). Runs inside
// dl_iterate_phdr's first callback, which holds the loader's lock on its lists; the object's
// program headers come from dlinfo(RTLD_DI_PHDR) (glibc 2.36), which takes no lock (a handle
// is the object's link_map). False where it cannot (an object without them): the caller scans
// as before, and so does every later scan.
bool add_new_objects(FoundList* list, const dl_phdr_info* first) {
#if __GLIBC_PREREQ(2, 36)  // dlinfo(RTLD_DI_PHDR)
  const Snapshot* k = list->known;
  if (g_walk_off.load(std::memory_order_relaxed) || !k || !k->tail || !k->has_stamp ||
      k->subs != first->dlpi_subs)
    return false;
  const link_map* last = k->tail;
  for (const link_map* l = last->l_next; l; l = l->l_next) {
    const ElfW(Phdr)* phdr = nullptr;
    const int phnum = dlinfo(const_cast<link_map*>(l), RTLD_DI_PHDR, &phdr);
    if (phnum <= 0 || !phdr) {
      g_walk_off.store(true, std::memory_order_relaxed);
      list->nobjs = list->n = list->names_len = 0;
      list->partial = false;
      return false;
    }
    dl_phdr_info info = *first;
    info.dlpi_addr = l->l_addr;
    info.dlpi_name = l->l_name;
    info.dlpi_phdr = phdr;
    info.dlpi_phnum = static_cast<ElfW(Half)>(phnum);
    if (add_object(list, &info)) return true;  // out of memory: partial, not merged
    last = l;
  }
  if (list->seen) memset(list->seen, 1, k->n);
  list->nseen = k->n;
  list->tail = last;
  return true;
#else
  (void)list;
  (void)first;
  return false;
#endif
}

int collect(dl_phdr_info* info, size_t size, void* data) {
  auto* list = static_cast<FoundList*>(data);
  if (!list->started) {  // the counters are the same for every object of one call
    list->started = true;
    if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
      list->stamp = info->dlpi_adds + info->dlpi_subs, list->has_stamp = true;
      list->subs = info->dlpi_subs;
    }
    // Nothing loaded or unloaded since the snapshot: done (adds + subs only grows).
    if (list->has_stamp && list->known && list->known->has_stamp &&
        list->stamp == list->known->stamp)
      return list->unchanged = true, 1;
    if (list->has_stamp && add_new_objects(list, info)) return 1;
    // Every object is stepped over: the list's last one, for the next scan's walk.
    const link_map* self = g_self_map.load(std::memory_order_acquire);
    if (list->has_stamp && self && !g_walk_off.load(std::memory_order_relaxed))
      for (list->tail = self; list->tail->l_next;) list->tail = list->tail->l_next;
  }
  const ObjKey key{info->dlpi_addr, info->dlpi_phdr, info->dlpi_name};
  if (known_object(list, key)) return 0;
  return add_object(list, info);
}

}  // namespace

long Snapshot::find(const ObjKey& k) const {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (key_less(obj[sorted[mid]].key, k))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n && key_eq(obj[sorted[lo]].key, k) ? static_cast<long>(sorted[lo]) : -1;
}

FoundList scan(const Snapshot* known) {
  FoundList list{};
  list.known = known;
  if (known && known->n) {
    list.seen = static_cast<uint8_t*>(calloc(known->n, 1));
    if (!list.seen) return list.partial = true, list;
  }
  if (known) find_self_map();  // a dlopen's or dlclose's scan: the walk's start, once
  dl_iterate_phdr(collect, &list);
  return list;
}

void free_list(FoundList* list) {
  free(list->v);
  free(list->names);
  free(list->objs);
  free(list->seen);
  *list = FoundList{};
}

}  // namespace sprofil::agent
