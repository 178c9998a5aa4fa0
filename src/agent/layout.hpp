// The runtime's side of the record layout: the shared definition (sizes, offsets, fields,
// src/format/layout.hpp) plus what only a live process needs: a record's arrays in memory,
// where they follow its page as in the file, and the end fields of a header whose tallies
// the handler may still be counting.
#pragma once

#include "format/layout.hpp"

namespace sprofil::layout {

// A record's arrays, given where the record page is in memory. system_array is null without
// SPROF_R_SYSTEM.
void* counters_array(sprof_region* r);
void* system_array(sprof_region* r);

// The end fields: process CPU time, end time, and the effective rate from the delivered
// tally (read atomically: the handler may still count). Does not set SPROF_F_FINISHED.
void finish_header(sprof_header* h, uint64_t cpu_ns, uint64_t end_ns);

}  // namespace sprofil::layout
