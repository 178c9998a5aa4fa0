// The row formats on runs of tests/report/exports_prog.cpp recorded by the real `sprofil
// record`: CSV's inline chains (--by line --inline), and folded stacks' frames (a `;` in a
// symbol, a line without debug information) as the text report names them.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../common/process.hpp"
#include "test_util.hpp"

namespace sprofil::report_test {
namespace {

using testproc::Args;

struct Result {
  int status = -1;
  std::string out, err;
};

Result tool(const Args& args) {
  Args a{SPROFIL_TOOL};
  a.insert(a.end(), args.begin(), args.end());
  testproc::Proc p = testproc::run(a, {}, 120);
  return {p.status, p.stdout_text, p.stderr_text};
}

std::string describe(const Result& r) {
  return "status " + std::to_string(r.status) + "\nstdout:\n" + r.out + "\nstderr:\n" + r.err;
}

// `sprofil record -o temp_dir()/NAME -- PROG ARGS...`: the profile's path.
std::string record(const std::string& name, const Args& command) {
  const std::string file = temp_dir() + "/" + name;
  Args a{"record", "-q", "-o", file, "--"};
  a.insert(a.end(), command.begin(), command.end());
  const Result r = tool(a);
  EXPECT_EQ(r.status, 0) << describe(r);
  return file;
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// A CSV line's fields (RFC 4180: quoted fields with doubled quotes).
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"')
        out.back() += '"', ++i;
      else if (c == '"')
        quoted = false;
      else
        out.back() += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

// --by line --inline: hot_step, inlined at two call sites of main, makes two rows of main at
// exports_hot.hpp's line, one per chain. CSV has an `inlined` column (JSON's name) with each
// row's chain as the text report shows it, innermost first: "exports_hot.hpp:L hot_step <-
// exports_prog.cpp:S main", S each call site's line, so that no two rows read alike.
TEST(ReportExports, CsvInlineChainsTellRowsApart) {
  const std::string file = record("inline.sprof", {EXPORTS_PROG, "inline", "200000000"});
  const Result csv = tool({"report", file, "--by", "line", "--inline", "--format", "csv"});
  ASSERT_EQ(csv.status, 0) << describe(csv);
  const std::vector<std::string> lines = lines_of(csv.out);
  ASSERT_GE(lines.size(), 3u) << csv.out;
  const std::vector<std::string> header = csv_fields(lines[0]);
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  ASSERT_TRUE(col.count("inlined")) << lines[0];
  const int hot = marker_line(EXPORTS_HOT_SOURCE, "MARK:hot-step");
  const int first = marker_line(EXPORTS_SOURCE, "MARK:first-site");
  const int second = marker_line(EXPORTS_SOURCE, "MARK:second-site");
  ASSERT_TRUE(hot > 0 && first > 0 && second > 0);
  const std::string inner = "exports_hot.hpp:" + std::to_string(hot) + " hot_step <- ";
  std::set<std::string> rows;
  std::map<std::string, double> hot_rows;  // chain -> samples, main's rows at hot_step's line
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::vector<std::string> f = csv_fields(lines[i]);
    ASSERT_EQ(f.size(), header.size()) << lines[i];
    // No two rows alike: name, object, file, line and chain together are a row's key.
    const std::string key = f[col["name"]] + '\0' + f[col["object"]] + '\0' + f[col["file"]] +
                            '\0' + f[col["line"]] + '\0' + f[col["inlined"]];
    EXPECT_TRUE(rows.insert(key).second) << "two rows read alike: " << lines[i] << "\n" << csv.out;
    if (f[col["name"]] == "main" && f[col["line"]] == std::to_string(hot)) {
      EXPECT_EQ(f[col["file"]].substr(f[col["file"]].rfind('/') + 1), "exports_hot.hpp");
      hot_rows[f[col["inlined"]]] += std::stod(f[col["samples"]]);
    }
  }
  const std::string chain1 = inner + "exports_prog.cpp:" + std::to_string(first) + " main";
  const std::string chain2 = inner + "exports_prog.cpp:" + std::to_string(second) + " main";
  ASSERT_TRUE(hot_rows.count(chain1)) << csv.out;
  ASSERT_TRUE(hot_rows.count(chain2)) << csv.out;
  EXPECT_EQ(hot_rows.size(), 2u) << csv.out;
  // Each site runs half the steps: each chain has a part of the samples (most land on main's
  // own loop instructions, a sixth to a third on hot_step's: 16 of 251 at the first site once).
  EXPECT_GE(hot_rows[chain1], 5) << csv.out;
  EXPECT_GE(hot_rows[chain2], 5) << csv.out;
  // The text report labels the same rows with the same chains.
  const Result text = tool({"report", file, "--by", "line", "--inline"});
  ASSERT_EQ(text.status, 0) << describe(text);
  EXPECT_NE(text.out.find(chain1), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(chain2), std::string::npos) << text.out;
  // Without --inline there is no chain, and no column for it.
  const Result plain = tool({"report", file, "--by", "line", "--format", "csv"});
  ASSERT_EQ(plain.status, 0) << describe(plain);
  EXPECT_EQ(plain.out.substr(0, plain.out.find('\n')).find("inlined"), std::string::npos)
      << plain.out;
}

// Folded stacks: a `;` separates frames, so the function whose symbol is `hot;spot` is one frame
// `hot:spot` (as FlameGraph's stackcollapse-perf.pl writes it), not two; and with --by line, a
// program without debug information has its lines as the text report names them, `??:0`.
TEST(ReportExports, FoldedFramesAreTheTextReportsNames) {
  const std::string base = std::string(EXPORTS_PROG_NODEBUG);
  const std::string object = base.substr(base.rfind('/') + 1);
  const std::string file = record("semi.sprof", {base, "semi", "200000000"});

  const Result text = tool({"report", file});
  ASSERT_EQ(text.status, 0) << describe(text);
  ASSERT_NE(text.out.find("hot;spot  " + object), std::string::npos) << text.out;

  // Every stack is OBJECT;FUNCTION (or one frame outside any object): no `;` inside a frame.
  const Result folded = tool({"report", file, "--format", "folded"});
  ASSERT_EQ(folded.status, 0) << describe(folded);
  uint64_t hot = 0, sum = 0;
  for (const std::string& line : lines_of(folded.out)) {
    const std::string stack = line.substr(0, line.rfind(' '));
    const uint64_t n = std::stoull(line.substr(line.rfind(' ') + 1));
    sum += n;
    EXPECT_LE(std::count(stack.begin(), stack.end(), ';'), 1) << line;
    if (stack == object + ";hot:spot") hot = n;
  }
  EXPECT_GE(hot, 50u) << "hot;spot's samples under the frame hot:spot\n" << folded.out;
  EXPECT_GE(double(hot), 0.8 * double(sum)) << folded.out;

  // --by line: OBJECT;FUNCTION;FILE:LINE, the line `??:0` where the text report says `??:0`.
  const Result text_lines = tool({"report", file, "--by", "line"});
  ASSERT_EQ(text_lines.status, 0) << describe(text_lines);
  EXPECT_NE(text_lines.out.find("??:0 hot;spot  " + object), std::string::npos) << text_lines.out;
  const Result lines = tool({"report", file, "--by", "line", "--format", "folded"});
  ASSERT_EQ(lines.status, 0) << describe(lines);
  bool found = false;
  for (const std::string& line : lines_of(lines.out)) {
    const std::string stack = line.substr(0, line.rfind(' '));
    EXPECT_EQ(stack.find(";:"), std::string::npos) << "a frame without its file: " << line;
    if (stack.rfind(object + ";", 0) == 0) {
      EXPECT_EQ(std::count(stack.begin(), stack.end(), ';'), 2) << line;
    }
    found |= stack == object + ";hot:spot;??:0";
  }
  EXPECT_TRUE(found) << lines.out;
}

}  // namespace
}  // namespace sprofil::report_test
