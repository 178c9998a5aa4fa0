// Writing .sprof files in the v1 layout (src/profile/sprof_format.h).
#pragma once

#include <string>

#include "profile/profile.hpp"

namespace sprofil::profile {

// A Profile with `run` set is written as a run profile (each process's v1 image in the run
// container); else as a v1 file of the top-level fields and every region.
// Writes `p` to `path` (through a temporary file in the same directory, then rename). Counters
// are written little-endian at each region's counter_width; a region whose counts do not fit
// its width is written with 8-byte counters. Zero pages of counters are left as file holes.
// Fails (with *error set) on an inconsistent Profile: counter_width not 2/4/8, bin_size 0,
// start >= end, counts.size() != ceil((end - start) / bin_size), path or build-id too long,
// argv too long for the header.
bool write_profile(const Profile& p, const std::string& path, std::string* error);

}  // namespace sprofil::profile
