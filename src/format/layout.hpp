// The .sprof record layout (sprof_format.h), computed and filled in one place for both sides:
// the runtime's agent (through shared mappings) and the host's writer and reader. How many
// bins a region has, how large a region record is (its page, the padded counters and, with
// SPROF_R_SYSTEM, the padded system-time array), where its arrays are, the fields of a header
// and of a region record, and the file's byte order. Header-only, libc only (no I/O, no
// allocation, no exceptions), so libsprofil and the host libraries compile the same code.
//
// Byte order: the file is little-endian. The structs are filled in the machine's order; the
// host writer and reader pass them through *_le(), which swaps on a big-endian machine and
// is nothing on a little-endian one. The runtime's counters are the engine's native integers
// in a shared mapping, so the runtime writes native order; it builds only on a little-endian
// machine (static_assert in agent/layout.hpp).
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "format/sprof_format.h"

namespace sprofil::layout {

constexpr uint64_t page_round(uint64_t n) {
  return (n + SPROF_PAGE - 1) / SPROF_PAGE * SPROF_PAGE;
}

// The bin-count formula: counters for `span` bytes of text at `bin_size` bytes per counter
// (rounded up). 0 for an empty range or a bin size of 0.
constexpr uint64_t nbins_for(uint64_t span, uint32_t bin_size) {
  if (bin_size == 0) return 0;
  return span / bin_size + (span % bin_size != 0 ? 1 : 0);
}

// One array (counters or system parts) of `nbins` counters of `width` bytes, padded to the
// page. The caller checks fits() first where the numbers come from outside.
constexpr uint64_t array_bytes(uint64_t nbins, uint32_t width) {
  return page_round(nbins * width);
}

// Whether a record of `nbins` counters of `width` bytes (with a system array: twice) and its
// page can be addressed in 64 bits with room to spare: the bound the writer and the reader
// enforce before they compute a shape from outside numbers.
constexpr bool fits(uint64_t nbins, uint32_t width) {
  return width != 0 && nbins <= (UINT64_MAX - 4 * uint64_t{SPROF_PAGE}) / 2 / width;
}

// Every region record is at least two pages: its own and one of counters (nbins >= 1).
constexpr uint64_t kMinRecord = 2 * uint64_t{SPROF_PAGE};
// A process image in a run profile is at least two pages too: its header and one more.
constexpr uint64_t kMinImage = 2 * uint64_t{SPROF_PAGE};

// A packed run image (versions 2 and 3 of the run profile): the unit its extents count in
// (a page in version 2, SPROF_RUN_UNIT bytes in version 3), the bytes its extent table takes
// (padded to the page in version 2), and the least it can store (its table and one unit).
constexpr uint64_t run_unit(uint32_t version) {
  return version == SPROF_RUN_VERSION_PAGES ? SPROF_PAGE : SPROF_RUN_UNIT;
}
constexpr uint64_t run_table_bytes(uint32_t version, uint64_t extents) {
  const uint64_t bytes = extents * SPROF_RUN_EXTENT;
  return version == SPROF_RUN_VERSION_PAGES ? page_round(bytes) : bytes;
}
// The least bytes of a version 3 image that a region record takes: its fields that a valid
// record cannot leave zero (magic, record_size, counters_offset, end, nbins, bin_size and
// counter_width) lie in six different units, each stored.
constexpr uint64_t kMinStoredRecord = 6 * uint64_t{SPROF_RUN_UNIT};

// The shape of one region record. Offsets are relative to the record's start.
struct RegionShape {
  uint64_t nbins = 0;
  uint64_t array_bytes = 0;  // one array (counters or system), padded to the page
  uint64_t counters_at = 0;  // SPROF_PAGE
  uint64_t system_at = 0;    // the system array, 0 if none
  uint64_t record_size = 0;  // the page plus the arrays
};

constexpr RegionShape shape_of(uint64_t nbins, uint32_t counter_width, bool system) {
  RegionShape s;
  s.nbins = nbins;
  s.array_bytes = array_bytes(nbins, counter_width);
  s.counters_at = SPROF_PAGE;
  s.system_at = system ? SPROF_PAGE + s.array_bytes : 0;
  s.record_size = SPROF_PAGE + s.array_bytes * (system ? 2 : 1);
  return s;
}

constexpr RegionShape region_shape(uint64_t span, uint32_t bin_size, uint32_t counter_width,
                                   bool system) {
  return shape_of(nbins_for(span, bin_size), counter_width, system);
}

// What a region record describes (the shape aside).
struct RegionInfo {
  uint32_t flags = 0;           // SPROF_R_*; SPROF_R_SYSTEM is set from the shape
  uint64_t start = 0, end = 0;  // the runtime address range
  uint64_t load_bias = 0, file_offset = 0;
  uint32_t bin_size = 0, counter_width = 0;
  uint64_t load_ns = 0, unload_ns = 0;
  const uint8_t* build_id = nullptr;
  uint32_t build_id_len = 0;  // at most SPROF_BUILD_ID_MAX
  const char* path = nullptr;
  uint32_t path_len = 0;  // at most SPROF_PATH_MAX
};

// Fills the record page `r` (zeroed first) for a record at file offset `record_offset`.
inline void fill_region(sprof_region* r, const RegionShape& s, uint64_t record_offset,
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
  r->unload_ns = i.unload_ns;
  r->build_id_len = i.build_id_len < SPROF_BUILD_ID_MAX ? i.build_id_len : SPROF_BUILD_ID_MAX;
  if (r->build_id_len) memcpy(r->build_id, i.build_id, r->build_id_len);
  r->path_len = i.path_len < SPROF_PATH_MAX ? i.path_len : SPROF_PATH_MAX;
  if (r->path_len) memcpy(r->path, i.path, r->path_len);
  r->counters_offset = record_offset + s.counters_at;
  r->system_offset = s.system_at ? record_offset + s.system_at : 0;
}

// Moves a filled record to `record_offset`: updates counters_offset and system_offset.
inline void place_region(sprof_region* r, uint64_t record_offset) {
  const RegionShape s = shape_of(r->nbins, r->counter_width, (r->flags & SPROF_R_SYSTEM) != 0);
  r->counters_offset = record_offset + s.counters_at;
  r->system_offset = s.system_at ? record_offset + s.system_at : 0;
}

// What a header describes at the start of a process image.
struct HeaderInfo {
  uint32_t flags = 0;
  uint32_t clock = 0;
  uint64_t tick_ns = 0;  // requested_hz is derived from it
  uint64_t start_ns = 0;
  int32_t pid = 0, ppid = 0;
  uint64_t start_cpu_ns = 0;      // the process's CPU time now (the agent's)
  const char* cmdline = nullptr;  // arguments, each NUL-terminated
  uint32_t cmdline_len = 0;       // cut at SPROF_CMDLINE_MAX
  const char* comm = nullptr;     // the command name (cut at SPROF_COMM_MAX - 1); null: not told
};

// Fills the header page `h` (zeroed first): no region yet (regions_end = SPROF_PAGE).
inline void fill_header(sprof_header* h, const HeaderInfo& i) {
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
  h->start_cpu_ns = i.start_cpu_ns;
  h->regions_end = SPROF_PAGE;
  h->cmdline_len = i.cmdline_len < SPROF_CMDLINE_MAX ? i.cmdline_len : SPROF_CMDLINE_MAX;
  if (h->cmdline_len) memcpy(h->cmdline, i.cmdline, h->cmdline_len);
  for (size_t k = 0; i.comm != nullptr && k + 1 < SPROF_COMM_MAX && i.comm[k] != '\0'; ++k)
    h->comm[k] = i.comm[k];
}

// The end fields: process CPU time, end time, and the effective rate from the delivered
// tally (read atomically: a handler or the record parent may still count). Does not set
// SPROF_F_FINISHED. The agent's at an exit or exec; the record parent's for a forked child's
// file it made and the child never took (drain_proto.hpp, kFlushFinish).
inline void finish_header(sprof_header* h, uint64_t cpu_ns, uint64_t end_ns) {
  h->cpu_ns = cpu_ns;
  const uint64_t delivered = std::atomic_ref<uint64_t>(h->delivered).load();
  __extension__ using u128 = unsigned __int128;
  if (cpu_ns > 0)
    h->effective_hz_milli =
        static_cast<uint64_t>(static_cast<u128>(delivered) * 1000000000000ull / cpu_ns);
  h->end_ns = end_ns;
}

// ---- byte order: each function turns a struct between the machine's order and the file's
// (little-endian) in place; it is its own inverse, and nothing on a little-endian machine.

template <typename T>
constexpr T le(T v) {
  if constexpr (std::endian::native == std::endian::little || sizeof(T) == 1) {
    return v;
  } else {
    using U = std::make_unsigned_t<T>;
    U u = static_cast<U>(v), r = 0;
    for (size_t b = 0; b < sizeof(T); ++b) r = static_cast<U>((r << 8) | ((u >> (8 * b)) & 0xff));
    return static_cast<T>(r);
  }
}

// The little-endian unsigned integer of `width` bytes (2, 4 or 8) at p: a counter.
inline uint64_t load_counter(const uint8_t* p, uint32_t width) {
  uint64_t v = 0;
  if constexpr (std::endian::native == std::endian::little) {
    memcpy(&v, p, width);
    return v;
  }
  for (uint32_t i = 0; i < width; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

inline void store_counter(uint8_t* p, uint64_t v, uint32_t width) {
  for (uint32_t i = 0; i < width; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

template <typename... T>
constexpr void le_all(T&... fields) {
  ((fields = le(fields)), ...);
}

inline void header_le(sprof_header* h) {
  le_all(h->version, h->header_size, h->flags, h->clock, h->requested_hz, h->region_count,
         h->tick_ns, h->effective_hz_milli, h->start_ns, h->end_ns, h->cpu_ns, h->pid, h->ppid,
         h->regions_end, h->overflow, h->delivered, h->lost, h->cmdline_len, h->start_cpu_ns);
}

inline void region_le(sprof_region* r) {
  le_all(r->magic, r->flags, r->record_size, r->counters_offset, r->start, r->end, r->load_bias,
         r->file_offset, r->nbins, r->bin_size, r->counter_width, r->load_ns, r->unload_ns,
         r->build_id_len, r->path_len, r->system_offset);
}

inline void run_header_le(sprof_run_header* h) {
  le_all(h->version, h->header_size, h->process_count, h->flags, h->table_offset, h->run_cpu_ns,
         h->dropped_processes, h->start_ns, h->end_ns, h->exit_status, h->cmdline_len, h->throttled,
         h->unsampled_threads, h->unsampled_thread_ticks, h->unsampled_processes,
         h->unsampled_process_ticks);
}

inline void run_process_le(sprof_run_process* e) {
  le_all(e->pid, e->ppid, e->image_offset, e->image_size, e->stored_size, e->extent_count);
}

inline void run_extent_le(sprof_run_extent* x) {
  le_all(x->first, x->count);
}

}  // namespace sprofil::layout
