// Interop with the real tools. Synthetic profiles of a real binary (counts at nm addresses,
// including a count above 65535 and a bin split across two functions) are exported and read
// back by GNU gprof and `go tool pprof`; their per-function numbers must equal ours within one
// sample (the tools print rounded values). tick = 10 ms, so gprof's rate is 100 Hz and its
// 2-decimal seconds are exact sample counts.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <regex>
#include <sstream>

#include "report/exporter.hpp"
#include "test_util.hpp"

#include "profile/writer.hpp"

namespace sprofil::interop_test {
namespace {

using report_test::NmSymbol;

constexpr uint64_t kTick = 10000000;  // 10 ms
constexpr uint64_t kLibBias = 0x7f1234560000ull;

std::string temp_dir(const std::string& name) {
  std::string d =
      ::testing::TempDir() + "/sprofil_interop_" + name + "_" + std::to_string(::getpid());
  ::mkdir(d.c_str(), 0755);
  return d;
}

// A profile of `prog` (bias chosen like a PIE's when it is one) and of the shared library.
profile::Profile make_profile(const std::string& prog) {
  uint64_t bias = report_test::is_pie(prog) ? 0x555555554000ull : 0;
  auto fns = report_test::nm_functions(prog);
  profile::Profile p = report_test::base_profile(kTick);
  profile::Region r = report_test::text_region(prog, bias, 4, SPROF_R_MAIN);
  const char* names[] = {"int demo::sum_squares<int>(int const*, int)",
                         "double demo::sum_squares<double>(double const*, int)",
                         "demo::Widget::spin(long)", "demo::uses_inline(long)", "main"};
  // A bin across two adjacent functions, half in each (gprof counts addresses in 2-byte units,
  // so the boundary must be even to compare exactly): the region starts so that a bin begins
  // two bytes before the boundary.
  std::vector<NmSymbol> v;
  for (auto& [name, s] : fns) v.push_back(s);
  std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.addr < b.addr; });
  uint64_t boundary = 0;
  for (size_t i = 1; i < v.size() && boundary == 0; ++i)
    if (v[i - 1].addr + v[i - 1].size == v[i].addr && v[i - 1].size >= 2 && v[i].size >= 2 &&
        v[i].addr % 2 == 0)
      boundary = v[i].addr + bias;
  EXPECT_NE(boundary, 0u) << "no two adjacent functions at an even boundary";
  if (boundary != 0) {
    r.start -= (r.start - (boundary - 2)) % 4;
    r.bins.clear();
    report_test::add_at(&r, boundary - 2, 400);
  }
  uint64_t n = 37;
  for (const char* name : names) {
    EXPECT_TRUE(fns.count(name)) << name;
    const NmSymbol& s = fns[name];
    report_test::add_at(&r, bias + s.addr + s.size / 2, n);
    n = n * 3 + 11;
  }
  // A count above gprof's 16-bit counters: the gmon export scales every bin down.
  const NmSymbol& spin = fns["demo::Widget::spin(long)"];
  report_test::add_at(&r, bias + spin.addr + spin.size / 2, 70000);
  p.regions.push_back(r);

  auto lfns = report_test::nm_functions(TESTLIB);
  profile::Region lib = report_test::text_region(TESTLIB, kLibBias, 4);
  const NmSymbol& lw = lfns["testlib::lib_work(long)"];
  report_test::add_at(&lib, kLibBias + lw.addr + lw.size / 2, 123);
  p.regions.push_back(lib);
  p.overflow = 5;
  p.start_ns = 1700000000000000000ull;
  p.end_ns = p.start_ns + 3000000000ull;
  return p;
}

std::map<std::string, double> our_functions(const profile::Profile& p, const std::string& object) {
  symbolize::Symbolizer sym;
  report::Options o;
  o.object = object;
  report::Table t = report::aggregate(p, sym, o);
  std::map<std::string, double> out;
  for (const report::Row& r : t.rows) out[r.name] += r.samples;
  return out;
}

void check_gprof(const std::string& prog) {
  profile::Profile p = make_profile(prog);
  std::string dir = temp_dir("gprof");
  std::string gmon = dir + "/gmon.out";
  std::string err;
  ASSERT_TRUE(report::write_report(p, report::gmon_exporter(), {}, gmon, nullptr, &err)) << err;
  int status = 0;
  std::string out = report_test::run("gprof -b -p '" + prog + "' '" + gmon + "' 2>&1", &status);
  ASSERT_EQ(status, 0) << out;
  // Flat profile rows: %time cumulative self [calls self/call total/call] name.
  std::regex row(R"(^\s*([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+(.*\S)\s*$)");
  std::map<std::string, double> gprof;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, row)) gprof[m[4]] += std::stod(m[3]) * 100.0;  // 100 Hz
  }
  std::string base = prog.substr(prog.rfind('/') + 1);
  std::map<std::string, double> ours = our_functions(p, base);
  ASSERT_GE(ours.size(), 5u);
  // gmon_bytes divides every count by ceil(max / 65535) (rounded to nearest): compare gprof's
  // numbers times that factor, within a rounding of the factor per bin.
  uint64_t max = 0;
  for (const profile::Region& r : p.regions)
    if (r.flags & SPROF_R_MAIN) max = std::max(max, r.max_count());
  const double factor = max <= 65535 ? 1.0 : double((max + 65534) / 65535);
  for (auto& [name, n] : gprof) n *= factor;
  double our_total = 0, their_total = 0;
  for (auto& [name, n] : ours) {
    our_total += n;
    ASSERT_TRUE(gprof.count(name)) << "gprof has no " << name << "\n" << out;
    EXPECT_NEAR(gprof[name], n, factor) << name << "\n" << out;
  }
  for (auto& [name, n] : gprof) their_total += n;
  EXPECT_NEAR(their_total, our_total, factor * double(ours.size())) << out;
  report_test::run("rm -rf '" + dir + "'");
}

TEST(Gprof, FlatProfileOfPieMatchesOurs) {
  check_gprof(PROG_PIE);
}
TEST(Gprof, FlatProfileOfNonPieMatchesOurs) {
  ASSERT_FALSE(report_test::is_pie(PROG_NOPIE));
  check_gprof(PROG_NOPIE);
}

// Writes `p` as pprof's profile.pb.gz in `dir`; its path, "" (and a failure) if it cannot.
std::string write_pprof(const profile::Profile& p, const std::string& dir) {
  const std::string file = dir + "/profile.pb.gz";
  std::string err;
  const bool ok = report::write_report(p, report::pprof_exporter(), {}, file, nullptr, &err);
  EXPECT_TRUE(ok) << err;
  return ok ? file : "";
}

TEST(Pprof, GoToolPprofTopMatchesOurs) {
  if (report_test::run("command -v go").empty()) GTEST_SKIP() << "no go toolchain";
  profile::Profile p = make_profile(PROG_PIE);
  std::string dir = temp_dir("pprof");
  const std::string file = write_pprof(p, dir);
  ASSERT_FALSE(file.empty());
  std::string env = "HOME='" + dir + "' GOPATH='" + dir + "/gopath' GOCACHE='" + dir +
                    "/gocache' GOFLAGS=-mod=mod PPROF_TMPDIR='" + dir + "' ";
  int status = 0;
  std::string out = report_test::run(
      env + "go tool pprof -top -nodecount=100 -nodefraction=0 -unit=ms -noinlines '" +
          std::string(PROG_PIE) + "' '" + file + "' 2>&1",
      &status);
  ASSERT_EQ(status, 0) << out;
  // Rows: flat flat% sum% cum cum% name, values in ms.
  std::regex row(R"(^\s*([0-9.]+)ms\s+[0-9.]+%\s+[0-9.]+%\s+[0-9.]+ms\s+[0-9.]+%\s+(.*\S)\s*$)");
  std::map<std::string, double> pprof;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, row)) pprof[m[2]] += std::stod(m[1]) / 10.0;  // 10 ms/sample
  }
  symbolize::Symbolizer sym2;
  report::Table t = report::aggregate(p, sym2, report::Options{});
  ASSERT_GE(t.rows.size(), 7u);
  for (const report::Row& r : t.rows) {
    ASSERT_TRUE(pprof.count(r.name)) << "pprof has no " << r.name << "\n" << out;
    EXPECT_NEAR(pprof[r.name], r.samples, 0.01) << r.name << "\n" << out;
  }
  // Total: pprof's header "Showing nodes accounting for X, 100% of Y total".
  std::smatch m;
  std::regex total(R"(of ([0-9.]+)ms total)");
  ASSERT_TRUE(std::regex_search(out, m, total)) << out;
  EXPECT_NEAR(std::stod(m[1]), double(t.total_samples) * 10.0, 1.0);
  report_test::run("rm -rf '" + dir + "'");
}

// Line.column is newer than the copy of pprof's schema the exporter is built from, so it is
// written as that field's number (3 of Line, inside Location's field 4) by hand: protoc's raw
// decoder, which knows no schema, must find it there, with DWARF's columns (1-based, small).
TEST(Pprof, LinesCarryTheirColumnAsField3) {
  if (report_test::run("command -v protoc").empty()) GTEST_SKIP() << "no protoc";
  const std::string dir = temp_dir("column");
  const std::string file = write_pprof(make_profile(PROG_PIE), dir);
  ASSERT_FALSE(file.empty());
  int status = 0;
  const std::string raw =
      report_test::run("gzip -dc '" + file + "' | protoc --decode_raw 2>&1", &status);
  ASSERT_EQ(status, 0) << raw;
  // Top-level "4 {" opens a Location; inside it, "  4 {" opens a Line, whose fields are
  // indented by four spaces.
  std::istringstream in(raw);
  std::string line;
  bool in_location = false, in_line = false;
  int lines = 0, with_column = 0;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    if (line == "4 {")
      in_location = true;
    else if (line == "}")
      in_location = false;
    else if (in_location && line == "  4 {")
      in_line = true, line_no = 0, ++lines;
    else if (in_line && line == "  }")
      in_line = false;
    else if (in_line && line.rfind("    2: ", 0) == 0)
      line_no = std::stoll(line.substr(7));
    else if (in_line && line.rfind("    3: ", 0) == 0) {
      const int64_t col = std::stoll(line.substr(7));
      EXPECT_GE(col, 1) << line;
      EXPECT_LE(col, 400) << line;
      EXPECT_GT(line_no, 0) << "a column without a line number";
      ++with_column;
    }
  }
  EXPECT_GE(lines, 7) << raw.substr(0, 4000);
  EXPECT_GE(with_column, lines / 2) << raw.substr(0, 4000);
  report_test::run("rm -rf '" + dir + "'");
}

TEST(Tool, ReportFoldedSumsToTotalAndJsonParses) {
  profile::Profile p = make_profile(PROG_PIE);
  std::string dir = temp_dir("tool");
  std::string file = dir + "/prof.sprof";
  std::string err;
  ASSERT_TRUE(profile::write_profile(p, file, &err)) << err;
  int status = 0;
  std::string folded = report_test::run(
      std::string(SPROFIL_TOOL) + " report '" + file + "' --format folded", &status);
  ASSERT_EQ(status, 0) << folded;
  uint64_t total = p.overflow, sum = 0;
  for (auto& r : p.regions) r.for_each_bin([&](uint64_t, uint64_t c, uint64_t) { total += c; });
  std::istringstream in(folded);
  std::string line;
  while (std::getline(in, line)) sum += std::stoull(line.substr(line.rfind(' ') + 1));
  EXPECT_EQ(sum, total) << folded;

  std::string text = report_test::run(std::string(SPROFIL_TOOL) + " report '" + file + "' 2>&1");
  EXPECT_NE(text.find("demo::Widget::spin(long)"), std::string::npos) << text;
  EXPECT_NE(text.find("total samples:  " + std::to_string(total)), std::string::npos) << text;

  std::string bad = report_test::run(
      std::string(SPROFIL_TOOL) + " report " + dir + "/missing.sprof 2>&1", &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(bad.find("missing.sprof"), std::string::npos) << bad;

  std::string gmon = dir + "/gmon.out";
  report_test::run(
      std::string(SPROFIL_TOOL) + " report '" + file + "' --format gmon -o '" + gmon + "'",
      &status);
  EXPECT_EQ(status, 0);
  std::string g = report_test::read_file(gmon);
  EXPECT_EQ(g.substr(0, 4), "gmon");
  report_test::run("rm -rf '" + dir + "'");
}

}  // namespace
}  // namespace sprofil::interop_test
