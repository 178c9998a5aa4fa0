#include "agent/layout.hpp"

#include <atomic>
#include <cstring>

namespace sprofil::layout {

RegionShape region_shape(uint64_t span, uint32_t bin_size, uint32_t counter_width, bool system) {
  RegionShape s;
  s.nbins = nbins_for(span, bin_size);
  s.array_bytes = page_round(s.nbins * counter_width);
  s.counters_at = SPROF_PAGE;
  s.system_at = system ? SPROF_PAGE + s.array_bytes : 0;
  s.record_size = SPROF_PAGE + s.array_bytes * (system ? 2 : 1);
  return s;
}

void fill_region(sprof_region* r, const RegionShape& s, uint64_t record_offset,
                 const RegionInfo& i) {
  memset(r, 0, sizeof *r);
  r->magic = SPROF_REGION_MAGIC;
  r->flags = (i.flags & ~SPROF_R_SYSTEM) | (s.system_at ? SPROF_R_SYSTEM : 0u);
  r->record_size = s.record_size;
  r->start = i.start;
  r->end = i.end;
  r->load_bias = i.load_bias;
  r->file_offset = i.file_offset;
  r->nbins = s.nbins;
  r->bin_size = i.bin_size;
  r->counter_width = i.counter_width;
  r->load_ns = i.load_ns;
  r->build_id_len = i.build_id_len < SPROF_BUILD_ID_MAX ? i.build_id_len : SPROF_BUILD_ID_MAX;
  if (r->build_id_len) memcpy(r->build_id, i.build_id, r->build_id_len);
  r->path_len = i.path_len < SPROF_PATH_MAX ? i.path_len : SPROF_PATH_MAX;
  if (r->path_len) memcpy(r->path, i.path, r->path_len);
  r->counters_offset = record_offset + s.counters_at;
  r->system_offset = s.system_at ? record_offset + s.system_at : 0;
}

void place_region(sprof_region* r, uint64_t record_offset) {
  const uint64_t array_bytes = page_round(r->nbins * r->counter_width);
  r->counters_offset = record_offset + SPROF_PAGE;
  r->system_offset = (r->flags & SPROF_R_SYSTEM) ? record_offset + SPROF_PAGE + array_bytes : 0;
}

void* counters_array(sprof_region* r) {
  return reinterpret_cast<char*>(r) + SPROF_PAGE;
}

void* system_array(sprof_region* r) {
  if (!(r->flags & SPROF_R_SYSTEM)) return nullptr;
  return reinterpret_cast<char*>(r) + SPROF_PAGE + page_round(r->nbins * r->counter_width);
}

void fill_header(sprof_header* h, const HeaderInfo& i) {
  memset(h, 0, sizeof *h);
  memcpy(h->magic, SPROF_MAGIC, 8);
  h->version = SPROF_VERSION;
  h->header_size = SPROF_PAGE;
  h->flags = i.flags;
  h->clock = i.clock;
  h->requested_hz = i.tick_ns ? static_cast<uint32_t>(1000000000ull / i.tick_ns) : 0;
  h->tick_ns = i.tick_ns;
  h->start_ns = i.start_ns;
  h->pid = i.pid;
  h->ppid = i.ppid;
  h->regions_end = SPROF_PAGE;
  h->cmdline_len = i.cmdline_len < SPROF_CMDLINE_MAX ? i.cmdline_len : SPROF_CMDLINE_MAX;
  if (h->cmdline_len) memcpy(h->cmdline, i.cmdline, h->cmdline_len);
}

void finish_header(sprof_header* h, uint64_t cpu_ns, uint64_t end_ns) {
  h->cpu_ns = cpu_ns;
  const uint64_t delivered = std::atomic_ref<uint64_t>(h->delivered).load();
  __extension__ using u128 = unsigned __int128;
  if (cpu_ns > 0)
    h->effective_hz_milli =
        static_cast<uint64_t>(static_cast<u128>(delivered) * 1000000000000ull / cpu_ns);
  h->end_ns = end_ns;
}

}  // namespace sprofil::layout
