// libFuzzer target for the profile reader (v1 files and run profiles): any input must give an
// error or a consistent Profile, never a crash, leak or undefined behaviour.
// docs/file-format.md ("Fuzzing the reader") says how to run it longer.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "profile/reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sprofil::profile::Profile p;
  std::string error;
  if (!sprofil::profile::parse_profile(data, size, &p, &error)) return 0;
  // The reader's promise (reader.hpp): every region consistent.
  for (const sprofil::profile::Region& r : p.regions) {
    const uint64_t span = r.end - r.start;
    if (r.start >= r.end || r.bin_size == 0 ||
        r.nbins() != span / r.bin_size + (span % r.bin_size != 0) ||
        (r.counter_width != 2 && r.counter_width != 4 && r.counter_width != 8) ||
        (!p.processes.empty() && r.process >= p.processes.size()))
      std::abort();
    // Only non-zero bins, sorted, inside the region, each system part within its count.
    for (size_t i = 0; i < r.bins.size(); ++i)
      if (r.bins[i].index >= r.nbins() || r.bins[i].count == 0 ||
          r.bins[i].system > r.bins[i].count || (i > 0 && r.bins[i - 1].index >= r.bins[i].index))
        std::abort();
    (void)r.total();
    (void)r.system_total();
  }
  (void)p.system_samples();
  (void)p.total_samples();
  return 0;
}
