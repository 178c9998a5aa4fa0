// Record's side of the build-id cache (profile/buildid_cache.hpp): at the end of a run (and for
// `sprofil fetch`), a copy of each sampled object of the user's own that the cache does not hold
// yet, while the file at its path is still the build that ran.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "profile/profile.hpp"

namespace sprofil::record {

struct KeptObjects {
  unsigned stored = 0;              // objects copied in by this call
  unsigned present = 0;             // objects the cache held already (their time of use renewed)
  unsigned evicted = 0;             // older files removed to keep the cache under its size
  std::vector<std::string> failed;  // "path: why", one for each object that could not be kept
};

// Keeps p's sampled objects (regions with samples, a build-id and a path the cache keeps). The
// cache is kept under $SPROFIL_BUILDID_CACHE_MB megabytes (default 2048) by removing its files
// used longest ago. Never follows a link it did not expect, never replaces a file: each copy is a
// new private file, renamed into place once complete and checked.
KeptObjects keep_objects(const profile::Profile& p);

// One note for each object `kept` could not keep, as "sprofil CMD: note: ..." (none if quiet).
void say_not_kept(const KeptObjects& kept, const char* cmd, bool quiet, FILE* log);

}  // namespace sprofil::record
