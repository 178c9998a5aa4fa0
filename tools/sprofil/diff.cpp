// `sprofil diff BASE NEW`: compares two profiles row by row (src/report/diff.hpp).
#include <cstdio>
#include <fstream>
#include <iostream>
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
      std::fprintf(stderr, "sprofil diff: %s: %s\n", file->c_str(), err.c_str());
      return 1;
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
      std::fprintf(stderr, "sprofil diff: internal error: the page has no data marker\n");
      return 1;
    }
  } else {
    report::write_diff_text(t, args.limit, s);
  }
  if (args.format != "text")
    for (const std::string& w : t.warnings)
      std::fprintf(stderr, "sprofil diff: warning: %s\n", report::printable(w).c_str());
  if (args.out.empty() || args.out == "-") {
    std::cout << s.str() << std::flush;
    return std::cout ? 0 : 1;
  }
  std::ofstream f(args.out, std::ios::binary | std::ios::trunc);
  f << s.str();
  f.close();
  if (!f) {
    std::fprintf(stderr, "sprofil diff: %s: cannot write\n", args.out.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

Run setup_diff(CLI::App& sub) {
  auto args = std::make_shared<DiffArgs>();
  sub.add_option("base", args->base, "The baseline profile")->required();
  sub.add_option("new", args->next, "The profile compared with it")->required();
  sub.add_option("--by", args->by, "Compare by function, line or object")
      ->check(CLI::IsMember({"function", "line", "object"}))
      ->capture_default_str();
  sub.add_option("--format", args->format, "Output format: text, json, csv or html")
      ->check(CLI::IsMember({"text", "json", "csv", "html"}))
      ->capture_default_str();
  sub.add_option("--alpha", args->alpha,
                 "Family-wise error rate of the Holm-corrected tests (significance level)")
      ->check(CLI::Range(1e-12, 0.5))
      ->capture_default_str();
  sub.add_option("--limit", args->limit, "Text: show at most N rows (0 = all)");
  sub.add_option("-o,--output", args->out, "Output file (default: stdout)");
  return [args] { return run_diff(*args); };
}

}  // namespace sprofil::tool
