// The text report: a header describing the run, then one row per function, line, object or
// address with samples, percent, its 95% interval and seconds.
#include <cinttypes>
#include <cstdio>
#include <sstream>

#include "profile/sprof_format.h"
#include "report/exporter.hpp"
#include "report/labels.hpp"

namespace sprofil::report {

using profile::Profile;

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
  if (p.run) {
    std::snprintf(buf, sizeof buf,
                  "processes:      %zu with samples, %" PRIu64 " without samples not stored\n",
                  p.processes.size(), p.dropped_processes);
    out << buf;
  }
  if (p.run_cpu_ns != 0) {
    std::snprintf(buf, sizeof buf,
                  "uncovered CPU:  %.3f s of the run's %.3f s CPU is in no profile (before the "
                  "agent loaded, or in processes it never entered)\n",
                  double(profile::uncovered_cpu_ns(p)) / 1e9, double(p.run_cpu_ns) / 1e9);
    out << buf;
  }
  if ((p.flags & SPROF_F_FINISHED) == 0)
    out << "warning: the profile did not finish cleanly (crash, kill or still running); "
           "the counts are partial\n";
  for (const std::string& w : t.warnings) out << "warning: " << w << "\n";
  out << "by " << by_name(t.by) << "; percent and ci95 are % of total samples\n\n";
  std::snprintf(buf, sizeof buf, "%12s %7s %17s %10s  %s%s  %s\n", "samples", "percent",
                "ci95 low-high", "self s", t.per_process ? "command          " : "",
                t.by == By::kObject ? "object" : "function", t.by == By::kObject ? "" : "object");
  out << buf;
  for (const Row& r : t.rows) {
    char ci[64];
    std::snprintf(ci, sizeof ci, "%.2f-%.2f", r.ci95_lo, r.ci95_hi);
    std::snprintf(buf, sizeof buf, "%12s %7.2f %17s %10.3f  ", format_samples(r.samples).c_str(),
                  r.percent, ci, r.seconds);
    out << buf;
    if (t.per_process) {
      std::snprintf(buf, sizeof buf, "%-15s  ", r.comm.c_str());
      out << buf;
    }
    out << label_of(r, t.by);
    if (t.by != By::kObject && !r.object.empty()) out << "  " << r.object;
    out << "\n";
  }
}

namespace {
class TextExporter final : public Exporter {
 public:
  std::string_view name() const override { return "text"; }
  std::string_view description() const override { return "a flat profile for people (default)"; }
  bool render(const ExportInput& in, std::string* bytes, std::string*) const override {
    std::ostringstream s;
    write_text(in.profile, *in.table, in.options, s);
    *bytes = s.str();
    return true;
  }
};
}  // namespace

const Exporter& text_exporter() {
  static const TextExporter e;
  return e;
}

}  // namespace sprofil::report
