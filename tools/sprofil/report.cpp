// `sprofil report`: reads a .sprof file and prints or exports a report (src/report).
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "profile/reader.hpp"
#include "report/exporter.hpp"
#include "report/labels.hpp"
#include "subcommands.hpp"

namespace sprofil::tool {
namespace {

struct ReportArgs {
  std::string file = "sprofil.data";
  std::string by = "function";
  std::string format = "text";
  std::string object;
  std::vector<int32_t> pids;
  std::vector<std::string> comms;
  std::string out;
  size_t limit = 0;
  double min_percent = 0;
  bool inline_frames = false;
  bool full_names = false;
  bool user_only = false;
};

// "sprofil: symbolizing 3/12 libc.so.6" on a terminal, erased when done.
void show_progress(size_t done, size_t total, const std::string& object) {
  if (done < total)
    std::fprintf(stderr, "\rsprofil: symbolizing %zu/%zu %s\033[K", done + 1, total,
                 report::basename_of(object).c_str());
  else
    std::fputs("\r\033[K", stderr);
}

int run_report(const ReportArgs& args) {
  report::Options opts;
  report::parse_by(args.by, &opts.by);
  const report::Exporter* format = report::find_exporter(args.format);
  opts.inline_frames = args.inline_frames;
  opts.short_names = !args.full_names && format == &report::text_exporter();
  opts.limit = args.limit;
  opts.min_percent = args.min_percent;
  opts.object = args.object;
  opts.pids = args.pids;
  opts.comms = args.comms;
  opts.source = args.file;
  opts.user_only = args.user_only;
  if (::isatty(STDERR_FILENO)) opts.progress = show_progress;
  profile::Profile p;
  std::string err;
  if (!profile::read_profile(args.file, &p, &err)) {
    return fail("report", args.file + ": " + err);
  }
  std::vector<std::string> warnings;
  const bool ok = report::write_report(p, *format, opts, args.out, &warnings, &err);
  if (format != &report::text_exporter())
    for (const std::string& w : warnings) say("report", "warning: " + report::printable(w));
  if (!ok) {
    return fail("report", err);
  }
  return 0;
}

}  // namespace

Run setup_report(CLI::App& sub) {
  auto args = std::make_shared<ReportArgs>();
  sub.add_option("file", args->file, "Profile to read")->capture_default_str();
  add_choice(sub, "--by", args->by, "Aggregate by function, line, object or address",
             {"function", "line", "object", "address"});
  sub.add_flag("--inline", args->inline_frames,
               "With --by line: one row per inline chain, showing the inlined frames' lines");
  sub.add_flag("--full-names", args->full_names,
               "Text: keep the parameter lists and template arguments of long C++ names (JSON/CSV "
               "always do)");
  sub.add_flag("--user-only", args->user_only,
               "Shares of user time only: leave out the kernel time the profile records per "
               "row (compare with perf record -e cpu-clock:u)");
  sub.add_option("--limit", args->limit, "Show at most N rows (0 = all)");
  sub.add_option("--min-percent", args->min_percent, "Hide rows below P percent");
  sub.add_option("--object", args->object, "Only rows of objects whose file name contains NAME");
  add_process_filter(sub, args->pids, args->comms, "; percentages are of what is kept");
  std::string formats;
  std::vector<std::string> names;
  for (const report::Exporter* e : report::exporters()) {
    formats += "\n  " + std::string(e->name()) + ": " + std::string(e->description());
    names.emplace_back(e->name());
  }
  add_choice(sub, "--format", args->format, "Output format:" + formats, names);
  sub.add_option("-o,--output", args->out,
                 "Output file (default: stdout; sprofil.pb.gz for pprof, gmon.out for gmon)");
  return [args] { return run_report(*args); };
}

}  // namespace sprofil::tool
