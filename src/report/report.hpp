// Reports over a Profile: attribution of every count to an object, function, source line or
// address (sprofil_symbolize), statistics, and the output formats of `sprofil report`.
//
// Units: Row::percent and Row::ci95_* are percentages (0-100) of Table::total_samples, which
// counts every sample including the overflow ("[outside any object]"). ci95 is the 95% Wilson
// score interval. seconds = samples * tick_ns / 1e9. Samples are fractional when a bin spans
// two functions: its count is split in proportion to the bytes each function covers.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "profile/profile.hpp"
#include "symbolize/symbolize.hpp"

namespace sprofil::report {

enum class By { kFunction, kLine, kObject, kAddress };

// The object of JIT code's rows (regions with SPROF_R_JIT, whose path is a process's perf map):
// one object for every process's JIT code.
inline constexpr const char* kJitObject = "[JIT]";

// Every By, in the order --help lists them: its name (--by's value, the reports' "by" field)
// and whether `sprofil diff` compares by it (diff matches rows by name, not by address).
struct ByName {
  By by;
  const char* name;
  bool diff;
};
inline constexpr ByName kByNames[] = {{By::kFunction, "function", true},
                                      {By::kLine, "line", true},
                                      {By::kObject, "object", true},
                                      {By::kAddress, "address", false}};

// Both ways through kByNames: false (and *out untouched) for an unknown name.
bool parse_by(const std::string& s, By* out);
const char* by_name(By by);

struct Options {
  By by = By::kFunction;
  bool inline_frames = false;  // --by line: one row per inline chain, listing every frame
  std::string object;          // keep rows whose object basename contains this; "" = all
  size_t limit = 0;            // at most this many rows; 0 = all
  bool short_names = false;    // text: C++ names without parameters and template arguments
  double min_percent = 0;      // drop rows below this percentage
  // Called as symbolization proceeds: objects done, objects in all, the current object.
  std::function<void(size_t done, size_t total, const std::string& object)> progress;
  std::string source;  // the profile's file name, for headers and errors
  // Keep only these processes (by pid, or by command name as perf's --comms); empty = all.
  // write_report cuts the run down to them once (select_processes) and every format reports
  // from that part: its rows, and its header figures (CPU, tallies, rate, coverage).
  std::vector<int32_t> pids;
  std::vector<std::string> comms;
  // Set by write_report when --pid/--comm cut the profile the formats are given out of a run:
  // that whole run, for "2 of 9 processes" and JSON's whole-run figures. Null otherwise.
  const profile::Profile* whole_run = nullptr;
  // Shares of user time only: each bin's system part (a profile with SPROF_R_SYSTEM) is left
  // out of the rows and the total, as `perf record -e cpu-clock:u` would count. No effect on a
  // profile without system data.
  bool user_only = false;
};

// True if process `index` of `p` passes the --pid/--comm filters.
bool process_selected(const profile::Profile& p, uint32_t index, const Options& opts);
// The object a region's samples are reported as: its file's basename, or kJitObject for JIT
// code (a process's perf map).
std::string object_of(const profile::Region& r);
// True if --object keeps the samples of `object` (object_of a region's; "" for the overflow,
// which the filter never keeps).
bool object_selected(const std::string& object, const Options& opts);
// True if the options keep region `r` of `p`: its process (--pid, --comm) and its object
// (--object). attribute, executables, the gmon export and the HTML histograms ask it.
bool region_selected(const profile::Profile& p, const profile::Region& r, const Options& opts);
// One bin's samples as the options count them: with --user-only its user part alone (the count
// less its system part; *system becomes 0), else unchanged. attribute and the gmon export count
// every bin through it, so every format counts what the text report does.
void count_bin(const Options& opts, uint64_t* count, uint64_t* system);
// A region's samples as count_bin counts them (saturating).
uint64_t region_samples(const profile::Region& r, const Options& opts);
// The overflow ("[outside any object]") of the processes --pid/--comm keep.
uint64_t kept_overflow(const profile::Profile& p, const Options& opts);
// True if --pid or --comm is given.
bool filters_processes(const Options& opts);

// One executable of a profile: its main-executable regions (SPROF_R_MAIN) in the processes the
// options keep, of the objects --object keeps, grouped by path and build-id (where both have
// one); samples as count_bin counts them (--user-only: the user part).
struct Executable {
  std::string path;
  std::vector<uint8_t> build_id;
  std::vector<size_t> regions;      // indexes in Profile::regions
  std::vector<uint32_t> processes;  // distinct, in order
  uint64_t samples = 0;

  bool is(const profile::Region& r) const {
    return r.path == path && (r.build_id.empty() || build_id.empty() || r.build_id == build_id);
  }
};
// The kept processes' executables, in the order of their first region (the processes' order).
std::vector<Executable> executables(const profile::Profile& p, const Options& opts);
// The run's program, an index in `exes` (not empty): the root's executable (the first kept
// process: the command `sprofil record` ran), unless its text holds less than 1/10 of the
// samples in the kept executables' text (a shell or launcher that only waited: sh -c, env,
// make), then the executable with the most samples there. gmon exports it; pprof lists its
// mappings first (pprof's main binary).
size_t main_executable(const profile::Profile& p, const Options& opts,
                       const std::vector<Executable>& exes);

// The part of the run `p` that the --pid/--comm of `opts` keep, for every format to report
// from (write_report calls it once): the kept processes and their regions (renumbered in
// order), with header figures of theirs alone -- overflow, delivered, lost, cpu_ns,
// effective_hz, start/end and the FINISHED flag summed as a run's are (profile::TallySum; one
// process keeps its own rate); run_cpu_ns their CPU (CPU clocks: unsampled_cpu_ns is then their
// start-up before sampling), 0 for the wall clock; no dropped processes. The command line,
// clock, requested rate and tick stay the run's. False with *error, which names opts.source,
// when `p` is not a run profile (a merged profile has no per-process split) or when no process
// matches (the error lists the run's commands and their pids).
bool select_processes(const profile::Profile& p, const Options& opts, profile::Profile* out,
                      std::string* error);

// The 95% (z = 1.96) Wilson score interval of x successes in n trials, as fractions 0..1.
struct Interval {
  double lo = 0, hi = 0;
};
Interval wilson(double x, double n, double z = 1.959963984540054);

// The part of one bin attributed to one function (or to none: sym == nullptr).
struct Piece {
  size_t region = 0;     // index in Profile::regions; SIZE_MAX for the overflow
  uint32_t process = 0;  // index in Profile::processes
  uint64_t bin = 0;      // bin index in the region
  uint64_t address = 0;  // runtime address: max(bin start, function start)
  double samples = 0;    // count * covered bytes of this function / covered bytes
  double system = 0;     // the same share of the bin's system part (<= samples)
  const symbolize::Symbol* sym = nullptr;
  const symbolize::Object* object = nullptr;
};

// Splits every non-zero bin over the functions it covers. The overflow is one piece with
// region == SIZE_MAX (one per process with overflow). Only what the options keep: the processes
// (--pid, --comm), the objects (--object: no overflow then) and, with --user-only, each bin's
// user part (count_bin); every format's rows and samples come from here. Opens only objects with
// non-zero counts.
std::vector<Piece> attribute(const profile::Profile& p, symbolize::Symbolizer& sym,
                             const Options& opts = {});

struct Row {
  std::string name;  // function (demangled), object basename, or "[outside any object]"
  std::vector<std::string> aliases;  // the function's other names at its address (JSON)
  std::string comm;                  // the process's command name when the profile has several
  std::string object;                // object basename ("" for the overflow)
  std::string object_path;           // full path
  std::string file;                  // --by line / address: innermost frame's source file
  int line = 0;
  uint64_t address = 0;                  // --by address: runtime address (0: the processes
                                         // that ran it had it at different load addresses)
  uint64_t vaddr = 0;                    // --by address: link-time address
  std::vector<symbolize::Frame> frames;  // --by line with inline_frames: innermost first
  double samples = 0;
  double system_samples = 0;  // the part of samples spent in the kernel (profiles with system
                              // data; 0 otherwise and with --user-only)
  double percent = 0, ci95_lo = 0, ci95_hi = 0;  // percentages 0-100
  double seconds = 0;
};

struct Table {
  By by = By::kFunction;
  uint64_t total_samples = 0;   // all counts + overflow (of the selected processes); with
                                // user_only, without the system parts. Saturates at UINT64_MAX.
  bool has_system = false;      // the profile tells the system part of its counts
  bool user_only = false;       // Options::user_only applied to a profile with system data
  uint64_t system_samples = 0;  // the system parts of the selected processes' counts
  bool per_process = false;     // several processes: rows are per (comm, name), like perf;
                                // also when --pid/--comm keep one process of several
  bool inline_frames = false;   // --by line --inline: a row per inline chain (Row::frames)
  double tick_seconds = 0;
  std::vector<Row> rows;  // sorted by samples descending, filtered
  std::vector<std::string> warnings;
};

Table aggregate(const profile::Profile& p, symbolize::Symbolizer& sym, const Options& opts);

// Appends to *to the warnings of `more` it does not hold yet (one table's, or the
// symbolizer's, after another's), in their order.
void add_warnings(std::vector<std::string>* to, const std::vector<std::string>& more);

// The formats' writers, also used directly by tests (exporter.hpp lists the formats).
void write_text(const profile::Profile& p, const Table& t, const Options& opts, std::ostream& out);
void write_json(const profile::Profile& p, const Table& t, const Options& opts, std::ostream& out);
void write_csv(const Table& t, std::ostream& out);
// `object;function count` lines (integer counts, rounded so that they sum to the total of
// the rows shown); with --by line, `object;function;file:line count`.
void write_folded(const Table& t, std::ostream& out);
// Gzipped perftools.profiles.Profile (go tool pprof) of the samples `opts` keeps (attribute:
// --user-only, --object, --pid, --comm); empty if compression failed. Its first mapping is the
// run's program's (main_executable), with samples or without.
// Values beyond INT64_MAX (pprof's signed 64-bit values) are clamped, with a warning added to
// *warnings (if given).
std::string pprof_bytes(const profile::Profile& p, symbolize::Symbolizer& sym,
                        std::vector<std::string>* warnings = nullptr, const Options& opts = {});
// gmon.out (GNU gprof) of one executable, in link-time addresses: of the processes and
// executables `opts` keeps (--pid, --comm, --object), the root's executable, or the most-sampled
// one when the root's text holds under 10% of the main executables' samples (a shell, a
// launcher); every kept process of it summed, one histogram record per text range (gmon.cpp).
// Bins finer than gprof's 2-byte unit are summed into bins of 2 bytes (no count lost). A
// warning names the executable when the profile has others, with their samples left out; one
// says where the samples are when its text holds under half of those kept. gprof's counters are
// 16-bit: when a bin exceeds 65535 every bin is divided by one factor (rounding to nearest,
// proportions kept) so that the largest fits, and the rate by the same factor (gprof's seconds are
// counts / rate), and a warning gives the factor. The size follows the text size, never the counts.
// False if there is nothing, or a range too large for gprof's 32-bit bin count.
bool gmon_bytes(const profile::Profile& p, std::string* bytes, std::string* error,
                std::vector<std::string>* warnings = nullptr, const Options& opts = {});

class Exporter;
// Everything `sprofil report` does after reading: with --pid/--comm, cuts the run down to the
// processes kept (select_processes, whose error is returned: nothing is written); aggregates if
// the format needs rows, renders and writes to `out_path` ("" = the format's default: stdout,
// or a file for pprof and gmon; "-" = stdout) through profile::write_output. Warnings
// (symbolization) are returned, not printed. Errors name the file.
bool write_report(const profile::Profile& p, const Exporter& format, const Options& opts,
                  const std::string& out_path, std::vector<std::string>* warnings,
                  std::string* error);

}  // namespace sprofil::report
