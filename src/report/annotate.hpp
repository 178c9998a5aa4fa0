// `sprofil annotate`: the source lines and the disassembly of the hottest functions (or of one
// named function) with the samples each carries, as `perf annotate` shows them.
//
// Counts are read through profile::Region::for_each_bin. A bin covers Region::bin_size bytes:
// its count is split over the functions it covers in proportion to the bytes of each (as
// report::attribute does), and within a function over the instructions it overlaps, again in
// proportion to bytes. With 1-byte bins (SPROFIL_BIN_BYTES=1) every sample is charged to the
// instruction at its pc; with wider bins the split is an approximation, and the output says so.
//
// Runtime addresses map to the object's link-time addresses with the region's load bias (as the
// symbolizer does); the instruction bytes are read from the object's executable PT_LOAD segment
// (libelf) and decoded with capstone (AT&T syntax on x86, as perf and objdump print it). Source
// lines and inline chains come from the symbolizer (DWARF line tables through libdw).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "report/report.hpp"

namespace sprofil::report {

struct AnnotateOptions {
  // Annotate every function of this name (demangled, short or raw name, either without a GCC
  // clone suffix: symbolize::without_clone_suffix, an alias, or the last components of its
  // short name: `spin` or `Worker::spin` for `ns::Worker::spin`, where none is named so);
  // "" = the hottest.
  std::string function;
  size_t top = 3;  // without `function`: this many of the hottest functions
  Options report;  // process filters, --object
};

struct AnnotatedInstruction {
  uint64_t vaddr = 0;  // link-time address
  uint32_t size = 0;
  std::string text;  // "mnemonic operands"
  double samples = 0;
  std::string file;  // innermost source frame; "" without line information
  int line = 0;
  std::string inlined;  // the innermost frame's function when it is an inlined call, else ""
};

struct AnnotatedLine {
  std::string file;
  int line = 0;
  std::string inlined;  // as AnnotatedInstruction::inlined
  double samples = 0;
  double percent = 0;  // of the function's samples
  std::string source;  // the line's text when the file is readable, else ""
};

struct AnnotatedFunction {
  std::string name;  // demangled
  std::string object, object_path;
  // The command of the processes whose samples these are, in a profile of several processes:
  // one function per command, as `sprofil report`'s rows (Row::comm); "" otherwise.
  std::string comm;
  uint64_t start = 0, end = 0;  // link-time extent
  uint32_t bin_size = 1;        // widest bin of the regions that hold it
  double samples = 0;
  double percent = 0;  // of the profile's total samples
  bool has_lines = false;
  std::string note;                  // why there are no source lines, or why no disassembly
  std::vector<AnnotatedLine> lines;  // lines with samples, by file then line
  std::vector<AnnotatedInstruction> instructions;
};

struct Annotation {
  std::string source;
  uint64_t total_samples = 0;
  std::vector<AnnotatedFunction> functions;
  std::vector<std::string> warnings;
  // With a `function` that no function with samples is named or ends with: the (short) names
  // of the hottest ones that hold it, at most kNearNames, for the error message.
  std::vector<std::string> near;
};
constexpr size_t kNearNames = 5;

// Empty `functions` when the named function has no samples (or is not in the profile).
Annotation annotate(const profile::Profile& p, symbolize::Symbolizer& sym,
                    const AnnotateOptions& opts);

void write_annotation_text(const Annotation& a, std::ostream& out);
void write_annotation_json(const Annotation& a, std::ostream& out);

}  // namespace sprofil::report
