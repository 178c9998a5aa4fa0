// Reading .sprof files (src/format/sprof_format.h, docs/file-format.md). The reader validates
// every field and never trusts the file: any input either yields an error naming the problem
// and where it is, or a Profile whose regions are consistent (start < end, bin_size > 0,
// counter_width in {2, 4, 8}, bins holding only non-zero bins, sorted, each index < nbins()
// and each system part <= its count). Memory follows the non-zero bins: the counters are
// streamed through a bounded buffer, holes of a sparse file are skipped unread, and every size
// is checked against the file's before anything is read or allocated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "profile/profile.hpp"

namespace sprofil::profile {

// Accepts v1 files (one process) and run profiles (every process of a `sprofil record` run);
// docs/file-format.md describes both. Reads the file at `path`, which must be a regular file
// (opened with O_NONBLOCK: a FIFO or device is refused at once, never waited on). Reads only
// the header, the committed region records and their counters (with pread, so a file that
// shrinks while being read gives an error, not SIGBUS).
// On failure returns false and sets *error (without the path; callers prefix it).
bool read_profile(const std::string& path, Profile* out, std::string* error);

// Whether the regular file at `path` begins with the magic of a profile of either kind (a
// process's or a run's): the one test of "this file is a profile" for whoever must not
// replace any other file (`sprofil record -o`). False where it cannot be read.
bool starts_as_profile(const std::string& path);

// Parses a whole file image held in memory.
bool parse_profile(const uint8_t* data, size_t size, Profile* out, std::string* error);

}  // namespace sprofil::profile
