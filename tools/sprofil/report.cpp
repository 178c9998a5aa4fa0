// `sprofil report`: reads a .sprof file and prints or exports a report (src/report).
#include <cstdio>
#include <memory>
#include <string>

#include "report/report.hpp"
#include "subcommands.hpp"

#if __has_include("profile/reader.hpp")
#include "profile/reader.hpp"
#define SPROFIL_HAVE_READER 1
#endif

namespace sprofil::tool {

void register_report(CLI::App& app) {
  struct Args {
    std::string file = "sprofil.data";
    std::string by = "function";
    std::string format = "text";
    std::string object;
    std::string out;
    size_t limit = 0;
    double min_percent = 0;
    bool inline_frames = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("report", "Print or export a report of a .sprof profile");
  sub->add_option("file", args->file, "Profile to read")->capture_default_str();
  sub->add_option("--by", args->by, "Aggregate by function, line, object or address")
      ->check(CLI::IsMember({"function", "line", "object", "address"}))
      ->capture_default_str();
  sub->add_flag("--inline", args->inline_frames,
                "With --by line: one row per inline chain, showing the inlined frames' lines");
  sub->add_option("--limit", args->limit, "Show at most N rows (0 = all)");
  sub->add_option("--min-percent", args->min_percent, "Hide rows below P percent");
  sub->add_option("--object", args->object, "Only rows of objects whose file name contains NAME");
  sub->add_option("--format", args->format,
                  "text, json, csv, pprof (gzipped profile.proto), gmon (gmon.out of the main "
                  "executable for gprof) or folded (flame graphs)")
      ->check(CLI::IsMember({"text", "json", "csv", "pprof", "gmon", "folded"}))
      ->capture_default_str();
  sub->add_option("-o,--output", args->out,
                  "Output file (default: stdout; sprofil.pb.gz for pprof, gmon.out for gmon)");
  sub->callback([args]() {
    report::Options opts;
    report::Format format = report::Format::kText;
    report::parse_by(args->by, &opts.by);
    report::parse_format(args->format, &format);
    opts.inline_frames = args->inline_frames;
    opts.limit = args->limit;
    opts.min_percent = args->min_percent;
    opts.object = args->object;
    opts.source = args->file;
#ifdef SPROFIL_HAVE_READER
    profile::Profile p;
    std::string err;
    if (!profile::read_profile(args->file, &p, &err)) {
      std::fprintf(stderr, "sprofil report: %s: %s\n", args->file.c_str(), err.c_str());
      set_exit_code(1);
      return;
    }
    if (!report::write_report(p, format, opts, args->out, &err)) {
      std::fprintf(stderr, "sprofil report: %s\n", err.c_str());
      set_exit_code(1);
    }
#else
    std::fprintf(stderr, "sprofil report: %s: this build has no profile reader\n",
                 args->file.c_str());
    set_exit_code(1);
#endif
  });
}

}  // namespace sprofil::tool
