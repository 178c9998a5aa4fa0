// `sprofil diff`: see diff.hpp for the statistics.
#include "report/diff.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <tuple>

#include "profile/merge.hpp"
#include "report/json_out.hpp"
#include "report/labels.hpp"

namespace sprofil::report {
namespace {

constexpr double kZ95 = 1.959963984540054;

// `with_comm`: both profiles split their rows by process command (diff.hpp).
std::string key_of(const Row& r, By by, bool with_comm) {
  std::string k = (with_comm ? r.comm : std::string()) + '\0' + r.object + '\0' + r.name;
  if (by == By::kLine) k += '\0' + r.file + '\0' + std::to_string(r.line);
  return k;
}

std::string row_label(const DiffRow& r, By by, const std::set<std::string>& full) {
  Row tmp;
  tmp.name = r.name;
  tmp.object = r.object;
  tmp.file = r.file;
  tmp.line = r.line;
  return label_of(tmp, by, true, &full);
}

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// What a number of a diff row is, which says how each format writes it: JSON rounds it to
// what the data supports (`digits` decimals, or significant digits), CSV prints it with `csv`.
struct NumberKind {
  bool significant_digits;
  int digits;
  const char* csv;
  double json(double x) const {
    return significant_digits ? significant(x, digits) : rounded(x, digits);
  }
};
constexpr NumberKind kPercent{false, 4, "%.6f"}, kSeconds{true, 6, "%.9g"}, kP{true, 4, "%.6g"},
    kSamples{false, 3, "%.6g"};

// A diff row's numbers (SPROFIL_DIFF_NUMBERS, diff.hpp): each one's name, field and kind.
struct DiffColumn {
  const char* name;
  double DiffRow::*field;
  const NumberKind& kind;
};
#define SPROFIL_DIFF_COLUMN_(field, kind, initial) {#field, &DiffRow::field, kind},
constexpr DiffColumn kColumns[] = {SPROFIL_DIFF_NUMBERS(SPROFIL_DIFF_COLUMN_)};
#undef SPROFIL_DIFF_COLUMN_

}  // namespace

double two_proportion_p(double x1, double n1, double x2, double n2) {
  if (n1 <= 0 || n2 <= 0) return 1;
  double p1 = x1 / n1, p2 = x2 / n2, pooled = (x1 + x2) / (n1 + n2);
  double se = std::sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2));
  if (se <= 0) return p1 == p2 ? 1 : 0;
  double z = std::fabs(p2 - p1) / se;
  return std::erfc(z / std::sqrt(2.0));
}

std::vector<double> holm(const std::vector<double>& p) {
  std::vector<size_t> order(p.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] < p[b]; });
  std::vector<double> adj(p.size(), 1);
  double running = 0;
  const size_t m = p.size();
  for (size_t k = 0; k < m; ++k) {
    double v = std::min(1.0, double(m - k) * p[order[k]]);
    running = std::max(running, v);  // step-down: adjusted p-values never decrease
    adj[order[k]] = running;
  }
  return adj;
}

Interval newcombe(double x1, double n1, double x2, double n2) {
  Interval a = wilson(x1, n1, kZ95), b = wilson(x2, n2, kZ95);
  double p1 = n1 > 0 ? x1 / n1 : 0, p2 = n2 > 0 ? x2 / n2 : 0, d = p2 - p1;
  Interval iv;
  iv.lo = d - std::sqrt((p2 - b.lo) * (p2 - b.lo) + (a.hi - p1) * (a.hi - p1));
  iv.hi = d + std::sqrt((b.hi - p2) * (b.hi - p2) + (p1 - a.lo) * (p1 - a.lo));
  return iv;
}

namespace {
std::string clock_difference(const profile::Profile& base, const profile::Profile& next) {
  return profile::clock_difference(base, next, "the base profile", "the new one");
}
}  // namespace

std::string diff_refusal(const profile::Profile& base, const profile::Profile& next) {
  return profile::same_measure(base.clock, next.clock) ? "" : clock_difference(base, next);
}

DiffTable diff(const profile::Profile& base, const profile::Profile& next,
               symbolize::Symbolizer& sym, const Options& opts_in, double alpha) {
  Options opts = opts_in;
  opts.limit = 0;
  opts.min_percent = 0;
  opts.inline_frames = false;
  Table a = aggregate(base, sym, opts);
  Table b = aggregate(next, sym, opts);
  DiffTable t;
  t.by = opts.by;
  t.alpha = alpha;
  t.base_total = a.total_samples;
  t.new_total = b.total_samples;
  t.base_tick_seconds = a.tick_seconds;
  t.new_tick_seconds = b.tick_seconds;
  // What makes the comparison doubtful first: another clock (of another quantity: diff_refusal,
  // when the caller went on), another program, a profile cut short.
  for (const std::string& w :
       {clock_difference(base, next),
        profile::program_difference(base, next, "the base profile", "the new one", true)})
    if (!w.empty()) t.warnings.push_back(w);
  if (const std::string note = unfinished_note(base); !note.empty())
    t.warnings.push_back("base: " + note);
  if (const std::string note = unfinished_note(next); !note.empty())
    t.warnings.push_back("new: " + note);
  for (const RunNote& n : run_notes(base)) t.warnings.push_back("base: " + n.text);
  for (const RunNote& n : run_notes(next)) t.warnings.push_back("new: " + n.text);
  // Rows per (command, name) only when both profiles are split by process: a merged profile
  // (one process) against a run's would otherwise match nothing.
  const bool by_comm = a.per_process && b.per_process;
  if (a.per_process != b.per_process)
    t.warnings.push_back(std::string("rows are compared without their process command: the ") +
                         (a.per_process ? "base" : "new") + " profile has several processes, the " +
                         (a.per_process ? "new" : "base") +
                         " one a single one (a merged or single-process profile)");
  add_warnings(&t.warnings, a.warnings);
  add_warnings(&t.warnings, b.warnings);

  std::map<std::string, size_t> index;
  auto row_for = [&](const Row& r) -> DiffRow& {
    auto [it, inserted] = index.emplace(key_of(r, opts.by, by_comm), t.rows.size());
    if (inserted) {
      DiffRow d;
      d.name = !by_comm || r.comm.empty() ? r.name : r.comm + ": " + r.name;
      d.object = r.object;
      d.file = r.file;
      d.line = r.line;
      t.rows.push_back(d);
    }
    return t.rows[it->second];
  };
  for (const Row& r : a.rows) row_for(r).base_samples += r.samples;
  for (const Row& r : b.rows) row_for(r).new_samples += r.samples;

  const double n1 = double(t.base_total), n2 = double(t.new_total);
  std::vector<double> p;
  for (DiffRow& r : t.rows) {
    r.base_percent = n1 > 0 ? 100 * r.base_samples / n1 : 0;
    r.new_percent = n2 > 0 ? 100 * r.new_samples / n2 : 0;
    Interval iv = newcombe(r.base_samples, n1, r.new_samples, n2);
    r.change = r.new_percent - r.base_percent;
    r.change_ci95_low = 100 * iv.lo;
    r.change_ci95_high = 100 * iv.hi;
    r.base_seconds = r.base_samples * t.base_tick_seconds;
    r.new_seconds = r.new_samples * t.new_tick_seconds;
    r.change_seconds = r.new_seconds - r.base_seconds;
    r.p_value = two_proportion_p(r.base_samples, n1, r.new_samples, n2);
    p.push_back(r.p_value);
  }
  t.compared = p.size();
  std::vector<double> adj = holm(p);
  for (size_t i = 0; i < t.rows.size(); ++i) {
    t.rows[i].p_adjusted = adj[i];
    t.rows[i].significant = adj[i] < alpha;
  }
  std::sort(t.rows.begin(), t.rows.end(), [](const DiffRow& x, const DiffRow& y) {
    if (x.significant != y.significant) return x.significant;
    if (std::fabs(x.change) != std::fabs(y.change))
      return std::fabs(x.change) > std::fabs(y.change);
    return std::tie(x.name, x.object, x.line) < std::tie(y.name, y.object, y.line);
  });
  return t;
}

void write_diff_text(const DiffTable& t, size_t limit, std::ostream& out) {
  size_t sig = size_t(
      std::count_if(t.rows.begin(), t.rows.end(), [](const DiffRow& r) { return r.significant; }));
  out << "# base: " << printable(t.base_source) << " ("
      << count_of(t.base_total, "sample", "samples") << ")\n# new:  " << printable(t.new_source)
      << " (" << count_of(t.new_total, "sample", "samples") << ")\n";
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "# %zu of %zu %s rows differ significantly (two-proportion z test, Holm-corrected "
                "over %zu rows, alpha %.3g)\n",
                sig, t.rows.size(), by_name(t.by), t.compared, t.alpha);
  out << buf;
  for (const std::string& w : t.warnings) out << "# warning: " << printable(w) << "\n";
  out << "#\n";
  std::snprintf(buf, sizeof buf, "%-3s %7s %7s %8s %19s %10s %9s  %s\n", "sig", "base%", "new%",
                "change", "95% interval (pp)", "time (s)", "p (Holm)", by_name(t.by));
  out << buf;
  // A label another row shares (one name in two objects), or an `[unknown]` one, is followed by
  // its object, as `report`'s text shows every row's.
  std::vector<std::string> names;
  for (const DiffRow& r : t.rows) names.push_back(r.name);
  const std::set<std::string> full = names_short_alike(names);
  std::map<std::string, size_t> uses;
  for (const DiffRow& r : t.rows) ++uses[row_label(r, t.by, full)];
  size_t shown = 0;
  for (const DiffRow& r : t.rows) {
    if (limit != 0 && shown++ >= limit) break;
    std::snprintf(buf, sizeof buf, "%-3s %7.2f %7.2f %+8.2f [%+8.2f, %+8.2f] %+10.3f %9.2g  ",
                  r.significant ? "*" : "", r.base_percent, r.new_percent, r.change,
                  r.change_ci95_low, r.change_ci95_high, r.change_seconds, r.p_adjusted);
    const std::string label = row_label(r, t.by, full);
    out << buf << label;
    if (t.by != By::kObject && !r.object.empty() &&
        (uses[label] > 1 || ends_with(r.name, "[unknown]")))
      out << "  " << printable(r.object);
    out << "\n";
  }
}

void write_diff_json(const DiffTable& t, std::ostream& out) {
  nlohmann::json j;
  j["by"] = by_name(t.by);
  j["base"] = {{"source", valid_utf8(t.base_source)},
               {"total_samples", t.base_total},
               {"tick_seconds", t.base_tick_seconds}};
  j["new"] = {{"source", valid_utf8(t.new_source)},
              {"total_samples", t.new_total},
              {"tick_seconds", t.new_tick_seconds}};
  j["test"] = "two-proportion z test, two-sided";
  j["correction"] = "holm";
  j["alpha"] = t.alpha;
  j["compared"] = t.compared;
  j["warnings"] = json_strings(t.warnings);
  j["rows"] = nlohmann::json::array();
  for (const DiffRow& r : t.rows) {
    nlohmann::json row = json_named(r.name, r.object);
    row["significant"] = r.significant;
    for (const DiffColumn& c : kColumns) row[c.name] = c.kind.json(r.*c.field);
    if (t.by == By::kLine) {
      row["file"] = valid_utf8(r.file);
      row["line"] = r.line;
    }
    j["rows"].push_back(std::move(row));
  }
  write_json_document(j, out);
}

void write_diff_csv(const DiffTable& t, std::ostream& out) {
  out << "significant,";
  for (const DiffColumn& c : kColumns) out << c.name << ",";
  out << "name,object,file,line\n";
  char buf[128];
  for (const DiffRow& r : t.rows) {
    out << (r.significant ? 1 : 0) << ",";
    for (const DiffColumn& c : kColumns) {
      std::snprintf(buf, sizeof buf, c.kind.csv, r.*c.field);
      out << buf << ",";
    }
    out << csv_field(r.name) << "," << csv_field(r.object) << "," << csv_field(r.file) << ","
        << (r.line != 0 ? std::to_string(r.line) : std::string()) << "\n";
  }
}

std::span<const DiffFormat> diff_formats() {
  using T = const DiffTable&;
  static const DiffFormat kAll[] = {
      {"text",
       [](T t, size_t limit, std::ostream& out) {
         write_diff_text(t, limit, out);
         return true;
       }},
      {"json",
       [](T t, size_t, std::ostream& out) {
         write_diff_json(t, out);
         return true;
       }},
      {"csv",
       [](T t, size_t, std::ostream& out) {
         write_diff_csv(t, out);
         return true;
       }},
      {"html", [](T t, size_t, std::ostream& out) { return write_diff_html(t, out); }},
  };
  return kAll;
}

const DiffFormat* find_diff_format(std::string_view name) {
  for (const DiffFormat& f : diff_formats())
    if (name == f.name) return &f;
  return nullptr;
}

}  // namespace sprofil::report
