// `sprofil diff BASE NEW`: compares two profiles row by row (src/report/diff.hpp).
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>

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
  bool force = false;
};

int run_diff(const DiffArgs& args) {
  profile::Profile a, b;
  if (!read_input("diff", args.base, &a) || !read_input("diff", args.next, &b)) return 1;
  // A profile without a sample has no shares: every row's would be 0 of 0, and its interval
  // and test would still read as a change. Refused, --force or not.
  const bool base_empty = a.total_samples() == 0, new_empty = b.total_samples() == 0;
  if (base_empty && new_empty)
    return fail("diff", args.base + " and " + args.next +
                            ": neither profile has samples: there is nothing to compare");
  if (base_empty || new_empty)
    return fail("diff", (base_empty ? args.base : args.next) + ": the " +
                            (base_empty ? "base" : "new") +
                            " profile has no samples: there is nothing to compare");
  if (const std::string why = report::diff_refusal(a, b); !why.empty() && !args.force)
    return fail("diff",
                args.base + " and " + args.next + ": " + why + " (--force compares them anyway)");
  report::Options opts;
  report::parse_by(args.by, &opts.by);
  symbolize::Symbolizer sym;
  report::DiffTable t = report::diff(a, b, sym, opts, args.alpha);
  t.base_source = args.base;
  t.new_source = args.next;
  std::ostringstream s;
  if (!report::find_diff_format(args.format)->write(t, args.limit, s))
    return fail("diff", "internal error: the page has no data marker");
  if (args.format != "text")
    for (const std::string& w : t.warnings) say("diff", "warning: " + report::printable(w));
  return write_text("diff", args.out, s.str(), 0);
}

}  // namespace

Run setup_diff(CLI::App& sub) {
  auto args = std::make_shared<DiffArgs>();
  sub.add_option("base", args->base, "The baseline profile")->required();
  sub.add_option("new", args->next, "The profile compared with it")->required();
  add_by(sub, args->by, "Compare", true);
  std::vector<std::string> formats;
  for (const report::DiffFormat& f : report::diff_formats()) formats.emplace_back(f.name);
  add_choice(sub, "--format", args->format, "Output format: " + listed(formats), formats);
  sub.add_option("--alpha", args->alpha,
                 "Family-wise error rate of the Holm-corrected tests (significance level)")
      ->check(real_number(1e-12, 0.5))
      ->capture_default_str();
  sub.add_flag("--force", args->force,
               "Compare profiles of a CPU clock and the wall clock (a warning instead of an "
               "error)");
  add_limit(sub, args->limit, "Text: show at most N rows (0 = all)");
  add_output(sub, args->out);
  return [args] { return run_diff(*args); };
}

}  // namespace sprofil::tool
