// `sprofil diff BASE NEW`: per-function (or object, or line) comparison of two profiles with
// the change's 95% interval and a significance test corrected for the number of rows compared.
//
// Rows come from report::aggregate (the rows `sprofil report` prints), one table per profile,
// matched by (object basename, name[, file, line]). For each row, with x samples of n in each
// profile:
//   - share p = x / n, its 95% Wilson interval [l, u] (report::wilson, as `report` shows);
//   - change d = p_new - p_base in percentage points, its 95% interval by Newcombe's hybrid
//     score method (method 10), built from the two Wilson intervals:
//       [d - sqrt((p_new - l_new)^2 + (u_base - p_base)^2), d + sqrt((u_new - p_new)^2 +
//       (p_base - l_base)^2)];
//   - a two-sided two-proportion z test (pooled), and the Holm (step-down Bonferroni) adjusted
//     p-value over every row compared; significant when adjusted p < alpha (0.05).
// Holm controls the family-wise error rate: in an A/A comparison the chance that any row at all
// is flagged is at most alpha, which is the promise "an A/A diff flags nothing" needs.
#pragma once

#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "report/report.hpp"

namespace sprofil::report {

// A diff row's numbers, in the order of the CSV's columns: X(field, kind, initial). A field's
// name is its JSON key and CSV column; its kind says how each format writes it (diff.cpp).
// Percentages are 0-100 and the change and its 95% interval percentage points; seconds are
// estimated time (samples x tick), the change new - base; p is two-sided, then Holm-adjusted.
// clang-format off
#define SPROFIL_DIFF_NUMBERS(X)                                                            \
  X(base_percent, kPercent, 0) X(new_percent, kPercent, 0) X(change, kPercent, 0)          \
  X(change_ci95_low, kPercent, 0) X(change_ci95_high, kPercent, 0)                         \
  X(base_seconds, kSeconds, 0) X(new_seconds, kSeconds, 0) X(change_seconds, kSeconds, 0)  \
  X(p_value, kP, 1) X(p_adjusted, kP, 1)                                                   \
  X(base_samples, kSamples, 0) X(new_samples, kSamples, 0)
// clang-format on

struct DiffRow {
  std::string name;  // function, object basename, or "function file:line" parts below
  std::string object;
  std::string file;
  int line = 0;
#define SPROFIL_DIFF_FIELD_(field, kind, initial) double field = initial;
  SPROFIL_DIFF_NUMBERS(SPROFIL_DIFF_FIELD_)
#undef SPROFIL_DIFF_FIELD_
  bool significant = false;
};

struct DiffTable {
  By by = By::kFunction;
  std::string base_source, new_source;
  uint64_t base_total = 0, new_total = 0;
  double base_tick_seconds = 0, new_tick_seconds = 0;
  double alpha = 0.05;
  size_t compared = 0;        // rows tested (the Holm family size)
  std::vector<DiffRow> rows;  // significant first, then by |change| descending
  std::vector<std::string> warnings;
};

// The two-sided p-value of the pooled two-proportion z test of x1/n1 against x2/n2.
double two_proportion_p(double x1, double n1, double x2, double n2);
// Holm step-down adjusted p-values, in the input's order.
std::vector<double> holm(const std::vector<double>& p);
// Newcombe's hybrid score interval of p2 - p1 (fractions), from the Wilson intervals.
Interval newcombe(double x1, double n1, double x2, double n2);

// Why `base` and `next` should not be compared, or "": their clocks measure different things
// (profile::same_measure: CPU time against thread time on and off the CPU), in merge's words
// (profile::clock_difference). `sprofil diff` refuses such a pair unless --force. Two CPU
// clocks (cpu, itimer, perf, sampler) count one quantity, whose shares compare: not refused.
std::string diff_refusal(const profile::Profile& base, const profile::Profile& next);

// opts.by chooses the rows (function, object or line; address is refused by the tool);
// opts.limit / min_percent are ignored (every row is compared). Rows are matched per process
// command only when both profiles have several processes (Table::per_process); otherwise by
// object and name alone, so that a merged profile compares with a run's. The warnings start
// with what makes the comparison doubtful: clocks that differ (profile::clock_difference,
// naming both: of one measure, or diff_refusal's reason when compared anyway), a
// different program (profile::program_difference by file name: a rebuild of the program, even
// in another directory, is the same program), either profile unfinished (unfinished_note,
// prefixed "base: " or "new: "), and rows compared without their command; then the two
// tables' symbolization warnings.
DiffTable diff(const profile::Profile& base, const profile::Profile& next,
               symbolize::Symbolizer& sym, const Options& opts, double alpha = 0.05);

void write_diff_text(const DiffTable& t, size_t limit, std::ostream& out);
void write_diff_json(const DiffTable& t, std::ostream& out);
void write_diff_csv(const DiffTable& t, std::ostream& out);
// A self-contained HTML page (diff_html.cpp): the JSON above drawn as a table with intervals.
// False only if the embedded page lacks its data marker (a build error).
bool write_diff_html(const DiffTable& t, std::ostream& out);

// The formats of `sprofil diff --format NAME`, in the order --help lists them: the writers
// above behind one signature (`limit` is the text's row limit; false only from html's).
struct DiffFormat {
  const char* name;
  bool (*write)(const DiffTable& t, size_t limit, std::ostream& out);
};
std::span<const DiffFormat> diff_formats();
// The format named `name`, or null.
const DiffFormat* find_diff_format(std::string_view name);

}  // namespace sprofil::report
