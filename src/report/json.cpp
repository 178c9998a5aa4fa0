// The JSON report: the run's header fields and one object per row.
#include <nlohmann/json.hpp>
#include <sstream>

#include "profile/sprof_format.h"
#include "report/exporter.hpp"
#include "report/labels.hpp"

namespace sprofil::report {

using profile::Profile;

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
  j["clock"] = profile::clock_name(p.clock);
  j["requested_hz"] = p.requested_hz;
  j["effective_hz"] = p.effective_hz;
  j["tick_ns"] = p.tick_ns;
  j["overflow"] = p.overflow;
  j["delivered"] = p.delivered;
  j["lost"] = p.lost;
  j["cpu_seconds"] = double(p.cpu_ns) / 1e9;
  j["finished"] = (p.flags & SPROF_F_FINISHED) != 0;
  j["warnings"] = t.warnings;
  nlohmann::json procs = nlohmann::json::array();
  for (const profile::Process& pr : p.processes)
    procs.push_back({{"pid", pr.pid},
                     {"ppid", pr.ppid},
                     {"comm", pr.comm},
                     {"argv", pr.argv},
                     {"delivered", pr.delivered},
                     {"cpu_seconds", double(pr.cpu_ns) / 1e9}});
  j["processes"] = std::move(procs);
  j["dropped_processes"] = p.dropped_processes;
  j["run_cpu_seconds"] = double(p.run_cpu_ns) / 1e9;
  j["uncovered_cpu_seconds"] = double(profile::uncovered_cpu_ns(p)) / 1e9;
  nlohmann::json rows = nlohmann::json::array();
  for (const Row& r : t.rows) {
    nlohmann::json row;
    row["name"] = r.name;
    row["object"] = r.object;
    if (t.per_process) row["comm"] = r.comm;
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

namespace {
class JsonExporter final : public Exporter {
 public:
  std::string_view name() const override { return "json"; }
  std::string_view description() const override { return "the rows and the run's header as JSON"; }
  bool render(const ExportInput& in, std::string* bytes, std::string*) const override {
    std::ostringstream s;
    write_json(in.profile, *in.table, in.options, s);
    *bytes = s.str();
    return true;
  }
};
}  // namespace

const Exporter& json_exporter() {
  static const JsonExporter e;
  return e;
}

}  // namespace sprofil::report
