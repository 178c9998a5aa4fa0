// The .sprof record layout (src/profile/sprof_format.h), computed and filled in one place:
// how large a region record is (its page, the padded counters and, with SPROF_R_SYSTEM, the
// padded system-time array), where its arrays are, and the fields of a header and a region
// record. Pure functions over native-endian structs: no I/O, no allocation, libc only, so the
// runtime (the agent) and the host writer can both use them. The agent writes through shared
// mappings in the machine's byte order; a little-endian host writer (x86-64, aarch64) can
// fill its records with these functions unchanged and keep its byte swapping only for a
// big-endian machine.
#pragma once

#include <cstddef>
#include <cstdint>

#include "profile/sprof_format.h"

namespace sprofil::layout {

constexpr uint64_t page_round(uint64_t n) {
  return (n + SPROF_PAGE - 1) / SPROF_PAGE * SPROF_PAGE;
}

// Counters needed for `span` bytes of text at `bin_size` bytes per counter (rounded up).
constexpr uint64_t nbins_for(uint64_t span, uint32_t bin_size) {
  return span / bin_size + (span % bin_size != 0 ? 1 : 0);
}

// The shape of one region record. Offsets are relative to the record's start.
struct RegionShape {
  uint64_t nbins = 0;
  uint64_t array_bytes = 0;  // one array (counters or system), padded to the page
  uint64_t counters_at = 0;  // SPROF_PAGE
  uint64_t system_at = 0;    // the system array, 0 if none
  uint64_t record_size = 0;  // the page plus the arrays
};

RegionShape region_shape(uint64_t span, uint32_t bin_size, uint32_t counter_width, bool system);

// What a region record describes (the shape aside).
struct RegionInfo {
  uint32_t flags = 0;  // SPROF_R_*; SPROF_R_SYSTEM is set from the shape
  uint64_t start = 0, end = 0;
  uint64_t load_bias = 0;
  uint64_t file_offset = 0;
  uint32_t bin_size = 0;
  uint32_t counter_width = 0;
  uint64_t load_ns = 0;
  const uint8_t* build_id = nullptr;
  uint32_t build_id_len = 0;  // at most SPROF_BUILD_ID_MAX
  const char* path = nullptr;
  uint32_t path_len = 0;  // at most SPROF_PATH_MAX
};

// Fills the record page `r` (zeroed first) for a record at file offset `record_offset`.
void fill_region(sprof_region* r, const RegionShape& s, uint64_t record_offset,
                 const RegionInfo& i);

// Moves a filled record to `record_offset`: updates counters_offset and system_offset.
void place_region(sprof_region* r, uint64_t record_offset);

// The record's size in bytes as laid out (from its record_size), and its arrays, given where
// the record page is in memory (the arrays follow it as in the file). system_array is null
// without SPROF_R_SYSTEM.
void* counters_array(sprof_region* r);
void* system_array(sprof_region* r);

// What a header describes at the start of a process image.
struct HeaderInfo {
  uint32_t flags = 0;
  uint32_t clock = 0;
  uint64_t tick_ns = 0;  // requested_hz is derived from it
  uint64_t start_ns = 0;
  int32_t pid = 0, ppid = 0;
  const char* cmdline = nullptr;  // arguments, each NUL-terminated
  uint32_t cmdline_len = 0;       // cut at SPROF_CMDLINE_MAX
};

// Fills the header page `h` (zeroed first): no region yet (regions_end = SPROF_PAGE).
void fill_header(sprof_header* h, const HeaderInfo& i);

// The end fields: process CPU time, end time, and the effective rate from the delivered
// tally (read atomically: the handler may still count). Does not set SPROF_F_FINISHED.
void finish_header(sprof_header* h, uint64_t cpu_ns, uint64_t end_ns);

}  // namespace sprofil::layout
