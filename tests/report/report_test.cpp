// Symbolization and reports over the real report_testprog / libreport_testlib.so with synthetic
// profiles: counts are placed at addresses taken from nm (independent of the symbolizer), so
// every expected attribution is exact.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "report/exporter.hpp"
#include "report/labels.hpp"
#include "symbolize/symbolize.hpp"
#include "test_util.hpp"

namespace sprofil::report_test {
namespace {

using report::By;
using report::Options;
using report::Row;
using report::Table;

constexpr uint64_t kProgBias = 0x555555554000ull;
constexpr uint64_t kLibBias = 0x7f1234560000ull;
constexpr uint64_t kTick = 1000000;  // 1 ms

uint64_t prog_bias() {
  return report_test::is_pie(TESTPROG) ? kProgBias : 0;
}

const Row* find_row(const Table& t, const std::string& name, const std::string& object) {
  for (const Row& r : t.rows)
    if (r.name == name && r.object == object) return &r;
  return nullptr;
}

double sum_rows(const Table& t) {
  double s = 0;
  for (const Row& r : t.rows) s += r.samples;
  return s;
}

// The functions of the test program and their expected counts.
struct Fixture {
  profile::Profile p = report_test::base_profile(kTick);
  std::map<std::string, uint64_t> expected;  // function -> samples in report_testprog
  uint64_t lib_samples = 0, vdso_samples = 13, gone_samples = 17, overflow = 7;
};

Fixture make_fixture() {
  Fixture f;
  auto fns = nm_functions(TESTPROG);
  profile::Region prog = report_test::text_region(TESTPROG, prog_bias(), 4, SPROF_R_MAIN);
  const char* names[] = {"int demo::sum_squares<int>(int const*, int)",
                         "double demo::sum_squares<double>(double const*, int)",
                         "demo::Widget::spin(long)", "demo::uses_inline(long)", "main"};
  uint64_t n = 100;
  for (const char* name : names) {
    EXPECT_TRUE(fns.count(name)) << "nm has no " << name;
    if (!fns.count(name)) continue;
    const NmSymbol& s = fns[name];
    // Two bins strictly inside the function.
    uint64_t a = s.addr + prog_bias() + s.size / 2;
    EXPECT_TRUE(
        report_test::bin_inside(prog, a, s.addr + prog_bias(), s.addr + prog_bias() + s.size))
        << name;
    report_test::add_at(&prog, a, n);
    report_test::add_at(&prog, s.addr + prog_bias() + s.size / 4, 1);
    f.expected[name] = n + 1;
    n += 100;
  }
  f.p.regions.push_back(prog);

  auto lfns = nm_functions(TESTLIB);
  EXPECT_TRUE(lfns.count("testlib::lib_work(long)"));
  profile::Region lib = report_test::text_region(TESTLIB, kLibBias, 4);
  const NmSymbol& lw = lfns["testlib::lib_work(long)"];
  report_test::add_at(&lib, lw.addr + kLibBias + lw.size / 2, 42);
  f.lib_samples = 42;
  f.p.regions.push_back(lib);

  profile::Region vdso;
  vdso.path = "[vdso]";
  vdso.flags = SPROF_R_VDSO;
  vdso.start = 0x7fff00000000ull;
  vdso.end = vdso.start + 0x1000;
  vdso.bin_size = 16;
  vdso.add(3, f.vdso_samples);
  f.p.regions.push_back(vdso);

  profile::Region gone = vdso;
  gone.path = "/nonexistent/dir/libgone.so.1";
  gone.flags = 0;
  gone.start = 0x7e0000000000ull;
  gone.end = gone.start + 0x1000;
  gone.bins.clear();
  gone.add(9, f.gone_samples);
  f.p.regions.push_back(gone);

  f.p.overflow = f.overflow;
  return f;
}

uint64_t fixture_total(const Fixture& f) {
  uint64_t t = f.lib_samples + f.vdso_samples + f.gone_samples + f.overflow;
  for (auto& [name, n] : f.expected) t += n;
  return t;
}

TEST(Symbolize, DemangledFunctionsMatchNm) {
  symbolize::Symbolizer sym;
  symbolize::Object* obj = sym.open(TESTPROG, report_test::build_id(TESTPROG));
  ASSERT_TRUE(obj->ok());
  EXPECT_TRUE(obj->warning().empty()) << obj->warning();
  auto fns = nm_functions(TESTPROG);
  for (const char* name :
       {"demo::Widget::spin(long)", "int demo::sum_squares<int>(int const*, int)",
        "demo::uses_inline(long)"}) {
    ASSERT_TRUE(fns.count(name)) << name;
    const NmSymbol& s = fns[name];
    for (uint64_t off : {uint64_t(0), s.size / 2, s.size - 1}) {
      symbolize::Resolved r = sym.resolve(TESTPROG, report_test::build_id(TESTPROG), kProgBias,
                                          kProgBias + s.addr + off);
      EXPECT_TRUE(r.known);
      EXPECT_EQ(r.function, name);
      EXPECT_EQ(r.symbol_start, kProgBias + s.addr);
      EXPECT_EQ(r.symbol_size, s.size);
      EXPECT_NE(r.file.find("testprog.cpp"), std::string::npos) << r.file;
      EXPECT_GT(r.line, 0);
    }
  }
  // Sorted, non-overlapping extents.
  const auto& all = obj->functions();
  ASSERT_FALSE(all.empty());
  for (size_t i = 1; i < all.size(); ++i) EXPECT_LE(all[i - 1].end, all[i].start);
}

TEST(Symbolize, UnknownObjectsAndBuildIdMismatch) {
  symbolize::Symbolizer sym;
  EXPECT_FALSE(sym.open("[vdso]", {})->ok());
  symbolize::Resolved r = sym.resolve("/nonexistent/libx.so", {}, 0, 0x1234);
  EXPECT_FALSE(r.known);
  EXPECT_EQ(r.function, "[unknown]");
  auto w = sym.take_warnings();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("/nonexistent/libx.so"), std::string::npos) << w[0];

  std::vector<uint8_t> wrong(20, 0xab);
  symbolize::Object* obj = sym.open(TESTPROG, wrong);
  EXPECT_TRUE(obj->ok());  // used anyway, with a warning
  w = sym.take_warnings();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("build-id mismatch"), std::string::npos) << w[0];
}

TEST(Report, EverySampleAttributedToTheRightFunction) {
  Fixture f = make_fixture();
  symbolize::Symbolizer sym;
  Table t = report::aggregate(f.p, sym, Options{});
  uint64_t total = fixture_total(f);
  EXPECT_EQ(t.total_samples, total);
  EXPECT_DOUBLE_EQ(sum_rows(t), double(total));
  for (auto& [name, n] : f.expected) {
    const Row* r = find_row(t, name, "report_testprog");
    ASSERT_NE(r, nullptr) << name;
    EXPECT_DOUBLE_EQ(r->samples, double(n)) << name;
    EXPECT_DOUBLE_EQ(r->seconds, double(n) * 1e-3);
    EXPECT_NEAR(r->percent, 100.0 * double(n) / double(total), 1e-9);
  }
  const Row* lib = find_row(t, "testlib::lib_work(long)", "libreport_testlib.so");
  ASSERT_NE(lib, nullptr);
  EXPECT_DOUBLE_EQ(lib->samples, 42);
  const Row* vdso = find_row(t, "[unknown]", "[vdso]");
  ASSERT_NE(vdso, nullptr);
  EXPECT_DOUBLE_EQ(vdso->samples, double(f.vdso_samples));
  const Row* gone = find_row(t, "[unknown]", "libgone.so.1");
  ASSERT_NE(gone, nullptr);
  EXPECT_DOUBLE_EQ(gone->samples, double(f.gone_samples));
  const Row* out = find_row(t, "[outside any object]", "");
  ASSERT_NE(out, nullptr);
  EXPECT_DOUBLE_EQ(out->samples, double(f.overflow));
  // Sorted by samples, descending.
  for (size_t i = 1; i < t.rows.size(); ++i) EXPECT_GE(t.rows[i - 1].samples, t.rows[i].samples);
  // The unopenable object is a warning, not an error.
  bool warned = false;
  for (auto& w : t.warnings) warned |= w.find("libgone.so.1") != std::string::npos;
  EXPECT_TRUE(warned);
}

TEST(Report, ByObjectAndFilters) {
  Fixture f = make_fixture();
  symbolize::Symbolizer sym;
  Options o;
  o.by = By::kObject;
  Table t = report::aggregate(f.p, sym, o);
  uint64_t prog = 0;
  for (auto& [name, n] : f.expected) prog += n;
  const Row* r = find_row(t, "report_testprog", "report_testprog");
  ASSERT_NE(r, nullptr);
  EXPECT_DOUBLE_EQ(r->samples, double(prog));
  ASSERT_NE(find_row(t, "libreport_testlib.so", "libreport_testlib.so"), nullptr);
  EXPECT_DOUBLE_EQ(sum_rows(t), double(fixture_total(f)));

  Options filt;
  filt.object = "testlib";
  t = report::aggregate(f.p, sym, filt);
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_EQ(t.rows[0].name, "testlib::lib_work(long)");
  EXPECT_EQ(t.total_samples, fixture_total(f));  // percentages stay relative to everything

  Options lim;
  lim.limit = 2;
  t = report::aggregate(f.p, sym, lim);
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(t.rows[0].name, "main");  // the largest count (501)

  Options minp;
  minp.min_percent = 20;
  t = report::aggregate(f.p, sym, minp);
  for (const Row& row : t.rows) EXPECT_GE(row.percent, 20);
  EXPECT_EQ(t.rows.size(), 2u);  // main 501 and uses_inline 401 of 1604
}

TEST(Report, BinSpanningTwoFunctionsIsSplitByBytes) {
  auto fns = nm_functions(TESTPROG);
  // Two adjacent functions (no padding), the first >= 3 bytes, the second >= 5.
  std::vector<NmSymbol> v;
  for (auto& [n, s] : fns) v.push_back(s);
  std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.addr < b.addr; });
  const NmSymbol *f1 = nullptr, *f2 = nullptr;
  for (size_t i = 1; i < v.size() && f1 == nullptr; ++i)
    if (v[i - 1].addr + v[i - 1].size == v[i].addr && v[i - 1].size >= 3 && v[i].size >= 5) {
      f1 = &v[i - 1];
      f2 = &v[i];
    }
  ASSERT_NE(f1, nullptr) << "no two adjacent functions in the test program";
  uint64_t bias = prog_bias();
  profile::Profile p = report_test::base_profile(kTick);
  // 8-byte bins aligned so that one bin holds the last 3 bytes of f1 and the first 5 of f2.
  profile::Region r = report_test::text_region(TESTPROG, bias, 8, SPROF_R_MAIN);
  uint64_t boundary = f2->addr + bias;
  r.start = boundary - 3 - ((boundary - 3 - r.start) / 8) * 8;
  r.bins.clear();
  report_test::add_at(&r, boundary - 3, 800);
  p.regions.push_back(r);
  symbolize::Symbolizer sym;
  Table t = report::aggregate(p, sym, Options{});
  ASSERT_EQ(t.rows.size(), 2u);
  const Row* a = find_row(t, f1->name, "report_testprog");
  const Row* b = find_row(t, f2->name, "report_testprog");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NEAR(a->samples, 300, 1e-9);  // 3/8 of 800
  EXPECT_NEAR(b->samples, 500, 1e-9);  // 5/8 of 800
}

TEST(Report, WilsonIntervalMatchesHandComputation) {
  // Hand-computed with z = 1.959963984540054:
  //   x=30, n=100: p=0.3, center=(p+z^2/2n)/(1+z^2/n), half=z/(1+z^2/n)*sqrt(p(1-p)/n+z^2/4n^2)
  report::Interval iv = report::wilson(30, 100);
  EXPECT_NEAR(iv.lo, 0.2189488529, 1e-9);
  EXPECT_NEAR(iv.hi, 0.3958485463, 1e-9);
  iv = report::wilson(0, 50);
  EXPECT_NEAR(iv.lo, 0.0, 1e-12);
  EXPECT_NEAR(iv.hi, 0.0713475991, 1e-9);
  iv = report::wilson(5, 1000);
  EXPECT_NEAR(iv.lo, 0.0021375355, 1e-9);
  EXPECT_NEAR(iv.hi, 0.0116509554, 1e-9);

  // In a report row: 30 of 100 samples.
  auto fns = nm_functions(TESTPROG);
  const NmSymbol& s = fns["demo::Widget::spin(long)"];
  profile::Profile p = report_test::base_profile(kTick);
  profile::Region r = report_test::text_region(TESTPROG, prog_bias(), 4, SPROF_R_MAIN);
  report_test::add_at(&r, prog_bias() + s.addr + s.size / 2, 30);
  p.regions.push_back(r);
  p.overflow = 70;
  symbolize::Symbolizer sym;
  Table t = report::aggregate(p, sym, Options{});
  const Row* row = find_row(t, "demo::Widget::spin(long)", "report_testprog");
  ASSERT_NE(row, nullptr);
  EXPECT_NEAR(row->percent, 30.0, 1e-9);
  EXPECT_NEAR(row->ci95_lo, 21.89488529, 1e-7);
  EXPECT_NEAR(row->ci95_hi, 39.58485463, 1e-7);
}

// Addresses of demo::uses_inline whose innermost frame is the inlined demo::mix, per addr2line.
std::vector<uint64_t> inlined_mix_addresses(int mix_line) {
  auto fns = nm_functions(TESTPROG);
  const NmSymbol& s = fns["demo::uses_inline(long)"];
  std::string cmd = "addr2line -a -i -e '" + std::string(TESTPROG) + "'";
  for (uint64_t a = s.addr; a < s.addr + s.size; ++a) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " %llx", (unsigned long long)a);
    cmd += buf;
  }
  std::istringstream in(report_test::run(cmd));
  std::string line;
  std::vector<uint64_t> out;
  uint64_t cur = 0;
  bool first = false;
  while (std::getline(in, line)) {
    if (line.rfind("0x", 0) == 0) {
      cur = std::stoull(line, nullptr, 16);
      first = true;
      continue;
    }
    if (first && line.find("testprog.cpp:" + std::to_string(mix_line)) != std::string::npos)
      out.push_back(cur);
    first = false;
  }
  return out;
}

TEST(Report, ByLineWithInlineFrames) {
  int mix_line = report_test::marker_line(TESTPROG_SOURCE, "MARK:mix");
  int call_line = report_test::marker_line(TESTPROG_SOURCE, "MARK:call-mix");
  ASSERT_GT(mix_line, 0);
  ASSERT_GT(call_line, 0);
  std::vector<uint64_t> addrs = inlined_mix_addresses(mix_line);
  ASSERT_FALSE(addrs.empty()) << "addr2line finds no inlined mix() in uses_inline";
  uint64_t bias = prog_bias();
  profile::Profile p = report_test::base_profile(kTick);
  profile::Region r = report_test::text_region(TESTPROG, bias, 1, SPROF_R_MAIN);
  for (uint64_t a : addrs) report_test::add_at(&r, a + bias, 10);
  p.regions.push_back(r);
  symbolize::Symbolizer sym;

  Options o;
  o.by = By::kLine;
  Table t = report::aggregate(p, sym, o);
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_EQ(t.rows[0].name, "demo::uses_inline(long)");  // the ELF symbol
  EXPECT_NE(t.rows[0].file.find("testprog.cpp"), std::string::npos);
  EXPECT_EQ(t.rows[0].line, mix_line);
  EXPECT_DOUBLE_EQ(t.rows[0].samples, 10.0 * double(addrs.size()));

  o.inline_frames = true;
  t = report::aggregate(p, sym, o);
  ASSERT_FALSE(t.rows.empty());
  double total = 0;
  for (const Row& row : t.rows) {
    total += row.samples;
    ASSERT_GE(row.frames.size(), 2u);
    EXPECT_EQ(row.frames[0].line, mix_line);
    EXPECT_NE(row.frames[0].function.find("mix"), std::string::npos) << row.frames[0].function;
    EXPECT_EQ(row.frames[1].line, call_line);
    EXPECT_NE(row.frames[1].function.find("uses_inline"), std::string::npos);
  }
  EXPECT_DOUBLE_EQ(total, 10.0 * double(addrs.size()));
}

TEST(Report, ByAddress) {
  auto fns = nm_functions(TESTPROG);
  const NmSymbol& s = fns["demo::Widget::spin(long)"];
  profile::Profile p = report_test::base_profile(kTick);
  profile::Region r = report_test::text_region(TESTPROG, prog_bias(), 1, SPROF_R_MAIN);
  report_test::add_at(&r, prog_bias() + s.addr + 2, 5);
  p.regions.push_back(r);
  symbolize::Symbolizer sym;
  Options o;
  o.by = By::kAddress;
  Table t = report::aggregate(p, sym, o);
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_EQ(t.rows[0].address, prog_bias() + s.addr + 2);
  EXPECT_EQ(t.rows[0].vaddr, s.addr + 2);
  EXPECT_EQ(t.rows[0].name, "demo::Widget::spin(long)+0x2");
}

// By address, one row an instruction of an object, as by function: three processes of the test
// program (a shell loop's, each at its own load address; 0 and 1 at one address, 2 at another)
// give one row for the same instruction, its samples summed, with the run-time address of none
// (0, null in JSON; the text shows the object's address alone). Two processes at one address
// keep it.
TEST(Report, ByAddressJoinsTheProcessesOfAnInstruction) {
  auto fns = nm_functions(TESTPROG);
  const NmSymbol& s = fns["demo::Widget::spin(long)"];
  auto make = [&](uint32_t processes) {
    profile::Profile p = report_test::base_profile(kTick);
    for (uint32_t k = 0; k < processes; ++k) {
      profile::Process pr;
      pr.pid = 300 + int(k);
      pr.comm = "report_testprog";
      pr.tick_ns = kTick;
      p.processes.push_back(pr);
      const uint64_t bias = prog_bias() + (k == 2 ? 0x10000000ull : 0);
      profile::Region r = report_test::text_region(TESTPROG, bias, 1, SPROF_R_MAIN);
      report_test::add_at(&r, bias + s.addr + 2, 5 + k);
      r.process = k;
      p.regions.push_back(r);
    }
    return p;
  };
  symbolize::Symbolizer sym;
  Options o;
  o.by = By::kAddress;
  Table two = report::aggregate(make(2), sym, o);
  ASSERT_EQ(two.rows.size(), 1u);
  EXPECT_EQ(two.rows[0].samples, 11);
  EXPECT_EQ(two.rows[0].address, prog_bias() + s.addr + 2);
  const profile::Profile p = make(3);
  Table three = report::aggregate(p, sym, o);
  ASSERT_EQ(three.rows.size(), 1u);
  EXPECT_EQ(three.rows[0].samples, 18);
  EXPECT_EQ(three.rows[0].address, 0u);
  EXPECT_EQ(three.rows[0].vaddr, s.addr + 2);
  EXPECT_EQ(three.rows[0].name, "demo::Widget::spin(long)+0x2");
  EXPECT_EQ(report::label_of(three.rows[0], By::kAddress),
            "(" + report::hex_addr(s.addr + 2) + " in object) demo::Widget::spin(long)+0x2");
  std::ostringstream js;
  report::write_json(p, three, o, js);
  nlohmann::json j = nlohmann::json::parse(js.str());
  ASSERT_EQ(j["rows"].size(), 1u);
  EXPECT_TRUE(j["rows"][0]["address"].is_null()) << j["rows"][0].dump();
  EXPECT_EQ(j["rows"][0]["vaddr"].get<uint64_t>(), s.addr + 2);
}

TEST(Report, JsonMatchesSchema) {
  Fixture f = make_fixture();
  symbolize::Symbolizer sym;
  Options o;
  Table t = report::aggregate(f.p, sym, o);
  std::ostringstream s;
  report::write_json(f.p, t, o, s);
  nlohmann::json j = nlohmann::json::parse(s.str());
  ASSERT_TRUE(j.is_object());
  ASSERT_TRUE(j["total_samples"].is_number_unsigned());
  EXPECT_EQ(j["total_samples"].get<uint64_t>(), fixture_total(f));
  EXPECT_DOUBLE_EQ(j["tick_seconds"].get<double>(), 1e-3);
  ASSERT_TRUE(j["rows"].is_array());
  EXPECT_EQ(j["rows"].size(), t.rows.size());
  double pct = 0;
  for (auto& row : j["rows"]) {
    for (const char* k : {"name", "object"}) EXPECT_TRUE(row[k].is_string()) << k;
    for (const char* k : {"samples", "percent", "seconds"}) EXPECT_TRUE(row[k].is_number()) << k;
    ASSERT_TRUE(row["ci95"].is_array());
    ASSERT_EQ(row["ci95"].size(), 2u);
    double lo = row["ci95"][0], hi = row["ci95"][1], p = row["percent"];
    EXPECT_LE(lo, p);
    EXPECT_GE(hi, p);
    EXPECT_GE(lo, 0);
    EXPECT_LE(hi, 100);
    EXPECT_NEAR(row["seconds"].get<double>(), row["samples"].get<double>() * 1e-3, 1e-12);
    pct += p;
  }
  EXPECT_NEAR(pct, 100.0, 1e-9);
  // "name" is the plain demangled name.
  bool found = false;
  for (auto& row : j["rows"]) found |= row["name"] == "demo::Widget::spin(long)";
  EXPECT_TRUE(found);
}

TEST(Report, TextCsvAndFolded) {
  Fixture f = make_fixture();
  f.p.flags = 0;  // did not finish cleanly
  symbolize::Symbolizer sym;
  Options o;
  o.source = "prof.sprof";
  Table t = report::aggregate(f.p, sym, o);
  std::ostringstream text;
  report::write_text(f.p, t, o, text);
  std::string s = text.str();
  for (const char* needle : {"command:        testprog 1000", "clock:", "requested 1000 Hz",
                             "total samples:  1584 (1.584 CPU seconds estimated)",
                             "overflow:       7", "did not finish cleanly", "[outside any object]",
                             "demo::Widget::spin(long)  report_testprog", "libreport_testlib.so"})
    EXPECT_NE(s.find(needle), std::string::npos) << needle << "\n" << s;

  std::ostringstream csv;
  report::write_csv(t, csv);
  std::istringstream in(csv.str());
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "samples,percent,ci95_low,ci95_high,seconds,name,object,file,line,address");
  size_t lines = 0;
  while (std::getline(in, line)) ++lines;
  EXPECT_EQ(lines, t.rows.size());

  std::ostringstream folded;
  report::write_folded(t, folded);
  std::istringstream fin(folded.str());
  uint64_t sum = 0;
  bool saw = false;
  while (std::getline(fin, line)) {
    size_t sp = line.rfind(' ');
    ASSERT_NE(sp, std::string::npos);
    sum += std::stoull(line.substr(sp + 1));
    saw |= line.rfind("report_testprog;demo::Widget::spin(long) ", 0) == 0;
  }
  EXPECT_TRUE(saw) << folded.str();
  EXPECT_EQ(sum, fixture_total(f));
}

// gprof's counters are 16-bit: a bin of 70000 makes every count halved (factor 2, rounded to
// nearest), one record per region, and a warning says so; the size follows the text only.
// A run profile that did not finish: the warning names the processes that did not (the first
// five, by pid and command), says their samples are counted, and their CPU time unknown. A
// lone process's profile says so of the program. A finished one has none.
TEST(Report, UnfinishedProcessesAreNamed) {
  profile::Profile p = report_test::base_profile(kTick);
  p.flags = SPROF_F_FINISHED;
  EXPECT_EQ(report::unfinished_note(p), "");
  p.flags = 0;
  EXPECT_NE(report::unfinished_note(p).find("the profile did not finish cleanly (the program"),
            std::string::npos)
      << report::unfinished_note(p);
  for (int k = 0; k < 8; ++k) {
    profile::Process pr;
    pr.pid = 100 + k;
    pr.comm = "p" + std::to_string(k);
    pr.flags = k == 1 || k >= 3 ? 0 : SPROF_F_FINISHED;  // 1, 3, 4, 5, 6, 7 did not
    p.processes.push_back(pr);
  }
  EXPECT_EQ(report::unfinished_note(p),
            "6 of 8 processes did not finish cleanly (crashed, killed, or still running): 101 "
            "(p1), 103 (p3), 104 (p4), 105 (p5), 106 (p6) and 1 more; their samples up to then "
            "are counted; their CPU time and effective rate are unknown");
}

TEST(Report, GmonScalesLargeCounts) {
  auto fns = nm_functions(TESTPROG);
  const NmSymbol& s = fns["demo::Widget::spin(long)"];
  profile::Profile p = report_test::base_profile(kTick);
  profile::Region r = report_test::text_region(TESTPROG, prog_bias(), 4, SPROF_R_MAIN);
  report_test::add_at(&r, prog_bias() + s.addr + s.size / 2, 70000);
  report_test::add_at(&r, prog_bias() + s.addr, 3);  // 1.5 rounds to 2
  report_test::add_at(&r, r.end - 1, 1);             // 0.5 rounds to 1 (half up)
  p.regions.push_back(r);
  std::string path = ::testing::TempDir() + "/report_gmon.out";
  std::string err;
  std::vector<std::string> warnings;
  ASSERT_TRUE(report::write_report(p, report::gmon_exporter(), {}, path, &warnings, &err)) << err;
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("divided by 2"), std::string::npos) << warnings[0];
  std::string g = report_test::read_file(path);
  ASSERT_GE(g.size(), 20u);
  EXPECT_EQ(g.substr(0, 4), "gmon");
  int32_t version;
  std::memcpy(&version, g.data() + 4, 4);
  EXPECT_EQ(version, 1);
  size_t rec = 1 + 8 + 8 + 4 + 4 + 15 + 1 + 2 * r.nbins();
  ASSERT_EQ(g.size(), 20 + rec);  // one record, however large the counts
  const char* h = g.data() + 20;
  EXPECT_EQ(h[0], 0);  // GMON_TAG_TIME_HIST
  uint64_t lo, hi;
  uint32_t n, rate;
  std::memcpy(&lo, h + 1, 8);
  std::memcpy(&hi, h + 9, 8);
  std::memcpy(&n, h + 17, 4);
  std::memcpy(&rate, h + 21, 4);
  EXPECT_EQ(lo, r.start - r.load_bias);
  EXPECT_EQ(hi, lo + 4 * r.nbins());
  EXPECT_EQ(n, r.nbins());
  EXPECT_EQ(rate, 500u);  // 1000 Hz divided by the counts' factor: gprof's seconds stay right
  EXPECT_NE(warnings[0].find("the rate by the same factor (500 Hz)"), std::string::npos)
      << warnings[0];
  EXPECT_EQ(std::string(h + 25, 7), "seconds");
  EXPECT_EQ(h[40], 's');
  std::vector<uint16_t> bins(n);
  std::memcpy(bins.data(), h + 41, 2 * size_t{n});
  r.for_each_bin([&](uint64_t i, uint64_t c, uint64_t) {
    EXPECT_EQ(bins[i], c == 70000 ? 35000u : c == 3 ? 2u : 1u) << c;
  });
  uint64_t sum = 0;
  for (uint16_t c : bins) sum += c;
  EXPECT_EQ(sum, 35000u + 2 + 1);
  std::string none_err;
  profile::Profile empty = report_test::base_profile(kTick);
  EXPECT_FALSE(report::write_report(empty, report::gmon_exporter(), {}, path, nullptr, &none_err));
  EXPECT_NE(none_err.find(path), std::string::npos);
}

// A gmon.out's histogram records, parsed back: one per GMON_TAG_TIME_HIST record.
struct GmonRecord {
  uint64_t low = 0, high = 0;
  uint32_t rate = 0;
  std::vector<uint16_t> bins;
};
std::vector<GmonRecord> gmon_records(const std::string& g) {
  std::vector<GmonRecord> out;
  EXPECT_EQ(g.substr(0, 4), "gmon");
  size_t at = 20;
  while (at + 41 <= g.size()) {
    EXPECT_EQ(g[at], 0) << "not a histogram record at " << at;
    GmonRecord r;
    uint32_t n = 0;
    std::memcpy(&r.low, g.data() + at + 1, 8);
    std::memcpy(&r.high, g.data() + at + 9, 8);
    std::memcpy(&n, g.data() + at + 17, 4);
    std::memcpy(&r.rate, g.data() + at + 21, 4);
    if (at + 41 + 2 * size_t{n} > g.size()) {
      ADD_FAILURE() << "a record past the end";
      break;
    }
    r.bins.resize(n);
    std::memcpy(r.bins.data(), g.data() + at + 41, 2 * size_t{n});
    at += 41 + 2 * size_t{n};
    out.push_back(std::move(r));
  }
  EXPECT_EQ(at, g.size());
  return out;
}

// gprof counts addresses in 2-byte units: 1-byte bins (record's exact bins) are summed into
// 2-byte bins over an even range, every count kept, each where its byte lies.
TEST(Report, GmonSumsOneByteBinsIntoTwoByteBins) {
  auto fns = nm_functions(TESTPROG);
  const NmSymbol& s = fns["demo::Widget::spin(long)"];
  profile::Profile p = report_test::base_profile(kTick);
  profile::Region r = report_test::text_region(TESTPROG, prog_bias(), 1, SPROF_R_MAIN);
  const uint64_t a = prog_bias() + (s.addr + s.size / 2) / 2 * 2;  // an even address
  report_test::add_at(&r, a, 5);
  report_test::add_at(&r, a + 1, 7);  // the same 2-byte bin
  report_test::add_at(&r, a + 2, 3);  // the next one
  report_test::add_at(&r, r.end - 1, 1);
  p.regions.push_back(r);
  std::string g, err;
  std::vector<std::string> warnings;
  ASSERT_TRUE(report::gmon_bytes(p, &g, &err, &warnings)) << err;
  EXPECT_TRUE(warnings.empty()) << warnings[0];
  std::vector<GmonRecord> recs = gmon_records(g);
  ASSERT_EQ(recs.size(), 1u);
  const GmonRecord& rec = recs[0];
  const uint64_t low = r.start - r.load_bias;
  EXPECT_EQ(rec.low, low / 2 * 2);
  EXPECT_EQ(rec.high % 2, 0u);
  EXPECT_GE(rec.high, r.end - r.load_bias);
  EXPECT_LT(rec.high, r.end - r.load_bias + 2);
  ASSERT_EQ(rec.bins.size(), (rec.high - rec.low) / 2);
  EXPECT_EQ(rec.rate, 1000u);
  EXPECT_EQ(rec.bins[(a - r.load_bias - rec.low) / 2], 12u);
  EXPECT_EQ(rec.bins[(a + 2 - r.load_bias - rec.low) / 2], 3u);
  EXPECT_EQ(rec.bins.back(), 1u);
  uint64_t sum = 0;
  for (uint16_t c : rec.bins) sum += c;
  EXPECT_EQ(sum, 5u + 7 + 3 + 1);  // no count lost
}

// A run of several processes: a gmon.out describes one executable. Process 0 (the root) runs
// `other` (libreport_testlib.so standing for a shell), 1 and 2 the test program: the program's
// two regions are summed into one record, the other left out with a warning; --pid and --comm
// choose among the processes.
TEST(Report, GmonExportsOneExecutableSummingItsProcesses) {
  auto fns = nm_functions(TESTPROG);
  const NmSymbol& s = fns["demo::Widget::spin(long)"];
  const uint64_t at = prog_bias() + s.addr + s.size / 2;
  auto make = [&](uint64_t root_samples) {
    profile::Profile p = report_test::base_profile(kTick);
    const char* comms[] = {"sh", "report_testprog", "report_testprog"};
    for (int k = 0; k < 3; ++k) {
      profile::Process pr;
      pr.pid = 200 + k;
      pr.comm = comms[k];
      pr.tick_ns = kTick;
      p.processes.push_back(pr);
    }
    profile::Region other = report_test::text_region(TESTLIB, kLibBias, 1, SPROF_R_MAIN);
    if (root_samples > 0) report_test::add_at(&other, other.start + 16, root_samples);
    other.process = 0;
    p.regions.push_back(other);
    for (uint32_t k = 1; k <= 2; ++k) {
      profile::Region r = report_test::text_region(TESTPROG, prog_bias(), 1, SPROF_R_MAIN);
      report_test::add_at(&r, at, 100 * k);
      r.process = k;
      p.regions.push_back(r);
    }
    return p;
  };
  auto total = [](const std::vector<GmonRecord>& recs) {
    uint64_t sum = 0;
    for (const GmonRecord& r : recs)
      for (uint16_t c : r.bins) sum += c;
    return sum;
  };
  // The root's text holds under 10% of the samples (2 of 302): the most-sampled executable.
  profile::Profile p = make(2);
  std::string g, err;
  std::vector<std::string> warnings;
  ASSERT_TRUE(report::gmon_bytes(p, &g, &err, &warnings)) << err;
  std::vector<GmonRecord> recs = gmon_records(g);
  ASSERT_EQ(recs.size(), 1u);  // both processes' regions in one record
  EXPECT_EQ(total(recs), 300u);
  EXPECT_EQ(recs[0].low, p.regions[1].start - p.regions[1].load_bias);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("exported " + std::string(TESTPROG) + " (2 processes, 300 samples"),
            std::string::npos)
      << warnings[0];
  EXPECT_NE(warnings[0].find("left out 2 samples in the text of 1 other executable "
                             "(libreport_testlib.so)"),
            std::string::npos)
      << warnings[0];
  // So it does with 1.3% (4 of 304: a shell's fork, exec and wait in a loaded run).
  p = make(4);
  warnings.clear();
  ASSERT_TRUE(report::gmon_bytes(p, &g, &err, &warnings)) << err;
  EXPECT_EQ(total(gmon_records(g)), 300u);
  // With 10% or more (34 of 334) the root's executable is exported, and since that is under
  // half of the samples, a second warning says where the others are.
  p = make(34);
  warnings.clear();
  ASSERT_TRUE(report::gmon_bytes(p, &g, &err, &warnings)) << err;
  recs = gmon_records(g);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(total(recs), 34u);
  EXPECT_EQ(recs[0].low, (p.regions[0].start - p.regions[0].load_bias) / 2 * 2);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("left out 300 samples"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find("the text of " + std::string(TESTLIB) +
                             " holds 34 of the 334 samples kept; gprof sees only those. The "
                             "others are in report_testprog (300)"),
            std::string::npos)
      << warnings[1];
  // --pid 202: that process alone, nothing left out to warn of.
  Options o;
  o.pids = {202};
  warnings.clear();
  ASSERT_TRUE(report::gmon_bytes(p, &g, &err, &warnings, o)) << err;
  EXPECT_EQ(total(gmon_records(g)), 200u);
  EXPECT_TRUE(warnings.empty());
  // --comm report_testprog: its two processes summed, though the root has more than 10%.
  o = {};
  o.comms = {"report_testprog"};
  ASSERT_TRUE(report::gmon_bytes(p, &g, &err, &warnings, o)) << err;
  recs = gmon_records(g);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(total(recs), 300u);
  // A root without samples in its text (a shell that only waited) gives way as well.
  // Its text held no sample, so nothing is left out and nothing is warned of.
  p = make(0);
  warnings.clear();
  ASSERT_TRUE(report::gmon_bytes(p, &g, &err, &warnings)) << err;
  EXPECT_EQ(total(gmon_records(g)), 300u);
  EXPECT_TRUE(warnings.empty()) << warnings[0];
}

}  // namespace
}  // namespace sprofil::report_test

namespace sprofil::report_test {
namespace {

TEST(Symbolize, SeparateDebugFileThroughDebuglink) {
  // A stripped copy of the program whose symbols and lines live in a .debug file named by
  // .gnu_debuglink next to it: libdwfl's standard search finds it.
  std::string dir = ::testing::TempDir() + "/sprofil_debuglink_" + std::to_string(::getpid());
  std::string prog = dir + "/prog", debug = dir + "/prog.debug";
  int status = 0;
  report_test::run("mkdir -p '" + dir + "' && objcopy --only-keep-debug '" + std::string(TESTPROG) +
                       "' '" + debug + "' && objcopy --strip-all --add-gnu-debuglink='" + debug +
                       "' '" + std::string(TESTPROG) + "' '" + prog + "'",
                   &status);
  ASSERT_EQ(status, 0);
  ASSERT_EQ(report_test::run("nm '" + prog + "' 2>/dev/null"), "") << "the copy still has symbols";
  auto fns = nm_functions(TESTPROG);
  const NmSymbol& s = fns["demo::Widget::spin(long)"];
  symbolize::Symbolizer sym;
  symbolize::Resolved r =
      sym.resolve(prog, report_test::build_id(prog), kProgBias, kProgBias + s.addr + s.size / 2);
  EXPECT_TRUE(r.known);
  EXPECT_EQ(r.function, "demo::Widget::spin(long)");
  EXPECT_EQ(r.symbol_size, s.size);
  EXPECT_NE(r.file.find("testprog.cpp"), std::string::npos) << r.file;
  EXPECT_GT(r.line, 0);
  report_test::run("rm -rf '" + dir + "'");
}

// A stripped program's entry point is named `_start`, as its crt1 names it (where record's
// default counts the end of each exec and the programs that ended before their first
// sample): the PIE and the fixed-address program, stripped of every symbol. The name covers
// its first 16 bytes only (its size is unknown there): the next byte is [unknown]. The
// unstripped program keeps its own `_start` with its size.
TEST(Symbolize, StrippedProgramsEntryPointIsStart) {
  testproc::TempDir dir("sprofil_entry");
  for (const std::string& prog : {std::string(TESTPROG), std::string(TESTPROG_NOPIE)}) {
    SCOPED_TRACE(prog);
    auto fns = nm_functions(prog);
    ASSERT_TRUE(fns.count("_start")) << "crt1's _start in the unstripped program";
    const NmSymbol start = fns["_start"];
    ASSERT_GT(start.size, 16u);
    const std::string copy = dir.path() + "/" + prog.substr(prog.rfind('/') + 1);
    int status = 0;
    report_test::run("strip -s -o '" + copy + "' '" + prog + "'", &status);
    ASSERT_EQ(status, 0);
    ASSERT_EQ(report_test::run("nm '" + copy + "' 2>/dev/null"), "") << "the copy has symbols";
    const uint64_t bias = report_test::is_pie(prog) ? kProgBias : 0;
    symbolize::Symbolizer sym;
    for (uint64_t off : {uint64_t(0), uint64_t(15)}) {
      symbolize::Resolved r =
          sym.resolve(copy, report_test::build_id(copy), bias, bias + start.addr + off);
      EXPECT_TRUE(r.known) << off;
      EXPECT_EQ(r.function, "_start") << off;
      EXPECT_EQ(r.symbol_start, bias + start.addr);
      EXPECT_EQ(r.symbol_size, 16u);
    }
    symbolize::Resolved after =
        sym.resolve(copy, report_test::build_id(copy), bias, bias + start.addr + 16);
    EXPECT_FALSE(after.known) << after.function;
    EXPECT_EQ(after.function, "[unknown]");
    symbolize::Resolved own =
        sym.resolve(prog, report_test::build_id(prog), bias, bias + start.addr + start.size - 1);
    EXPECT_EQ(own.function, "_start");
    EXPECT_EQ(own.symbol_size, start.size);
  }
}

}  // namespace
}  // namespace sprofil::report_test
