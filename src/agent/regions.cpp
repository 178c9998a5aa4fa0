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
#include "clock/perf.hpp"
#include "engine/engine.hpp"
#include "util/grow.hpp"

namespace sprofil::agent {
namespace {
uint64_t g_reserved_to = 0;  // merge(): the file's space is reserved up to here
// merge(): one shared mapping of the reserved space [g_batch_off, g_reserved_to), which
// add_region() hands out in slices: a mapping (and an madvise) per record was two system calls
// and a VMA per object at each start (5 objects for a small C++ program, 18 for python3).
char* g_batch = nullptr;
uint64_t g_batch_off = 0;
}  // namespace
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
  if (!util::grow(&g_regs, &g_capregs, g_nregs + 1, 64)) return false;
  const layout::RegionShape shape =
      layout::region_shape(f.end - f.start, g_bin_bytes, kCounterWidth, g_with_system);
  const uint64_t off = g_next_off, len = shape.record_size;
  const uint64_t map_len = g_records_only ? SPROF_PAGE : len;  // what the process maps of it
  layout::RegionInfo info;
  info.flags = f.flags | (dlopened ? SPROF_R_DLOPEN : 0u);
  info.start = f.start;
  info.end = f.end;
  info.load_bias = f.obj_base;
  info.file_offset = f.file_offset;
  info.bin_size = g_bin_bytes;
  info.counter_width = kCounterWidth;
  info.load_ns = now_ns();
  info.build_id = f.build_id;
  info.build_id_len = f.build_id_len;
  info.path = path;
  info.path_len = f.path_len;
  // The record is filled here, then written: where its page is written to reserve it
  // (g_lazy_arrays: drain mode), by that write, and the program does not touch it through the
  // mapping; else copied into it.
  sprof_region* page = &g_scratch.region;
  layout::fill_region(page, shape, off, info);
  void* rec = MAP_FAILED;
  bool batched = g_batch && off >= g_batch_off && off + len <= g_reserved_to;
  if (batched) {
    if (const int e = reserve_record(fd, off, len, true, page)) {  // its page, where lazy
      // This record and the rest of the batch are not in the file: cut it off there.
      munmap(g_batch + (off - g_batch_off), g_reserved_to - off);
      (void)!ftruncate(fd, static_cast<off_t>(off));
      g_reserved_to = off;
      batched = false;
      g_spilled = true;
      say_spilled(e);
    } else {
      rec = g_batch + (off - g_batch_off);
    }
  } else if (!g_spilled && fd >= 0) {
    int e = reserve_record(fd, off, len, off + len <= g_reserved_to, page);
    if (e == 0) {
      rec = mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(off));
      if (rec == MAP_FAILED) {
        e = errno;
        (void)!ftruncate(fd, static_cast<off_t>(off));
        g_reserved_to = 0;
      }
    }
    if (e != 0) {
      g_spilled = true;
      say_spilled(e);
    }
  }
  const bool in_file = rec != MAP_FAILED;
  if (!in_file) {
    rec = mmap(nullptr, map_len, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (rec == MAP_FAILED) return false;
  }
  if (!batched) unlock_new(rec, map_len);
  // Counters are hit at random: no readahead, so only the pages hit become resident.
  if (!batched) madvise(rec, map_len, MADV_RANDOM);
  auto* r = static_cast<sprof_region*>(rec);
  if (!in_file || !g_lazy_arrays) memcpy(r, page, sizeof *page);
  g_next_off = off + len;
  char* at = static_cast<char*>(rec);
  g_regs[g_nregs++] = AgentRegion{r,
                                  g_records_only ? kNoCounters : at + shape.counters_at,
                                  !shape.system_at ? nullptr
                                  : g_records_only ? kNoCounters
                                                   : at + shape.system_at,
                                  len,
                                  off,
                                  true,
                                  in_file,
                                  0,
                                  f.start,
                                  f.end,
                                  shape.nbins};
  if (in_file) {
    g_nfile = g_nregs;
    g_file_end = g_next_off;
    std::atomic_ref<uint64_t>(g_hdr->regions_end).store(g_file_end, std::memory_order_release);
    std::atomic_ref<uint32_t>(g_hdr->region_count)
        .store(static_cast<uint32_t>(g_nfile), std::memory_order_release);
  }
  return true;
}

namespace {

// The engine's view of the live regions, kept sorted by start as regions come and go, so a
// publish copies it instead of reading every record page and sorting (under g_mu).
engine::Region* g_live = nullptr;
size_t g_nlive = 0, g_caplive = 0;
bool g_live_overlap = false;  // an insert overlapped a neighbour: publish filters

bool reserve_live(size_t n) {
  return util::grow(&g_live, &g_caplive, n, 64);
}

size_t live_upper(uintptr_t lo) {  // the first entry starting above lo
  size_t a = 0, b = g_nlive;
  while (a < b) {
    const size_t mid = a + (b - a) / 2;
    if (g_live[mid].lo <= lo)
      a = mid + 1;
    else
      b = mid;
  }
  return a;
}

// Room reserved by the caller (reserve_live).
void live_insert(const AgentRegion& a) {
  engine::Region r{};
  r.lo = a.start;
  r.last = a.end - 1;
  r.map = engine::BinMap{a.start, 65536, 0, static_cast<uint8_t>(__builtin_ctz(g_bin_bytes))};
  r.counters = engine::Counters{a.counters, a.nbins, kCounterWidth, engine::Policy::kSaturate, 0};
  r.system = a.system;
  const size_t p = live_upper(r.lo);
  memmove(g_live + p + 1, g_live + p, (g_nlive - p) * sizeof r);
  g_live[p] = r;
  ++g_nlive;
  if ((p > 0 && g_live[p - 1].last >= r.lo) || (p + 1 < g_nlive && g_live[p + 1].lo <= r.last))
    g_live_overlap = true;
}

void live_remove(const AgentRegion& a) {
  // Its entry starts at its record's start (equal starts only where regions overlap).
  for (size_t p = live_upper(a.start); p-- > 0 && g_live[p].lo == a.start;) {
    if (g_live[p].counters.base != a.counters) continue;
    memmove(g_live + p, g_live + p + 1, (g_nlive - p - 1) * sizeof(engine::Region));
    --g_nlive;
    return;
  }
}

}  // namespace

namespace {

// The published table is behind the records (publish() skipped while no handler reads it).
bool g_table_stale = false;

// The engine table over the live regions, into *t; 0 or an errno value.
int build_table(engine::Table** t) {
  const engine::Region* regs = g_live;
  size_t m = g_nlive;
  engine::Region* kept = nullptr;
  if (g_live_overlap) {
    // Objects can overlap only if the loader reused an address while a scan missed the
    // unload: the region that starts lower (the earlier one at equal starts) is kept.
    kept = engine::alloc_regions(g_nlive + 1);
    if (!kept) return ENOMEM;
    m = 0;
    for (size_t i = 0; i < g_nlive; ++i) {
      if (m > 0 && g_live[i].lo <= kept[m - 1].last) continue;
      kept[m++] = g_live[i];
    }
    g_live_overlap = m != g_nlive;
    regs = kept;
  }
  auto* tallies = reinterpret_cast<engine::Tallies*>(&g_hdr->overflow);
  const engine::Error e = engine::Table::create(regs, m, nullptr, tallies, t);
  free(kept);
  if (e != engine::Error::kOk) return e == engine::Error::kNoMemory ? ENOMEM : EINVAL;
  return 0;
}

// Whether no signal handler reads the agent's published table: the clock runs in drain mode
// (no signal: the record parent counts from the records in the file) with a table published.
// A new table at each dlopen was then work for nobody, and the most of it with many objects:
// a table of 5,000 regions is about 0.4 MB, allocated (its pages faulted in) and freed (the
// heap trimmed, a TLB flush) at every dlopen (docs/benchmarks.md, "After 3005695").
bool table_unread() {
  return rt::perf::drain_mode() && rt::current_signal() == 0 &&
         engine::global().current(engine::kAgentChannel) != nullptr;
}

}  // namespace

// Builds the engine table over the live regions and publishes it on the agent channel; only
// marks it behind where no handler reads it (table_unread).
int publish() {
  if (table_unread()) {
    g_table_stale = true;
    return 0;
  }
  engine::Table* t = nullptr;
  if (int e = build_table(&t)) return e;
  engine::Table* old = nullptr;
  if (int err = rt::install(engine::kAgentChannel, t, g_clock, &old)) {
    engine::Table::destroy(t);
    return err;
  }
  g_table_stale = false;
  engine::Table::destroy(old);
  return 0;
}

void catch_up_table() {
  if (!g_table_stale || !engine::global().current(engine::kAgentChannel)) return;
  engine::Table* t = nullptr;
  if (build_table(&t) != 0) return;  // the old table stays: objects loaded since miss
  engine::Table::destroy(engine::global().exchange(engine::kAgentChannel, t));
  g_table_stale = false;
}

Snapshot* acquire_snapshot() {
  if (g_snap) ++g_snap->refs;
  return g_snap;
}

void release_snapshot(Snapshot* s) {
  if (s && --s->refs == 0) free(s);
}

namespace {

// One allocation: the header, then the objects, their sorted indices and the region indices.
Snapshot* new_snapshot(size_t n, size_t nregs) {
  const size_t bytes = sizeof(Snapshot) + n * sizeof(SnapObj) + (n + nregs) * sizeof(uint32_t);
  auto* s = static_cast<Snapshot*>(malloc(bytes));
  if (!s) return nullptr;
  *s = Snapshot{};
  s->refs = 1;
  s->obj = reinterpret_cast<SnapObj*>(s + 1);
  s->sorted = reinterpret_cast<uint32_t*>(s->obj + n);
  s->regs = s->sorted + n;
  return s;
}

// Index of a found segment among the unloaded records (same path, build-id, segment offset
// and size: the bins are relative to the segment), or -1. Costs the number of unloaded
// records, not of all records.
long unloaded_match(const Found& f, const char* path) {
  for (size_t u = 0; u < g_nunloaded; ++u)
    if (same_segment(g_regs[g_unloaded[u]], f, path)) return static_cast<long>(u);
  return -1;
}

// The objects of a scan compared with another snapshot than g_snap (two threads' dlopens
// raced): which of g_snap's objects the scan lists (seen) and which of its new objects
// g_snap already holds (skip). Costs O((N + K) log K) for N objects and K new ones: rare.
bool rebase(const FoundList& list, const Snapshot* y, uint8_t* seen, size_t* nseen, uint8_t* skip) {
  auto* order = static_cast<uint32_t*>(malloc((list.nobjs + 1) * sizeof(uint32_t)));
  if (!order) return false;
  for (size_t i = 0; i < list.nobjs; ++i) order[i] = static_cast<uint32_t>(i);
  std::sort(order, order + list.nobjs,
            [&](uint32_t a, uint32_t b) { return key_less(list.objs[a].key, list.objs[b].key); });
  *nseen = 0;
  for (size_t j = 0; y && j < y->n; ++j) {
    const ObjKey& k = y->obj[j].key;
    bool present = false;
    if (list.known) {
      const long i = list.known->find(k);
      present = i >= 0 && (list.unchanged || list.seen[i]);
    }
    const uint32_t* p = std::lower_bound(
        order, order + list.nobjs, k,
        [&](uint32_t a, const ObjKey& key) { return key_less(list.objs[a].key, key); });
    if (p != order + list.nobjs && key_eq(list.objs[*p].key, k)) {
      skip[*p] = 1;
      present = true;
    }
    if (present) seen[j] = 1, ++*nseen;
  }
  free(order);
  return true;
}

}  // namespace

// Brings the regions in line with a scan: objects that are gone are marked unloaded (their
// counts stay), an object loaded again gets its old record back (same path, build-id, segment
// offset and size: the bins are relative to the segment, so a new address is fine), other new
// objects get a new record; g_snap becomes the scan's objects. The scan read only the objects
// g_snap did not hold, and this costs O(N) word copies for the new snapshot plus the new and
// gone objects' own work, for N objects loaded (bench/compare/scale.py: 5,000 dlopens): no sorting,
// no reading of known objects. A new object is looked up among the unloaded records only.
int merge(const FoundList& list, bool dlopened, int fd) {
  Snapshot* y = g_snap;
  const size_t ny = y ? y->n : 0;
  if (list.unchanged && list.known == y) return 0;
  // Which of g_snap's objects are still there, which new objects are new.
  const uint8_t* seen = list.seen;
  size_t nseen = list.nseen;
  uint8_t* own_seen = nullptr;
  uint8_t* skip = nullptr;
  if (list.known != y) {
    own_seen = static_cast<uint8_t*>(calloc(ny + 1, 1));
    skip = static_cast<uint8_t*>(calloc(list.nobjs + 1, 1));
    if (!own_seen || !skip || !rebase(list, y, own_seen, &nseen, skip)) {
      free(own_seen);
      free(skip);
      return -1;
    }
    seen = own_seen;
  } else if (list.unchanged) {
    nseen = ny;
  }
  size_t nnew = 0;
  for (size_t i = 0; i < list.nobjs; ++i) nnew += skip && skip[i] ? 0 : 1;
  const size_t gone = ny - nseen;
  if (gone == 0 && nnew == 0) {
    free(own_seen);
    free(skip);
    return 0;
  }
  take_file_if_pending();  // a forked child writes only into a file of its own
  // Everything that can fail on memory first, so that a failure changes nothing.
  const size_t yregs = y ? y->nregs : 0;
  const size_t nz = nseen + nnew;
  Snapshot* z = new_snapshot(nz, yregs + list.n);
  auto* remap = static_cast<uint32_t*>(malloc((ny + 1) * sizeof(uint32_t)));
  auto* fresh = static_cast<uint32_t*>(malloc((nnew + 1) * sizeof(uint32_t)));
  bool room = reserve_live(g_nlive + list.n);
  // Every region is at most once in g_unloaded.
  room = room && util::grow(&g_unloaded, &g_capunloaded, g_nregs, 64);
  if (!z || !remap || !fresh || !room) {
    free(z);
    free(remap);
    free(fresh);
    free(own_seen);
    free(skip);
    return -1;
  }
  bool changed = false;  // regions added, unloaded or loaded again: a new table
  bool moved = false;    // a committed record changed, or one added where one unloaded was
  // Under sprofil record the parent counts the samples already taken by the regions as they
  // are, before any is marked unloaded (drain_proto.hpp, kDrainSync).
  if (gone > 0) rt::perf::sync_drained();
  // The objects kept, in their order; the gone ones' regions are unloaded.
  size_t n = 0, nr = 0;
  if (gone == 0 && ny > 0) {  // the usual dlopen: one block copy
    memcpy(z->obj, y->obj, ny * sizeof(SnapObj));
    memcpy(z->regs, y->regs, yregs * sizeof(uint32_t));
    n = ny;
    nr = yregs;
  }
  for (size_t j = 0; gone > 0 && j < ny; ++j) {
    const SnapObj& o = y->obj[j];
    if (!seen || !seen[j]) {
      remap[j] = UINT32_MAX;
      for (uint32_t r = 0; r < o.reg_n; ++r) {
        const uint32_t k = y->regs[o.reg_first + r];
        AgentRegion& a = g_regs[k];
        if (!a.live) continue;
        a.live = false;
        live_remove(a);
        a.rec->flags |= SPROF_R_UNLOADED;
        a.rec->unload_ns = now_ns();
        g_unloaded[g_nunloaded++] = k;
        changed = moved = true;
      }
      continue;
    }
    remap[j] = static_cast<uint32_t>(n);
    z->obj[n] = SnapObj{o.key, static_cast<uint32_t>(nr), o.reg_n};
    memcpy(z->regs + nr, y->regs + o.reg_first, o.reg_n * sizeof(uint32_t));
    nr += o.reg_n;
    ++n;
  }
  // The new objects, in the loader's order, their records' space reserved at once (one
  // fallocate was about 10 us each: 18 objects of a python3 start-up, 5,000 of goal 5's). An
  // object loaded again keeps its record and needs none: a dlopen/dlclose churn of one object
  // must not open, reserve and cut the file each time (tests/harm AgentDlopen).
  bool opened = fd >= 0;
  int own_fd = -1;
  size_t nfresh = 0;
  uint64_t want = 0;
  for (size_t i = 0; i < list.nobjs && !g_spilled; ++i) {
    if (skip && skip[i]) continue;
    const NewObj& no = list.objs[i];
    for (uint32_t s = 0; s < no.found_n; ++s) {
      const Found& f = list.v[no.found_first + s];
      if (unloaded_match(f, list.path(f)) >= 0) continue;  // loaded again: its record is kept
      want += layout::region_shape(f.end - f.start, g_bin_bytes, kCounterWidth, g_with_system)
                  .record_size;
    }
  }
  if (want > 0 && !g_spilled) {
    if (!opened) fd = own_fd = reopen_output();
    opened = true;
    if (fd >= 0 && reserve_span(fd, g_next_off, want) == 0) g_reserved_to = g_next_off + want;
    // Not with g_records_only: a record's page is mapped alone.
    void* m = g_reserved_to && !g_records_only
                  ? mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                         static_cast<off_t>(g_next_off))
                  : MAP_FAILED;
    if (m != MAP_FAILED) {  // else add_region() maps each record
      unlock_new(m, want);
      madvise(m, want, MADV_RANDOM);
      g_batch = static_cast<char*>(m);
      g_batch_off = g_next_off;
    }
  }
  for (size_t i = 0; i < list.nobjs; ++i) {
    if (skip && skip[i]) continue;
    const NewObj& no = list.objs[i];
    fresh[nfresh++] = static_cast<uint32_t>(n);
    SnapObj& o = z->obj[n++];
    o = SnapObj{no.key, static_cast<uint32_t>(nr), 0};
    for (uint32_t s = 0; s < no.found_n; ++s) {
      const Found& f = list.v[no.found_first + s];
      if (const long u = unloaded_match(f, list.path(f)); u >= 0) {
        // Loaded again: the same record, at its new address.
        const uint32_t k = g_unloaded[u];
        g_unloaded[u] = g_unloaded[--g_nunloaded];
        AgentRegion& a = g_regs[k];
        a.rec->start = a.start = f.start;
        a.rec->end = a.end = f.end;
        a.rec->load_bias = f.obj_base;
        a.rec->unload_ns = 0;
        std::atomic_ref<uint32_t>(a.rec->flags).fetch_and(~SPROF_R_UNLOADED);
        a.live = true;
        live_insert(a);
        z->regs[nr++] = k;
        changed = moved = true;
        continue;
      }
      if (!opened && !g_spilled) {
        fd = own_fd = reopen_output();
        opened = true;
      }
      if (fd < 0 && !g_spilled) continue;  // not our file any more: new objects go uncounted
      if (add_region(fd, f, list.path(f), dlopened)) {
        live_insert(g_regs[g_nregs - 1]);
        z->regs[nr++] = static_cast<uint32_t>(g_nregs - 1);
        changed = true;
        moved |= g_nunloaded > 0;  // it may lie where an unloaded one was
      }
    }
    o.reg_n = static_cast<uint32_t>(nr) - o.reg_first;
  }
  // Space reserved for records that were not made (an object loaded again reuses its record;
  // a failure spilled the rest) is cut off.
  if (g_reserved_to > g_next_off && fd >= 0 && !g_spilled)
    (void)!ftruncate(fd, static_cast<off_t>(g_next_off));
  // The batch mapping's part past the records made (over the space just cut off) goes.
  if (g_batch && g_reserved_to > std::max(g_next_off, g_batch_off))
    munmap(g_batch + (std::max(g_next_off, g_batch_off) - g_batch_off),
           g_reserved_to - std::max(g_next_off, g_batch_off));
  g_batch = nullptr;
  g_reserved_to = 0;
  if (own_fd >= 0) close(own_fd);
  // The key order: the kept objects' (from y's) merged with the new ones' (sorted).
  std::sort(fresh, fresh + nfresh,
            [&](uint32_t a, uint32_t b) { return key_less(z->obj[a].key, z->obj[b].key); });
  size_t m = 0;
  if (gone == 0) {
    // The kept objects' indices are unchanged: copy y's order in blocks between the places
    // where the new ones go.
    size_t a = 0;
    for (size_t b = 0; b < nfresh; ++b) {
      const ObjKey& k = z->obj[fresh[b]].key;
      const uint32_t* p = std::lower_bound(
          y ? y->sorted + a : nullptr, y ? y->sorted + ny : nullptr, k,
          [&](uint32_t i, const ObjKey& key) { return key_less(y->obj[i].key, key); });
      const size_t upto = y ? static_cast<size_t>(p - y->sorted) : 0;
      if (upto > a) memcpy(z->sorted + m, y->sorted + a, (upto - a) * sizeof(uint32_t));
      m += upto - a;
      a = upto;
      z->sorted[m++] = fresh[b];
    }
    if (ny > a) memcpy(z->sorted + m, y->sorted + a, (ny - a) * sizeof(uint32_t));
  } else {
    size_t a = 0, b = 0;
    while (a < ny || b < nfresh) {
      if (a < ny && remap[y->sorted[a]] == UINT32_MAX) {
        ++a;
        continue;
      }
      if (b == nfresh ||
          (a < ny && key_less(z->obj[remap[y->sorted[a]]].key, z->obj[fresh[b]].key)))
        z->sorted[m++] = remap[y->sorted[a++]];
      else
        z->sorted[m++] = fresh[b++];
    }
  }
  z->n = n;
  z->nregs = nr;
  z->stamp = list.stamp;
  z->has_stamp = list.has_stamp;
  z->subs = list.subs;
  z->tail = list.tail;
  release_snapshot(y);
  g_snap = z;
  free(remap);
  free(fresh);
  free(own_seen);
  free(skip);
  // A reader holding a table over the records (sprofil record's drainer) rebuilds it when this
  // moves: a record unloaded, loaded again elsewhere, or one added where an unloaded one may
  // have been. A record added while none is unloaded lies where no other does: a reader finds
  // it by region_count (and reads only the records added, src/record/drain_files.cpp refresh).
  if (moved)
    std::atomic_ref<uint32_t>(g_hdr->regions_changes).fetch_add(1, std::memory_order_release);
  return changed ? 1 : 0;
}

}  // namespace sprofil::agent
