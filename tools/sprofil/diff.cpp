// `sprofil diff BASE NEW`: compares two profiles row by row (src/report/diff.hpp).
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>

#include "profile/reader.hpp"
#include "report/diff.hpp"
#include "report/labels.hpp"
#include "subcommands.hpp"

namespace sprofil::tool {
namespace {

struct DiffArgs {
  std::string base, next;
  std::string by = "function";
  std::string format = "text";
  std::string out;
  size_t limit = 0;
  double alpha = 0.05;
};

int run_diff(const DiffArgs& args) {
  profile::Profile a, b;
  std::string err;
  for (auto [file, p] : {std::pair{&args.base, &a}, std::pair{&args.next, &b}})
    if (!profile::read_profile(*file, p, &err)) {
      return fail("diff", *file + ": " + err);
    }
  report::Options opts;
  report::parse_by(args.by, &opts.by);
  symbolize::Symbolizer sym;
  report::DiffTable t = report::diff(a, b, sym, opts, args.alpha);
  t.base_source = args.base;
  t.new_source = args.next;
  std::ostringstream s;
  if (args.format == "json") {
    report::write_diff_json(t, s);
  } else if (args.format == "csv") {
    report::write_diff_csv(t, s);
  } else if (args.format == "html") {
    if (!report::write_diff_html(t, s)) {
      return fail("diff", "internal error: the page has no data marker");
    }
  } else {
    report::write_diff_text(t, args.limit, s);
  }
  if (args.format != "text")
    for (const std::string& w : t.warnings) say("diff", "warning: " + report::printable(w));
  return write_text("diff", args.out, s.str(), 0);
}

}  // namespace

Run setup_diff(CLI::App& sub) {
  auto args = std::make_shared<DiffArgs>();
  sub.add_option("base", args->base, "The baseline profile")->required();
  sub.add_option("new", args->next, "The profile compared with it")->required();
  add_choice(sub, "--by", args->by, "Compare by function, line or object",
             {"function", "line", "object"});
  add_choice(sub, "--format", args->format, "Output format: text, json, csv or html",
             {"text", "json", "csv", "html"});
  sub.add_option("--alpha", args->alpha,
                 "Family-wise error rate of the Holm-corrected tests (significance level)")
      ->check(CLI::Range(1e-12, 0.5))
      ->capture_default_str();
  sub.add_option("--limit", args->limit, "Text: show at most N rows (0 = all)");
  sub.add_option("-o,--output", args->out, "Output file (default: stdout)");
  return [args] { return run_diff(*args); };
}

}  // namespace sprofil::tool
