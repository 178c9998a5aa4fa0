#include "report/report.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "profile/sprof_format.h"

namespace sprofil::report {
namespace {

using profile::Profile;
using profile::Region;

std::string basename_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

uint64_t total_of(const Profile& p) {
  uint64_t t = p.overflow;
  for (const Region& r : p.regions)
    for (uint64_t c : r.counts) t += c;
  return t;
}

const char* clock_label(profile::Clock c) {
  switch (c) {
    case profile::Clock::kCpu:
      return "cpu (per-thread CPU-time timers)";
    case profile::Clock::kItimer:
      return "itimer (process-wide ITIMER_PROF)";
    case profile::Clock::kPerf:
      return "perf (per-thread perf_event task clock)";
    case profile::Clock::kWall:
      return "wall (per-thread wall-clock timers)";
  }
  return "unknown";
}

const char* clock_short(profile::Clock c) {
  switch (c) {
    case profile::Clock::kCpu:
      return "cpu";
    case profile::Clock::kItimer:
      return "itimer";
    case profile::Clock::kPerf:
      return "perf";
    case profile::Clock::kWall:
      return "wall";
  }
  return "unknown";
}

std::string command_of(const Profile& p) {
  std::string s;
  for (const std::string& a : p.argv) {
    if (!s.empty()) s += ' ';
    s += a;
  }
  return s;
}

std::string hex_addr(uint64_t a) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, a);
  return buf;
}

std::string format_samples(double s) {
  char buf[64];
  if (std::fabs(s - std::round(s)) < 1e-9)
    std::snprintf(buf, sizeof buf, "%.0f", s);
  else
    std::snprintf(buf, sizeof buf, "%.2f", s);
  return buf;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// The label of a row in text output.
std::string label_of(const Row& r, By by) {
  switch (by) {
    case By::kFunction:
    case By::kObject:
      return r.name;
    case By::kLine: {
      std::string s =
          (r.file.empty() ? std::string("??") : basename_of(r.file)) + ":" +
          std::to_string(r.line) + " " +
          (!r.frames.empty() && !r.frames[0].function.empty() ? r.frames[0].function : r.name);
      for (size_t i = 1; i < r.frames.size(); ++i) {
        s += " <- " +
             (r.frames[i].file.empty() ? std::string("??") : basename_of(r.frames[i].file)) + ":" +
             std::to_string(r.frames[i].line);
        if (!r.frames[i].function.empty()) s += " " + r.frames[i].function;
      }
      return s;
    }
    case By::kAddress:
      return hex_addr(r.address) + " " + r.name;
  }
  return r.name;
}

}  // namespace

bool parse_by(const std::string& s, By* out) {
  if (s == "function")
    *out = By::kFunction;
  else if (s == "line")
    *out = By::kLine;
  else if (s == "object")
    *out = By::kObject;
  else if (s == "address")
    *out = By::kAddress;
  else
    return false;
  return true;
}

bool parse_format(const std::string& s, Format* out) {
  if (s == "text")
    *out = Format::kText;
  else if (s == "json")
    *out = Format::kJson;
  else if (s == "csv")
    *out = Format::kCsv;
  else if (s == "pprof")
    *out = Format::kPprof;
  else if (s == "gmon")
    *out = Format::kGmon;
  else if (s == "folded")
    *out = Format::kFolded;
  else
    return false;
  return true;
}

const char* by_name(By by) {
  switch (by) {
    case By::kFunction:
      return "function";
    case By::kLine:
      return "line";
    case By::kObject:
      return "object";
    case By::kAddress:
      return "address";
  }
  return "function";
}

Interval wilson(double x, double n, double z) {
  Interval iv;
  if (n <= 0) return iv;
  double p = x / n;
  double z2 = z * z;
  double denom = 1 + z2 / n;
  double center = (p + z2 / (2 * n)) / denom;
  double half = z / denom * std::sqrt(std::max(0.0, p * (1 - p) / n + z2 / (4 * n * n)));
  iv.lo = std::max(0.0, center - half);
  iv.hi = std::min(1.0, center + half);
  return iv;
}

std::vector<Piece> attribute(const Profile& p, symbolize::Symbolizer& symbolizer, bool progress) {
  std::vector<Piece> pieces;
  bool show = progress && ::isatty(2);
  size_t nonempty = 0, done = 0;
  for (const Region& r : p.regions)
    if (std::any_of(r.counts.begin(), r.counts.end(), [](uint64_t c) { return c != 0; }))
      ++nonempty;
  for (size_t ri = 0; ri < p.regions.size(); ++ri) {
    const Region& r = p.regions[ri];
    if (std::none_of(r.counts.begin(), r.counts.end(), [](uint64_t c) { return c != 0; })) continue;
    if (show) {
      std::fprintf(stderr, "\rsprofil: symbolizing %zu/%zu %s\033[K", ++done, nonempty,
                   basename_of(r.path).c_str());
    }
    const symbolize::Object* obj = symbolizer.open(r.path, r.build_id);
    const std::vector<symbolize::Symbol>& fns = obj->functions();
    for (uint64_t i = 0; i < r.counts.size(); ++i) {
      uint64_t count = r.counts[i];
      if (count == 0) continue;
      uint64_t a = r.bin_address(i);
      uint64_t b = std::min(a + r.bin_size, std::max(r.end, a + 1));
      uint64_t va = a - r.load_bias, vb = b - r.load_bias;
      // Functions overlapping [va, vb).
      auto it =
          std::upper_bound(fns.begin(), fns.end(), va,
                           [](uint64_t x, const symbolize::Symbol& s) { return x < s.start; });
      if (it != fns.begin()) --it;
      size_t first = pieces.size();
      uint64_t covered = 0;
      for (; it != fns.end() && it->start < vb; ++it) {
        uint64_t lo = std::max(va, it->start), hi = std::min(vb, it->end);
        if (hi <= lo) continue;
        Piece pc;
        pc.region = ri;
        pc.bin = i;
        pc.address = lo + r.load_bias;
        pc.samples = double(hi - lo);  // bytes for now
        pc.sym = &*it;
        pc.object = obj;
        pieces.push_back(pc);
        covered += hi - lo;
      }
      if (covered == 0) {
        Piece pc;
        pc.region = ri;
        pc.bin = i;
        pc.address = a;
        pc.samples = double(count);
        pc.object = obj;
        pieces.push_back(pc);
      } else {
        for (size_t k = first; k < pieces.size(); ++k)
          pieces[k].samples = double(count) * pieces[k].samples / double(covered);
      }
    }
  }
  if (show && done > 0) std::fprintf(stderr, "\r\033[K");
  if (p.overflow != 0) {
    Piece pc;
    pc.region = SIZE_MAX;
    pc.samples = double(p.overflow);
    pieces.push_back(pc);
  }
  return pieces;
}

Table aggregate(const Profile& p, symbolize::Symbolizer& symbolizer, const Options& opts) {
  Table t;
  t.by = opts.by;
  t.total_samples = total_of(p);
  t.tick_seconds = double(p.tick_ns) / 1e9;
  std::vector<Piece> pieces = attribute(p, symbolizer, opts.progress);

  std::map<std::string, size_t> index;
  for (const Piece& pc : pieces) {
    Row row;
    std::string key;
    if (pc.region == SIZE_MAX) {
      row.name = "[outside any object]";
      key = std::string(1, '\0');
    } else {
      const Region& r = p.regions[pc.region];
      row.object_path = r.path;
      row.object = basename_of(r.path);
      row.name = pc.sym != nullptr ? pc.sym->name : std::string("[unknown]");
      key = r.path + '\0';
      switch (opts.by) {
        case By::kObject:
          row.name = row.object;
          break;
        case By::kFunction:
          key += row.name;
          break;
        case By::kLine: {
          std::vector<symbolize::Frame> frames = pc.object->frames(pc.address - r.load_bias);
          if (!frames.empty()) {
            row.file = frames.front().file;
            row.line = frames.front().line;
          }
          key += row.name + '\0' + row.file + '\0' + std::to_string(row.line);
          if (opts.inline_frames) {
            for (const symbolize::Frame& f : frames)
              key += '\0' + f.function + '\0' + f.file + ':' + std::to_string(f.line);
            row.frames = std::move(frames);
          }
          break;
        }
        case By::kAddress: {
          row.address = pc.address;
          row.vaddr = pc.address - r.load_bias;
          if (pc.sym != nullptr && row.vaddr != pc.sym->start)
            row.name += "+" + hex_addr(row.vaddr - pc.sym->start);
          std::vector<symbolize::Frame> frames = pc.object->frames(row.vaddr);
          if (!frames.empty()) {
            row.file = frames.front().file;
            row.line = frames.front().line;
          }
          key += hex_addr(pc.address);
          break;
        }
      }
    }
    auto [it, inserted] = index.emplace(key, t.rows.size());
    if (inserted) t.rows.push_back(std::move(row));
    t.rows[it->second].samples += pc.samples;
  }

  double n = double(t.total_samples);
  std::vector<Row> kept;
  for (Row& row : t.rows) {
    if (!opts.object.empty() &&
        (row.object.empty() || row.object.find(opts.object) == std::string::npos))
      continue;
    row.percent = n > 0 ? 100.0 * row.samples / n : 0;
    Interval iv = wilson(row.samples, n);
    row.ci95_lo = 100.0 * iv.lo;
    row.ci95_hi = 100.0 * iv.hi;
    row.seconds = row.samples * t.tick_seconds;
    if (row.percent < opts.min_percent) continue;
    kept.push_back(std::move(row));
  }
  std::sort(kept.begin(), kept.end(), [](const Row& a, const Row& b) {
    if (a.samples != b.samples) return a.samples > b.samples;
    return std::tie(a.name, a.object, a.line, a.address) <
           std::tie(b.name, b.object, b.line, b.address);
  });
  if (opts.limit != 0 && kept.size() > opts.limit) kept.resize(opts.limit);
  t.rows = std::move(kept);
  t.warnings = symbolizer.take_warnings();
  return t;
}

void write_text(const Profile& p, const Table& t, const Options& opts, std::ostream& out) {
  char buf[512];
  out << "sprofil flat profile" << (opts.source.empty() ? "" : " of " + opts.source) << "\n";
  out << "command:        " << command_of(p) << "\n";
  out << "clock:          " << clock_label(p.clock) << "\n";
  std::string effective = "unknown";
  if (p.effective_hz > 0) {
    std::snprintf(buf, sizeof buf, "%.1f Hz", p.effective_hz);
    effective = buf;
  }
  std::snprintf(buf, sizeof buf, "rate:           requested %u Hz, effective %s\n", p.requested_hz,
                effective.c_str());
  out << buf;
  std::snprintf(buf, sizeof buf, "tick:           %.6g ms per sample\n", double(p.tick_ns) / 1e6);
  out << buf;
  std::snprintf(buf, sizeof buf, "total samples:  %" PRIu64 " (%.3f CPU seconds estimated)\n",
                t.total_samples, double(t.total_samples) * t.tick_seconds);
  out << buf;
  std::snprintf(buf, sizeof buf, "overflow:       %" PRIu64 " samples outside any object\n",
                p.overflow);
  out << buf;
  std::snprintf(buf, sizeof buf,
                "delivered:      %" PRIu64 " delivered, %" PRIu64 " counted, %" PRIu64 " lost\n",
                p.delivered, p.delivered >= p.lost ? p.delivered - p.lost : 0, p.lost);
  out << buf;
  if (p.cpu_ns != 0) {
    std::snprintf(buf, sizeof buf, "process CPU:    %.3f s\n", double(p.cpu_ns) / 1e9);
    out << buf;
  }
  if ((p.flags & SPROF_F_FINISHED) == 0)
    out << "warning: the profile did not finish cleanly (crash, kill or still running); "
           "the counts are partial\n";
  for (const std::string& w : t.warnings) out << "warning: " << w << "\n";
  out << "by " << by_name(t.by) << "; percent and ci95 are % of total samples\n\n";
  std::snprintf(buf, sizeof buf, "%12s %7s %17s %10s  %s  %s\n", "samples", "percent",
                "ci95 low-high", "self s", t.by == By::kObject ? "object" : "function",
                t.by == By::kObject ? "" : "object");
  out << buf;
  for (const Row& r : t.rows) {
    char ci[64];
    std::snprintf(ci, sizeof ci, "%.2f-%.2f", r.ci95_lo, r.ci95_hi);
    std::snprintf(buf, sizeof buf, "%12s %7.2f %17s %10.3f  ", format_samples(r.samples).c_str(),
                  r.percent, ci, r.seconds);
    out << buf << label_of(r, t.by);
    if (t.by != By::kObject && !r.object.empty()) out << "  " << r.object;
    out << "\n";
  }
}

void write_json(const Profile& p, const Table& t, const Options& opts, std::ostream& out) {
  nlohmann::json j;
  j["total_samples"] = t.total_samples;
  j["tick_seconds"] = t.tick_seconds;
  j["units"] =
      "percent and ci95 are percentages (0-100) of total_samples; seconds = samples * "
      "tick_seconds";
  j["by"] = by_name(t.by);
  j["file"] = opts.source;
  j["command"] = p.argv;
  j["clock"] = clock_short(p.clock);
  j["requested_hz"] = p.requested_hz;
  j["effective_hz"] = p.effective_hz;
  j["tick_ns"] = p.tick_ns;
  j["overflow"] = p.overflow;
  j["delivered"] = p.delivered;
  j["lost"] = p.lost;
  j["cpu_seconds"] = double(p.cpu_ns) / 1e9;
  j["finished"] = (p.flags & SPROF_F_FINISHED) != 0;
  j["warnings"] = t.warnings;
  nlohmann::json rows = nlohmann::json::array();
  for (const Row& r : t.rows) {
    nlohmann::json row;
    row["name"] = r.name;
    row["object"] = r.object;
    row["samples"] = r.samples;
    row["percent"] = r.percent;
    row["ci95"] = {r.ci95_lo, r.ci95_hi};
    row["seconds"] = r.seconds;
    if (!r.object_path.empty()) row["object_path"] = r.object_path;
    if (t.by == By::kLine || t.by == By::kAddress) {
      row["file"] = r.file;
      row["line"] = r.line;
    }
    if (t.by == By::kAddress) {
      row["address"] = r.address;
      row["vaddr"] = r.vaddr;
    }
    if (!r.frames.empty()) {
      nlohmann::json frames = nlohmann::json::array();
      for (const symbolize::Frame& f : r.frames)
        frames.push_back({{"function", f.function}, {"file", f.file}, {"line", f.line}});
      row["inlined"] = frames;
    }
    rows.push_back(std::move(row));
  }
  j["rows"] = std::move(rows);
  out << j.dump(2) << "\n";
}

void write_csv(const Table& t, std::ostream& out) {
  out << "samples,percent,ci95_low,ci95_high,seconds,name,object,file,line,address\n";
  char buf[256];
  for (const Row& r : t.rows) {
    std::snprintf(buf, sizeof buf, "%.6g,%.6f,%.6f,%.6f,%.9g,", r.samples, r.percent, r.ci95_lo,
                  r.ci95_hi, r.seconds);
    out << buf << csv_field(r.name) << "," << csv_field(r.object) << "," << csv_field(r.file) << ","
        << (r.line != 0 ? std::to_string(r.line) : std::string()) << ","
        << (r.address != 0 ? hex_addr(r.address) : std::string()) << "\n";
  }
}

void write_folded(const Table& t, std::ostream& out) {
  // Largest-remainder rounding keeps the sum equal to the rows' (integral) total.
  std::vector<uint64_t> n(t.rows.size());
  std::vector<std::pair<double, size_t>> rem;
  double sum = 0;
  uint64_t floor_sum = 0;
  for (size_t i = 0; i < t.rows.size(); ++i) {
    double s = t.rows[i].samples;
    sum += s;
    n[i] = uint64_t(std::floor(s + 1e-9));
    floor_sum += n[i];
    rem.emplace_back(s - double(n[i]), i);
  }
  uint64_t target = uint64_t(std::llround(sum));
  std::stable_sort(rem.begin(), rem.end(), [](auto& a, auto& b) { return a.first > b.first; });
  for (size_t k = 0; floor_sum < target && k < rem.size(); ++k, ++floor_sum) ++n[rem[k].second];
  for (size_t i = 0; i < t.rows.size(); ++i) {
    if (n[i] == 0) continue;
    const Row& r = t.rows[i];
    std::string stack;
    if (r.object.empty()) {
      stack = r.name;
    } else if (t.by == By::kObject) {
      stack = r.object;
    } else {
      stack = r.object + ";" + r.name;
      if (t.by == By::kLine) {
        for (size_t k = r.frames.size(); k-- > 1;)
          if (!r.frames[k - 1].function.empty()) stack += ";" + r.frames[k - 1].function;
        stack += ";" + basename_of(r.file) + ":" + std::to_string(r.line);
      } else if (t.by == By::kAddress) {
        stack = r.object + ";" + r.name;
      }
    }
    for (char& c : stack)
      if (c == '\n') c = '_';
    out << stack << " " << n[i] << "\n";
  }
}

bool write_report(const Profile& p, Format format, const Options& opts, const std::string& out_path,
                  std::string* error) {
  symbolize::Symbolizer symbolizer;
  if (format == Format::kGmon) {
    return write_gmon(p, out_path.empty() || out_path == "-" ? "gmon.out" : out_path, error);
  }
  if (format == Format::kPprof) {
    std::vector<std::string> warnings;
    bool ok =
        write_pprof(p, symbolizer, out_path.empty() || out_path == "-" ? "sprofil.pb.gz" : out_path,
                    error, &warnings);
    for (const std::string& w : warnings) std::fprintf(stderr, "sprofil: warning: %s\n", w.c_str());
    return ok;
  }
  Table t = aggregate(p, symbolizer, opts);
  std::ostringstream s;
  switch (format) {
    case Format::kText:
      write_text(p, t, opts, s);
      break;
    case Format::kJson:
      write_json(p, t, opts, s);
      break;
    case Format::kCsv:
      write_csv(t, s);
      break;
    case Format::kFolded:
      write_folded(t, s);
      break;
    default:
      break;
  }
  if (format != Format::kText)
    for (const std::string& w : t.warnings)
      std::fprintf(stderr, "sprofil: warning: %s\n", w.c_str());
  std::string data = s.str();
  if (out_path.empty() || out_path == "-") {
    std::fwrite(data.data(), 1, data.size(), stdout);
    std::fflush(stdout);
    return true;
  }
  return write_file(out_path, data, error);
}

bool write_file(const std::string& path, std::string_view bytes, std::string* error) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (f) f.write(bytes.data(), std::streamsize(bytes.size()));
  if (f) f.close();
  if (!f) {
    if (error != nullptr) *error = path + ": cannot write: " + std::strerror(errno);
    return false;
  }
  return true;
}

bool print_report(const Profile& p, std::FILE* out, const Options& opts, std::string* error) {
  symbolize::Symbolizer symbolizer;
  Table t = aggregate(p, symbolizer, opts);
  std::ostringstream s;
  write_text(p, t, opts, s);
  std::string data = s.str();
  if (std::fwrite(data.data(), 1, data.size(), out) != data.size()) {
    if (error != nullptr) *error = std::string("cannot write the report: ") + std::strerror(errno);
    return false;
  }
  std::fflush(out);
  return true;
}

}  // namespace sprofil::report
