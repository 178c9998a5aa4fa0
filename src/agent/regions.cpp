// Region records and the engine table over them. A record (layout.hpp) is a page describing
// one executable segment, its counters and, where the clock splits system time, its
// system-time array. It lives in the output file through a shared mapping of reserved space
// while everything so far fit, else in anonymous memory (written at a clean exit, finish.cpp).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "agent/layout.hpp"
#include "agent/state.hpp"
#include "engine/engine.hpp"

namespace sprofil::agent {
namespace {

bool same_segment(const AgentRegion& a, const Found& f, const char* path) {
  const sprof_region* r = a.rec;
  return r->file_offset == f.file_offset && r->end - r->start == f.end - f.start &&
         r->build_id_len == f.build_id_len &&
         memcmp(r->build_id, f.build_id, f.build_id_len) == 0 && r->path_len == f.path_len &&
         memcmp(r->path, path, r->path_len) == 0 &&
         (r->flags & (SPROF_R_MAIN | SPROF_R_VDSO)) == (f.flags & (SPROF_R_MAIN | SPROF_R_VDSO));
}

}  // namespace

// Adds a region record with its arrays: in the file (fd, at g_next_off, space reserved)
// while everything so far fit, else in anonymous memory. A record in the file is committed
// by raising region_count only once it is complete.
bool add_region(int fd, const Found& f, const char* path, bool dlopened) {
  if (g_nregs == g_capregs) {
    const size_t cap = g_capregs ? g_capregs * 2 : 64;
    auto* v = static_cast<AgentRegion*>(realloc(g_regs, cap * sizeof(AgentRegion)));
    if (!v) return false;
    g_regs = v;
    g_capregs = cap;
  }
  const layout::RegionShape shape =
      layout::region_shape(f.end - f.start, g_bin_bytes, 4, g_with_system);
  const uint64_t off = g_next_off, len = shape.record_size;
  void* rec = MAP_FAILED;
  if (!g_spilled && fd >= 0) {
    int e = reserve(fd, off, len);
    if (e == 0) {
      rec = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(off));
      if (rec == MAP_FAILED) {
        e = errno;
        (void)!ftruncate(fd, static_cast<off_t>(off));
      }
    }
    if (e != 0) {
      g_spilled = true;
      say_spilled(e);
    }
  }
  const bool in_file = rec != MAP_FAILED;
  if (!in_file) {
    rec = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
               -1, 0);
    if (rec == MAP_FAILED) return false;
  }
  // Counters are hit at random: no readahead, so only the pages hit become resident.
  madvise(rec, len, MADV_RANDOM);
  auto* r = static_cast<sprof_region*>(rec);
  layout::RegionInfo info;
  info.flags = f.flags | (dlopened ? SPROF_R_DLOPEN : 0u);
  info.start = f.start;
  info.end = f.end;
  info.load_bias = f.obj_base;
  info.file_offset = f.file_offset;
  info.bin_size = g_bin_bytes;
  info.counter_width = 4;
  info.load_ns = now_ns();
  info.build_id = f.build_id;
  info.build_id_len = f.build_id_len;
  info.path = path;
  info.path_len = f.path_len;
  layout::fill_region(r, shape, off, info);
  g_next_off = off + len;
  g_regs[g_nregs++] = AgentRegion{
      r, layout::counters_array(r), layout::system_array(r), len, off, f.obj_base, true, in_file,
      0};
  if (in_file) {
    g_nfile = g_nregs;
    g_file_end = g_next_off;
    std::atomic_ref<uint64_t>(g_hdr->regions_end).store(g_file_end, std::memory_order_release);
    std::atomic_ref<uint32_t>(g_hdr->region_count)
        .store(static_cast<uint32_t>(g_nfile), std::memory_order_release);
  }
  return true;
}

// Builds the engine table over the live regions and publishes it on the agent channel.
int publish() {
  auto* regs = static_cast<engine::Region*>(malloc((g_nregs + 1) * sizeof(engine::Region)));
  if (!regs) return ENOMEM;
  size_t n = 0;
  const uint8_t shift = static_cast<uint8_t>(__builtin_ctz(g_bin_bytes));
  for (size_t i = 0; i < g_nregs; ++i) {
    const AgentRegion& a = g_regs[i];
    if (!a.live) continue;
    engine::Region& r = regs[n++];
    r = engine::Region{};
    r.lo = a.rec->start;
    r.last = a.rec->end - 1;
    r.map = engine::BinMap{a.rec->start, 65536, 0, shift};
    r.counters = engine::Counters{a.counters, a.rec->nbins, 4, engine::Policy::kSaturate, 0};
    r.system = a.system;
  }
  std::sort(regs, regs + n,
            [](const engine::Region& a, const engine::Region& b) { return a.lo < b.lo; });
  // Objects can overlap only if the loader reused an address; keep the newer one.
  size_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    if (m > 0 && regs[i].lo <= regs[m - 1].last) continue;
    regs[m++] = regs[i];
  }
  engine::Table* t = nullptr;
  auto* tallies = reinterpret_cast<engine::Tallies*>(&g_hdr->overflow);
  const engine::Error e = engine::Table::create(regs, m, nullptr, tallies, &t);
  free(regs);
  if (e != engine::Error::kOk) return e == engine::Error::kNoMemory ? ENOMEM : EINVAL;
  engine::Table* old = nullptr;
  if (int err = rt::install(engine::kAgentChannel, t, g_clock, &old)) {
    engine::Table::destroy(t);
    return err;
  }
  engine::Table::destroy(old);
  return 0;
}

namespace {
// A live region or a found segment, by where it is loaded: (object base, segment start).
struct Key {
  uintptr_t base, start;
  size_t index;
};
bool key_less(const Key& a, const Key& b) {
  return a.base != b.base ? a.base < b.base : a.start < b.start;
}
}  // namespace

// Brings the regions in line with a scan: objects that are gone are marked unloaded (their
// counts stay), an object loaded again gets its old record back (same path, build-id, segment
// offset and size: the bins are relative to the segment, so a new address is fine), other new
// objects get a new record. Returns 1 if anything changed, 0 if not, -1 if it could not look
// (out of memory: nothing changed). The live regions and the scan are matched by sorting both
// by load address: O((R + L) log) per call for R live regions and L segments found, so a
// program that dlopens thousands of objects one by one does not pay R x L at each call
// (bench/scale: 5,000 dlopens). A new object is looked up among the unloaded records, a cost
// bounded by the distinct objects ever loaded, paid once per new object.
int merge(const FoundList& list, bool dlopened) {
  auto* live = static_cast<Key*>(malloc((g_nregs + 1) * sizeof(Key)));
  auto* found = static_cast<Key*>(malloc((list.n + 1) * sizeof(Key)));
  auto* known = static_cast<bool*>(calloc(list.n + 1, sizeof(bool)));
  if (!live || !found || !known) {
    free(live);
    free(found);
    free(known);
    return -1;
  }
  size_t nlive = 0;
  for (size_t k = 0; k < g_nregs; ++k)
    if (g_regs[k].live) live[nlive++] = Key{g_regs[k].obj_base, g_regs[k].rec->start, k};
  for (size_t i = 0; i < list.n; ++i) found[i] = Key{list.v[i].obj_base, list.v[i].start, i};
  std::sort(live, live + nlive, key_less);
  std::sort(found, found + list.n, key_less);
  bool changed = false;
  size_t j = 0;
  for (size_t k = 0; k < nlive; ++k) {
    while (j < list.n && key_less(found[j], live[k])) ++j;
    if (j < list.n && !key_less(live[k], found[j])) {
      known[found[j].index] = true;
      continue;
    }
    AgentRegion& a = g_regs[live[k].index];  // gone
    a.live = false;
    a.rec->flags |= SPROF_R_UNLOADED;
    a.rec->unload_ns = now_ns();
    changed = true;
  }
  free(live);
  free(found);
  int fd = -1;
  bool opened = false;
  for (size_t i = 0; i < list.n; ++i) {  // in the loader's order
    if (known[i]) continue;
    const Found& f = list.v[i];
    size_t k = 0;
    for (; k < g_nregs && (g_regs[k].live || !same_segment(g_regs[k], f, list.path(f))); ++k) {
    }
    if (k < g_nregs) {  // loaded again: the same record, at its new address
      AgentRegion& a = g_regs[k];
      a.rec->start = f.start;
      a.rec->end = f.end;
      a.rec->load_bias = f.obj_base;
      a.rec->unload_ns = 0;
      std::atomic_ref<uint32_t>(a.rec->flags).fetch_and(~SPROF_R_UNLOADED);
      a.obj_base = f.obj_base;
      a.live = true;
      changed = true;
      continue;
    }
    if (!opened && !g_spilled) {
      fd = reopen_output();
      opened = true;
    }
    if (fd < 0 && !g_spilled) continue;  // not our file any more: new objects go uncounted
    if (add_region(fd, f, list.path(f), dlopened)) changed = true;
  }
  free(known);
  if (fd >= 0) close(fd);
  return changed ? 1 : 0;
}

}  // namespace sprofil::agent
