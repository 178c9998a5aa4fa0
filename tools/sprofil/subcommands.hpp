// The subcommands of the sprofil tool. Each lives in a file of its own and is one row of the
// table in subcommands.cpp: its setup function declares its options on the CLI11 subcommand
// and returns the function that runs it and returns the exit status.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "format/profile_name.hpp"
#include "profile/profile.hpp"
#include "report/report.hpp"

namespace sprofil::tool {

using Run = std::function<int()>;

struct Subcommand {
  const char* name;
  const char* help;
  Run (*setup)(CLI::App& sub);
};

// Every subcommand, in the order `sprofil --help` lists them.
std::span<const Subcommand> subcommands();

Run setup_record(CLI::App& sub);
Run setup_report(CLI::App& sub);
Run setup_merge(CLI::App& sub);
Run setup_diff(CLI::App& sub);
Run setup_annotate(CLI::App& sub);
Run setup_fetch(CLI::App& sub);
Run setup_gperf(CLI::App& sub);
Run setup_list(CLI::App& sub);
Run setup_top(CLI::App& sub);
Run setup_serve(CLI::App& sub);

// What every subcommand does one way.
// "sprofil CMD: MESSAGE" on stderr; fail() returns 1, the exit status of a failure.
void say(const char* cmd, const std::string& message);
int fail(const char* cmd, const std::string& message);
// The exit status of a usage error (a bad option or argument, found before anything runs), of
// every subcommand: 2, as usual.
inline constexpr int kUsageError = 2;
// A usage error of `sprofil CMD` (`cmd` "": of sprofil itself): the message, a line naming
// its --help, and kUsageError. main() reports CLI11's parse errors with it, whatever CLI11's
// own code for them (105, 106, 109, ...).
int usage_error(const std::string& cmd, const std::string& message);
// Numeric options: a whole number from `min` to `max` (or of the type's range), in decimal,
// handed on as such (a transform(): a check() may not change it); a number from `min` to `max`
// for a real one (a check()). CLI11 alone reads "-1" as an unsigned type's largest value, a
// number past the type's range as its largest, "010" as octal and accepts "nan" in a Range.
CLI::Validator whole_number(uint64_t min, uint64_t max, bool max_of_type = false);
template <typename T>
CLI::Validator whole_number(T min = 0) {
  return whole_number(static_cast<uint64_t>(min),
                      static_cast<uint64_t>(std::numeric_limits<T>::max()), true);
}
CLI::Validator real_number(double min, double max);
// Writes `text` to `out` ("" or "-": standard output) with profile::write_output: `status`,
// or fail() if it cannot be written.
int write_text(const char* cmd, const std::string& out, const std::string& text, int status);
// Reads the profile `file` (profile::read_profile), or a run directory that a killed `sprofil
// record` left (record::gather_run_dir); false after saying why: "sprofil CMD:
// FILE: problem".
bool read_input(const char* cmd, const std::string& file, profile::Profile* p);
// "a, b or c".
std::string listed(const std::vector<std::string>& names);
// An option whose value is one of `choices`, its default shown in --help.
CLI::Option* add_choice(CLI::App& sub, const std::string& name, std::string& value,
                        const std::string& help, const std::vector<std::string>& choices);

// The options several subcommands share, each declared here once.
// TARGET: a running process, by pid or by its live socket's path.
CLI::Option* add_live_target(CLI::App& sub, std::string& target);
// -o,--output: where the output goes; `help` tells the default.
inline constexpr const char* kToStdout = "Output file (default: stdout)";
CLI::Option* add_output(CLI::App& sub, std::string& out, const std::string& help = kToStdout);
// -N,--no-buildid-cache: clears `keep` (record and fetch keep the sampled objects by build-id).
void add_no_buildid_cache(CLI::App& sub, bool& keep);
// --by: the rows' aggregation, one of report::kByNames (`diff`: only those diff compares by),
// its help "VERB by function, line, object or address".
void add_by(CLI::App& sub, std::string& by, const std::string& verb, bool diff = false);
// --limit: at most N rows (0 = all).
CLI::Option* add_limit(CLI::App& sub, size_t& limit,
                       const std::string& help = "Show at most N rows (0 = all)");

// What a subcommand that writes a `sprofil report` (report, gperf) asks for.
struct ReportRequest {
  std::string by = "function";
  std::string format = "text";
  size_t limit = 0;
  std::string out;
  // report::Options with --by and --limit, and short names in the text format unless
  // `full_names`.
  report::Options options(bool full_names = false) const;
};
// --by, --format (one of report::exporters(); `describe`: its help lists them with their
// descriptions, else refers to sprofil report), --limit and -o (`out_help`).
void add_report_request(CLI::App& sub, ReportRequest& r, bool describe,
                        const std::string& out_help = kToStdout);
// Renders the report and writes it (report::write_report); its warnings on stderr, but for
// the text format, which prints them itself. The exit status.
int write_report(const char* cmd, const profile::Profile& p, const ReportRequest& r,
                 const report::Options& opts);

// What report and annotate read: the profile FILE (sprofil.data by default) and, with
// --object, --pid and --comm, which of its rows to keep, by object and process.
struct ProfileInput {
  std::string file = naming::kDefaultProfile;
  std::string object;
  std::vector<int32_t> pids;
  std::vector<std::string> comms;
  // Reads the file into *p (read_input) and sets the selection and the source in *opts.
  bool read(const char* cmd, profile::Profile* p, report::Options* opts) const;
};
// `rows` names what --object keeps ("rows", "functions"); `note` ends --pid's help.
void add_profile_input(CLI::App& sub, ProfileInput& in, const std::string& rows,
                       const std::string& note = "");

}  // namespace sprofil::tool
