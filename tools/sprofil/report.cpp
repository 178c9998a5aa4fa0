// `sprofil report`: reads a .sprof file and prints or exports a report (src/report).
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "report/labels.hpp"
#include "subcommands.hpp"

namespace sprofil::tool {
namespace {

struct ReportArgs {
  ProfileInput input;
  ReportRequest request;
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
  // --inline splits a line's row by its inline chains: there is no such split of another row.
  if (args.inline_frames && args.request.by != "line")
    return usage_error("report",
                       "--inline needs --by line (it splits each source line's row by "
                       "its inline chains; this is --by " +
                           args.request.by + ")");
  report::Options opts = args.request.options(args.full_names);
  opts.inline_frames = args.inline_frames;
  opts.min_percent = args.min_percent;
  opts.user_only = args.user_only;
  if (::isatty(STDERR_FILENO)) opts.progress = show_progress;
  profile::Profile p;
  if (!args.input.read("report", &p, &opts)) return 1;
  return write_report("report", p, args.request, opts);
}

}  // namespace

Run setup_report(CLI::App& sub) {
  auto args = std::make_shared<ReportArgs>();
  add_profile_input(sub, args->input, "rows", "; percentages are of what is kept");
  sub.add_flag("--inline", args->inline_frames,
               "With --by line (and only there): one row per inline chain, showing the inlined "
               "frames' lines");
  sub.add_flag("--full-names", args->full_names,
               "Text: keep the parameter lists and template arguments of long C++ names (JSON/CSV "
               "always do)");
  sub.add_flag("--user-only", args->user_only,
               "Shares of user time only: leave out the kernel time the profile records per "
               "row (compare with perf record -e cpu-clock:u)");
  sub.add_option("--min-percent", args->min_percent, "Hide rows below P percent")
      ->check(real_number(0, 100));
  add_report_request(sub, args->request, true,
                     "Output file (default: stdout; sprofil.pb.gz for pprof, gmon.out for gmon)");
  return [args] { return run_report(*args); };
}

}  // namespace sprofil::tool
