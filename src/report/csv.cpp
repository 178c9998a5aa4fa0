// The CSV report: one line per row, RFC 4180 quoting.
#include <cstdio>
#include <sstream>

#include "report/exporter.hpp"
#include "report/labels.hpp"

namespace sprofil::report {

// With --by address a last column, vaddr, gives the object-relative (link-time) address that
// `addr2line -e OBJECT` and objdump take; address is the run-time one (ASLR). With --by line
// --inline, a column `inlined` (JSON's name) gives the row's inline chain as the text report's
// label does, innermost first ("hot.hpp:11 inner <- prog.cpp:20 main"; empty where the row has
// no line information, as JSON has no `inlined`): rows of one function and line reached
// through different chains are told apart.
void write_csv(const Table& t, std::ostream& out) {
  const bool by_address = t.by == By::kAddress;
  out << "samples,percent,ci95_low,ci95_high,seconds,name,object,file,line,address"
      << (by_address ? ",vaddr" : "") << (t.inline_frames ? ",inlined" : "")
      << (t.per_process ? ",comm" : "") << (t.has_system ? ",system_samples" : "") << "\n";
  char buf[256];
  for (const Row& r : t.rows) {
    std::snprintf(buf, sizeof buf, "%.6g,%.6f,%.6f,%.6f,%.9g,", r.samples, r.percent, r.ci95_lo,
                  r.ci95_hi, r.seconds);
    out << buf << csv_field(r.name) << "," << csv_field(r.object) << "," << csv_field(r.file) << ","
        << (r.line != 0 ? std::to_string(r.line) : std::string()) << ","
        << (r.address != 0 ? hex_addr(r.address) : std::string());
    if (by_address) out << "," << (r.object.empty() ? std::string() : hex_addr(r.vaddr));
    if (t.inline_frames)
      out << ","
          << (r.frames.empty()
                  ? std::string()
                  : csv_field(line_label(r, [](const std::string& name) { return name; })));
    if (t.per_process) out << "," << csv_field(r.comm);
    if (t.has_system) {
      std::snprintf(buf, sizeof buf, ",%.6g", r.system_samples);
      out << buf;
    }
    out << "\n";
  }
}

const Exporter& csv_exporter() {
  static const RowsExporter e{"csv", "one line per row, for spreadsheets", write_csv};
  return e;
}

}  // namespace sprofil::report
