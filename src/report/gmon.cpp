// gmon.out export for GNU gprof: the BSD/GNU format with a 20-byte gmon_hdr ("gmon", version
// 1) followed by GMON_TAG_TIME_HIST records covering the main executable's regions in its
// link-time addresses. Counters are 16-bit; a count above 65535 is spread over several records
// with the same range, which gprof sums.
#include <cmath>
#include <cstring>

#include "profile/sprof_format.h"
#include "report/exporter.hpp"

namespace sprofil::report {
namespace {

template <typename T>
void put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);  // host order, as gprof reads it
}

}  // namespace

bool gmon_bytes(const profile::Profile& p, std::string* bytes, std::string* error) {
  std::string& out = *bytes;
  out.clear();
  out.append("gmon", 4);
  put<int32_t>(&out, 1);  // GMON_VERSION
  out.append(12, '\0');   // spare
  uint32_t rate = p.tick_ns > 0 ? uint32_t(std::llround(1e9 / double(p.tick_ns))) : 100;
  bool any = false;
  for (const profile::Region& r : p.regions) {
    if ((r.flags & SPROF_R_MAIN) == 0 || r.counts.empty()) continue;
    any = true;
    uint64_t low = r.start - r.load_bias;
    uint64_t high = low + uint64_t(r.counts.size()) * r.bin_size;
    uint64_t max = 0;
    for (uint64_t c : r.counts) max = std::max(max, c);
    uint64_t records = max == 0 ? 1 : (max + 65534) / 65535;
    for (uint64_t rec = 0; rec < records; ++rec) {
      out.push_back('\0');  // GMON_TAG_TIME_HIST
      put<uint64_t>(&out, low);
      put<uint64_t>(&out, high);
      put<uint32_t>(&out, uint32_t(r.counts.size()));
      put<uint32_t>(&out, rate);
      char dimen[15] = {};
      std::memcpy(dimen, "seconds", 7);
      out.append(dimen, 15);
      out.push_back('s');
      for (uint64_t c : r.counts) {
        // Record rec holds min(65535, what is left after the earlier records).
        uint64_t before = rec * 65535;
        uint64_t v = c > before ? std::min<uint64_t>(65535, c - before) : 0;
        put<uint16_t>(&out, uint16_t(v));
      }
    }
  }
  if (!any) {
    if (error != nullptr) *error = "the profile has no main-executable region for gmon";
    return false;
  }
  return true;
}

namespace {
class GmonExporter final : public Exporter {
 public:
  std::string_view name() const override { return "gmon"; }
  std::string_view description() const override {
    return "gmon.out of the main executable for gprof (default file gmon.out)";
  }
  std::string_view default_path() const override { return "gmon.out"; }
  bool needs_table() const override { return false; }
  bool render(const ExportInput& in, std::string* bytes, std::string* error) const override {
    return gmon_bytes(in.profile, bytes, error);
  }
};
}  // namespace

const Exporter& gmon_exporter() {
  static const GmonExporter e;
  return e;
}

}  // namespace sprofil::report
