// User and system time apart (host side): a profile of the real
// report_testprog whose regions carry system parts (SPROF_R_SYSTEM), placed at nm addresses,
// so every number is exact: the per-row split, the totals, --user-only shares, and the text,
// JSON and CSV output of the real `sprofil report`.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "profile/writer.hpp"
#include "report/exporter.hpp"
#include "symbolize/symbolize.hpp"
#include "test_util.hpp"

namespace sprofil::report_test {
namespace {

using report::Options;
using report::Row;
using report::Table;

constexpr uint64_t kTick = 1000000;  // 1 ms

uint64_t prog_bias() {
  return report_test::is_pie(TESTPROG) ? 0x555555554000ull : 0;
}

const Row* find_row(const Table& t, const std::string& name) {
  for (const Row& r : t.rows)
    if (r.name == name) return &r;
  return nullptr;
}

// spin: 1000 samples of which 400 system; main: 200, none system; uses_inline: 300, all
// system; overflow 100. Total 1600, system 700, user 900.
profile::Profile split_profile(bool with_system) {
  profile::Profile p = report_test::base_profile(kTick);
  auto fns = report_test::nm_functions(TESTPROG);
  profile::Region r = report_test::text_region(TESTPROG, prog_bias(), 4, SPROF_R_MAIN);
  if (with_system) r.flags |= SPROF_R_SYSTEM;
  auto put = [&](const char* name, uint64_t count, uint64_t system) {
    const report_test::NmSymbol& s = fns.at(name);
    const uint64_t addr = prog_bias() + s.addr + s.size / 2;
    EXPECT_TRUE(
        report_test::bin_inside(r, addr, prog_bias() + s.addr, prog_bias() + s.addr + s.size))
        << name;
    r.add((addr - r.start) / r.bin_size, count, with_system ? system : 0);
  };
  put("demo::Widget::spin(long)", 1000, 400);
  put("main", 200, 0);
  put("demo::uses_inline(long)", 300, 300);
  p.regions.push_back(r);
  p.overflow = 100;
  p.delivered = 1600;
  return p;
}

TEST(ReportSystem, RowsSplitAndTotals) {
  const profile::Profile p = split_profile(true);
  EXPECT_TRUE(p.has_system());
  EXPECT_EQ(p.system_samples(), 700u);
  symbolize::Symbolizer sym;
  Table t = report::aggregate(p, sym, Options{});
  EXPECT_TRUE(t.has_system);
  EXPECT_FALSE(t.user_only);
  EXPECT_EQ(t.total_samples, 1600u);
  EXPECT_EQ(t.system_samples, 700u);
  const Row* spin = find_row(t, "demo::Widget::spin(long)");
  const Row* main_row = find_row(t, "main");
  const Row* inl = find_row(t, "demo::uses_inline(long)");
  ASSERT_TRUE(spin && main_row && inl);
  EXPECT_DOUBLE_EQ(spin->samples, 1000);
  EXPECT_DOUBLE_EQ(spin->system_samples, 400);
  EXPECT_DOUBLE_EQ(spin->percent, 62.5);
  EXPECT_DOUBLE_EQ(main_row->system_samples, 0);
  EXPECT_DOUBLE_EQ(inl->system_samples, 300);
}

TEST(ReportSystem, UserOnlySharesAreOfUserTime) {
  const profile::Profile p = split_profile(true);
  symbolize::Symbolizer sym;
  Options o;
  o.user_only = true;
  Table t = report::aggregate(p, sym, o);
  EXPECT_TRUE(t.user_only);
  EXPECT_EQ(t.total_samples, 900u);  // 1600 - 700 system
  const Row* spin = find_row(t, "demo::Widget::spin(long)");
  const Row* main_row = find_row(t, "main");
  const Row* outside = find_row(t, "[outside any object]");
  ASSERT_TRUE(spin && main_row && outside);
  EXPECT_DOUBLE_EQ(spin->samples, 600);
  EXPECT_DOUBLE_EQ(spin->system_samples, 0);
  EXPECT_DOUBLE_EQ(spin->percent, 100.0 * 600 / 900);
  EXPECT_DOUBLE_EQ(main_row->percent, 100.0 * 200 / 900);
  EXPECT_DOUBLE_EQ(outside->percent, 100.0 * 100 / 900);
  // All of uses_inline's time was in the kernel: no user row.
  EXPECT_EQ(find_row(t, "demo::uses_inline(long)"), nullptr);
  EXPECT_EQ(t.rows.size(), 3u);
}

TEST(ReportSystem, WithoutSystemDataNothingChanges) {
  const profile::Profile with = split_profile(false);
  EXPECT_FALSE(with.has_system());
  symbolize::Symbolizer sym;
  Options o;
  Table plain = report::aggregate(with, sym, o);
  o.user_only = true;  // no system data: --user-only has nothing to leave out
  Table user = report::aggregate(with, sym, o);
  EXPECT_FALSE(plain.has_system);
  EXPECT_FALSE(user.user_only);
  EXPECT_EQ(plain.total_samples, user.total_samples);
  std::ostringstream a, b, c;
  report::write_text(with, plain, Options{}, a);
  report::write_text(with, user, Options{}, b);
  EXPECT_EQ(a.str(), b.str());
  EXPECT_EQ(a.str().find("sys%"), std::string::npos);
  EXPECT_EQ(a.str().find("user/system"), std::string::npos);
  report::write_csv(plain, c);
  EXPECT_EQ(c.str().find("system_samples"), std::string::npos);
}

// The real tool on a file written by the real writer: header totals, the columns, JSON and CSV
// fields, and --user-only.
TEST(ReportSystem, ToolTextJsonCsvAndUserOnly) {
  const std::string file = ::testing::TempDir() + "/report_system.sprof";
  std::string err;
  ASSERT_TRUE(profile::write_profile(split_profile(true), file, &err)) << err;
  const std::string tool = std::string(SPROFIL_TOOL) + " report '" + file + "'";
  int status = 0;
  std::string text = report_test::run(tool + " 2>&1", &status);
  ASSERT_EQ(status, 0) << text;
  EXPECT_NE(text.find("user/system:    0.900 s user, 0.700 s system (900 and 700 samples"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("user%   sys%"), std::string::npos) << text;
  // spin: 1000 samples, 62.50%, 1.000 s, 60.0% of its time user and 40.0% system.
  bool spin = false, inl = false;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find("demo::Widget::spin(long)") != std::string::npos) {
      spin = true;
      EXPECT_NE(line.find("1000   62.50"), std::string::npos) << line;
      EXPECT_NE(line.find("  60.0   40.0  "), std::string::npos) << line;
    }
    if (line.find("demo::uses_inline(long)") != std::string::npos) {
      inl = true;
      EXPECT_NE(line.find("   0.0  100.0  "), std::string::npos) << line;
    }
  }
  EXPECT_TRUE(spin && inl) << text;

  std::string user = report_test::run(tool + " --user-only 2>&1", &status);
  ASSERT_EQ(status, 0) << user;
  EXPECT_NE(user.find("percentages are of user time only"), std::string::npos) << user;
  EXPECT_NE(user.find("total samples:  900 "), std::string::npos) << user;
  EXPECT_EQ(user.find("demo::uses_inline(long)"), std::string::npos) << user;
  EXPECT_NE(user.find("600   66.67"), std::string::npos) << user;

  const nlohmann::json j =
      nlohmann::json::parse(report_test::run(tool + " --format json", &status));
  ASSERT_EQ(status, 0);
  EXPECT_EQ(j["system_samples"].get<uint64_t>(), 700u);
  EXPECT_EQ(j["user_only"].get<bool>(), false);
  bool found = false;
  for (const auto& row : j["rows"])
    if (row["name"] == "demo::Widget::spin(long)") {
      found = true;
      EXPECT_EQ(row["system_samples"].get<double>(), 400.0);
      EXPECT_EQ(row["samples"].get<double>(), 1000.0);
    }
  EXPECT_TRUE(found);
  const nlohmann::json ju =
      nlohmann::json::parse(report_test::run(tool + " --format json --user-only", &status));
  EXPECT_EQ(ju["total_samples"].get<uint64_t>(), 900u);
  EXPECT_EQ(ju["user_only"].get<bool>(), true);

  std::string csv = report_test::run(tool + " --format csv", &status);
  ASSERT_EQ(status, 0);
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "samples,percent,ci95_low,ci95_high,seconds,name,object,file,line,address,"
            "system_samples");
  EXPECT_NE(csv.find("demo::Widget::spin(long),report_testprog,,,,400\n"), std::string::npos)
      << csv;
  std::remove(file.c_str());
}

}  // namespace
}  // namespace sprofil::report_test
