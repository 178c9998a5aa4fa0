// The HTML report in a real browser: the bundled demo (its four compute functions take 40%,
// 24%, 20% and 16% of its work) is recorded with `sprofil record`, reported with
// `--format html`, and loaded in headless Chromium (Debian's chromium). The page must run
// without errors, and its function table must hold the demo's functions with exactly the
// numbers of `sprofil report --format csv` of the same profile. A screenshot is kept as an
// artifact (build/tests/artifacts/html_report.png). Skips, saying why, where chromium is absent.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "../common/chromium.hpp"
#include "test_util.hpp"

namespace sprofil::interop_test {
namespace {

using report_test::run;

using testproc::chromium;
using testproc::chromium_cmd;

struct FnRow {
  std::string object;
  double samples = 0, percent = 0;
};

TEST(Html, ChromiumLoadsThePageAndItsTableHoldsTheReport) {
  if (chromium() == nullptr)
    GTEST_SKIP() << "chromium is not installed (scripts/deps.sh installs Debian's chromium)";
  const std::string dir = ::testing::TempDir() + "/sprofil_html_" + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  int st = 0;
  run(std::string(SPROFIL_TOOL) + " record -o '" + dir + "/demo.sprof' " DEMO " 2>&1", &st);
  ASSERT_EQ(st, 0);
  run(std::string(SPROFIL_TOOL) + " report --format html -o '" + dir + "/r.html' '" + dir +
          "/demo.sprof' 2>&1",
      &st);
  ASSERT_EQ(st, 0);
  const std::string csv =
      run(std::string(SPROFIL_TOOL) + " report --format csv '" + dir + "/demo.sprof' 2>/dev/null");

  const std::string dom = run(chromium_cmd(dir + "/ud") + " --dump-dom 'file://" + dir +
                              "/r.html' 2>'" + dir + "/console.txt'");
  ASSERT_NE(dom.find("data-status=\"ok\""), std::string::npos)
      << "the page's script did not finish:\n"
      << dom.substr(0, 2000);
  EXPECT_EQ(dom.find("data-errors="), std::string::npos) << "script errors on the page";
  const std::string console = report_test::read_file(dir + "/console.txt");
  EXPECT_EQ(console.find("Uncaught"), std::string::npos) << console;

  // The function table's rows: name, object, samples, percent.
  std::map<std::string, FnRow> page;
  const std::regex row(
      "<tr data-fn=\"\\d+\"><td class=\"name\" title=\"([^\"]*)\">.*?</td><td>([^<]*)</td>"
      "<td class=\"num\">([^<]*)</td><td class=\"num\">([^<]*)</td>");
  for (auto it = std::sregex_iterator(dom.begin(), dom.end(), row); it != std::sregex_iterator();
       ++it)
    page[(*it)[1]] = FnRow{(*it)[2], std::stod((*it)[3]), std::stod((*it)[4])};
  // The CSV rows of the same profile: the page must show the same numbers (the page rounds
  // percentages to 2 decimals below 10%, 1 above).
  std::istringstream lines(csv);
  std::string header, line;
  std::getline(lines, header);
  size_t compared = 0;
  while (std::getline(lines, line)) {  // samples,percent,ci95_low,ci95_high,seconds,name,object
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) f.push_back(cell);
    ASSERT_GE(f.size(), 7u) << line;
    const std::string& fn = f[5];
    if (fn.rfind("demo_", 0) != 0) continue;
    ASSERT_TRUE(page.count(fn)) << fn << " missing from the page's table";
    EXPECT_EQ(page[fn].object, f[6]) << fn;
    EXPECT_DOUBLE_EQ(page[fn].samples, std::stod(f[0])) << fn;
    EXPECT_NEAR(page[fn].percent, std::stod(f[1]), 0.051) << fn;
    ++compared;
  }
  EXPECT_EQ(compared, 4u) << csv;
  // The demo's split (40/24/20/16% of its work); 8 points allow for the scheduler and the
  // sampling noise of ~2000 samples (a share's 95% interval is about +-2 points).
  const std::map<std::string, double> expected = {{"demo_main_compute", 40},
                                                  {"demo_lib_compute", 24},
                                                  {"demo_worker_compute", 20},
                                                  {"demo_plugin_compute", 16}};
  for (const auto& [fn, share] : expected) EXPECT_NEAR(page[fn].percent, share, 8) << fn;
  // The other views were drawn: histogram bars and the icicle's boxes.
  EXPECT_NE(dom.find("<rect"), std::string::npos);
  EXPECT_NE(dom.find("demo_main.cpp:"), std::string::npos) << "no line in the drill-down";
  // The hottest function's detail, shown at load, holds its annotation: sprofil annotate's
  // source lines and disassembly.
  EXPECT_NE(dom.find("Annotation: source lines and instructions"), std::string::npos);
  EXPECT_NE(dom.find("## demo_main_compute in sprofil-demo"), std::string::npos);
  EXPECT_NE(dom.find("Source / disassembly"), std::string::npos);

  const std::string artifacts = std::string(ARTIFACTS_DIR);
  ::mkdir(artifacts.c_str(), 0755);
  run(chromium_cmd(dir + "/ud") + " --window-size=1300,2200 --screenshot='" + artifacts +
      "/html_report.png' 'file://" + dir + "/r.html' 2>/dev/null");
  struct stat sb {};
  EXPECT_EQ(::stat((artifacts + "/html_report.png").c_str(), &sb), 0) << "no screenshot";
  EXPECT_GT(sb.st_size, 10000) << "the screenshot is empty";
  run("rm -rf '" + dir + "'");
}

// A long command line (or a long note: a run's unfinished processes, a seccomp filter) wraps
// inside the summary table, and the histogram is as wide as the window's column: the page
// loaded in a 1000-pixel frame is no wider than the frame (before, the command's cell ran
// 7,500 pixels to the right). The frame's page reads the report's layout, which
// --allow-file-access-from-files lets a file page do.
TEST(Html, LongCommandWrapsInsideTheWindow) {
  if (chromium() == nullptr)
    GTEST_SKIP() << "chromium is not installed (scripts/deps.sh installs Debian's chromium)";
  const std::string dir = ::testing::TempDir() + "/sprofil_html_wide_" + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  std::string args;
  for (int i = 0; i < 60; ++i) args += " --option-number-" + std::to_string(i) + "=value";
  int st = 0;
  run(std::string(SPROFIL_TOOL) + " record -o '" + dir +
          "/p.sprof' -- sh -c 'exec " DEMO " --scale 0.05'" + args + " 2>&1",
      &st);
  ASSERT_EQ(st, 0);
  run(std::string(SPROFIL_TOOL) + " report --format html -o '" + dir + "/r.html' '" + dir +
          "/p.sprof' 2>&1",
      &st);
  ASSERT_EQ(st, 0);
  {
    std::ofstream frame(dir + "/frame.html");
    frame << "<!doctype html><html><body><iframe id=\"f\" src=\"r.html\" "
             "style=\"width:1000px;height:700px\"></iframe><script>\n"
             "document.getElementById('f').onload = function () {\n"
             "  const d = this.contentDocument.documentElement;\n"
             "  document.body.setAttribute('data-widths', d.scrollWidth + ' ' + d.clientWidth);\n"
             "};\n</script></body></html>\n";
  }
  const std::string dom =
      run(chromium_cmd(dir + "/ud") + " --allow-file-access-from-files --dump-dom 'file://" + dir +
          "/frame.html' 2>/dev/null");
  std::smatch m;
  const std::regex widths("data-widths=\"(\\d+) (\\d+)\"");
  ASSERT_TRUE(std::regex_search(dom, m, widths)) << dom.substr(0, 2000);
  const int scroll = std::stoi(m[1]), client = std::stoi(m[2]);
  EXPECT_GT(client, 900);
  EXPECT_LE(scroll, client) << "the page is wider than its 1000-pixel frame";
  run("rm -rf '" + dir + "'");
}

}  // namespace
}  // namespace sprofil::interop_test
