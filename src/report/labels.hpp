// Names and numbers as every output format prints them: object basenames, the command line,
// addresses, clock names, sample counts and row labels.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "profile/profile.hpp"
#include "report/report.hpp"
#include "util/count_of.hpp"

namespace sprofil::report {

std::string basename_of(const std::string& path);
// argv joined with spaces.
std::string command_of(const profile::Profile& p);
std::string hex_addr(uint64_t a);
// "cpu (per-thread CPU-time timers)"
std::string clock_label(profile::Clock c);
// Whole numbers without decimals, fractional ones (split bins) with two.
std::string format_samples(double s);
// With short names (the text report's default), names longer than this lose their parameter
// lists and template arguments (symbolize::short_name); shorter ones fit a line and are kept.
constexpr size_t kShortNameAbove = 64;
// Whether label_of shortens `name` (with short names, and unless `full` keeps it whole).
bool shortened(const std::string& name, const std::set<std::string>* full = nullptr);
// A source line as every format shows it: "FILE:LINE", the file's basename, "??:0" where no
// line information covers the address (the text report, folded stacks).
std::string file_line(const std::string& file, int line);
// The label of a --by line row: "hot.hpp:11 inner", and with --inline its whole chain,
// innermost first: "hot.hpp:11 inner <- prog.cpp:20 main" (file_line, then each frame's
// function where it has one). `name` shows a function name (the text report's short names).
// The text report's label (label_of, made printable) and CSV's `inlined` column.
std::string line_label(const Row& r, const std::function<std::string(const std::string&)>& name);
// The label of a row in text output: function, object, file:line function, or address (the
// runtime address, then the object-relative one that addr2line -e OBJECT takes); with
// `short_names`, names longer than kShortNameAbove are shortened.
// `full`: names shown whole even with `short_names` (names_short_alike).
std::string label_of(const Row& r, By by, bool short_names = false,
                     const std::set<std::string>* full = nullptr);
// Of `names`, those whose short form (the one label_of shows) another, different name has too:
// two lambdas' std::thread::_State_impl<...{lambda()#1}...>::_M_run and ...#2... would read
// alike as std::thread::_State_impl::_M_run, so both are shown whole.
std::set<std::string> names_short_alike(const std::vector<std::string>& names);
// The names of `rows` that label_of shows: each row's, and its inline frames' functions.
std::vector<std::string> shown_names(const std::vector<Row>& rows);

// For a terminal: control characters (C0, DEL, C1) and bytes that are not UTF-8 as \xNN, so
// that a command line, path or symbol cannot move the cursor or recolour the screen.
std::string printable(const std::string& s);
// A source line as an editor shows it: each tab to the next multiple of `stop` columns (a
// column is a byte, or a UTF-8 sequence).
std::string expand_tabs(const std::string& line, size_t stop = 8);
// Valid UTF-8 for JSON and protobuf strings: every byte that is not part of a valid UTF-8
// sequence becomes U+FFFD.
std::string valid_utf8(const std::string& s);
// A CSV field (RFC 4180): quoted, with quotes doubled, when it holds a comma, quote or newline.
std::string csv_field(const std::string& s);
// "1 sample", "2 samples" (util/count_of.hpp, which record's summary uses too).
using util::count_of;
// `x` rounded to `digits` decimals, or to `digits` significant digits, so that JSON prints
// 0.576 and not 0.5760000000000001.
double rounded(double x, int digits);
double significant(double x, int digits);

// Whether the samples account for the process's CPU time (CPU clocks only; the wall clock
// also samples time off the CPU). ratio = samples x tick / cpu_ns.
struct Coverage {
  bool known = false;  // a CPU clock with cpu_ns recorded
  double ratio = 0;
  std::string warning;  // non-empty when the samples fall far below the CPU time
};
// `kept`: p is the part of a run that --pid/--comm keep (select_processes), and the cause names
// "the N processes kept" rather than the run's.
Coverage coverage_of(const profile::Profile& p, uint64_t total_samples, bool kept = false);

// The --pid/--comm filter as typed, for headers and errors: "--pid 12 --comm cc1" ("" without
// one); command names printable.
std::string process_filter(const Options& opts);
// With --pid/--comm: "2 of 9 with samples (--comm cc1)", the processes kept of the run's
// (opts.whole_run; without it "2 (--comm cc1)"); "" without a filter.
std::string kept_processes(const profile::Profile& p, const Options& opts);

// "" for a finished profile; else what the reports say of it: which processes did not finish
// (of the processes kept, when p is select_processes's part of a run)
// (a crash, a kill, or still running; up to five named by pid and command), that their samples
// up to then are counted, and, where one has no CPU time (cpu_ns 0: its agent wrote no end),
// that their CPU time and effective rate are unknown (sampled from outside, a process has them).
std::string unfinished_note(const profile::Profile& p);

// "" unless a process installed a seccomp filter (SPROF_F_SANDBOXED; up to five named): that
// sprofil made no system call of its own in it afterwards, so what it started later (threads,
// processes) was not sampled, and with a signal per sample sampling stopped there.
std::string sandboxed_note(const profile::Profile& p);

// "" unless the kernel throttled the run's sampling (a run profile's `throttled`): how often,
// that the throttled time is in `lost`, and what to do about it.
std::string throttled_note(const profile::Profile& p);

// What a run profile's header says of how its sampling went, beyond its tallies, for every
// format alike: each note with its name (the HTML header's row, the JSON key before
// "_warning"): "throttled" (throttled_note), "short_threads" (profile::unsampled_threads_note),
// "short_processes" (profile::unsampled_processes_note), "unwaited" (profile::unwaited_note).
struct RunNote {
  const char* name;
  std::string text;
};
std::vector<RunNote> run_notes(const profile::Profile& p);

}  // namespace sprofil::report
