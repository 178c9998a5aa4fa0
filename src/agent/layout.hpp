// The runtime's side of the record layout: the shared definition (sizes, offsets, fields,
// src/format/layout.hpp), which the runtime fills in place in the machine's order.
#pragma once

#include <bit>

#include "format/layout.hpp"

namespace sprofil::layout {

// The runtime fills headers, region records and counters in place, in the machine's order
// (the counters are the engine's native integers in a shared mapping): the agent's files, the
// live images (live.cpp) and the API's snapshot images (api_source.cpp) alike. The file is
// little-endian, so the runtime builds only where the machine's order is the file's; the
// host's reader and writer go through *_le() and need no such machine.
static_assert(std::endian::native == std::endian::little,
              "the runtime writes the little-endian .sprof format in the machine's order");

}  // namespace sprofil::layout
