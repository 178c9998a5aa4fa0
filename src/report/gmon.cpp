// gmon.out export for GNU gprof: the BSD/GNU format with a 20-byte gmon_hdr ("gmon", version
// 1) followed by GMON_TAG_TIME_HIST records covering the main executable's regions in its
// link-time addresses, one record per region. Counters are 16-bit: when a bin exceeds 65535,
// every count is divided by one factor (with a warning) so that the largest fits; the output's
// size follows the text size, never the counts.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "format/sprof_format.h"
#include "report/exporter.hpp"

namespace sprofil::report {
namespace {

template <typename T>
void put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);  // host order, as gprof reads it
}

// The most bins one region may have in the output (2 bytes each): 2^28 bins cover 1 GiB of text
// at 4 bytes a bin, a 512 MiB histogram. A larger region is refused, not written.
constexpr uint64_t kGmonMaxBins = uint64_t{1} << 28;

}  // namespace

bool gmon_bytes(const profile::Profile& p, std::string* bytes, std::string* error,
                std::vector<std::string>* warnings) {
  std::string& out = *bytes;
  out.clear();
  // gprof's histogram has one 16-bit counter per bin: one scale factor for the whole profile
  // (so that the regions keep their proportions) brings the largest bin to at most 65535.
  uint64_t max = 0;
  bool any = false;
  for (const profile::Region& r : p.regions) {
    if ((r.flags & SPROF_R_MAIN) == 0 || r.nbins() == 0) continue;
    any = true;
    if (r.nbins() > kGmonMaxBins) {
      if (error != nullptr)
        *error = "gmon: " + r.path + " has " + std::to_string(r.nbins()) +
                 " bins, more than a gmon.out histogram of this tool holds (" +
                 std::to_string(kGmonMaxBins) + "); use another format";
      return false;
    }
    max = std::max(max, r.max_count());
  }
  if (!any) {
    if (error != nullptr) *error = "the profile has no main-executable region for gmon";
    return false;
  }
  const uint64_t factor = max <= 65535 ? 1 : max / 65535 + (max % 65535 != 0 ? 1 : 0);
  if (factor > 1 && warnings != nullptr)
    warnings->push_back("gmon: the largest bin holds " + std::to_string(max) +
                        " samples, more than gprof's 16-bit counters hold; every count was "
                        "divided by " +
                        std::to_string(factor) +
                        " (rounded to nearest, so bins below half of that read as 0)");
  out.append("gmon", 4);
  put<int32_t>(&out, 1);  // GMON_VERSION
  out.append(12, '\0');   // spare
  uint32_t rate = p.tick_ns > 0 ? uint32_t(std::llround(1e9 / double(p.tick_ns))) : 100;
  for (const profile::Region& r : p.regions) {
    if ((r.flags & SPROF_R_MAIN) == 0 || r.nbins() == 0) continue;
    const uint64_t nbins = r.nbins();
    uint64_t low = r.start - r.load_bias;
    uint64_t high = low + nbins * r.bin_size;
    out.push_back('\0');  // GMON_TAG_TIME_HIST
    put<uint64_t>(&out, low);
    put<uint64_t>(&out, high);
    put<uint32_t>(&out, uint32_t(nbins));
    put<uint32_t>(&out, rate);
    char dimen[15] = {};
    std::memcpy(dimen, "seconds", 7);
    out.append(dimen, 15);
    out.push_back('s');
    const size_t at = out.size();
    out.append(2 * nbins, '\0');  // the bins without samples stay 0
    r.for_each_bin([&](uint64_t i, uint64_t c, uint64_t) {
      uint64_t v = c / factor;
      if (c % factor != 0 && c % factor >= factor - c % factor) ++v;  // round to nearest
      const uint16_t v16 = uint16_t(std::min<uint64_t>(v, 65535));
      std::memcpy(&out[at + 2 * i], &v16, 2);  // host order, as gprof reads it
    });
  }
  return true;
}

const Exporter& gmon_exporter() {
  static const FileExporter e{
      "gmon", "gmon.out of the main executable for gprof (default file gmon.out)", "gmon.out",
      [](const ExportInput& in, std::string* bytes, std::string* error) {
        return gmon_bytes(in.profile, bytes, error, in.warnings);
      }};
  return e;
}

}  // namespace sprofil::report
