#include "agent/layout.hpp"

#include <atomic>

namespace sprofil::layout {

void* counters_array(sprof_region* r) {
  return reinterpret_cast<char*>(r) + shape_of(r->nbins, r->counter_width, false).counters_at;
}

void* system_array(sprof_region* r) {
  const RegionShape s = shape_of(r->nbins, r->counter_width, (r->flags & SPROF_R_SYSTEM) != 0);
  return s.system_at ? reinterpret_cast<char*>(r) + s.system_at : nullptr;
}

void finish_header(sprof_header* h, uint64_t cpu_ns, uint64_t end_ns) {
  h->cpu_ns = cpu_ns;
  const uint64_t delivered = std::atomic_ref<uint64_t>(h->delivered).load();
  __extension__ using u128 = unsigned __int128;
  if (cpu_ns > 0)
    h->effective_hz_milli =
        static_cast<uint64_t>(static_cast<u128>(delivered) * 1000000000000ull / cpu_ns);
  h->end_ns = end_ns;
}

}  // namespace sprofil::layout
