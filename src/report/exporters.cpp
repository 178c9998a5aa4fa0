// The list of output formats, and write_report(): keep the processes --pid/--comm select,
// aggregate if the format needs rows, render, write the output safely.
#include "profile/output.hpp"

#include <sstream>
#include "report/exporter.hpp"

namespace sprofil::report {

bool RowsExporter::render(const ExportInput& in, std::string* bytes, std::string*) const {
  std::ostringstream s;
  if (full_ != nullptr)
    full_(in.profile, *in.table, in.options, s);
  else
    rows_(*in.table, s);
  *bytes = s.str();
  return true;
}

std::span<const Exporter* const> exporters() {
  static const Exporter* const kAll[] = {&text_exporter(),   &json_exporter(),  &csv_exporter(),
                                         &folded_exporter(), &pprof_exporter(), &gmon_exporter(),
                                         &html_exporter()};
  return kAll;
}

const Exporter* find_exporter(std::string_view name) {
  for (const Exporter* e : exporters())
    if (e->name() == name) return e;
  return nullptr;
}

bool write_report(const profile::Profile& p, const Exporter& format, const Options& opts,
                  const std::string& out_path, std::vector<std::string>* warnings,
                  std::string* error) {
  // --pid/--comm: the processes kept, cut out of the run once; every format reports from
  // that part (its rows and its header's figures), knowing the whole run through whole_run.
  profile::Profile kept;
  Options o = opts;
  if (filters_processes(opts)) {
    std::string problem;
    if (!select_processes(p, opts, &kept, &problem)) {
      if (error != nullptr) *error = problem;
      return false;
    }
    o.whole_run = &p;
  }
  const profile::Profile& shown = o.whole_run != nullptr ? kept : p;
  symbolize::Symbolizer symbolizer;
  Table table;
  if (format.needs_table()) table = aggregate(shown, symbolizer, o);
  std::string bytes;
  std::vector<std::string> render_warnings;
  const ExportInput in{shown, symbolizer, o, format.needs_table() ? &table : nullptr,
                       &render_warnings};
  std::string problem;
  const bool rendered = format.render(in, &bytes, &problem);
  if (warnings != nullptr) {
    *warnings = format.needs_table() ? table.warnings : std::vector<std::string>();
    for (std::string& w : symbolizer.take_warnings()) warnings->push_back(std::move(w));
    for (std::string& w : render_warnings) warnings->push_back(std::move(w));
  }
  std::string path = out_path;
  if (path.empty()) path = format.default_path().empty() ? "-" : std::string(format.default_path());
  if (!rendered) {
    if (error != nullptr) *error = (path == "-" ? "standard output" : path) + ": " + problem;
    return false;
  }
  return profile::write_output(path, bytes, error);
}

}  // namespace sprofil::report
