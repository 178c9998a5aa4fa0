// sprofil: RAII wrapper over the C API (sprofil.h) for C++ code. Errors throw
// std::system_error carrying the errno of the failed call.
#pragma once

#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "sprofil/sprofil.h"

namespace sprofil {

struct RegionCounts {
  uintptr_t lo = 0, hi = 0;
  unsigned bin_bytes = 0;
  std::string name;
  std::vector<uint64_t> counts;
  uint64_t total() const {
    uint64_t t = 0;
    for (uint64_t c : counts) t += c;
    return t;
  }
};

struct Snapshot {
  std::vector<RegionCounts> regions;
  // As in sprofil_snapshot; outside is the samples in none of the regions (the engine's
  // overflow tally).
  uint64_t delivered = 0, outside = 0, lost = 0, tick_ns = 0;
};

class Profiler {
 public:
  explicit Profiler(const sprofil_options* opt = nullptr) : s_(sprofil_create(opt)) {
    if (!s_) throw std::system_error(errno, std::generic_category(), "sprofil_create");
  }
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;
  ~Profiler() { sprofil_destroy(s_); }

  Profiler& add_range(const void* lo, const void* hi, const char* name = "") {
    return check(sprofil_add_range(s_, lo, hi, name), "sprofil_add_range");
  }
  Profiler& add_function(const void* fn) {
    return check(sprofil_add_function(s_, fn), "sprofil_add_function");
  }
  Profiler& add_symbol(const char* name) {
    return check(sprofil_add_symbol(s_, name), "sprofil_add_symbol");
  }
  Profiler& add_object(const void* addr) {
    return check(sprofil_add_object(s_, addr), "sprofil_add_object");
  }
  Profiler& add_all_objects() { return check(sprofil_add_all_objects(s_), "sprofil_add_all"); }
  Profiler& start() { return check(sprofil_start(s_), "sprofil_start"); }
  Profiler& stop() { return check(sprofil_stop(s_), "sprofil_stop"); }
  Profiler& reset() { return check(sprofil_reset(s_), "sprofil_reset"); }

  Snapshot snapshot() const {
    std::unique_ptr<sprofil_snapshot, void (*)(sprofil_snapshot*)> raw(sprofil_snapshot_take(s_),
                                                                       sprofil_snapshot_free);
    if (!raw) throw std::system_error(errno, std::generic_category(), "sprofil_snapshot_take");
    Snapshot out;
    out.delivered = raw->delivered;
    out.outside = raw->outside;
    out.lost = raw->lost;
    out.tick_ns = raw->tick_ns;
    for (size_t i = 0; i < raw->nregions; ++i) {
      const sprofil_region_counts& r = raw->regions[i];
      out.regions.push_back(RegionCounts{r.lo, r.hi, r.bin_bytes, r.name,
                                         std::vector<uint64_t>(r.counts, r.counts + r.nbins)});
    }
    return out;
  }

 private:
  Profiler& check(int rc, const char* what) {
    if (rc != 0) throw std::system_error(errno, std::generic_category(), what);
    return *this;
  }
  sprofil_session* s_;
};

}  // namespace sprofil
