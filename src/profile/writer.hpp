// Writing .sprof files in the v1 layout (src/format/sprof_format.h).
#pragma once

#include <string>

#include "format/sprof_format.h"
#include "profile/profile.hpp"

namespace sprofil::profile {

// A Profile with `run` set is written as a run profile (each process's v1 image in the run
// container; `run_version` 2, packed: only the pages of each image that hold data, or 1, each
// image in full with its zero pages as holes: for tests of the reader); else as a v1 file of
// the top-level fields and every region.
// Writes `p` to `path` (through a temporary file in the same directory, then rename). Counters
// are written little-endian at each region's counter_width; a region whose counts do not fit
// its width is written with 8-byte counters. Only pages holding a non-zero counter are written
// (the rest are file holes), so the cost follows the non-zero bins. A region with
// SPROF_R_SYSTEM also gets its system array, right after the counters (system_offset =
// counters_offset + padded counters; record_size covers both).
// Fails (with *error set) on an inconsistent Profile: counter_width not 2/4/8, bin_size 0,
// start >= end, a bin unsorted, zero, past nbins() or with system > count, path or build-id
// too long, argv too long for the header.
// A file already at `path` that is regular, not empty and not a profile is not replaced
// (may_write_profile_at).
bool write_profile(const Profile& p, const std::string& path, std::string* error,
                   uint32_t run_version = SPROF_RUN_VERSION);

// Whether a profile may be written at `path`: nothing there, something not regular (written in
// place: /dev/null), a symbolic link (replaced, never followed), an empty file (mktemp's) or a
// profile (a rerun's). Any other file is someone's data, which a profile written there would
// take the name of (`-o main.c` for `-o main.sprof`): false, with *why. `sprofil record` asks
// before it runs the command; write_profile asks again.
bool may_write_profile_at(const std::string& path, std::string* why);

// The file of p into `fd`, a seekable file at offset 0 (a memfd: `sprofil record`'s live
// snapshots): a v1 file, or with `run` set a packed run profile. Fails as write_profile does.
bool write_profile_fd(const Profile& p, int fd, std::string* error);

}  // namespace sprofil::profile
