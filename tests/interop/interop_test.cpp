// Interop with the real tools. Synthetic profiles of a real binary (counts at nm addresses,
// including a count above 65535 and a bin split across two functions) are exported and read
// back by GNU gprof and `go tool pprof`; their per-function numbers must equal ours within one
// sample (the tools print rounded values). tick = 10 ms, so gprof's rate is 100 Hz (50 Hz with
// the counts halved to fit its 16-bit bins) and its 2-decimal seconds are exact sample counts. And
// programs recorded by the real `sprofil record` (its default 1-byte bins; one program, the same
// twice, two programs under `sh -c`) exported by `sprofil report --format gmon`: gprof's shares and
// total against the profile's.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "report/exporter.hpp"
#include "test_util.hpp"

#include "profile/reader.hpp"
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

// gprof's flat profile of `gmon` (gprof -b -p): per function its %time and self seconds, and
// the total (the last row's cumulative seconds), as gprof prints them (2 decimals).
struct GprofFlat {
  struct Fn {
    double percent = 0, self = 0;
  };
  std::map<std::string, Fn> rows;
  double total = 0;
  int status = 0;
  std::string out;
};
GprofFlat gprof_flat(const std::string& prog, const std::string& gmon) {
  GprofFlat g;
  g.out = report_test::run("gprof -b -p '" + prog + "' '" + gmon + "' 2>&1", &g.status);
  // Flat profile rows: %time cumulative self [calls self/call total/call] name.
  std::regex row(R"(^\s*([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+(.*\S)\s*$)");
  std::istringstream in(g.out);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    GprofFlat::Fn& f = g.rows[m[4]];
    f.percent += std::stod(m[1]);
    f.self += std::stod(m[3]);
    g.total = std::max(g.total, std::stod(m[2]));
  }
  return g;
}

void check_gprof(const std::string& prog) {
  profile::Profile p = make_profile(prog);
  std::string dir = temp_dir("gprof");
  std::string gmon = dir + "/gmon.out";
  std::string err;
  ASSERT_TRUE(report::write_report(p, report::gmon_exporter(), {}, gmon, nullptr, &err)) << err;
  const GprofFlat flat = gprof_flat(prog, gmon);
  ASSERT_EQ(flat.status, 0) << flat.out;
  const std::string& out = flat.out;
  std::map<std::string, double> gprof;
  for (auto& [name, f] : flat.rows) gprof[name] = f.self * 100.0;  // seconds x 100 Hz: samples
  std::string base = prog.substr(prog.rfind('/') + 1);
  std::map<std::string, double> ours = our_functions(p, base);
  ASSERT_GE(ours.size(), 5u);
  // gmon_bytes divides every count by ceil(max / 65535) (rounded to nearest) and the rate by the
  // same factor, so gprof's seconds stay the samples': compare them within a rounding of the
  // factor per bin.
  uint64_t max = 0;
  for (const profile::Region& r : p.regions)
    if (r.flags & SPROF_R_MAIN) max = std::max(max, r.max_count());
  const double factor = max <= 65535 ? 1.0 : double((max + 65534) / 65535);
  ASSERT_GT(factor, 1.0) << "the profile no longer has a bin over 65535: this test means one";
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

// Programs recorded by the real `sprofil record` and exported by `sprofil report --format gmon`.
// The test program runs Widget::spin, uses_inline and the library's lib_work N times each: at
// 5e7 about 0.25 s of CPU here (-O1), so each run stays well under a second.
const char* const kIters = "50000000";

std::string q(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// `sprofil record -o FILE -- COMMAND` (the record's defaults: exact 1-byte bins on disk), read
// back into *p.
void record(const std::string& command, const std::string& file, profile::Profile* p) {
  int status = 0;
  const std::string log = report_test::run(
      std::string(SPROFIL_TOOL) + " record -o " + q(file) + " -- " + command + " 2>&1 >/dev/null",
      &status);
  ASSERT_EQ(status, 0) << log;
  std::string err;
  ASSERT_TRUE(profile::read_profile(file, p, &err)) << err;
}

// `sprofil report FILE --format gmon -o GMON [ARGS]`: its standard error.
std::string export_gmon(const std::string& file, const std::string& gmon,
                        const std::string& args = "") {
  int status = 0;
  const std::string log =
      report_test::run(std::string(SPROFIL_TOOL) + " report " + q(file) + " --format gmon -o " +
                           q(gmon) + " " + args + " 2>&1",
                       &status);
  EXPECT_EQ(status, 0) << log;
  return log;
}

// The samples in `prog`'s main-executable text, over every process running it, and the
// largest of one process.
struct ExeSamples {
  uint64_t total = 0, largest = 0;
  size_t processes = 0;
};
ExeSamples exe_samples(const profile::Profile& p, const std::string& prog) {
  std::map<uint32_t, uint64_t> per;
  for (const profile::Region& r : p.regions)
    if ((r.flags & SPROF_R_MAIN) != 0 && r.path == prog) per[r.process] += r.total();
  ExeSamples e;
  for (auto& [k, n] : per) {
    e.total += n;
    e.largest = std::max(e.largest, n);
    ++e.processes;
  }
  return e;
}

// gprof's rate: the profile's tick as whole hertz, as the exporter writes it.
double rate_of(const profile::Profile& p) {
  return double(std::llround(1e9 / double(p.tick_ns)));
}

// gprof's total seconds against `samples` / rate: within 5%, plus 0.005 s for its 2-decimal
// print.
void expect_total(const GprofFlat& g, uint64_t samples, const profile::Profile& p) {
  const double want = double(samples) / rate_of(p);
  EXPECT_NEAR(g.total, want, 0.05 * want + 0.005) << samples << " samples\n" << g.out;
}

// A program recorded with the default (1-byte) bins: gprof's flat profile has every function
// that holds 5% or more of the executable's samples in sprofil's report, its share within 2
// percentage points of sprofil's, and a total of the executable's samples / rate within 5%
// (the 1-byte bins once read as half lost and half doubled).
void check_recorded(const std::string& prog) {
  const std::string dir = temp_dir("recorded");
  const std::string file = dir + "/p.sprof", gmon = dir + "/gmon.out";
  profile::Profile p;
  ASSERT_NO_FATAL_FAILURE(record(q(prog) + " " + kIters, file, &p));
  bool one_byte = false;
  for (const profile::Region& r : p.regions)
    if ((r.flags & SPROF_R_MAIN) != 0 && r.path == prog) one_byte = r.bin_size == 1;
  EXPECT_TRUE(one_byte) << "record's default bins are no longer 1 byte: this test means them";
  const std::string log = export_gmon(file, gmon);
  EXPECT_EQ(log.find("gmon:"), std::string::npos) << log;  // one executable, small counts
  const GprofFlat g = gprof_flat(prog, gmon);
  ASSERT_EQ(g.status, 0) << g.out;
  const ExeSamples e = exe_samples(p, prog);
  ASSERT_GE(e.total, 50u) << "too few samples to compare";
  expect_total(g, e.total, p);
  const std::string base = prog.substr(prog.rfind('/') + 1);
  std::map<std::string, double> ours = our_functions(p, base);
  double sum = 0;
  for (auto& [name, n] : ours) sum += n;
  int compared = 0;
  for (auto& [name, n] : ours) {
    const double share = 100.0 * n / sum;
    if (share < 5) continue;
    ++compared;
    ASSERT_TRUE(g.rows.count(name)) << "gprof has no " << name << "\n" << g.out;
    EXPECT_NEAR(g.rows.at(name).percent, share, 2.0) << name << "\n" << g.out;
  }
  EXPECT_GE(compared, 2) << g.out;  // Widget::spin and uses_inline at least
  EXPECT_TRUE(g.rows.count("demo::Widget::spin(long)")) << g.out;
  report_test::run("rm -rf " + q(dir));
}

TEST(Gprof, RecordedPieWithOneByteBins) {
  check_recorded(PROG_PIE);
}
TEST(Gprof, RecordedNonPieWithOneByteBins) {
  ASSERT_FALSE(report_test::is_pie(PROG_NOPIE));
  check_recorded(PROG_NOPIE);
}

// `sh -c 'PROG N; PROG N'`: the two runs of the program are one executable, summed into one
// histogram (gprof reads it: no "different scales"); the shell, another executable, is left out
// with a warning naming the program.
TEST(Gprof, RecordedRunOfTwoProcessesSumsTheProgram) {
  const std::string dir = temp_dir("twice");
  const std::string file = dir + "/p.sprof", gmon = dir + "/gmon.out";
  const std::string prog = PROG_PIE;
  profile::Profile p;
  ASSERT_NO_FATAL_FAILURE(
      record("sh -c " + q(q(prog) + " " + kIters + "; " + q(prog) + " " + kIters), file, &p));
  const ExeSamples e = exe_samples(p, prog);
  ASSERT_EQ(e.processes, 2u);
  ASSERT_GE(e.total, 50u) << "too few samples to compare";
  ASSERT_LT(double(e.largest), 0.8 * double(e.total));  // both runs count
  const std::string log = export_gmon(file, gmon);
  if (log.find("gmon:") != std::string::npos) {  // the shell's text is in the profile
    EXPECT_NE(log.find("exported " + prog + " (2 processes"), std::string::npos) << log;
  }
  const GprofFlat g = gprof_flat(prog, gmon);
  ASSERT_EQ(g.status, 0) << g.out;
  EXPECT_EQ(g.out.find("different scales"), std::string::npos) << g.out;
  expect_total(g, e.total, p);
  report_test::run("rm -rf " + q(dir));
}

// `sh -c 'PIE N; NOPIE N/3; true'`: two programs at different link-time addresses. The
// gmon.out has the one with the most samples (the shell's text has next to none), and --pid
// picks the other; gprof reads each with its program, with that program's samples alone. The
// `true` keeps dash from exec'ing NOPIE in the shell's own process, whose pid --pid would then
// share.
TEST(Gprof, RecordedRunOfTwoProgramsExportsOne) {
  const std::string dir = temp_dir("two");
  const std::string file = dir + "/p.sprof", gmon = dir + "/gmon.out";
  const std::string pie = PROG_PIE, nopie = PROG_NOPIE;
  profile::Profile p;
  ASSERT_NO_FATAL_FAILURE(
      record("sh -c " + q(q(pie) + " " + kIters + "; " + q(nopie) + " 10000000; true"), file, &p));
  const ExeSamples a = exe_samples(p, pie), b = exe_samples(p, nopie);
  ASSERT_GE(b.total, 10u) << "too few samples to compare";
  ASSERT_GT(a.total, b.total);
  std::string log = export_gmon(file, gmon);
  EXPECT_NE(log.find("exported " + pie + " (1 process"), std::string::npos) << log;
  uint64_t others = 0;  // the program's and the shell's
  for (const profile::Region& r : p.regions)
    if ((r.flags & SPROF_R_MAIN) != 0 && r.path != pie) others += r.total();
  EXPECT_NE(log.find("left out " + std::to_string(others) + " sample"), std::string::npos) << log;
  GprofFlat g = gprof_flat(pie, gmon);
  ASSERT_EQ(g.status, 0) << g.out;
  expect_total(g, a.total, p);

  // Its command name is cut to report_testprog, the other's too: --pid tells them apart.
  int32_t pid = 0;
  for (const profile::Region& r : p.regions)
    if ((r.flags & SPROF_R_MAIN) != 0 && r.path == nopie && r.process < p.processes.size())
      pid = p.processes[r.process].pid;
  ASSERT_NE(pid, 0);
  log = export_gmon(file, gmon, "--pid " + std::to_string(pid));
  EXPECT_EQ(log.find("gmon:"), std::string::npos) << log;  // one executable kept
  g = gprof_flat(nopie, gmon);
  ASSERT_EQ(g.status, 0) << g.out;
  expect_total(g, b.total, p);
  report_test::run("rm -rf " + q(dir));
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
  // pprof names a C++ function as its own symbolizer does by default: our rows' short names
  // (two template instances are two rows of one name).
  symbolize::Symbolizer sym2;
  report::Table t = report::aggregate(p, sym2, report::Options{});
  ASSERT_GE(t.rows.size(), 7u);
  std::map<std::string, double> ours;
  for (const report::Row& r : t.rows) ours[symbolize::short_name(r.name)] += r.samples;
  EXPECT_TRUE(ours.count("demo::sum_squares")) << out;
  for (const auto& [name, samples] : ours) {
    ASSERT_TRUE(pprof.count(name)) << "pprof has no " << name << "\n" << out;
    EXPECT_NEAR(pprof[name], samples, 0.01) << name << "\n" << out;
  }
  // Total: pprof's header "Showing nodes accounting for X, 100% of Y total".
  std::smatch m;
  std::regex total(R"(of ([0-9.]+)ms total)");
  ASSERT_TRUE(std::regex_search(out, m, total)) << out;
  EXPECT_NEAR(std::stod(m[1]), double(t.total_samples) * 10.0, 1.0);
  report_test::run("rm -rf '" + dir + "'");
}

// pprof's main binary is its first mapping (`go tool pprof` names it in `File:` and symbolizes
// with it): the run's program, as gmon exports it (report::main_executable), not the object of
// the first region with samples (a compiler's run was `File: libc.so.6`): here the library's
// region comes first in the profile.
TEST(Pprof, TheRunsProgramIsTheMainMapping) {
  if (report_test::run("command -v go").empty()) GTEST_SKIP() << "no go toolchain";
  const std::string dir = temp_dir("pprof_main");
  const std::string pie = PROG_PIE;
  profile::Profile p = make_profile(pie);
  ASSERT_GE(p.regions.size(), 2u);
  ASSERT_NE(p.regions.front().flags & SPROF_R_MAIN, 0u);
  std::rotate(p.regions.begin(), p.regions.begin() + 1, p.regions.end());
  ASSERT_EQ(p.regions.front().flags & SPROF_R_MAIN, 0u);
  const std::string file = write_pprof(p, dir);
  ASSERT_FALSE(file.empty());
  const std::string env =
      "HOME=" + q(dir) + " GOCACHE=" + q(dir + "/gocache") + " PPROF_TMPDIR=" + q(dir) + " ";
  int status = 0;
  std::string raw = report_test::run(env + "go tool pprof -raw " + q(file) + " 2>&1", &status);
  ASSERT_EQ(status, 0) << raw;
  const size_t mappings = raw.find("Mappings\n1: ");
  ASSERT_NE(mappings, std::string::npos) << raw;
  const std::string first = raw.substr(mappings, raw.find('\n', mappings + 9) - mappings);
  EXPECT_NE(first.find(" " + pie + " "), std::string::npos) << first;
  std::string top = report_test::run(env + "go tool pprof -top " + q(file) + " 2>&1", &status);
  ASSERT_EQ(status, 0) << top;
  EXPECT_EQ(top.rfind("File: " + pie.substr(pie.rfind('/') + 1) + "\n", 0), 0u) << top;
  report_test::run("rm -rf " + q(dir));
}

// Each function's system name is its mangled one, as pprof's own symbolizer stores it (so that
// `-symbolize=demangle=full` demangles it again), and its name the short one, in both the
// out-of-line function and the inline frames: no return type ("int demo::sum_squares").
TEST(Pprof, FunctionsKeepTheirMangledNames) {
  if (report_test::run("command -v go").empty()) GTEST_SKIP() << "no go toolchain";
  const std::string dir = temp_dir("pprof_names");
  const std::string file = write_pprof(make_profile(PROG_PIE), dir);
  ASSERT_FALSE(file.empty());
  const std::string env =
      "HOME=" + q(dir) + " GOCACHE=" + q(dir + "/gocache") + " PPROF_TMPDIR=" + q(dir) + " ";
  int status = 0;
  // -raw prints a function "NAME FILE:LINE s=START(SYSTEM NAME)" where the two differ.
  const std::string raw =
      report_test::run(env + "go tool pprof -symbolize=none -raw " + q(file) + " 2>&1", &status);
  ASSERT_EQ(status, 0) << raw;
  std::istringstream nm(report_test::run("nm --defined-only " + q(PROG_PIE)));
  int mangled = 0;
  for (std::string line; std::getline(nm, line);) {
    const std::string sym = line.substr(line.rfind(' ') + 1);
    if (sym.find("sum_squares") == std::string::npos || sym.rfind("_Z", 0) != 0) continue;
    ++mangled;
    const std::regex fn("demo::sum_squares \\S+ s=[0-9]+\\(" + sym + "\\)");
    EXPECT_TRUE(std::regex_search(raw, fn)) << sym << "\n" << raw;
  }
  EXPECT_EQ(mangled, 2) << "sum_squares<int> and sum_squares<double>";
  // The inline frames' names: pprof's -top lists them "(inline)", none with a return type or a
  // parameter list.
  const std::string top =
      report_test::run(env + "go tool pprof -top -nodefraction=0 " + q(file) + " 2>&1", &status);
  ASSERT_EQ(status, 0) << top;
  EXPECT_NE(top.find("(inline)"), std::string::npos) << top;
  EXPECT_EQ(top.find("int demo::"), std::string::npos) << top;
  EXPECT_EQ(top.find("double demo::"), std::string::npos) << top;
  EXPECT_EQ(top.find("(long)"), std::string::npos) << top;
  report_test::run("rm -rf " + q(dir));
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

// `go tool pprof ARGS` with a private HOME, GOPATH, GOCACHE and temporary directory in `dir`:
// its output (standard error too) and *status.
std::string go_pprof(const std::string& dir, const std::string& args, int* status) {
  const std::string env = "HOME=" + q(dir) + " GOPATH=" + q(dir + "/gopath") +
                          " GOCACHE=" + q(dir + "/gocache") + " PPROF_TMPDIR=" + q(dir) + " ";
  return report_test::run(env + "go tool pprof " + args + " 2>&1", status);
}

// pprof's total of the sample type `samples` (a count): "of N total" in `-top`'s header.
double pprof_total_samples(const std::string& dir, const std::string& file) {
  int status = 0;
  const std::string top = go_pprof(dir, "-top -sample_index=samples " + q(file), &status);
  EXPECT_EQ(status, 0) << top;
  std::smatch m;
  if (!std::regex_search(top, m, std::regex(R"(of ([0-9.]+) total)"))) {
    ADD_FAILURE() << "no total in\n" << top;
    return -1;
  }
  return std::stod(m[1]);
}

// `sprofil report FILE ARGS`: standard output, with *status; standard error to *err (if given).
std::string sprofil_report(const std::string& file, const std::string& args, int* status,
                           std::string* err = nullptr) {
  const std::string err_file = file + ".err";
  std::string out = report_test::run(
      std::string(SPROFIL_TOOL) + " report " + q(file) + " " + args + " 2>" + q(err_file), status);
  if (err != nullptr) *err = report_test::read_file(err_file);
  return out;
}

// The text report's "total samples:  N".
uint64_t text_total(const std::string& file, const std::string& args) {
  int status = 0;
  const std::string text = sprofil_report(file, args, &status);
  EXPECT_EQ(status, 0) << text;
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(R"(total samples:  ([0-9]+))"))) {
    ADD_FAILURE() << "no total in\n" << text;
    return 0;
  }
  return std::stoull(m[1]);
}

// The sum of the `samples` column of `sprofil report FILE --format csv ARGS`.
double csv_samples(const std::string& file, const std::string& args) {
  int status = 0;
  const std::string csv = sprofil_report(file, "--format csv " + args, &status);
  EXPECT_EQ(status, 0) << csv;
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);  // the header
  double sum = 0;
  while (std::getline(in, line)) sum += std::stod(line.substr(0, line.find(',')));
  return sum;
}

// The samples of the address-space histograms of `sprofil report FILE --format html ARGS`: the
// sum of each histogram's total, from the page's embedded data.
double html_histogram_samples(const std::string& dir, const std::string& file,
                              const std::string& args) {
  const std::string html = dir + "/page.html";
  int status = 0;
  std::string err;
  sprofil_report(file, "--format html -o " + q(html) + " " + args, &status, &err);
  EXPECT_EQ(status, 0) << err;
  const std::string page = report_test::read_file(html);
  const std::string open = "id=\"sprofil-data\">";
  const size_t from = page.find(open);
  const size_t to = page.find("</script>", from);
  if (from == std::string::npos || to == std::string::npos) {
    ADD_FAILURE() << "no data in the page";
    return -1;
  }
  const auto data = nlohmann::json::parse(page.substr(from + open.size(), to - from - open.size()));
  double sum = 0;
  for (const auto& h : data.at("hist")) sum += h.at("total").get<double>();
  return sum;
}

// A gmon.out's histogram records read back (the 20-byte header, then per record: tag, low and
// high pc, bin count, rate, dimension and its abbreviation, 16-bit bins): the sum of the bins
// and the records' rate.
struct GmonHistogram {
  uint64_t sum = 0;
  uint32_t rate = 0;
  int records = 0;
};
GmonHistogram read_gmon(const std::string& path) {
  const std::string g = report_test::read_file(path);
  GmonHistogram h;
  size_t at = 20;
  while (at < g.size() && g[at] == 0) {  // GMON_TAG_TIME_HIST
    uint32_t nbins = 0;
    std::memcpy(&nbins, &g[at + 17], 4);
    std::memcpy(&h.rate, &g[at + 21], 4);
    at += 1 + 8 + 8 + 4 + 4 + 15 + 1;
    if (at + 2 * size_t(nbins) > g.size()) break;
    for (uint32_t i = 0; i < nbins; ++i) {
      uint16_t v = 0;
      std::memcpy(&v, &g[at + 2 * i], 2);
      h.sum += v;
    }
    at += 2 * size_t(nbins);
    ++h.records;
  }
  EXPECT_EQ(at, g.size()) << path << ": only histogram records expected";
  return h;
}

// --user-only and --object keep in pprof, gmon and the HTML page's histograms what they keep in
// the text report. The
// program spends a known part of its time in the kernel at its own pc (reads of /dev/zero by
// its own syscall instruction) and a part in a shared library (report_testlib). pprof's total
// under --user-only equals the text report's --user-only total, and under --object
// report_testlib the text rows' samples of that object, within 1 sample (a split bin's
// rounding); gmon.out's histogram under --user-only sums to the program's user samples in the
// text report (--by object) within 1 sample, and gprof's total is that / rate (within gprof's
// 2-decimal print). The system part is large enough that a format ignoring either filter is
// off by far more. gmon refuses --object of a shared library.
TEST(Filters, PprofGmonAndHtmlKeepWhatTheTextReportKeeps) {
  const std::string dir = temp_dir("filters");
  const std::string file = dir + "/sys.sprof";
  const std::string prog = EXPORT_PROG;
  const std::string object = prog.substr(prog.rfind('/') + 1);
  profile::Profile p;
  ASSERT_NO_FATAL_FAILURE(record(q(prog) + " sys 0.6", file, &p));
  if (!p.has_system()) GTEST_SKIP() << "the clock here records no system part";

  const uint64_t all = text_total(file, ""), user = text_total(file, "--user-only");
  ASSERT_GE(all, 200u) << "too few samples to compare";
  ASSERT_GE(double(all - user), 0.05 * double(all)) << all << " samples, " << user << " user";
  const double exe_all = csv_samples(file, "--by object --object " + q(object));
  const double exe_user = csv_samples(file, "--by object --user-only --object " + q(object));
  ASSERT_GE(exe_all - exe_user, 10) << "the program's own system part";
  const double lib = csv_samples(file, "--object report_testlib");
  ASSERT_GE(lib, 20) << "the library's samples";
  ASSERT_LE(lib, 0.9 * double(all));

  int status = 0;
  std::string err;
  if (!report_test::run("command -v go").empty()) {
    const std::string pb = dir + "/p.pb.gz", upb = dir + "/u.pb.gz", opb = dir + "/o.pb.gz";
    sprofil_report(file, "--format pprof -o " + q(pb), &status, &err);
    ASSERT_EQ(status, 0) << err;
    sprofil_report(file, "--user-only --format pprof -o " + q(upb), &status, &err);
    ASSERT_EQ(status, 0) << err;
    sprofil_report(file, "--object report_testlib --format pprof -o " + q(opb), &status, &err);
    ASSERT_EQ(status, 0) << err;
    EXPECT_NEAR(pprof_total_samples(dir, pb), double(all), 1);
    EXPECT_NEAR(pprof_total_samples(dir, upb), double(user), 1) << "--user-only";
    EXPECT_NEAR(pprof_total_samples(dir, opb), lib, 1) << "--object report_testlib";
  }

  // The HTML page's histograms (its tables apply both filters through the same rows).
  EXPECT_NEAR(html_histogram_samples(dir, file, "--object " + q(object)), exe_all, 1);
  EXPECT_NEAR(html_histogram_samples(dir, file, "--user-only --object " + q(object)), exe_user, 1)
      << "--user-only";
  EXPECT_NEAR(html_histogram_samples(dir, file, "--object report_testlib"), lib, 1)
      << "--object report_testlib";

  const std::string gmon = dir + "/gmon.out", ugmon = dir + "/u.gmon.out";
  export_gmon(file, gmon);
  export_gmon(file, ugmon, "--user-only");
  EXPECT_NEAR(double(read_gmon(gmon).sum), exe_all, 1);
  const GmonHistogram h = read_gmon(ugmon);
  EXPECT_NEAR(double(h.sum), exe_user, 1) << "--user-only";
  const GprofFlat g = gprof_flat(prog, ugmon);
  ASSERT_EQ(g.status, 0) << g.out;
  ASSERT_GT(h.rate, 0u);
  EXPECT_NEAR(g.total, exe_user / h.rate, 0.005 + 1.0 / h.rate) << g.out;
  // --object: the program's text is kept; a shared library's cannot be (exit status 1).
  export_gmon(file, gmon, "--object " + q(object));
  EXPECT_NEAR(double(read_gmon(gmon).sum), exe_all, 1);
  sprofil_report(file, "--format gmon -o " + q(gmon) + " --object report_testlib", &status, &err);
  EXPECT_NE(status, 0);
  EXPECT_NE(err.find("never a shared library's"), std::string::npos) << err;
  report_test::run("rm -rf " + q(dir));
}

// gprof's counters are 16-bit: when a bin exceeds 65535 the export divides every count by one
// factor, and must divide the rate by it too, since gprof's seconds are counts / rate (they
// read the factor too few). One `loop` instruction spinning at 50 kHz puts ~50,000 samples in
// one bin in a second; three such runs merged (`sprofil merge`: the sum of the runs) hold about
// 150,000 there, a factor of 3. gprof's seconds for the function, and its total, are sprofil's
// (the text report's CSV) within 3%.
TEST(Gprof, ScaledDownCountsKeepTheirSeconds) {
  const std::string dir = temp_dir("gmon_scale");
  const std::string file = dir + "/spin.sprof", merged = dir + "/merged.sprof";
  const std::string gmon = dir + "/gmon.out";
  const std::string prog = EXPORT_PROG;
  int status = 0;
  const std::string log =
      report_test::run(std::string(SPROFIL_TOOL) + " record -q -F 50000 -o " + q(file) + " -- " +
                           q(prog) + " spin 1 2>&1 >/dev/null",
                       &status);
  ASSERT_EQ(status, 0) << log;
  const std::string merge =
      report_test::run(std::string(SPROFIL_TOOL) + " merge -o " + q(merged) + " " + q(file) + " " +
                           q(file) + " " + q(file) + " 2>&1",
                       &status);
  ASSERT_EQ(status, 0) << merge;
  const std::string warned = export_gmon(merged, gmon);
  ASSERT_NE(warned.find("every count was divided by"), std::string::npos)
      << "no bin outgrew gprof's counters (the sampling was throttled?): this test needs one\n"
      << warned;
  // sprofil's seconds for spin, and for the program's text (--by object).
  const std::string csv = sprofil_report(merged, "--format csv", &status);
  ASSERT_EQ(status, 0) << csv;
  double ours = 0;
  std::istringstream in(csv);
  for (std::string line; std::getline(in, line);)
    if (line.find("spin(unsigned long)") != std::string::npos) {
      std::vector<std::string> f;
      std::istringstream fs(line);
      for (std::string x; std::getline(fs, x, ',');) f.push_back(x);
      ours += std::stod(f.at(4));  // seconds
    }
  ASSERT_GT(ours, 1.0) << csv;
  const GprofFlat g = gprof_flat(prog, gmon);
  ASSERT_EQ(g.status, 0) << g.out;
  double theirs = 0;
  for (const auto& [name, f] : g.rows)
    if (name.find("spin(unsigned long)") != std::string::npos) theirs += f.self;
  EXPECT_NEAR(theirs, ours, 0.03 * ours) << g.out;
  const double exe =
      csv_samples(merged, "--by object --object " + q(prog.substr(prog.rfind('/') + 1)));
  profile::Profile p;
  std::string err;
  ASSERT_TRUE(profile::read_profile(merged, &p, &err)) << err;
  EXPECT_NEAR(g.total, exe * double(p.tick_ns) / 1e9, 0.03 * exe * double(p.tick_ns) / 1e9)
      << g.out;
  report_test::run("rm -rf " + q(dir));
}

// A run whose time is all in a shared library the program links (report_testlib): the
// program's own text has no sample. Its samples, and those in the program's text. The kernel's
// time in exec, when a period ends there, is charged to the program's entry point (`_start`,
// one sample as system time in about one run in twelve on the loaded 2-core machine): the run
// is recorded again then, five times at most.
struct LibraryRun {
  std::string file;
  uint64_t samples = 0, in_program = 0;
  bool program_region = false;  // the profile has the program's text region
};
LibraryRun record_library_run(const std::string& dir) {
  LibraryRun run;
  run.file = dir + "/lib.sprof";
  for (int attempt = 0; attempt < 5; ++attempt) {
    profile::Profile p;
    record(q(EXPORT_PROG) + " lib 100000000", run.file, &p);
    run.samples = p.total_samples();
    run.in_program = 0;
    for (const profile::Region& r : p.regions)
      if ((r.flags & SPROF_R_MAIN) != 0 && r.path == EXPORT_PROG) {
        run.program_region = true;
        run.in_program += r.total();
      }
    if (run.in_program == 0) break;
  }
  return run;
}

// pprof's main binary (`File:` in `go tool pprof -top`) is the recorded program though its text
// has no sample (sqlite3, all of whose time is in libsqlite3, was `File: ld-linux-x86-64.so.2`):
// its mapping is the first, with samples or without.
TEST(Pprof, TheProgramIsTheMainMappingWithoutSamplesOfItsOwn) {
  if (report_test::run("command -v go").empty()) GTEST_SKIP() << "no go toolchain";
  const std::string dir = temp_dir("pprof_lib");
  const LibraryRun run = record_library_run(dir);
  ASSERT_TRUE(run.program_region) << "the profile has no region of " << EXPORT_PROG;
  ASSERT_EQ(run.in_program, 0u) << "the program's own text has samples: this test needs none";
  ASSERT_GE(run.samples, 20u);
  const std::string pb = dir + "/lib.pb.gz";
  int status = 0;
  std::string err;
  sprofil_report(run.file, "--format pprof -o " + q(pb), &status, &err);
  ASSERT_EQ(status, 0) << err;
  const std::string top = go_pprof(dir, "-top " + q(pb), &status);
  ASSERT_EQ(status, 0) << top;
  const std::string prog = EXPORT_PROG;
  EXPECT_EQ(top.rfind("File: " + prog.substr(prog.rfind('/') + 1) + "\n", 0), 0u) << top;
  EXPECT_NE(top.find("testlib::lib_work"), std::string::npos) << top;
  report_test::run("rm -rf " + q(dir));
}

// The gmon export of a run whose executable's text has no sample (all in a shared library,
// which a gmon.out cannot hold) warns that the executable holds 0 of the samples, and where they
// are, rather than writing gprof's "no time accumulated" silently.
TEST(Gprof, AnExecutableWithoutSamplesIsWarnedOf) {
  const std::string dir = temp_dir("gmon_lib");
  const LibraryRun run = record_library_run(dir);
  ASSERT_TRUE(run.program_region) << "the profile has no region of " << EXPORT_PROG;
  ASSERT_EQ(run.in_program, 0u) << "the program's own text has samples: this test needs none";
  ASSERT_GE(run.samples, 20u);
  const std::string log = export_gmon(run.file, dir + "/gmon.out");
  EXPECT_NE(log.find("warning: gmon: the text of " + std::string(EXPORT_PROG) + " holds 0 of the " +
                     std::to_string(run.samples) + " samples kept"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("The others are in libreport_testlib.so ("), std::string::npos) << log;
  report_test::run("rm -rf " + q(dir));
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
