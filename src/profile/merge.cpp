#include "profile/merge.hpp"

#include <algorithm>

#include "format/sprof_format.h"

namespace sprofil::profile {

namespace {

std::string num(uint64_t v) {
  return std::to_string(v);
}

std::string describe(const Region& r) {
  return "size " + num(r.end - r.start) + ", bin_size " + num(r.bin_size);
}

// The bin-by-bin sum of two sorted bin lists (counts and system parts saturate).
std::vector<Region::Bin> add_bins(const std::vector<Region::Bin>& a,
                                  const std::vector<Region::Bin>& b) {
  std::vector<Region::Bin> out;
  out.reserve(a.size() + b.size());
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a[i].index < b[j].index)) {
      out.push_back(a[i++]);
    } else if (i == a.size() || b[j].index < a[i].index) {
      out.push_back(b[j++]);
    } else {
      Region::Bin s{a[i].index, sat_add(a[i].count, b[j].count), 0};
      s.system = std::min(sat_add(a[i].system, b[j].system), s.count);
      out.push_back(s);
      ++i;
      ++j;
    }
  }
  return out;
}

}  // namespace

bool same_object(const Region& a, const Region& b) {
  if (!a.build_id.empty() && !b.build_id.empty()) return a.build_id == b.build_id;
  return a.path == b.path;
}

bool merge_profiles(const std::vector<Profile>& in, Profile* out, std::string* error) {
  return merge_profiles(in, out, error, nullptr);
}

namespace {

// The root process's main executable's region, or nullptr.
const Region* main_region(const Profile& p) {
  for (const Region& r : p.regions)
    if ((r.flags & SPROF_R_MAIN) && r.process == 0) return &r;
  return nullptr;
}

}  // namespace

std::string program_of(const Profile& p) {
  const Region* r = main_region(p);
  return r != nullptr ? r->path : comm_of(p.argv);
}

std::string clock_difference(const Profile& a, const Profile& b, const std::string& a_is,
                             const std::string& b_is) {
  if (a.clock == b.clock) return "";
  const std::string s = std::string("clock differs: ") + clock_name(a.clock) + " in " + a_is +
                        ", " + clock_name(b.clock) + " in " + b_is;
  if (same_measure(a.clock, b.clock)) return s + "; both measure " + clock_measure(a.clock);
  return s + ": their samples measure different things, " + clock_measure(a.clock) + " and " +
         clock_measure(b.clock);
}

std::string program_difference(const Profile& a, const Profile& b, const std::string& a_is,
                               const std::string& b_is, bool by_file_name) {
  const Region *ra = main_region(a), *rb = main_region(b);
  if (ra != nullptr && rb != nullptr && !ra->build_id.empty() && ra->build_id == rb->build_id)
    return "";  // one executable, run from two paths (a copy, another checkout)
  const std::string pa = program_of(a), pb = program_of(b);
  auto file_name = [](const std::string& s) { return s.substr(s.rfind('/') + 1); };
  if (by_file_name ? file_name(pa) == file_name(pb) : pa == pb) return "";
  return "program differs: " + pa + " in " + a_is + ", " + pb + " in " + b_is;
}

bool merge_profiles(const std::vector<Profile>& in, Profile* out, std::string* error,
                    size_t* bad_input) {
  return merge_profiles(in, out, error, bad_input, MergePolicy{true, nullptr});
}

bool merge_profiles(const std::vector<Profile>& in, Profile* out, std::string* error,
                    size_t* bad_input, const MergePolicy& policy) {
  std::string scratch;
  if (!error) error = &scratch;
  size_t scratch_index;
  if (!bad_input) bad_input = &scratch_index;
  *bad_input = in.size();
  if (in.empty()) {
    *error = "no profiles to merge";
    return false;
  }
  const Profile& first = in.front();
  Profile m;
  set_header(&m, process_of(first));  // the first's identity; flags and tallies below

  TallySum sum;
  for (size_t i = 0; i < in.size(); ++i) {
    const Profile& p = in[i];
    if (p.tick_ns != m.tick_ns) {
      *bad_input = i;
      *error = "tick_ns differs: " + num(m.tick_ns) + " in the first profile, " + num(p.tick_ns) +
               " in this one";
      return false;
    }
    if (i > 0) {
      std::string differs = clock_difference(first, p, "the first profile", "this one");
      // One quantity, but the merged profile names one clock (the first's) for every sample.
      if (!differs.empty() && same_measure(first.clock, p.clock))
        differs += std::string(
                       ", but a merged profile names one clock for all its samples, the "
                       "first's (") +
                   clock_name(first.clock) + ")";
      if (differs.empty()) differs = program_difference(first, p, "the first profile", "this one");
      if (!differs.empty()) {
        if (!policy.force) {
          *bad_input = i;
          *error = differs + " (--force merges them anyway)";
          return false;
        }
        if (policy.warnings) policy.warnings->push_back(differs);
      }
    }
    sum.add(p);

    for (const Region& r : p.regions) {
      auto it = std::find_if(m.regions.begin(), m.regions.end(), [&](const Region& o) {
        return same_object(o, r) && o.file_offset == r.file_offset;
      });
      if (it == m.regions.end()) {
        m.regions.push_back(r);
        Region& n = m.regions.back();
        n.process = 0;
        n.counter_width = std::max(n.counter_width, counter_width_for(n.max_count()));
        continue;
      }
      Region& o = *it;
      if (o.end - o.start != r.end - r.start || o.bin_size != r.bin_size ||
          o.nbins() != r.nbins()) {
        *bad_input = i;
        *error = r.path + ": bin layout differs from an earlier profile (" + describe(r) +
                 " here, " + describe(o) + " before; file_offset " + num(r.file_offset) + ")";
        return false;
      }
      o.bins = add_bins(o.bins, r.bins);
      o.counter_width =
          std::max({o.counter_width, r.counter_width, counter_width_for(o.max_count())});
      if (o.build_id.empty()) o.build_id = r.build_id;
      // Still loaded if loaded in any run; the earliest load, the latest unload.
      if (!(r.flags & SPROF_R_UNLOADED)) {
        o.flags &= ~SPROF_R_UNLOADED;
        o.unload_ns = 0;
      } else if (o.flags & SPROF_R_UNLOADED) {
        o.unload_ns = std::max(o.unload_ns, r.unload_ns);
      }
      o.flags |= r.flags & ~SPROF_R_UNLOADED;
      if (r.load_ns != 0 && (o.load_ns == 0 || r.load_ns < o.load_ns)) o.load_ns = r.load_ns;
    }
  }
  m.flags = 0;
  sum.store(&m);
  *out = std::move(m);
  return true;
}

}  // namespace sprofil::profile
