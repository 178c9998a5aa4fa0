#include "report/labels.hpp"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "symbolize/symbolize.hpp"

namespace sprofil::report {

std::string basename_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string command_of(const profile::Profile& p) {
  std::string s;
  for (const std::string& a : p.argv) {
    if (!s.empty()) s += ' ';
    s += a;
  }
  return s;
}

std::string hex_addr(uint64_t a) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, a);
  return buf;
}

std::string clock_label(profile::Clock c) {
  return std::string(profile::clock_name(c)) + " (" + profile::clock_description(c) + ")";
}

std::string format_samples(double s) {
  char buf[64];
  if (std::fabs(s - std::round(s)) < 1e-9)
    std::snprintf(buf, sizeof buf, "%.0f", s);
  else
    std::snprintf(buf, sizeof buf, "%.2f", s);
  return buf;
}

namespace {

// The length of the valid UTF-8 sequence at s[i], or 0 (overlong forms, surrogates and code
// points above U+10FFFF are invalid).
size_t utf8_length(const std::string& s, size_t i) {
  auto b = [&](size_t k) { return k < s.size() ? static_cast<unsigned char>(s[k]) : 0u; };
  unsigned c = b(i);
  auto cont = [&](size_t k) { return (b(k) & 0xC0) == 0x80; };
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(i + 1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    unsigned c1 = b(i + 1);
    if (c == 0xE0 && c1 < 0xA0) return 0;
    if (c == 0xED && c1 > 0x9F) return 0;
    return cont(i + 1) && cont(i + 2) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    unsigned c1 = b(i + 1);
    if (c == 0xF0 && c1 < 0x90) return 0;
    if (c == 0xF4 && c1 > 0x8F) return 0;
    return cont(i + 1) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  }
  return 0;
}

std::string escaped_byte(unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02x", c);
  return buf;
}

}  // namespace

std::string printable(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_length(s, i);
    unsigned char c = static_cast<unsigned char>(s[i]);
    bool c1 = n == 2 && c == 0xC2 && static_cast<unsigned char>(s[i + 1]) < 0xA0;
    if (n == 0 || c < 0x20 || c == 0x7F || c1) {
      out += escaped_byte(c);
      if (c1) out += escaped_byte(static_cast<unsigned char>(s[i + 1]));
      i += c1 ? 2 : 1;
      continue;
    }
    out.append(s, i, n);
    i += n;
  }
  return out;
}

std::string expand_tabs(const std::string& line, size_t stop) {
  if (line.find('\t') == std::string::npos) return line;
  std::string out;
  size_t column = 0;
  for (size_t i = 0; i < line.size();) {
    if (line[i] == '\t') {
      const size_t to = (column / stop + 1) * stop;
      out.append(to - column, ' ');
      column = to;
      ++i;
      continue;
    }
    const size_t n = std::max<size_t>(utf8_length(line, i), 1);  // an invalid byte: one column
    out.append(line, i, n);
    i += n;
    ++column;
  }
  return out;
}

std::string valid_utf8(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_length(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    out.append(s, i, n);
    i += n;
  }
  return out;
}

double rounded(double x, int digits) {
  if (!std::isfinite(x)) return x;
  char buf[400];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return std::strtod(buf, nullptr);
}

double significant(double x, int digits) {
  if (!std::isfinite(x)) return x;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, x);
  return std::strtod(buf, nullptr);
}

// The most CPU per process that its start-up before sampling is taken to explain (coverage_of).
constexpr double kStartUpNs = 10e6;

Coverage coverage_of(const profile::Profile& p, uint64_t total_samples, bool kept) {
  Coverage c;
  if (profile::counts_off_cpu(p.clock) || p.cpu_ns == 0 || p.tick_ns == 0) return c;
  c.known = true;
  double sampled_ns = double(total_samples) * double(p.tick_ns);
  c.ratio = sampled_ns / double(p.cpu_ns);
  // Far below: under half the CPU time, and enough CPU time for 20 ticks, so that the few
  // ticks of a short run (and a tick's quantisation) do not warn.
  if (c.ratio < 0.5 && double(p.cpu_ns) >= 20.0 * double(p.tick_ns)) {
    char what[320];
    std::snprintf(what, sizeof what,
                  "the samples cover only %.1f%% of the process CPU time (%s x %.6g ms = %.3f s "
                  "of %.3f s)",
                  100.0 * c.ratio, count_of(total_samples, "sample", "samples").c_str(),
                  double(p.tick_ns) / 1e6, sampled_ns / 1e9, double(p.cpu_ns) / 1e9);
    // Many short processes (a shell loop, a build): each one's CPU before its sampling began
    // (the loader, the agent: 1-5 ms a process on the VMs of docs/benchmarks.md) is in its CPU
    // time and in no sample. When that explains what is missing, say so, not blocked signals.
    const size_t n = p.processes.size();
    const double missing_each = n ? (double(p.cpu_ns) - sampled_ns) / double(n) : 0;
    char why[240];
    const double lost_ns = double(p.lost) * double(p.tick_ns);
    if (lost_ns >= 0.5 * (double(p.cpu_ns) - sampled_ns))
      // Lost samples: a full ring, or time the kernel throttled the sampling (throttled_note).
      std::snprintf(why, sizeof why, "%s were lost (%.3f s: %s)",
                    count_of(p.lost, "sample", "samples").c_str(), lost_ns / 1e9,
                    p.throttled ? "time the kernel throttled the sampling"
                                : "dropped from a full ring, or not counted");
    else if (n >= 2 && missing_each <= kStartUpNs)
      std::snprintf(why, sizeof why,
                    "the %s%zu processes%s average %.1f ms of CPU, and each one's start-up "
                    "before its sampling began (the loader, the agent) is CPU time no sample "
                    "stands for",
                    kept ? "" : "run's ", n, kept ? " kept" : "",
                    double(p.cpu_ns) / double(n) / 1e6);
    else
      std::snprintf(why, sizeof why,
                    "threads that block the profiling signal, or a program that took over the "
                    "signal or the clock, were not sampled");
    c.warning = std::string(what) + ": " + why;
  }
  return c;
}

std::string process_filter(const Options& opts) {
  std::string s;
  for (int32_t pid : opts.pids) s += (s.empty() ? "--pid " : " --pid ") + std::to_string(pid);
  for (const std::string& c : opts.comms) s += (s.empty() ? "--comm " : " --comm ") + printable(c);
  return s;
}

std::string kept_processes(const profile::Profile& p, const Options& opts) {
  if (!filters_processes(opts)) return "";
  std::string s = std::to_string(p.processes.size());
  if (opts.whole_run != nullptr)
    s += " of " + std::to_string(opts.whole_run->processes.size()) + " stored";
  return s + " (" + process_filter(opts) + ")";
}

bool shortened(const std::string& name, const std::set<std::string>* full) {
  return name.size() > kShortNameAbove && !(full && full->count(name));
}

std::set<std::string> names_short_alike(const std::vector<std::string>& names) {
  std::map<std::string, std::set<std::string>> by_short;
  for (const std::string& n : names)
    if (shortened(n)) by_short[symbolize::short_name(n)].insert(n);
  std::set<std::string> alike;
  for (const std::string& n : names)  // a short name a kept name already has
    if (!shortened(n)) {
      if (const auto it = by_short.find(n); it != by_short.end()) {
        alike.insert(it->second.begin(), it->second.end());
        by_short.erase(it);
      }
    }
  for (const auto& [short_form, whole] : by_short)
    if (whole.size() > 1) alike.insert(whole.begin(), whole.end());
  return alike;
}

std::vector<std::string> shown_names(const std::vector<Row>& rows) {
  std::vector<std::string> names;
  for (const Row& r : rows) {
    names.push_back(r.name);
    for (const symbolize::Frame& f : r.frames) names.push_back(f.function);
  }
  return names;
}

std::string file_line(const std::string& file, int line) {
  return (file.empty() ? std::string("??") : basename_of(file)) + ":" + std::to_string(line);
}

std::string line_label(const Row& r, const std::function<std::string(const std::string&)>& name) {
  std::string s =
      file_line(r.file, r.line) + " " +
      name(!r.frames.empty() && !r.frames[0].function.empty() ? r.frames[0].function : r.name);
  for (size_t i = 1; i < r.frames.size(); ++i) {
    s += " <- " + file_line(r.frames[i].file, r.frames[i].line);
    if (!r.frames[i].function.empty()) s += " " + name(r.frames[i].function);
  }
  return s;
}

std::string label_of(const Row& r, By by, bool short_names, const std::set<std::string>* full) {
  auto shown = [&](const std::string& name) {
    return printable(short_names && shortened(name, full) ? symbolize::short_name(name) : name);
  };
  switch (by) {
    case By::kFunction:
      return shown(r.name);
    case By::kObject:
      return printable(r.name);
    case By::kLine:
      return printable(line_label(r, [&](const std::string& name) {
        return short_names && shortened(name, full) ? symbolize::short_name(name) : name;
      }));
    case By::kAddress:
      if (r.object.empty()) return hex_addr(r.address) + " " + shown(r.name);
      // (Processes that ran it at different load addresses: the object's address alone.)
      return (r.address != 0 ? hex_addr(r.address) + " " : std::string()) + "(" +
             hex_addr(r.vaddr) + " in object) " + shown(r.name);
  }
  return r.name;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

namespace {
// "PID (COMM), ..." of up to five of `ps`, then " and N more".
std::string named(const std::vector<const profile::Process*>& ps) {
  constexpr size_t kNamed = 5;
  std::string s;
  for (size_t i = 0; i < ps.size() && i < kNamed; ++i)
    s += (i ? ", " : "") + std::to_string(ps[i]->pid) + " (" + ps[i]->comm + ")";
  if (ps.size() > kNamed) s += " and " + std::to_string(ps.size() - kNamed) + " more";
  return s;
}
}  // namespace

std::string sandboxed_note(const profile::Profile& p) {
  std::vector<const profile::Process*> in;
  for (const profile::Process& pr : p.processes)
    if (pr.flags & SPROF_F_SANDBOXED) in.push_back(&pr);
  if (in.empty()) return "";
  return (in.size() == 1 ? "process " : std::to_string(in.size()) + " processes: ") + named(in) +
         " installed" +
         " a seccomp filter; sprofil then made no system call of its own there (the filter "
         "could deny it and kill the program): the threads and processes started after it "
         "were not sampled, and with a signal per sample sampling stopped at it";
}

std::string throttled_note(const profile::Profile& p) {
  if (p.throttled == 0) return "";
  return "the kernel throttled the sampling " + count_of(p.throttled, "time", "times") +
         " (its perf interrupts passed kernel.perf_event_max_sample_rate, which it also lowers "
         "itself when they take long): the throttled time is counted as lost samples; record "
         "with a lower -F, or raise the limit";
}

std::vector<RunNote> run_notes(const profile::Profile& p) {
  std::vector<RunNote> out;
  if (std::string n = throttled_note(p); !n.empty()) out.push_back({"throttled", std::move(n)});
  if (std::string n = profile::unsampled_threads_note(p); !n.empty())
    out.push_back({"short_threads", std::move(n)});
  if (std::string n = profile::unsampled_processes_note(p); !n.empty())
    out.push_back({"short_processes", std::move(n)});
  if (std::string n = profile::unwaited_note(p); !n.empty())
    out.push_back({"unwaited", std::move(n)});
  return out;
}

std::string unfinished_note(const profile::Profile& p) {
  if (p.finished()) return "";
  std::vector<const profile::Process*> open;
  for (const profile::Process& pr : p.processes)
    if (!(pr.flags & SPROF_F_FINISHED)) open.push_back(&pr);
  // A process sampled from outside has its CPU time (its periods) whatever its end; one whose
  // agent wrote no end has none.
  bool unknown = p.cpu_ns == 0;
  for (const profile::Process* pr : open) unknown |= pr->cpu_ns == 0;
  if (p.processes.size() <= 1 || open.empty())
    return std::string(
               "the profile did not finish cleanly (the program crashed, was killed, or "
               "is still running): its samples up to then are counted") +
           (unknown ? "; its CPU time and effective rate are unknown" : "");
  return std::to_string(open.size()) + " of " + std::to_string(p.processes.size()) +
         " processes did not finish cleanly (crashed, killed, or still running): " + named(open) +
         "; their samples up to then are counted" +
         (unknown ? "; their CPU time and effective rate are unknown" : "");
}

}  // namespace sprofil::report
