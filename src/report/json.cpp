// The JSON report: the run's header fields and one object per row.
#include <nlohmann/json.hpp>
#include <sstream>

#include "format/sprof_format.h"
#include "report/exporter.hpp"
#include "report/json_out.hpp"
#include "report/labels.hpp"

namespace sprofil::report {

using profile::Profile;

// Strings are made valid UTF-8 (invalid bytes become U+FFFD); numbers are rounded to what the
// data supports, dropping the binary noise of the last digits: samples (fractional when a bin
// is split) to 1e-6, rates to 1e-3 Hz, other reals to 12 significant digits.
void write_json(const Profile& p, const Table& t, const Options& opts, std::ostream& out) {
  nlohmann::json j;
  const bool wall = profile::counts_off_cpu(p.clock);
  j["total_samples"] = t.total_samples;
  j["tick_seconds"] = significant(t.tick_seconds, 12);
  j["units"] =
      "percent and ci95 are percentages (0-100) of total_samples; seconds = samples * "
      "tick_seconds";
  j["seconds_meaning"] =
      wall ? "wall-clock seconds of all threads, on- and off-CPU" : "CPU seconds estimated";
  j["effective_hz_meaning"] = "delivered samples per CPU-second of the process";
  j["by"] = by_name(t.by);
  j["file"] = valid_utf8(opts.source);
  j["command"] = json_strings(p.argv);
  j["clock"] = profile::clock_name(p.clock);
  j["requested_hz"] = p.requested_hz;
  j["effective_hz"] = rounded(p.effective_hz, 3);
  j["tick_ns"] = p.tick_ns;
  j["overflow"] = p.overflow;
  j["delivered"] = p.delivered;
  j["lost"] = p.lost;
  j["cpu_seconds"] = significant(double(p.cpu_ns) / 1e9, 12);
  j["finished"] = p.finished();
  if (const std::string note = unfinished_note(p); !note.empty())
    j["unfinished_warning"] = valid_utf8(note);
  if (const std::string note = sandboxed_note(p); !note.empty())
    j["sandboxed_warning"] = valid_utf8(note);
  j["throttled"] = p.throttled;  // times the kernel throttled the sampling (run profiles)
  j["unsampled_threads"] = p.unsampled_threads;  // ended before their first sample (run profiles)
  j["unsampled_thread_seconds"] =
      significant(double(p.unsampled_thread_ticks) * double(p.tick_ns) / 1e9, 12);
  j["unsampled_processes"] = p.unsampled_processes;  // their program ended before its first one
  j["unsampled_process_seconds"] =
      significant(double(p.unsampled_process_ticks) * double(p.tick_ns) / 1e9, 12);
  for (const RunNote& n : run_notes(p)) j[std::string(n.name) + "_warning"] = n.text;
  // samples x tick / cpu_seconds for CPU clocks (null for the wall clock or without cpu_ns);
  // coverage_warning is set when the samples fall far below the process's CPU time.
  // With system data (SPROF_R_SYSTEM): the system part of the total and of each row; with
  // --user-only the rows and total_samples are user time only.
  if (t.has_system) {
    j["system_samples"] = t.system_samples;
    j["user_only"] = t.user_only;
  }
  const bool filtered = filters_processes(opts);
  Coverage cov = coverage_of(
      p, t.user_only ? profile::sat_add(t.total_samples, t.system_samples) : t.total_samples,
      filtered);
  j["coverage"] = cov.known ? nlohmann::json(rounded(cov.ratio, 4)) : nlohmann::json(nullptr);
  if (!cov.warning.empty()) j["coverage_warning"] = cov.warning;
  j["warnings"] = json_strings(t.warnings);
  nlohmann::json procs = nlohmann::json::array();
  for (const profile::Process& pr : p.processes)
    procs.push_back({{"pid", pr.pid},
                     {"ppid", pr.ppid},
                     {"comm", valid_utf8(pr.comm)},
                     {"argv", json_strings(pr.argv)},
                     {"delivered", pr.delivered},
                     {"finished", (pr.flags & SPROF_F_FINISHED) != 0},
                     {"cpu_seconds", significant(double(pr.cpu_ns) / 1e9, 12)}});
  j["processes"] = std::move(procs);
  j["dropped_processes"] = p.dropped_processes;
  j["run_cpu_seconds"] = significant(double(p.run_cpu_ns) / 1e9, 12);
  j["unsampled_cpu_seconds"] = significant(double(profile::unsampled_cpu_ns(p)) / 1e9, 12);
  // With --pid/--comm every field above is of the processes kept (select_processes: their
  // tallies, CPU, rate and coverage; run_cpu_seconds is their CPU, dropped_processes 0);
  // "filter" says so, and its "run" holds the whole run's figures under the same names.
  if (filtered) {
    nlohmann::json f;
    f["pids"] = opts.pids;
    f["comms"] = json_strings(opts.comms);
    f["processes"] = p.processes.size();
    if (opts.whole_run != nullptr) {
      const Profile& w = *opts.whole_run;
      f["run"] = {
          {"processes", w.processes.size()},
          {"dropped_processes", w.dropped_processes},
          {"total_samples", w.total_samples()},
          {"overflow", w.overflow},
          {"delivered", w.delivered},
          {"lost", w.lost},
          {"cpu_seconds", significant(double(w.cpu_ns) / 1e9, 12)},
          {"effective_hz", rounded(w.effective_hz, 3)},
          {"finished", w.finished()},
          {"run_cpu_seconds", significant(double(w.run_cpu_ns) / 1e9, 12)},
          {"unsampled_cpu_seconds", significant(double(profile::unsampled_cpu_ns(w)) / 1e9, 12)}};
    }
    j["filter"] = std::move(f);
  }
  nlohmann::json rows = nlohmann::json::array();
  for (const Row& r : t.rows) {
    nlohmann::json row = json_named(r.name, r.object);
    if (!r.aliases.empty()) row["aliases"] = json_strings(r.aliases);
    if (t.per_process) row["comm"] = valid_utf8(r.comm);
    const double samples = rounded(r.samples, 6);
    row["samples"] = samples;
    if (t.has_system) row["system_samples"] = rounded(r.system_samples, 6);
    row["percent"] = significant(r.percent, 12);
    row["ci95"] = {significant(r.ci95_lo, 12), significant(r.ci95_hi, 12)};
    row["seconds"] = significant(samples * t.tick_seconds, 12);
    if (!r.object_path.empty()) row["object_path"] = valid_utf8(r.object_path);
    if (t.by == By::kLine || t.by == By::kAddress) {
      row["file"] = valid_utf8(r.file);
      row["line"] = r.line;
    }
    if (t.by == By::kAddress) {
      // null where the processes that ran it had it at different load addresses
      row["address"] = r.address != 0 ? nlohmann::json(r.address) : nlohmann::json();
      row["vaddr"] = r.vaddr;
    }
    if (!r.frames.empty()) {
      nlohmann::json frames = nlohmann::json::array();
      for (const symbolize::Frame& f : r.frames)
        frames.push_back(
            {{"function", valid_utf8(f.function)}, {"file", valid_utf8(f.file)}, {"line", f.line}});
      row["inlined"] = frames;
    }
    rows.push_back(std::move(row));
  }
  j["rows"] = std::move(rows);
  write_json_document(j, out);
}

const Exporter& json_exporter() {
  static const RowsExporter e{"json", "the rows and the run's header as JSON", write_json};
  return e;
}

}  // namespace sprofil::report
