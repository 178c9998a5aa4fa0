// The HTML report (`--format html`): one self-contained page, html_page.html, with the profile's
// data embedded as JSON. The page draws everything itself (inline SVG and positioned boxes from
// a short script): the header, a sortable and filterable function table with each share's 95%
// interval, the objects, each object's address-space histogram with function boundaries and
// zoom, an object -> function -> line icicle, and each function's lines.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "format/sprof_format.h"
#include "report/annotate.hpp"
#include "report/exporter.hpp"
#include "report/labels.hpp"
#include "report/page.hpp"

namespace sprofil::report {

using nlohmann::json;
using profile::Profile;
using profile::Region;

namespace {

constexpr std::string_view kPage =
#include "html_page_html.inc"
    ;
// The hottest functions get their annotation (source lines and instructions) in the page.
constexpr size_t kAnnotated = 20;

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

json header_rows(const Profile& p, const Options& opts, uint64_t total, double tick_seconds) {
  const bool wall = profile::counts_off_cpu(p.clock);
  json h = json::array();
  auto add = [&](const char* k, const std::string& v) { h.push_back({k, valid_utf8(v)}); };
  add("command", command_of(p));
  const bool filtered = filters_processes(opts);
  if (filtered)
    add("filter", process_filter(opts) + ": every figure here is of the processes it keeps");
  if (!opts.source.empty()) add("profile", opts.source);
  add("clock", clock_label(p.clock));
  add("requested rate", std::to_string(p.requested_hz) + " Hz");
  add("effective rate",
      p.effective_hz > 0 ? fmt("%.1f Hz per CPU-second", p.effective_hz) : std::string("unknown"));
  add("tick", fmt("%.6g ms per sample", double(p.tick_ns) / 1e6));
  add("samples", std::to_string(total) + " (" + fmt("%.3f", double(total) * tick_seconds) +
                     (wall ? " wall-clock seconds of all threads)" : " CPU seconds estimated)"));
  add("delivered", std::to_string(p.delivered) + " delivered, " + std::to_string(p.counted()) +
                       " counted, " + std::to_string(p.lost) + " lost");
  add("overflow", count_of(p.overflow, "sample", "samples") + " outside any object");
  if (p.cpu_ns != 0) add("process CPU", fmt("%.3f s", double(p.cpu_ns) / 1e9));
  if (filtered)
    add("processes", kept_processes(p, opts));
  else if (p.run)
    add("processes", std::to_string(p.processes.size()) + " stored, " +
                         std::to_string(p.dropped_processes) + " without samples not stored");
  if (p.run_cpu_ns != 0) {
    const char* what = filtered ? " CPU has no sample (start-up before sampling)"
                       : wall   ? " is in no process's profile"
                                : " has no sample";
    add("unsampled CPU", fmt("%.3f s", double(profile::unsampled_cpu_ns(p)) / 1e9) +
                             (filtered ? " of the kept processes' " : " of the run's ") +
                             fmt("%.3f s", double(p.run_cpu_ns) / 1e9) + what);
  }
  const Coverage cov = coverage_of(p, total, filtered);
  if (!cov.warning.empty()) add("warning", cov.warning);
  if (const std::string note = unfinished_note(p); !note.empty()) add("finished", "no: " + note);
  if (const std::string note = sandboxed_note(p); !note.empty()) add("seccomp", note);
  for (const RunNote& n : run_notes(p)) add(n.name, n.text);
  return h;
}

// Rows are keyed by what the function table shows: object path, name and command.
using RowKey = std::tuple<std::string, std::string, std::string>;
RowKey key_of(const Row& r) {
  return {r.object_path, r.name, r.comm};
}

}  // namespace

class HtmlExporter final : public Exporter {
 public:
  std::string_view name() const override { return "html"; }
  std::string_view description() const override {
    return "a self-contained page: tables, intervals, address-space histograms, drill-down";
  }
  std::string_view default_path() const override { return "sprofil.html"; }
  bool needs_table() const override { return false; }       // it aggregates three ways itself
  bool takes_min_percent() const override { return true; }  // its tables' rows

  bool render(const ExportInput& in, std::string* bytes, std::string* error) const override {
    const Profile& p = in.profile;
    Options o = in.options;
    o.limit = 0;  // the page filters and pages rows itself
    o.by = By::kFunction;
    const Table fns = aggregate(p, in.symbolizer, o);
    o.by = By::kObject;
    o.progress = nullptr;  // reported once, by the first pass
    const Table objs = aggregate(p, in.symbolizer, o);
    o.by = By::kLine;
    const Table lines = aggregate(p, in.symbolizer, o);

    json d;
    d["title"] = valid_utf8(command_of(p));
    d["total"] = fns.total_samples;
    d["per_process"] = fns.per_process;
    d["header"] = header_rows(p, in.options, fns.total_samples, fns.tick_seconds);
    std::map<RowKey, size_t> fn_index;
    json f = json::array();
    for (const Row& r : fns.rows) {
      fn_index.emplace(key_of(r), f.size());
      f.push_back({valid_utf8(r.name), valid_utf8(r.object), valid_utf8(r.comm),
                   rounded(r.samples, 6), significant(r.percent, 8), significant(r.ci95_lo, 8),
                   significant(r.ci95_hi, 8), significant(r.seconds, 9)});
    }
    d["functions"] = std::move(f);
    json ob = json::array();
    for (const Row& r : objs.rows)
      ob.push_back({valid_utf8(r.name), valid_utf8(r.object_path), rounded(r.samples, 6),
                    significant(r.percent, 8), significant(r.ci95_lo, 8), significant(r.ci95_hi, 8),
                    significant(r.seconds, 9)});
    d["objects"] = std::move(ob);
    json ln = json::array();
    for (const Row& r : lines.rows) {
      auto it = fn_index.find(key_of(r));
      if (it == fn_index.end()) continue;  // a function the filters dropped
      ln.push_back({it->second, valid_utf8(r.file), r.line, rounded(r.samples, 6)});
    }
    d["lines"] = std::move(ln);
    d["hist"] = histograms(in, o, fns.per_process, fn_index);
    d["annotations"] = annotations(in, o, fns);

    if (!fill_page(kPage, "sprofil report", d.dump(-1, ' ', false, json::error_handler_t::replace),
                   bytes)) {
      *error = "internal error: the page template lacks a marker";
      return false;
    }
    return true;
  }

 private:
  // `sprofil annotate`'s text for the hottest functions, keyed by their row in the function
  // table (the page shows it in the function's detail).
  static json annotations(const ExportInput& in, const Options& o, const Table& fns) {
    AnnotateOptions ao;
    ao.top = kAnnotated;
    ao.report = o;
    ao.report.by = By::kFunction;
    const Annotation a = annotate(in.profile, in.symbolizer, ao);
    json out = json::object();
    for (const AnnotatedFunction& f : a.functions) {
      size_t row = fns.rows.size();
      for (size_t i = 0; i < fns.rows.size() && i < 4 * kAnnotated; ++i)
        if (fns.rows[i].name == f.name && fns.rows[i].object_path == f.object_path &&
            fns.rows[i].comm == f.comm) {
          row = i;
          break;
        }
      if (row == fns.rows.size() || out.contains(std::to_string(row))) continue;
      Annotation one;
      one.source = a.source;
      one.total_samples = a.total_samples;
      one.functions.push_back(f);
      std::ostringstream text;
      write_annotation_text(one, text);
      out[std::to_string(row)] = valid_utf8(text.str());
    }
    return out;
  }

  // One histogram per region with samples that the options keep (--pid, --comm, --object; with
  // --user-only the user part of each bin): its non-zero bins at link-time addresses and the
  // functions with samples in it (their range and row in the function table; rows are keyed by
  // command when `per_process`).
  static json histograms(const ExportInput& in, const Options& o, bool per_process,
                         const std::map<RowKey, size_t>& fn_index) {
    const Profile& p = in.profile;
    std::vector<Piece> pieces = attribute(p, in.symbolizer, o);
    std::map<size_t, std::set<std::tuple<uint64_t, uint64_t, size_t>>> fns_of;
    for (const Piece& pc : pieces) {
      if (pc.region == SIZE_MAX || pc.sym == nullptr) continue;
      const Region& r = p.regions[pc.region];
      const std::string comm = per_process && pc.process < p.processes.size()
                                   ? p.processes[pc.process].comm
                                   : std::string();
      auto it = fn_index.find({r.path, pc.sym->name, comm});
      if (it != fn_index.end()) fns_of[pc.region].insert({pc.sym->start, pc.sym->end, it->second});
    }
    json out = json::array();
    for (size_t ri = 0; ri < p.regions.size(); ++ri) {
      const Region& r = p.regions[ri];
      if (!region_selected(p, r, o)) continue;
      json bins = json::array();
      double total = 0;
      uint64_t first = UINT64_MAX, last = 0;
      const uint64_t base = r.start - r.load_bias;
      r.for_each_bin([&](uint64_t i, uint64_t count, uint64_t system) {
        count_bin(o, &count, &system);  // --user-only: the user part, as the tables count
        if (count == 0) return;
        const uint64_t a = base + i * r.bin_size;
        bins.push_back({a, count});
        total += double(count);
        first = std::min(first, a);
        last = std::max(last, a + r.bin_size);
      });
      if (bins.empty()) continue;
      std::string label = basename_of(r.path);
      if (per_process && r.process < p.processes.size())
        label += " [" + p.processes[r.process].comm + " " +
                 std::to_string(p.processes[r.process].pid) + "]";
      json fns = json::array();
      for (const auto& [s, e, fi] : fns_of[ri]) fns.push_back({s, e, fi});
      const uint64_t pad = std::max<uint64_t>((last - first) / 50, r.bin_size);
      out.push_back({{"object", valid_utf8(label)},
                     {"path", valid_utf8(r.path)},
                     {"lo", base},
                     {"hi", base + (r.end - r.start)},
                     {"view_lo", first > base + pad ? first - pad : base},
                     {"view_hi", std::min(last + pad, base + (r.end - r.start))},
                     {"bin", r.bin_size},
                     {"total", total},
                     {"bins", std::move(bins)},
                     {"fns", std::move(fns)}});
    }
    std::stable_sort(out.begin(), out.end(), [](const json& a, const json& b) {
      return a["total"].get<double>() > b["total"].get<double>();
    });
    return out;
  }
};

const Exporter& html_exporter() {
  static const HtmlExporter e;
  return e;
}

}  // namespace sprofil::report
