// `sprofil top`'s views (src/live/top.hpp) without a terminal: live::render_top_view writes to
// a memory FILE (open_memstream) a hand-made table, and the view of the delta of two hand-made
// snapshots over live_prog's text (counts placed at burn_hot and burn_cold by nm's addresses),
// aggregated as top aggregates; the header line's numbers and the rows are checked. And
// live::run_top's answer when the target cannot be reached.
#include <gtest/gtest.h>

#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "../report/test_util.hpp"
#include "live/top.hpp"
#include "profile/profile.hpp"
#include "report/report.hpp"
#include "symbolize/symbolize.hpp"

namespace sprofil::live_test {
namespace {

using namespace sprofil;

const std::string kProg = LIVE_PROG;

// What render_top_view writes, as a string.
std::string render(const profile::Profile& d, const report::Table& t, double secs, size_t limit,
                   bool tty) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  if (f == nullptr) {
    ADD_FAILURE() << "open_memstream failed";
    return "";
  }
  live::render_top_view(f, d, t, secs, limit, tty);
  std::fclose(f);
  std::string s(buf, len);
  free(buf);
  return s;
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

report::Row row(double samples, double pct, double lo, double hi, const std::string& name,
                const std::string& object) {
  report::Row r;
  r.samples = samples;
  r.percent = pct;
  r.ci95_lo = lo;
  r.ci95_hi = hi;
  r.name = name;
  r.object = object;
  return r;
}

// 42 samples in 0.5 s: two functions and the overflow.
struct HandMade {
  profile::Profile delta;
  report::Table table;
  HandMade() {
    delta.pid = 4242;
    delta.lost = 3;
    delta.overflow = 2;
    table.total_samples = 42;
    table.rows = {row(30, 71.43, 56.4, 82.9, "burn_hot(double, double)", "live_prog"),
                  row(10, 23.81, 13.5, 38.5, "burn_cold(double, double)", "live_prog"),
                  row(2, 4.76, 1.3, 15.8, "[overflow]", "")};
  }
};

const char* const kTitles = "  samples percent   ci95 low-high  function  object\n";
const char* const kHot = "       30   71.43   56.40-82.90    burn_hot(double, double)  live_prog\n";
const char* const kCold =
    "       10   23.81   13.50-38.50    burn_cold(double, double)  live_prog\n";
const char* const kOverflow = "        2    4.76    1.30-15.80    [overflow]  \n";

// Not a terminal (logs): the header, the titles, the rows, an empty line.
TEST(TopView, ForLogsHeaderRowsAndAnEmptyLine) {
  const HandMade h;
  EXPECT_EQ(render(h.delta, h.table, 0.5, 20, false),
            std::string("sprofil top: pid 4242  interval 0.50 s  samples 42 (84/s)  lost 3  "
                        "overflow 2\n") +
                kTitles + kHot + kCold + kOverflow + "\n");
}

// limit rows at most; 0 shows them all.
TEST(TopView, LimitCutsTheRows) {
  const HandMade h;
  const std::vector<std::string> one = lines_of(render(h.delta, h.table, 0.5, 1, false));
  ASSERT_EQ(one.size(), 4u);  // header, titles, one row, the empty line
  EXPECT_EQ(one[2] + "\n", kHot);
  EXPECT_EQ(one[3], "");
  EXPECT_EQ(lines_of(render(h.delta, h.table, 0.5, 0, false)).size(), 6u);
  EXPECT_EQ(lines_of(render(h.delta, h.table, 0.5, 3, false)).size(), 6u);
}

// On a terminal: the screen cleared first, the keys' help on the header, no empty line; no
// rate for an interval of 0.
TEST(TopView, OnATerminalClearsAndShowsTheKeys) {
  const HandMade h;
  EXPECT_EQ(render(h.delta, h.table, 0, 2, true),
            std::string("\033[H\033[2Jsprofil top: pid 4242  interval 0.00 s  samples 42 (0/s)  "
                        "lost 3  overflow 2   [q quit, p pause, s sort]\n") +
                kTitles + kHot + kCold);
}

// Names and paths as the text report shows them: a symbol or path cannot move the cursor or
// recolour the screen (control bytes and invalid UTF-8 as \xNN); a long C++ name is shortened,
// unless another would then read alike (two lambdas' thread functions), which stay whole.
TEST(TopView, NamesArePrintableAndShortUnlessAlike) {
  const std::string lambda1 =
      "std::thread::_State_impl<std::thread::_Invoker<std::tuple<main::{lambda()#1}> > >::_M_run()";
  const std::string lambda2 =
      "std::thread::_State_impl<std::thread::_Invoker<std::tuple<main::{lambda()#2}> > >::_M_run()";
  const std::string lone =
      "long ns::worker<std::map<std::string, std::vector<int> >, double>(std::map<std::string, "
      "std::vector<int> > const&, double)";
  profile::Profile d;
  d.pid = 9;
  report::Table t;
  t.total_samples = 40;
  t.rows = {row(10, 25, 1, 2, lambda1, "app"), row(10, 25, 1, 2, lambda2, "app"),
            row(10, 25, 1, 2, lone, "app"),
            row(10, 25, 1, 2, "evil\x1b[2J\x1b]0;pwned\x07", "lib\xff\x1b[31m.so")};
  const std::string out = render(d, t, 1, 0, false);
  for (char c : out)
    EXPECT_TRUE(c == '\n' || (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f))
        << "control character " << int(static_cast<unsigned char>(c)) << " in\n"
        << out;
  EXPECT_NE(out.find("  " + lambda1 + "  app\n"), std::string::npos) << out;
  EXPECT_NE(out.find("  " + lambda2 + "  app\n"), std::string::npos) << out;
  EXPECT_NE(out.find("  ns::worker  app\n"), std::string::npos) << out;
  EXPECT_NE(out.find("  evil\\x1b[2J\\x1b]0;pwned\\x07  lib\\xff\\x1b[31m.so\n"), std::string::npos)
      << out;
}

// An empty interval: zeros, the titles, no rows.
TEST(TopView, EmptyIntervalHasNoRows) {
  profile::Profile d;
  d.pid = 7;
  const report::Table t;
  EXPECT_EQ(render(d, t, 1.25, 20, false),
            std::string("sprofil top: pid 7  interval 1.25 s  samples 0 (0/s)  lost 0  overflow "
                        "0\n") +
                kTitles + "\n");
}

// A snapshot of live_prog (pid 777): a region over its text with `hot` and `cold` samples in
// burn_hot and burn_cold (in an anonymous namespace there), and the tallies.
struct Snapshot {
  uint64_t hot, cold, overflow, lost;
};
profile::Profile snapshot(const Snapshot& s) {
  const uint64_t bias = report_test::is_pie(kProg) ? 0x555555554000ull : 0;
  profile::Profile p = report_test::base_profile(1000000);
  p.pid = 777;
  p.argv = {kProg, "api", "5"};
  profile::Region r = report_test::text_region(kProg, bias, 4, SPROF_R_MAIN);
  const auto fns = report_test::nm_functions(kProg);
  std::vector<std::pair<uint64_t, uint64_t>> at;  // address, count
  for (const auto& [name, sym] : fns) {
    if (name.find("burn_hot(") != std::string::npos)
      at.push_back({sym.addr + bias + sym.size / 2, s.hot});
    if (name.find("burn_cold(") != std::string::npos)
      at.push_back({sym.addr + bias + sym.size / 2, s.cold});
  }
  EXPECT_EQ(at.size(), 2u) << "nm finds no burn_hot or burn_cold in " << kProg;
  std::sort(at.begin(), at.end());
  for (const auto& [addr, n] : at) report_test::add_at(&r, addr, n);
  p.regions.push_back(r);
  p.overflow = s.overflow;
  p.lost = s.lost;
  p.delivered = s.hot + s.cold + s.overflow + s.lost;
  return p;
}

// What top shows for one interval: only the samples the second snapshot added, by function.
TEST(TopView, DeltaOfTwoSnapshotsAsTopShowsIt) {
  const profile::Profile before = snapshot({10, 5, 1, 1});
  const profile::Profile after = snapshot({40, 15, 3, 4});
  const profile::Profile d = profile::delta(before, after);
  symbolize::Symbolizer sym;
  report::Options opts;
  opts.short_names = true;  // as run_top
  const report::Table t = report::aggregate(d, sym, opts);
  const std::vector<std::string> lines = lines_of(render(d, t, 1.0, 20, false));
  ASSERT_GE(lines.size(), 5u) << render(d, t, 1.0, 20, false);
  EXPECT_EQ(lines[0],
            "sprofil top: pid 777  interval 1.00 s  samples 42 (42/s)  lost 3  overflow 2");
  EXPECT_EQ(lines[1] + "\n", kTitles);
  EXPECT_EQ(lines.back(), "");
  // The rows: burn_hot's 30 samples first, then burn_cold's 10, both in live_prog.
  struct Parsed {
    double samples = -1, pct = -1, lo = -1, hi = -1;
    std::string rest;
  };
  auto parse = [](const std::string& line) {
    Parsed p;
    int used = 0;
    if (std::sscanf(line.c_str(), "%lf %lf %lf-%lf %n", &p.samples, &p.pct, &p.lo, &p.hi, &used) ==
        4)
      p.rest = line.substr(static_cast<size_t>(used));
    return p;
  };
  const Parsed hot = parse(lines[2]), cold = parse(lines[3]);
  EXPECT_EQ(hot.samples, 30) << lines[2];
  EXPECT_NEAR(hot.pct, 100.0 * 30 / 42, 0.005) << lines[2];
  EXPECT_LT(hot.lo, hot.pct);
  EXPECT_GT(hot.hi, hot.pct);
  EXPECT_NE(hot.rest.find("burn_hot(double, double)  live_prog"), std::string::npos) << lines[2];
  EXPECT_EQ(cold.samples, 10) << lines[3];
  EXPECT_NEAR(cold.pct, 100.0 * 10 / 42, 0.005) << lines[3];
  EXPECT_NE(cold.rest.find("burn_cold(double, double)  live_prog"), std::string::npos) << lines[3];
  // Every row shown: the rows' samples add up to the header's 42 (the overflow's 2 included).
  double sum = 0;
  for (size_t i = 2; i + 1 < lines.size(); ++i) sum += parse(lines[i]).samples;
  EXPECT_EQ(sum, 42) << render(d, t, 1.0, 20, false);
}

// A target that does not answer: exit status 1, why in *error for the tool to say, no view.
TEST(TopRun, UnreachableTargetIsAnError) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* out = open_memstream(&buf, &len);
  ASSERT_NE(out, nullptr);
  live::TopOptions o;
  o.target = "/nonexistent/sprofil-top-test.sock";
  o.count = 1;
  std::string err;
  EXPECT_EQ(live::run_top(o, out, -1, &err), 1);
  std::fclose(out);
  EXPECT_FALSE(err.empty());
  EXPECT_EQ(std::string(buf, len), "");
  free(buf);
}

}  // namespace
}  // namespace sprofil::live_test
