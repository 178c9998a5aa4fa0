#include "subcommands.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "profile/output.hpp"
#include "profile/reader.hpp"
#include "record/record.hpp"
#include "report/exporter.hpp"
#include "report/labels.hpp"

namespace sprofil::tool {
namespace {

// 0.05, 3600, 1e-12: the shortest form.
std::string fmt_number(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", x);
  return b;
}

}  // namespace

std::span<const Subcommand> subcommands() {
  static const Subcommand kAll[] = {
      {"record", "Run a command and profile it (all threads, shared libraries, dlopen'd code)",
       setup_record},
      {"report", "Print or export a report of a .sprof profile", setup_report},
      {"merge", "Sum profiles of the same program (runs, fork children) into one file",
       setup_merge},
      {"diff", "Compare two profiles: each function's change with its interval and significance",
       setup_diff},
      {"annotate", "Source lines and disassembly of the hottest functions, with their samples",
       setup_annotate},
      {"fetch", "Copy a live snapshot of a running program to a .sprof file", setup_fetch},
      {"gperf", "Report a running program live, or receive its osProfileFlush (--serve)",
       setup_gperf},
      {"top", "A live view of a running program's hottest functions, like perf top", setup_top},
      {"list", "List the running processes of this user that serve live profiles", setup_list},
      {"serve", "Serve this user's live profiles over HTTP as Go's net/http/pprof does",
       setup_serve},
  };
  return kAll;
}

void say(const char* cmd, const std::string& message) {
  std::fprintf(stderr, "sprofil %s: %s\n", cmd, message.c_str());
}

int fail(const char* cmd, const std::string& message) {
  say(cmd, message);
  return 1;
}

int usage_error(const std::string& cmd, const std::string& message) {
  const std::string prog = cmd.empty() ? "sprofil" : "sprofil " + cmd;
  std::fprintf(stderr, "%s: %s\nRun '%s --help' for more information.\n", prog.c_str(),
               message.c_str(), prog.c_str());
  return kUsageError;
}

CLI::Validator whole_number(uint64_t min, uint64_t max, bool max_of_type) {
  const std::string range = max_of_type ? std::to_string(min) + " or more"
                                        : std::to_string(min) + " to " + std::to_string(max);
  return CLI::Validator(
      [=](std::string& input) -> std::string {
        if (input.empty() || input.find_first_not_of("0123456789") != std::string::npos)
          return input + ": not a whole number (" + range + ")";
        uint64_t n = 0;
        const bool fits =
            std::from_chars(input.data(), input.data() + input.size(), n).ec == std::errc();
        if (max_of_type && (!fits || n > max))
          return input + ": too large (at most " + std::to_string(max) + ")";
        if (!fits || n < min || n > max) return input + ": out of range (" + range + ")";
        input = std::to_string(n);  // as CLI11 reads it: "010" would be octal
        return "";
      },
      range);
}

CLI::Validator real_number(double min, double max) {
  const std::string range = fmt_number(min) + " to " + fmt_number(max);
  return CLI::Validator(
      [=](std::string& input) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(input.c_str(), &end);
        if (input.empty() || std::isspace(static_cast<unsigned char>(input[0])) ||
            end != input.c_str() + input.size() || !std::isfinite(x))
          return input + ": not a number (" + range + ")";
        if (x < min || x > max) return input + ": out of range (" + range + ")";
        return "";
      },
      range);
}

int write_text(const char* cmd, const std::string& out, const std::string& text, int status) {
  std::string err;
  if (!profile::write_output(out.empty() ? "-" : out, text, &err)) return fail(cmd, err);
  return status;
}

bool read_input(const char* cmd, const std::string& file, profile::Profile* p) {
  std::string err;
  struct stat st;
  if (stat(file.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    // A run directory that `sprofil record` left (killed before it gathered the files): its
    // files gathered as record would.
    std::vector<std::string> skipped;
    if (!record::gather_run_dir(file, p, &skipped, &err)) {
      say(cmd, file + ": a directory with " + err);
      return false;
    }
    for (const std::string& s : skipped) say(cmd, "warning: " + file + ": skipped " + s);
    say(cmd, "warning: " + file +
                 ": the files of a run that sprofil record did not gather (it ended before its "
                 "command: killed?), gathered as it would. The run's CPU time is not known, and "
                 "in drain mode (record's default) the samples of processes that ran on after "
                 "record ended were not taken");
    return true;
  }
  if (profile::read_profile(file, p, &err)) return true;
  // The default profile not there: the user has not recorded one here yet (perf's "try 'perf
  // record' first").
  const bool none_yet =
      file == naming::kDefaultProfile && access(file.c_str(), F_OK) != 0 && errno == ENOENT;
  say(cmd, file + ": " + err + (none_yet ? " (record one first: sprofil record CMD)" : ""));
  return false;
}

std::string listed(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i)
    s += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return s;
}

CLI::Option* add_choice(CLI::App& sub, const std::string& name, std::string& value,
                        const std::string& help, const std::vector<std::string>& choices) {
  return sub.add_option(name, value, help)->check(CLI::IsMember(choices))->capture_default_str();
}

CLI::Option* add_live_target(CLI::App& sub, std::string& target) {
  return sub.add_option("target", target, "The running process (pid) or its live socket's path");
}

CLI::Option* add_output(CLI::App& sub, std::string& out, const std::string& help) {
  return sub.add_option("-o,--output", out, help);
}

void add_no_buildid_cache(CLI::App& sub, bool& keep) {
  sub.add_flag_callback(
      "-N,--no-buildid-cache", [&keep] { keep = false; },
      "Do not keep a copy of the sampled objects of your own (not the system's "
      "packages') in the build-id cache ($SPROFIL_BUILDID_DIR, else "
      "~/.cache/sprofil/build-id), by which report names a program rebuilt since the "
      "run from the build that ran");
}

void add_by(CLI::App& sub, std::string& by, const std::string& verb, bool diff) {
  std::vector<std::string> names;
  for (const report::ByName& b : report::kByNames)
    if (b.diff || !diff) names.emplace_back(b.name);
  add_choice(sub, "--by", by, verb + " by " + listed(names), names);
}

CLI::Option* add_limit(CLI::App& sub, size_t& limit, const std::string& help) {
  return sub.add_option("--limit", limit, help)->transform(whole_number<size_t>());
}

namespace {

void add_report_format(CLI::App& sub, std::string& format, bool describe) {
  std::string help = describe ? "Output format:" : "Output format (as sprofil report)";
  std::vector<std::string> names;
  for (const report::Exporter* e : report::exporters()) {
    if (describe) help += "\n  " + std::string(e->name()) + ": " + std::string(e->description());
    names.emplace_back(e->name());
  }
  add_choice(sub, "--format", format, help, names);
}

}  // namespace

report::Options ReportRequest::options(bool full_names) const {
  report::Options opts;
  report::parse_by(by, &opts.by);
  opts.short_names = !full_names && report::find_exporter(format) == &report::text_exporter();
  opts.limit = limit;
  return opts;
}

void add_report_request(CLI::App& sub, ReportRequest& r, bool describe,
                        const std::string& out_help) {
  add_by(sub, r.by, "Aggregate");
  add_report_format(sub, r.format, describe);
  add_limit(sub, r.limit);
  add_output(sub, r.out, out_help);
}

int write_report(const char* cmd, const profile::Profile& p, const ReportRequest& r,
                 const report::Options& opts) {
  const report::Exporter* format = report::find_exporter(r.format);
  // An option that chooses rows, given to a format that writes every sample: said, not silent.
  const std::string why = " chooses the rows of a table; --format " + r.format +
                          " writes every sample and leaves the choice to its viewer: it is left "
                          "out";
  if (opts.limit && !format->takes_limit()) say(cmd, "warning: --limit" + why);
  if (opts.min_percent > 0 && !format->takes_min_percent())
    say(cmd, "warning: --min-percent" + why);
  std::vector<std::string> warnings;
  std::string err;
  const bool ok = report::write_report(p, *format, opts, r.out, &warnings, &err);
  if (format != &report::text_exporter())
    for (const std::string& w : warnings) say(cmd, "warning: " + report::printable(w));
  return ok ? 0 : fail(cmd, err);
}

bool ProfileInput::read(const char* cmd, profile::Profile* p, report::Options* opts) const {
  opts->object = object;
  opts->pids = pids;
  opts->comms = comms;
  opts->source = file;
  return read_input(cmd, file, p);
}

void add_profile_input(CLI::App& sub, ProfileInput& in, const std::string& rows,
                       const std::string& note) {
  sub.add_option("file", in.file, "Profile to read")->capture_default_str();
  sub.add_option("--object", in.object,
                 "Only " + rows + " of objects whose file name contains NAME");
  sub.add_option("--pid", in.pids, "Only this process (several allowed)" + note)
      ->transform(whole_number<int32_t>(1));
  sub.add_option("--comm", in.comms,
                 "Only processes with this command name (basename of argv[0]; several allowed)");
}

}  // namespace sprofil::tool
