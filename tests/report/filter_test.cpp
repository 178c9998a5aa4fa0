// `sprofil report --comm/--pid` on a real run of several processes (recorded with the real
// tool: sh running tests/report/diff_prog.cpp, then annotate_prog.cpp): the header's figures
// (CPU, tallies, rate, coverage, processes, unfinished note) are those of the processes kept,
// in text, JSON and HTML alike, and differ from the whole run's; a filter that keeps nothing,
// and a filter on a merged profile, are errors with nothing on standard output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../common/process.hpp"
#include "profile/reader.hpp"
#include "test_util.hpp"

namespace sprofil::report_test {
namespace {

using Json = nlohmann::json;
using testproc::Args;

const std::string kTool = SPROFIL_TOOL;
const std::string kDiffProg = DIFF_PROG;
const std::string kAnnotateProg = ANNOTATE_PROG;
// Command names as the run stores them: argv[0]'s basename cut to 15 bytes.
const std::string kDiffComm = "report_diff_pro";
const std::string kAnnotateComm = "report_annotate";

struct Result {
  int status = -1;
  std::string out, err;
};

Result tool(const Args& args) {
  Args a{kTool};
  a.insert(a.end(), args.begin(), args.end());
  testproc::Proc p = testproc::run(a, {}, 120);
  return {p.status, p.stdout_text, p.stderr_text};
}

std::string describe(const Result& r) {
  return "status " + std::to_string(r.status) + "\nstdout:\n" + r.out + "\nstderr:\n" + r.err;
}

Json report_json(const std::string& file, const Args& filter) {
  Args a{"report", file, "--format", "json"};
  a.insert(a.end(), filter.begin(), filter.end());
  Result r = tool(a);
  EXPECT_EQ(r.status, 0) << describe(r);
  Json j = Json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  return j.is_discarded() ? Json::object() : j;
}

// The run: the shell (root), which counts to 20,000 first (tens of ms: its samples; a shell that
// only forks and execs may take none), diff_prog with six times annotate_prog's work, then
// annotate_prog. annotate_prog's CPU is about a seventh of the run's, so its samples against
// the run's CPU fall far below half (the coverage warning the filter once gave), and against
// its own CPU do not.
class ReportFilter : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testproc::TempDir("sprofil_filter");
    run_ = *dir_ / "run.sprof";
    // The tests need the run of three images. A shell's forked child that ran a period before
    // its exec is an image of its own (it took a sample there; once in a CI run of the ASan
    // build): the run is recorded again then, three times at most.
    for (int attempt = 0; attempt < 3; ++attempt) {
      Result r = tool({"record", "-o", run_, "--", "sh", "-c",
                       "i=0; while [ $i -lt 20000 ]; do i=$((i + 1)); done; '" + kDiffProg +
                           "' 60000000 1 && '" + kAnnotateProg + "' loops 10000000"});
      ASSERT_EQ(r.status, 0) << describe(r);
      profile::Profile p;
      std::string err;
      ASSERT_TRUE(profile::read_profile(run_, &p, &err)) << err;
      if (p.processes.size() == 3) break;
    }
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override {
    std::string err;
    ASSERT_TRUE(profile::read_profile(run_, &p_, &err)) << err;
    ASSERT_TRUE(p_.run);
    ASSERT_EQ(p_.processes.size(), 3u) << "sh, diff_prog and annotate_prog each take samples";
    ASSERT_EQ(p_.processes[1].comm, kDiffComm);
    ASSERT_EQ(p_.processes[2].comm, kAnnotateComm);
  }

  // Samples of process k: its regions' counts and its overflow.
  uint64_t samples_of(uint32_t k) const {
    uint64_t n = p_.processes[k].overflow;
    for (const profile::Region& r : p_.regions)
      if (r.process == k) n += r.total();
    return n;
  }

  // The header fields of JSON `j` are process k's own (within JSON's rounding).
  void expect_figures_of(const Json& j, uint32_t k) const {
    const profile::Process& pr = p_.processes[k];
    const double cpu = double(pr.cpu_ns) / 1e9;
    EXPECT_EQ(j["total_samples"].get<uint64_t>(), samples_of(k)) << pr.comm;
    EXPECT_EQ(j["delivered"].get<uint64_t>(), pr.delivered) << pr.comm;
    EXPECT_EQ(j["lost"].get<uint64_t>(), pr.lost) << pr.comm;
    EXPECT_EQ(j["overflow"].get<uint64_t>(), pr.overflow) << pr.comm;
    EXPECT_NEAR(j["cpu_seconds"].get<double>(), cpu, 1e-9) << pr.comm;
    EXPECT_NEAR(j["effective_hz"].get<double>(), pr.effective_hz, 1e-3) << pr.comm;
    EXPECT_NEAR(j["run_cpu_seconds"].get<double>(), cpu, 1e-9) << pr.comm;
    EXPECT_EQ(j["dropped_processes"].get<uint64_t>(), 0u);
    ASSERT_TRUE(j["coverage"].is_number()) << pr.comm;
    EXPECT_NEAR(j["coverage"].get<double>(),
                double(samples_of(k)) * double(p_.tick_ns) / double(pr.cpu_ns), 1e-4)
        << pr.comm;
    ASSERT_EQ(j["processes"].size(), 1u);
    EXPECT_EQ(j["processes"][0]["pid"].get<int32_t>(), pr.pid);
    double rows = 0;
    for (const Json& row : j["rows"]) {
      EXPECT_EQ(row.value("comm", ""), pr.comm) << row.dump();
      rows += row["samples"].get<double>();
    }
    EXPECT_NEAR(rows, double(samples_of(k)), 1e-3) << pr.comm;
  }

  static testproc::TempDir* dir_;
  static std::string run_;
  profile::Profile p_;
};

testproc::TempDir* ReportFilter::dir_ = nullptr;
std::string ReportFilter::run_;

TEST_F(ReportFilter, CommKeepsThatProcessesFiguresInJson) {
  const Json all = report_json(run_, {});
  const Json j = report_json(run_, {"--comm", kAnnotateComm});
  expect_figures_of(j, 2);
  // The filter is said, with the whole run's figures beside it.
  ASSERT_TRUE(j.contains("filter")) << j.dump(1);
  EXPECT_EQ(j["filter"]["comms"], Json::array({kAnnotateComm}));
  EXPECT_EQ(j["filter"]["processes"].get<size_t>(), 1u);
  const Json& run = j["filter"]["run"];
  EXPECT_EQ(run["processes"].get<size_t>(), 3u);
  EXPECT_EQ(run["total_samples"], all["total_samples"]);
  EXPECT_EQ(run["delivered"], all["delivered"]);
  EXPECT_EQ(run["cpu_seconds"], all["cpu_seconds"]);
  EXPECT_EQ(run["run_cpu_seconds"], all["run_cpu_seconds"]);
  EXPECT_EQ(run["effective_hz"], all["effective_hz"]);
  EXPECT_FALSE(all.contains("filter"));
  // And they differ from the unfiltered report's.
  EXPECT_LT(j["total_samples"].get<uint64_t>(), all["total_samples"].get<uint64_t>());
  EXPECT_LT(j["delivered"].get<uint64_t>(), all["delivered"].get<uint64_t>());
  EXPECT_LT(j["cpu_seconds"].get<double>(), all["cpu_seconds"].get<double>() / 2);
  EXPECT_EQ(all["processes"].size(), 3u);
  // A process sampled for at least half its CPU has no coverage warning, though its samples
  // are well under half the run's CPU (what the warning used to compare them with).
  const double tick = double(p_.tick_ns);
  EXPECT_LT(double(samples_of(2)) * tick, 0.5 * double(p_.cpu_ns));
  if (double(samples_of(2)) * tick >= 0.5 * double(p_.processes[2].cpu_ns)) {
    EXPECT_FALSE(j.contains("coverage_warning")) << j["coverage_warning"];
    EXPECT_GE(j["coverage"].get<double>(), 0.5);
  }
}

TEST_F(ReportFilter, PidAndSeveralFiltersInJson) {
  const Json j = report_json(run_, {"--pid", std::to_string(p_.processes[1].pid)});
  expect_figures_of(j, 1);
  EXPECT_EQ(j["filter"]["pids"], Json::array({p_.processes[1].pid}));
  // Two filters keep both processes: their sums.
  const Json two = report_json(run_, {"--comm", "sh", "--comm", kDiffComm});
  ASSERT_EQ(two["processes"].size(), 2u);
  const profile::Process &sh = p_.processes[0], &diff = p_.processes[1];
  EXPECT_EQ(two["total_samples"].get<uint64_t>(), samples_of(0) + samples_of(1));
  EXPECT_EQ(two["delivered"].get<uint64_t>(), sh.delivered + diff.delivered);
  EXPECT_NEAR(two["cpu_seconds"].get<double>(), double(sh.cpu_ns + diff.cpu_ns) / 1e9, 1e-9);
  EXPECT_EQ(two["filter"]["processes"].get<size_t>(), 2u);
}

TEST_F(ReportFilter, TextAndHtmlHeadersDescribeTheKeptProcesses) {
  const profile::Process& pr = p_.processes[2];
  Result all = tool({"report", run_});
  ASSERT_EQ(all.status, 0) << describe(all);
  Result r = tool({"report", run_, "--comm", kAnnotateComm});
  ASSERT_EQ(r.status, 0) << describe(r);
  char cpu[64];
  std::snprintf(cpu, sizeof cpu, "process CPU:    %.3f s\n", double(pr.cpu_ns) / 1e9);
  EXPECT_NE(r.out.find(cpu), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("total samples:  " + std::to_string(samples_of(2)) + " "), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("delivered:      " + std::to_string(pr.delivered) + " delivered"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("filter:         --comm " + kAnnotateComm), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("processes:      1 of 3 stored (--comm " + kAnnotateComm + ")"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("of the kept processes'"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("of the run's"), std::string::npos) << r.out;
  EXPECT_EQ(all.out.find("filter:"), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("processes:      3 stored"), std::string::npos) << all.out;
  if (double(samples_of(2)) * double(p_.tick_ns) >= 0.5 * double(pr.cpu_ns)) {
    EXPECT_EQ(r.out.find("the samples cover only"), std::string::npos) << r.out;
  }
  // The HTML page's header says the same.
  const std::string html = *dir_ / "filtered.html";
  Result h = tool({"report", run_, "--comm", kAnnotateComm, "--format", "html", "-o", html});
  ASSERT_EQ(h.status, 0) << describe(h);
  const std::string page = read_file(html);
  std::snprintf(cpu, sizeof cpu, "[\"process CPU\",\"%.3f s\"]", double(pr.cpu_ns) / 1e9);
  EXPECT_NE(page.find(cpu), std::string::npos);
  EXPECT_NE(page.find("[\"processes\",\"1 of 3 stored (--comm " + kAnnotateComm + ")\"]"),
            std::string::npos);
  EXPECT_NE(page.find("[\"samples\",\"" + std::to_string(samples_of(2)) + " ("), std::string::npos);
}

// --limit and --min-percent choose the rows of a table. pprof and gmon write every sample (their
// viewers choose), and the HTML page pages its rows itself (it takes --min-percent): given to
// them, the option is said to be left out, on stderr, and the file is the same bytes as without
// it. They were silently ignored before. The formats of rows take both and say nothing.
TEST_F(ReportFilter, LimitOrMinPercentThatAFormatLeavesOutIsSaid) {
  struct Case {
    const char* format;
    bool limit_said, min_said;
  };
  for (const Case& c : {Case{"pprof", true, true}, Case{"gmon", true, true},
                        Case{"html", true, false}, Case{"csv", false, false}}) {
    SCOPED_TRACE(c.format);
    const std::string plain = *dir_ / (std::string("plain.") + c.format);
    const std::string chosen = *dir_ / (std::string("chosen.") + c.format);
    const Args common{"report", run_, "--comm", kAnnotateComm, "--format", c.format};
    Args a = common, b = common;
    a.insert(a.end(), {"-o", plain});
    b.insert(b.end(), {"-o", chosen, "--limit", "1", "--min-percent", "5"});
    Result r = tool(a);
    ASSERT_EQ(r.status, 0) << describe(r);
    EXPECT_EQ(r.err.find("warning: --"), std::string::npos) << r.err;
    Result f = tool(b);
    ASSERT_EQ(f.status, 0) << describe(f);
    const std::string said = "sprofil report: warning: --";
    const std::string why = " chooses the rows of a table; --format " + std::string(c.format) +
                            " writes every sample and leaves the choice to its viewer: it is "
                            "left out";
    EXPECT_EQ(f.err.find(said + "limit" + why) != std::string::npos, c.limit_said) << f.err;
    EXPECT_EQ(f.err.find(said + "min-percent" + why) != std::string::npos, c.min_said) << f.err;
    if (c.limit_said && c.min_said) {
      EXPECT_EQ(read_file(chosen), read_file(plain));
    }
    if (!c.limit_said) {  // csv: the header and one row
      const std::string rows = read_file(chosen);
      EXPECT_EQ(std::count(rows.begin(), rows.end(), '\n'), 2) << rows;
    }
  }
}

TEST_F(ReportFilter, NoMatchIsAnErrorListingTheCommands) {
  for (const Args& filter : {Args{"--comm", "nosuch"}, Args{"--pid", "1"}}) {
    for (const char* format : {"text", "json"}) {
      Result r = tool({"report", run_, filter[0], filter[1], "--format", format});
      EXPECT_EQ(r.status, 1) << describe(r);
      EXPECT_EQ(r.out, "") << describe(r);
      EXPECT_NE(r.err.find("no process matches " + filter[0] + " " + filter[1]), std::string::npos)
          << r.err;
      EXPECT_NE(r.err.find(kDiffComm + " (pid " + std::to_string(p_.processes[1].pid) + ")"),
                std::string::npos)
          << r.err;
      EXPECT_NE(r.err.find(kAnnotateComm), std::string::npos) << r.err;
    }
  }
}

TEST_F(ReportFilter, MergedProfileRefusesTheFilter) {
  const std::string merged = *dir_ / "merged.sprof";
  Result m = tool({"merge", "-o", merged, run_});
  ASSERT_EQ(m.status, 0) << describe(m);
  Result r = tool({"report", merged, "--comm", kAnnotateComm});
  EXPECT_EQ(r.status, 1) << describe(r);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("a merged profile has no per-process split"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--comm/--pid need a run profile"), std::string::npos) << r.err;
  // Its root's own command and pid too: the merged profile holds every process's samples.
  r = tool({"report", merged, "--pid", std::to_string(p_.processes[0].pid), "--format", "json"});
  EXPECT_EQ(r.status, 1) << describe(r);
  EXPECT_EQ(r.out, "");
  // Without a filter it reports as before.
  r = tool({"report", merged});
  EXPECT_EQ(r.status, 0) << describe(r);
}

// A run whose diff_prog is killed: the unfinished note names it unless the filter leaves it out.
TEST(ReportFilterUnfinished, NoteOfTheKeptProcessesOnly) {
  testproc::TempDir dir("sprofil_filter");
  const std::string out = dir / "killed.sprof";
  Result r = tool({"record", "-o", out, "--", "sh", "-c",
                   "'" + kAnnotateProg + "' loops 5000000; '" + kDiffProg + "' 20000000 1 kill"});
  // sh's status is the killed program's: 128 + SIGKILL.
  ASSERT_EQ(r.status, 137) << describe(r);
  const Json all = report_json(out, {});
  EXPECT_FALSE(all["finished"].get<bool>());
  ASSERT_TRUE(all.contains("unfinished_warning")) << all.dump(1);
  EXPECT_NE(all["unfinished_warning"].get<std::string>().find(kDiffComm), std::string::npos);
  const Json kept = report_json(out, {"--comm", kAnnotateComm});
  EXPECT_TRUE(kept["finished"].get<bool>());
  EXPECT_FALSE(kept.contains("unfinished_warning")) << kept["unfinished_warning"];
  EXPECT_TRUE(kept["cpu_seconds"].get<double>() > 0);  // known: every kept process finished
  const Json killed = report_json(out, {"--comm", kDiffComm});
  EXPECT_FALSE(killed["finished"].get<bool>());
  ASSERT_TRUE(killed.contains("unfinished_warning")) << killed.dump(1);
  Result text = tool({"report", out, "--comm", kAnnotateComm});
  EXPECT_EQ(text.out.find("did not finish"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace sprofil::report_test
