// Reports over a Profile: attribution of every count to an object, function, source line or
// address (sprofil_symbolize), statistics, and the output formats of `sprofil report`.
//
// Units: Row::percent and Row::ci95_* are percentages (0-100) of Table::total_samples, which
// counts every sample including the overflow ("[outside any object]"). ci95 is the 95% Wilson
// score interval. seconds = samples * tick_ns / 1e9. Samples are fractional when a bin spans
// two functions: its count is split in proportion to the bytes each function covers.
#pragma once

#include <cstdint>
#include <cstdio>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "profile/profile.hpp"
#include "symbolize/symbolize.hpp"

namespace sprofil::report {

enum class By { kFunction, kLine, kObject, kAddress };
enum class Format { kText, kJson, kCsv, kPprof, kGmon, kFolded };

bool parse_by(const std::string& s, By* out);
bool parse_format(const std::string& s, Format* out);
const char* by_name(By by);

struct Options {
  By by = By::kFunction;
  bool inline_frames = false;  // --by line: one row per inline chain, listing every frame
  std::string object;          // keep rows whose object basename contains this; "" = all
  size_t limit = 0;            // at most this many rows; 0 = all
  double min_percent = 0;      // drop rows below this percentage
  bool progress = true;        // progress on stderr when it is a terminal
  std::string source;          // the profile's file name, for headers and errors
};

// The 95% (z = 1.96) Wilson score interval of x successes in n trials, as fractions 0..1.
struct Interval {
  double lo = 0, hi = 0;
};
Interval wilson(double x, double n, double z = 1.959963984540054);

// The part of one bin attributed to one function (or to none: sym == nullptr).
struct Piece {
  size_t region = 0;     // index in Profile::regions; SIZE_MAX for the overflow
  uint64_t bin = 0;      // bin index in the region
  uint64_t address = 0;  // runtime address: max(bin start, function start)
  double samples = 0;    // count * covered bytes of this function / covered bytes
  const symbolize::Symbol* sym = nullptr;
  const symbolize::Object* object = nullptr;
};

// Splits every non-zero bin over the functions it covers. The overflow is one piece with
// region == SIZE_MAX. Opens only objects with non-zero counts.
std::vector<Piece> attribute(const profile::Profile& p, symbolize::Symbolizer& sym,
                             bool progress = false);

struct Row {
  std::string name;         // function (demangled), object basename, or "[outside any object]"
  std::string object;       // object basename ("" for the overflow)
  std::string object_path;  // full path
  std::string file;         // --by line / address: innermost frame's source file
  int line = 0;
  uint64_t address = 0;                  // --by address: runtime address; 0 otherwise
  uint64_t vaddr = 0;                    // --by address: link-time address
  std::vector<symbolize::Frame> frames;  // --by line with inline_frames: innermost first
  double samples = 0;
  double percent = 0, ci95_lo = 0, ci95_hi = 0;  // percentages 0-100
  double seconds = 0;
};

struct Table {
  By by = By::kFunction;
  uint64_t total_samples = 0;  // all counts + overflow
  double tick_seconds = 0;
  std::vector<Row> rows;  // sorted by samples descending, filtered
  std::vector<std::string> warnings;
};

Table aggregate(const profile::Profile& p, symbolize::Symbolizer& sym, const Options& opts);

void write_text(const profile::Profile& p, const Table& t, const Options& opts, std::ostream& out);
void write_json(const profile::Profile& p, const Table& t, const Options& opts, std::ostream& out);
void write_csv(const Table& t, std::ostream& out);
// `object;function count` lines (integer counts, rounded so that they sum to the total of
// the rows shown); with --by line, `object;function;file:line count`.
void write_folded(const Table& t, std::ostream& out);

// Gzipped perftools.profiles.Profile (go tool pprof).
bool write_pprof(const profile::Profile& p, symbolize::Symbolizer& sym, const std::string& path,
                 std::string* error, std::vector<std::string>* warnings = nullptr);
std::string pprof_bytes(const profile::Profile& p, symbolize::Symbolizer& sym);  // gzipped

// gmon.out (GNU gprof) of the main executable's regions: link-time addresses, several
// identical-range histogram records when a count exceeds 65535.
bool write_gmon(const profile::Profile& p, const std::string& path, std::string* error);

// Writes bytes to path (truncating it); on failure sets *error to "PATH: cannot write: why".
bool write_file(const std::string& path, std::string_view bytes, std::string* error);

// Everything `sprofil report` does after reading: aggregates and writes `format` to
// `out_path` ("" or "-" = stdout; pprof defaults to sprofil.pb.gz and gmon to gmon.out).
// Warnings go to stderr. Errors name the file.
bool write_report(const profile::Profile& p, Format format, const Options& opts,
                  const std::string& out_path, std::string* error);

// A text flat profile of `p` on `out` (what `sprofil record` prints at the end).
bool print_report(const profile::Profile& p, std::FILE* out, const Options& opts = {},
                  std::string* error = nullptr);

}  // namespace sprofil::report
