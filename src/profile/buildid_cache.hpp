// The build-id cache: a private copy of each sampled object of the user's own, kept by its
// build-id when `sprofil record` or `fetch` writes a profile, so that a program rebuilt in place
// since its run is still named from the build that ran (perf record keeps ~/.debug for the
// same). This is its one layout; record writes it (record/buildid_store.hpp), the symbolizer
// reads it (symbolize.cpp), docs/report.md "Rebuilt programs" tells users.
//
//   DIR/ab/cdef...   the object of build-id abcdef... (hex; the first byte a directory)
//
// DIR is $SPROFIL_BUILDID_DIR, else $XDG_CACHE_HOME/sprofil/build-id, else
// $HOME/.cache/sprofil/build-id. Directories are 0700 and files 0600.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sprofil::profile {

// A build-id in lower-case hex.
std::string hex(const std::vector<uint8_t>& bytes);

// The cache's directory; "" when the environment names none (no HOME).
std::string buildid_cache_dir();

// The cache's file for `build_id` ("" when there is no directory or no build-id). It may not
// exist.
std::string buildid_cache_file(const std::vector<uint8_t>& build_id);

// Whether the cache keeps an object at `path` (a real path, as run profiles name objects): the
// user's own files, not the system packages' (under /usr but /usr/local, and /lib*, /bin,
// /sbin, /nix/store), which change only with an upgrade and whose old builds debuginfod serves
// by build-id.
bool buildid_cache_keeps(const std::string& path);

}  // namespace sprofil::profile
