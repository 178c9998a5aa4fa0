#include "agent/layout.hpp"

namespace sprofil::layout {

void* counters_array(sprof_region* r) {
  return reinterpret_cast<char*>(r) + shape_of(r->nbins, r->counter_width, false).counters_at;
}

void* system_array(sprof_region* r) {
  const RegionShape s = shape_of(r->nbins, r->counter_width, (r->flags & SPROF_R_SYSTEM) != 0);
  return s.system_at ? reinterpret_cast<char*>(r) + s.system_at : nullptr;
}

}  // namespace sprofil::layout
