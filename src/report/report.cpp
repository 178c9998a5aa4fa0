#include "report/report.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "format/sprof_format.h"
#include "report/labels.hpp"

namespace sprofil::report {
namespace {

using profile::Profile;
using profile::Region;

}  // namespace

bool parse_by(const std::string& s, By* out) {
  for (const ByName& b : kByNames)
    if (s == b.name) {
      *out = b.by;
      return true;
    }
  return false;
}

const char* by_name(By by) {
  for (const ByName& b : kByNames)
    if (b.by == by) return b.name;
  return kByNames[0].name;
}

void add_warnings(std::vector<std::string>* to, const std::vector<std::string>& more) {
  for (const std::string& w : more)
    if (std::find(to->begin(), to->end(), w) == to->end()) to->push_back(w);
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

bool process_selected(const Profile& p, uint32_t index, const Options& opts) {
  if (opts.pids.empty() && opts.comms.empty()) return true;
  if (index >= p.processes.size()) return false;
  const profile::Process& pr = p.processes[index];
  return std::find(opts.pids.begin(), opts.pids.end(), pr.pid) != opts.pids.end() ||
         std::find(opts.comms.begin(), opts.comms.end(), pr.comm) != opts.comms.end();
}

bool filters_processes(const Options& opts) {
  return !opts.pids.empty() || !opts.comms.empty();
}

std::string object_of(const Region& r) {
  // JIT code is one object, whatever process's perf map names it: a function's rows of several
  // processes (a node cluster's) are one, and a diff of two runs matches them.
  return (r.flags & SPROF_R_JIT) != 0 ? std::string(kJitObject) : basename_of(r.path);
}

bool object_selected(const std::string& object, const Options& opts) {
  return opts.object.empty() || (!object.empty() && object.find(opts.object) != std::string::npos);
}

bool region_selected(const Profile& p, const Region& r, const Options& opts) {
  return process_selected(p, r.process, opts) && object_selected(object_of(r), opts);
}

void count_bin(const Options& opts, uint64_t* count, uint64_t* system) {
  if (!opts.user_only) return;
  *count -= std::min(*count, *system);
  *system = 0;
}

uint64_t kept_overflow(const Profile& p, const Options& opts) {
  if (p.processes.size() <= 1) return process_selected(p, 0, opts) ? p.overflow : 0;
  uint64_t n = 0;
  for (uint32_t k = 0; k < p.processes.size(); ++k)
    if (process_selected(p, k, opts)) n = profile::sat_add(n, p.processes[k].overflow);
  return n;
}

uint64_t region_samples(const Region& r, const Options& opts) {
  const uint64_t all = r.total();
  // A saturated total cannot say how much of it is user time: keep it as the bound.
  if (!opts.user_only || all == UINT64_MAX) return all;
  return all - std::min(all, r.system_total());
}

namespace {

// Below this share of the kept main executables' samples (1 / kRootShareDivisor), the root's
// executable is taken for a launcher and the most-sampled executable is exported instead. A
// shell's fork, exec and wait put 3 of 244 samples (1.2%) in its text in a loaded CI run of
// `sh -c 'A; B'` (tests/interop Gprof.RecordedRunOfTwoProgramsExportsOne): at 1% it was
// exported in place of A.
constexpr double kRootShareDivisor = 10;

}  // namespace

// The kept processes' main-executable regions, grouped by executable in the order of their
// first region (the processes' order).
std::vector<Executable> executables(const Profile& p, const Options& opts) {
  std::vector<Executable> out;
  for (size_t i = 0; i < p.regions.size(); ++i) {
    const Region& r = p.regions[i];
    if ((r.flags & SPROF_R_MAIN) == 0 || r.nbins() == 0) continue;
    if (!region_selected(p, r, opts)) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const Executable& e) { return e.is(r); });
    if (it == out.end()) {
      out.push_back({r.path, r.build_id, {}, {}, 0});
      it = out.end() - 1;
    }
    if (it->build_id.empty()) it->build_id = r.build_id;
    it->regions.push_back(i);
    if (std::find(it->processes.begin(), it->processes.end(), r.process) == it->processes.end())
      it->processes.push_back(r.process);
    it->samples = profile::sat_add(it->samples, region_samples(r, opts));
  }
  return out;
}

size_t main_executable(const Profile& p, const Options& opts, const std::vector<Executable>& exes) {
  uint32_t root = 0;  // the first kept process (every region's process is 0 without processes)
  for (uint32_t i = 0; i < p.processes.size(); ++i)
    if (process_selected(p, i, opts)) {
      root = i;
      break;
    }
  uint64_t all = 0;
  size_t most = 0;
  for (size_t k = 0; k < exes.size(); ++k) {
    all = profile::sat_add(all, exes[k].samples);
    if (exes[k].samples > exes[most].samples) most = k;
  }
  for (size_t k = 0; k < exes.size(); ++k) {
    const std::vector<uint32_t>& ps = exes[k].processes;
    if (std::find(ps.begin(), ps.end(), root) == ps.end()) continue;
    if (double(exes[k].samples) * kRootShareDivisor >= double(all) &&
        (exes[k].samples > 0 || all == 0))
      return k;
    break;
  }
  return most;
}

namespace {

// The run's commands with their pids, for an error: "sh (pid 100), cc1 (pids 101, 103, 105 and
// 2 more), as (pid 102) and 3 more commands".
std::string commands_of(const Profile& p) {
  constexpr size_t kCommands = 6, kPids = 3;
  std::vector<std::pair<std::string, std::vector<int32_t>>> by_comm;
  for (const profile::Process& pr : p.processes) {
    auto it = std::find_if(by_comm.begin(), by_comm.end(),
                           [&](const auto& c) { return c.first == pr.comm; });
    if (it == by_comm.end()) it = by_comm.insert(by_comm.end(), {pr.comm, {}});
    it->second.push_back(pr.pid);
  }
  std::string s;
  for (size_t i = 0; i < by_comm.size() && i < kCommands; ++i) {
    const auto& [comm, pids] = by_comm[i];
    s += (i ? ", " : "") + printable(comm) + (pids.size() == 1 ? " (pid " : " (pids ");
    for (size_t k = 0; k < pids.size() && k < kPids; ++k)
      s += (k ? ", " : "") + std::to_string(pids[k]);
    if (pids.size() > kPids) s += " and " + std::to_string(pids.size() - kPids) + " more";
    s += ")";
  }
  if (by_comm.size() > kCommands)
    s += " and " + std::to_string(by_comm.size() - kCommands) + " more commands";
  return s;
}

}  // namespace

bool select_processes(const Profile& p, const Options& opts, Profile* out, std::string* error) {
  const std::string file = opts.source.empty() ? std::string() : opts.source + ": ";
  const std::string filter = process_filter(opts);
  if (!p.run) {
    *error = file + filter +
             ": not a run profile: a merged profile has no per-process split (sprofil merge sums "
             "every process into one), nor has a single process's own profile; --comm/--pid "
             "need a run profile, as sprofil record writes";
    return false;
  }
  std::vector<uint32_t> index(p.processes.size(), UINT32_MAX);
  Profile o;
  profile::TallySum sum;
  for (uint32_t k = 0; k < p.processes.size(); ++k) {
    if (!process_selected(p, k, opts)) continue;
    index[k] = static_cast<uint32_t>(o.processes.size());
    o.processes.push_back(p.processes[k]);
    Profile header;
    profile::set_header(&header, p.processes[k]);
    sum.add(header);
  }
  if (o.processes.empty()) {
    *error = file + "no process matches " + filter + "; the run's " +
             count_of(p.processes.size(), "process", "processes") + " stored: " + commands_of(p);
    if (p.dropped_processes != 0)
      *error += " (" + count_of(p.dropped_processes, "process", "processes") +
                " without samples not stored)";
    return false;
  }
  for (const Region& r : p.regions)
    if (r.process < index.size() && index[r.process] != UINT32_MAX) {
      o.regions.push_back(r);
      o.regions.back().process = index[r.process];
    }
  // The run's identity: its command line, clock, rate requested and tick.
  o.version = p.version;
  o.flags = p.flags;
  o.clock = p.clock;
  o.requested_hz = p.requested_hz;
  o.tick_ns = p.tick_ns;
  o.pid = p.pid;
  o.ppid = p.ppid;
  o.argv = p.argv;
  o.run = true;
  o.run_start_ns = p.run_start_ns;
  o.run_end_ns = p.run_end_ns;
  o.exit_status = p.exit_status;
  o.throttled = p.throttled;  // the run's (its throttled time is in the kept processes' lost)
  o.unsampled_threads = p.unsampled_threads;  // (the run's too)
  o.unsampled_thread_ticks = p.unsampled_thread_ticks;
  o.unsampled_processes = p.unsampled_processes;
  o.unsampled_process_ticks = p.unsampled_process_ticks;
  // The kept processes' tallies, CPU and rate (one process: its own rate, as combine_processes
  // keeps it).
  sum.store(&o);
  if (o.processes.size() == 1) o.effective_hz = o.processes[0].effective_hz;
  o.run_cpu_ns = profile::counts_off_cpu(o.clock) ? 0 : o.cpu_ns;
  o.dropped_processes = 0;
  *out = std::move(o);
  return true;
}

std::vector<Piece> attribute(const Profile& p, symbolize::Symbolizer& symbolizer,
                             const Options& opts) {
  std::vector<Piece> pieces;
  auto selected = [&](const Region& r) { return !r.empty() && region_selected(p, r, opts); };
  size_t nonempty = 0, done = 0;
  for (const Region& r : p.regions)
    if (selected(r)) ++nonempty;
  for (size_t ri = 0; ri < p.regions.size(); ++ri) {
    const Region& r = p.regions[ri];
    if (!selected(r)) continue;
    if (opts.progress) opts.progress(done++, nonempty, r.path);
    const symbolize::Object* obj = symbolizer.open(r.path, r.build_id);
    const std::vector<symbolize::Symbol>& fns = obj->functions();
    r.for_each_bin([&](uint64_t i, uint64_t count, uint64_t system) {
      count_bin(opts, &count, &system);
      if (count == 0) return;
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
        pc.process = r.process;
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
        pc.process = r.process;
        pc.bin = i;
        pc.address = a;
        pc.samples = double(count);
        pc.system = double(system);
        pc.object = obj;
        pieces.push_back(pc);
      } else {
        for (size_t k = first; k < pieces.size(); ++k) {
          const double share = pieces[k].samples / double(covered);
          pieces[k].samples = double(count) * share;
          pieces[k].system = double(system) * share;
        }
      }
    });
  }
  if (opts.progress && done > 0) opts.progress(done, nonempty, "");
  if (!object_selected("", opts)) return pieces;  // the overflow is of no object
  if (p.processes.size() <= 1) {
    if (p.overflow != 0 && process_selected(p, 0, opts)) {
      Piece pc;
      pc.region = SIZE_MAX;
      pc.samples = double(p.overflow);
      pieces.push_back(pc);
    }
    return pieces;
  }
  for (uint32_t k = 0; k < p.processes.size(); ++k)
    if (p.processes[k].overflow != 0 && process_selected(p, k, opts)) {
      Piece pc;
      pc.region = SIZE_MAX;
      pc.process = k;
      pc.samples = double(p.processes[k].overflow);
      pieces.push_back(pc);
    }
  return pieces;
}

Table aggregate(const Profile& p, symbolize::Symbolizer& symbolizer, const Options& opts) {
  Table t;
  t.by = opts.by;
  t.inline_frames = opts.by == By::kLine && opts.inline_frames;
  t.tick_seconds = double(p.tick_ns) / 1e9;
  // Per process also when --pid/--comm keep one process of a run of several: the rows say
  // which command they are of, as without the filter.
  t.per_process =
      p.processes.size() > 1 || (opts.whole_run != nullptr && opts.whole_run->processes.size() > 1);
  const bool filtered = filters_processes(opts);
  for (const Region& r : p.regions)
    if (process_selected(p, r.process, opts)) {
      // Without a filter the total is the profile's own (below), not this sum.
      if (filtered) t.total_samples = profile::sat_add(t.total_samples, r.total());
      t.system_samples = profile::sat_add(t.system_samples, r.system_total());
      t.has_system = t.has_system || r.has_system();
    }
  if (!filtered)
    t.total_samples = p.total_samples();
  else  // percentages of what a --pid/--comm filter keeps, as perf does
    t.total_samples = profile::sat_add(t.total_samples, kept_overflow(p, opts));
  if (opts.user_only && t.has_system) {
    t.user_only = true;
    // A saturated total cannot say how much of it is user time: keep it as the bound.
    if (t.total_samples != UINT64_MAX)
      t.total_samples -= std::min(t.total_samples, t.system_samples);
  }
  std::vector<Piece> pieces = attribute(p, symbolizer, opts);

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
      const bool jit = (r.flags & SPROF_R_JIT) != 0;
      row.object = object_of(r);
      row.name = pc.sym != nullptr ? pc.sym->name : std::string("[unknown]");
      key = (jit && opts.by != By::kAddress ? row.object : r.path) + '\0';
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
          // One row an instruction of the object, as by function and by line: the processes
          // that ran it (a shell loop's, each at its own load address) are one row, whose
          // run-time address is theirs where they agree, else 0 (label_of shows the
          // object's address alone).
          key += hex_addr(row.vaddr);
          break;
        }
      }
    }
    if (t.per_process && pc.process < p.processes.size()) {
      row.comm = p.processes[pc.process].comm;
      key = row.comm + '\0' + key;
    }
    auto [it, inserted] = index.emplace(key, t.rows.size());
    if (inserted && pc.sym != nullptr && opts.by != By::kObject) row.aliases = pc.sym->aliases;
    if (!inserted && t.rows[it->second].address != row.address) t.rows[it->second].address = 0;
    if (inserted) t.rows.push_back(std::move(row));
    t.rows[it->second].samples += pc.samples;
    t.rows[it->second].system_samples += pc.system;
  }

  double n = double(t.total_samples);
  std::vector<Row> kept;
  for (Row& row : t.rows) {  // (attribute kept only the objects --object keeps)
    // Clamped to [0, 100]: a saturated total (UINT64_MAX) can be below the rows' exact sum.
    row.percent = n > 0 ? std::clamp(100.0 * row.samples / n, 0.0, 100.0) : 0;
    Interval iv = wilson(std::min(row.samples, n), n);
    row.ci95_lo = 100.0 * iv.lo;
    row.ci95_hi = 100.0 * iv.hi;
    row.seconds = row.samples * t.tick_seconds;
    if (row.percent < opts.min_percent) continue;
    kept.push_back(std::move(row));
  }
  std::sort(kept.begin(), kept.end(), [](const Row& a, const Row& b) {
    if (a.samples != b.samples) return a.samples > b.samples;
    return std::tie(a.name, a.object, a.line, a.vaddr, a.address, a.comm) <
           std::tie(b.name, b.object, b.line, b.vaddr, b.address, b.comm);
  });
  if (opts.limit != 0 && kept.size() > opts.limit) kept.resize(opts.limit);
  t.rows = std::move(kept);
  t.warnings = symbolizer.take_warnings();
  return t;
}

}  // namespace sprofil::report
