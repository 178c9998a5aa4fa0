// The output formats of `sprofil report --format NAME` (and `sprofil gperf --format`). Each
// format is one Exporter in a file of its own (text.cpp, json.cpp, csv.cpp, folded.cpp,
// pprof.cpp, gmon.cpp, html.cpp); exporters.cpp holds the one list of them. A new format is
// NAME.cpp defining NAME_exporter(), its declaration at the end of this file, its entry in
// exporters()'s list (exporters.cpp), its source in src/report/CMakeLists.txt, and outside the
// code the completions, the man page and a test: docs/architecture.md, "Seams", lists the steps.
#pragma once

#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "report/report.hpp"

namespace sprofil::report {

// What an exporter renders: the profile, a symbolizer, the options, and the aggregated rows
// when it asked for them.
struct ExportInput {
  const profile::Profile& profile;
  symbolize::Symbolizer& symbolizer;
  const Options& options;
  const Table* table;                            // null unless needs_table()
  std::vector<std::string>* warnings = nullptr;  // where render() may add warnings; may be null
};

class Exporter {
 public:
  virtual ~Exporter() = default;
  virtual std::string_view name() const = 0;         // the --format value
  virtual std::string_view description() const = 0;  // for --help
  // Where the output goes when no -o is given; "" = standard output.
  virtual std::string_view default_path() const { return {}; }
  // Whether render() needs the rows aggregated by Options::by (ExportInput::table).
  virtual bool needs_table() const { return true; }
  // Whether Options::limit and Options::min_percent choose what it writes: the formats of rows
  // do; pprof and gmon keep every sample (their viewers choose), HTML pages its rows itself.
  virtual bool takes_limit() const { return needs_table(); }
  virtual bool takes_min_percent() const { return needs_table(); }
  // The whole output into *bytes; false with *error naming the problem.
  virtual bool render(const ExportInput& in, std::string* bytes, std::string* error) const = 0;
};

// A format that streams the aggregated rows (text, json, csv, folded): a name, a description
// and its writer, one of report.hpp's write_* functions (with or without the profile and the
// options); render() hands it the ExportInput's parts.
class RowsExporter final : public Exporter {
 public:
  using WriteFull = void (*)(const profile::Profile& p, const Table& t, const Options& opts,
                             std::ostream& out);
  using WriteRows = void (*)(const Table& t, std::ostream& out);
  RowsExporter(std::string_view name, std::string_view description, WriteFull write)
      : name_(name), description_(description), full_(write) {}
  RowsExporter(std::string_view name, std::string_view description, WriteRows write)
      : name_(name), description_(description), rows_(write) {}
  std::string_view name() const override { return name_; }
  std::string_view description() const override { return description_; }
  bool render(const ExportInput& in, std::string* bytes, std::string* error) const override;

 private:
  std::string_view name_, description_;
  WriteFull full_ = nullptr;
  WriteRows rows_ = nullptr;
};

// A format that renders the whole profile into a file of its own (pprof, gmon): a name, a
// description, the file written when no -o is given, and the function that renders it.
class FileExporter final : public Exporter {
 public:
  using Render = bool (*)(const ExportInput& in, std::string* bytes, std::string* error);
  FileExporter(std::string_view name, std::string_view description, std::string_view path,
               Render fn)
      : name_(name), description_(description), path_(path), render_(fn) {}
  std::string_view name() const override { return name_; }
  std::string_view description() const override { return description_; }
  std::string_view default_path() const override { return path_; }
  bool needs_table() const override { return false; }
  bool render(const ExportInput& in, std::string* bytes, std::string* error) const override {
    return render_(in, bytes, error);
  }

 private:
  std::string_view name_, description_, path_;
  Render render_;
};

// Every format, in the order --help lists them; find_exporter("") is null.
std::span<const Exporter* const> exporters();
const Exporter* find_exporter(std::string_view name);

// Each format's exporter, defined in its own file.
const Exporter& text_exporter();
const Exporter& json_exporter();
const Exporter& csv_exporter();
const Exporter& folded_exporter();
const Exporter& pprof_exporter();
const Exporter& gmon_exporter();
const Exporter& html_exporter();

}  // namespace sprofil::report
