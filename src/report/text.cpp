// The text report: a header describing the run, then one row per function, line, object or
// address with samples, percent, its 95% interval and seconds.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <sstream>

#include "format/sprof_format.h"
#include "report/exporter.hpp"
#include "report/labels.hpp"

namespace sprofil::report {

using profile::Profile;

void write_text(const Profile& p, const Table& t, const Options& opts, std::ostream& out) {
  char buf[512];
  const bool wall = profile::counts_off_cpu(p.clock);
  out << "sprofil flat profile" << (opts.source.empty() ? "" : " of " + printable(opts.source))
      << "\n";
  out << "command:        " << printable(command_of(p)) << "\n";
  const bool filtered = filters_processes(opts);
  if (filtered)
    out << "filter:         " << process_filter(opts)
        << ": every figure below is of the processes it keeps\n";
  out << "clock:          " << clock_label(p.clock) << "\n";
  std::string effective = "unknown";
  if (p.effective_hz > 0) {
    // The rate is delivered samples per CPU-second; the wall clock is requested per
    // thread-second, on and off the CPU, so its rate per CPU-second exceeds the request.
    std::snprintf(buf, sizeof buf, "%.1f Hz per CPU-second%s", p.effective_hz,
                  wall ? " (the wall clock ticks per thread-second, on- and off-CPU, so this "
                         "exceeds the request when threads wait)"
                       : "");
    effective = buf;
  }
  std::snprintf(buf, sizeof buf, "rate:           requested %u Hz, effective %s\n", p.requested_hz,
                effective.c_str());
  out << buf;
  std::snprintf(buf, sizeof buf, "tick:           %.6g ms per sample\n", double(p.tick_ns) / 1e6);
  out << buf;
  std::snprintf(
      buf, sizeof buf, "total samples:  %" PRIu64 " (%.3f %s)\n", t.total_samples,
      double(t.total_samples) * t.tick_seconds,
      wall ? "wall-clock seconds of all threads, on- and off-CPU" : "CPU seconds estimated");
  out << buf;
  if (t.has_system) {
    const uint64_t all =
        t.user_only ? profile::sat_add(t.total_samples, t.system_samples) : t.total_samples;
    const uint64_t user = all - std::min(all, t.system_samples);
    std::snprintf(buf, sizeof buf,
                  "user/system:    %.3f s user, %.3f s system (%" PRIu64 " and %" PRIu64
                  " samples; kernel time charged to the user pc it returned to)\n",
                  double(user) * t.tick_seconds, double(t.system_samples) * t.tick_seconds, user,
                  t.system_samples);
    out << buf;
    if (t.user_only)
      out << "user only:      percentages are of user time only (--user-only); system time is "
             "left out, as perf record -e cpu-clock:u counts\n";
  }
  out << "overflow:       " << count_of(p.overflow, "sample", "samples") << " outside any object\n";
  std::snprintf(buf, sizeof buf,
                "delivered:      %" PRIu64 " delivered, %" PRIu64 " counted, %" PRIu64 " lost\n",
                p.delivered, p.delivered >= p.lost ? p.delivered - p.lost : 0, p.lost);
  out << buf;
  if (p.cpu_ns != 0) {
    std::snprintf(buf, sizeof buf, "process CPU:    %.3f s\n", double(p.cpu_ns) / 1e9);
    out << buf;
  }
  if (filtered) {
    out << "processes:      " << kept_processes(p, opts) << "\n";
  } else if (p.run) {
    std::snprintf(buf, sizeof buf,
                  "processes:      %zu stored, %" PRIu64 " without samples not stored\n",
                  p.processes.size(), p.dropped_processes);
    out << buf;
  }
  if (p.run_cpu_ns != 0) {
    std::snprintf(buf, sizeof buf,
                  filtered ? "unsampled CPU:  %.3f s of the kept processes' %.3f s CPU has no "
                             "sample (start-up before sampling)\n"
                  : profile::counts_off_cpu(p.clock)
                      ? "unsampled CPU:  %.3f s of the run's %.3f s CPU is in no process's "
                        "profile\n"
                      : "unsampled CPU:  %.3f s of the run's %.3f s CPU has no sample (start-up "
                        "before sampling, processes without samples)\n",
                  double(profile::unsampled_cpu_ns(p)) / 1e9, double(p.run_cpu_ns) / 1e9);
    out << buf;
  }
  if (const std::string note = unfinished_note(p); !note.empty())
    out << "warning: " << printable(note) << "\n";
  if (const std::string note = sandboxed_note(p); !note.empty())
    out << "warning: " << printable(note) << "\n";
  for (const RunNote& n : run_notes(p)) out << "warning: " << n.text << "\n";
  Coverage cov = coverage_of(
      p, t.user_only ? profile::sat_add(t.total_samples, t.system_samples) : t.total_samples,
      filtered);
  if (!cov.warning.empty()) out << "warning: " << cov.warning << "\n";
  for (const std::string& w : t.warnings) out << "warning: " << printable(w) << "\n";
  const std::vector<std::string> names = shown_names(t.rows);
  const std::set<std::string> full = names_short_alike(names);
  bool shortened = false;
  if (opts.short_names && t.by != By::kObject)
    for (const std::string& n : names) shortened |= report::shortened(n, &full);
  out << "by " << by_name(t.by) << "; percent and ci95 are % of total samples"
      << (shortened ? "; long C++ names without parameters and template arguments, but where two "
                      "would read alike (--full-names keeps them all)"
                    : "")
      << "\n\n";
  // With system data: the row's own time split into user and system (percent of the row).
  const bool split = t.has_system && !t.user_only;
  std::snprintf(buf, sizeof buf, "%12s %7s %17s %10s  %s%s%s  %s\n", "samples", "percent",
                "ci95 low-high", "self s", split ? " user%   sys%  " : "",
                t.per_process ? "command          " : "",
                t.by == By::kObject ? "object" : "function", t.by == By::kObject ? "" : "object");
  out << buf;
  for (const Row& r : t.rows) {
    char ci[64];
    std::snprintf(ci, sizeof ci, "%.2f-%.2f", r.ci95_lo, r.ci95_hi);
    std::snprintf(buf, sizeof buf, "%12s %7.2f %17s %10.3f  ", format_samples(r.samples).c_str(),
                  r.percent, ci, r.seconds);
    out << buf;
    if (split) {
      const double sys =
          r.samples > 0 ? std::clamp(100.0 * r.system_samples / r.samples, 0.0, 100.0) : 0.0;
      std::snprintf(buf, sizeof buf, "%6.1f %6.1f  ", 100.0 - sys, sys);
      out << buf;
    }
    if (t.per_process) {
      std::snprintf(buf, sizeof buf, "%-15s  ", printable(r.comm).c_str());
      out << buf;
    }
    out << label_of(r, t.by, opts.short_names, &full);
    if (t.by != By::kObject && !r.object.empty()) out << "  " << printable(r.object);
    out << "\n";
  }
}

const Exporter& text_exporter() {
  static const RowsExporter e{"text", "a flat profile for people (default)", write_text};
  return e;
}

}  // namespace sprofil::report
