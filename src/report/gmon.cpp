// gmon.out export for GNU gprof: the BSD/GNU format with a 20-byte gmon_hdr ("gmon", version
// 1) followed by GMON_TAG_TIME_HIST records covering ONE executable's text in its link-time
// addresses (a gmon.out describes one program).
//
// Which executable: report.hpp's main_executable() (the recorded command's, or the most sampled
// where the command's text holds under 10%: a shell). Every kept process of that executable
// (same path, and same build-id where both have one) is summed in; a warning names the
// executable and the samples of the others left out.
//
// Bins: gprof counts addresses in 2-byte units (gprof/hist.c: UNIT is 2 bytes, its scale is
// (highpc - lowpc) / 2 / num_bins), so a bin narrower than 2 bytes reads wrong (1-byte bins:
// half the bins lost, the others doubled). The records use one bin size for the executable,
// the smallest power of two >= 2 and >= every summed region's bin size; finer bins (the exact
// 1-byte bins of `sprofil record`) are summed into it, each by its first byte, so no count is
// lost. The regions' link-time ranges are widened to that bin size, and overlapping ones (the
// same text in several processes) become one record.
//
// Counters are 16-bit: when a bin exceeds 65535, every count is divided by one factor (with a
// warning) so that the largest fits, and the rate by the same factor, since gprof's seconds are
// counts / rate; the output's size follows the text size, never the counts.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "format/sprof_format.h"
#include "report/exporter.hpp"
#include "report/labels.hpp"

namespace sprofil::report {
namespace {

using profile::Profile;
using profile::Region;

template <typename T>
void put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);  // host order, as gprof reads it
}

// The most bins one record may have in the output (2 bytes each): 2^28 bins cover 1 GiB of text
// at 4 bytes a bin, a 512 MiB histogram. A larger record is refused, not written.
constexpr uint64_t kGmonMaxBins = uint64_t{1} << 28;

// The finest bin gprof reads right: one UNIT (2 bytes) of its histogram arithmetic.
constexpr uint64_t kGmonMinBin = 2;

// One output record: a link-time range [low, high), a multiple of the bin size, and its
// non-zero bins (index, count) summed from every region over it.
struct Record {
  uint64_t low = 0, high = 0;
  std::vector<std::pair<uint64_t, uint64_t>> bins;
};

}  // namespace

bool gmon_bytes(const Profile& p, std::string* bytes, std::string* error,
                std::vector<std::string>* warnings, const Options& opts) {
  std::string& out = *bytes;
  out.clear();
  const std::vector<Executable> exes = executables(p, opts);
  if (exes.empty()) {
    if (error != nullptr) {
      *error = opts.pids.empty() && opts.comms.empty()
                   ? "the profile has no main-executable region for gmon"
                   : "the processes --pid and --comm keep have no main-executable region for gmon";
      if (!opts.object.empty())
        *error += " whose file name contains --object's " + opts.object +
                  " (a gmon.out holds one executable's text, never a shared library's)";
    }
    return false;
  }
  const Executable& exe = exes[main_executable(p, opts, exes)];
  // Only executables whose text holds samples are named: one with none (a shell that exec'd
  // the command, say) loses nothing by being left out.
  uint64_t left = 0, others = 0;
  std::string names;
  for (const Executable& e : exes) {
    if (&e == &exe || e.samples == 0) continue;
    left = profile::sat_add(left, e.samples);
    ++others;
    names += (names.empty() ? "" : ", ") + basename_of(e.path);
  }
  if (others > 0 && warnings != nullptr) {
    warnings->push_back("gmon: a gmon.out describes one executable: exported " + exe.path + " (" +
                        count_of(exe.processes.size(), "process", "processes") + ", " +
                        count_of(exe.samples, "sample", "samples") + " in its text); left out " +
                        count_of(left, "sample", "samples") + " in the text of " +
                        count_of(others, "other executable", "other executables") + " (" + names +
                        "); --pid or --comm picks another");
  }

  // The samples gprof will not see: those of shared libraries (never in a gmon.out), of other
  // executables and of no object. When they are most of what the options keep, a warning says
  // so and where they are: an empty gmon.out ("no time accumulated") or a sliver of the run
  // would otherwise pass for the program's profile.
  std::map<std::string, uint64_t> elsewhere;  // by object_of
  uint64_t kept = 0;
  for (size_t i = 0; i < p.regions.size(); ++i) {
    const Region& r = p.regions[i];
    if (!region_selected(p, r, opts)) continue;
    const uint64_t n = region_samples(r, opts);
    kept = profile::sat_add(kept, n);
    if (n != 0 && std::find(exe.regions.begin(), exe.regions.end(), i) == exe.regions.end())
      elsewhere[object_of(r)] = profile::sat_add(elsewhere[object_of(r)], n);
  }
  if (const uint64_t overflow = kept_overflow(p, opts);
      overflow != 0 && object_selected("", opts)) {
    kept = profile::sat_add(kept, overflow);
    elsewhere["[outside any object]"] = overflow;
  }
  if (double(exe.samples) * 2 < double(kept) && warnings != nullptr) {
    std::vector<std::pair<uint64_t, std::string>> most;
    for (const auto& [object, n] : elsewhere) most.emplace_back(n, object);
    std::sort(most.begin(), most.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    constexpr size_t kNamed = 3;
    std::string where;
    uint64_t rest = 0;
    for (size_t k = 0; k < most.size(); ++k) {
      if (k < kNamed)
        where += (k == 0 ? "" : ", ") + most[k].second + " (" + std::to_string(most[k].first) + ")";
      else
        rest = profile::sat_add(rest, most[k].first);
    }
    if (most.size() > kNamed)
      where += " and " + count_of(most.size() - kNamed, "other object", "other objects") + " (" +
               std::to_string(rest) + ")";
    warnings->push_back("gmon: the text of " + exe.path + " holds " + std::to_string(exe.samples) +
                        " of the " + count_of(kept, "sample", "samples") +
                        " kept; gprof sees only those" +
                        (exe.samples == 0 ? " (it will say \"no time accumulated\")" : "") +
                        ". The others are in " + where +
                        ": a gmon.out holds one executable's text, never a shared library's; "
                        "--format pprof or text report them");
  }

  // One bin size for every record (gprof refuses records of different scales).
  uint64_t bin = kGmonMinBin;
  for (size_t i : exe.regions)
    while (bin < p.regions[i].bin_size) bin *= 2;
  // The link-time ranges widened to the bin size, overlapping ones joined.
  std::vector<Record> records;
  for (size_t i : exe.regions) {
    const Region& r = p.regions[i];
    const uint64_t low = r.start - r.load_bias;
    const uint64_t high = low + r.nbins() * r.bin_size;
    records.push_back({low / bin * bin, (high + bin - 1) / bin * bin, {}});
  }
  std::sort(records.begin(), records.end(),
            [](const Record& a, const Record& b) { return a.low < b.low; });
  size_t n = 0;
  for (const Record& rec : records) {
    if (n > 0 && rec.low < records[n - 1].high)
      records[n - 1].high = std::max(records[n - 1].high, rec.high);
    else
      records[n++] = rec;
  }
  records.resize(n);
  for (const Record& rec : records)
    if ((rec.high - rec.low) / bin > kGmonMaxBins) {
      if (error != nullptr)
        *error = "gmon: " + exe.path + " needs " + std::to_string((rec.high - rec.low) / bin) +
                 " bins, more than a gmon.out histogram of this tool holds (" +
                 std::to_string(kGmonMaxBins) + "); use another format";
      return false;
    }
  // Every region's bins into the record over it, then summed by index.
  for (size_t i : exe.regions) {
    const Region& r = p.regions[i];
    const uint64_t low = r.start - r.load_bias;
    Record& rec =
        *std::prev(std::upper_bound(records.begin(), records.end(), low,
                                    [](uint64_t a, const Record& x) { return a < x.low; }));
    r.for_each_bin([&](uint64_t b, uint64_t c, uint64_t system) {
      count_bin(opts, &c, &system);  // --user-only: the user part
      if (c != 0) rec.bins.emplace_back((low + b * r.bin_size - rec.low) / bin, c);
    });
  }
  // gprof's histogram has one 16-bit counter per bin: one scale factor for the whole profile
  // (so that the records keep their proportions) brings the largest bin to at most 65535.
  uint64_t max = 0;
  for (Record& rec : records) {
    std::sort(rec.bins.begin(), rec.bins.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    size_t m = 0;
    for (const auto& [at, c] : rec.bins) {
      if (m > 0 && rec.bins[m - 1].first == at)
        rec.bins[m - 1].second = profile::sat_add(rec.bins[m - 1].second, c);
      else
        rec.bins[m++] = {at, c};
    }
    rec.bins.resize(m);
    for (const auto& [at, c] : rec.bins) max = std::max(max, c);
  }
  const uint64_t factor = max <= 65535 ? 1 : max / 65535 + (max % 65535 != 0 ? 1 : 0);
  // gprof's seconds are counts / rate: the rate is divided by the same factor as the counts
  // (at least 1 Hz), so that its seconds stay the samples' seconds.
  uint64_t tick_ns = p.tick_ns;
  const uint32_t first = exe.processes.front();
  if (first < p.processes.size() && p.processes[first].tick_ns > 0)
    tick_ns = p.processes[first].tick_ns;
  const double hz = tick_ns > 0 ? 1e9 / double(tick_ns) : 100;
  const uint32_t rate = uint32_t(std::max<int64_t>(1, std::llround(hz / double(factor))));
  if (factor > 1 && warnings != nullptr)
    warnings->push_back("gmon: the largest bin holds " + std::to_string(max) +
                        " samples, more than gprof's 16-bit counters hold; every count was "
                        "divided by " +
                        std::to_string(factor) +
                        " (rounded to nearest, so bins below half of that read as 0), and the "
                        "rate by the same factor (" +
                        std::to_string(rate) + " Hz), so that gprof's seconds stay right");
  out.append("gmon", 4);
  put<int32_t>(&out, 1);  // GMON_VERSION
  out.append(12, '\0');   // spare
  for (const Record& rec : records) {
    const uint64_t nbins = (rec.high - rec.low) / bin;
    out.push_back('\0');  // GMON_TAG_TIME_HIST
    put<uint64_t>(&out, rec.low);
    put<uint64_t>(&out, rec.high);
    put<uint32_t>(&out, uint32_t(nbins));
    put<uint32_t>(&out, rate);
    char dimen[15] = {};
    std::memcpy(dimen, "seconds", 7);
    out.append(dimen, 15);
    out.push_back('s');
    const size_t at = out.size();
    out.append(2 * nbins, '\0');  // the bins without samples stay 0
    for (const auto& [i, c] : rec.bins) {
      uint64_t v = c / factor;
      if (c % factor != 0 && c % factor >= factor - c % factor) ++v;  // round to nearest
      const uint16_t v16 = uint16_t(std::min<uint64_t>(v, 65535));
      std::memcpy(&out[at + 2 * i], &v16, 2);  // host order, as gprof reads it
    }
  }
  return true;
}

const Exporter& gmon_exporter() {
  static const FileExporter e{
      "gmon",
      "gmon.out for gprof, of one executable: the recorded command's, or the most sampled if "
      "the command's text holds under 10% (a shell); --pid/--comm choose (default file gmon.out)",
      "gmon.out", [](const ExportInput& in, std::string* bytes, std::string* error) {
        return gmon_bytes(in.profile, bytes, error, in.warnings, in.options);
      }};
  return e;
}

}  // namespace sprofil::report
